"""Records against their JSON Schema (reports/schema.json): every committed benchmark record
validates, a field of the wrong type is refused naming the file and the field, and the
vocabulary of the schema is the one of superopt.store.record."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports.load import RecordError, load_record, schema
from superopt.store.record import Decision, Fate, Status

ROOT = Path(__file__).resolve().parents[2]
RECORDS = sorted((ROOT / "bench" / "results").glob("*.records.json"))


def test_the_schema_is_a_draft_2020_12_schema():
    from jsonschema import Draft202012Validator
    s = schema()
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(s)


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_every_committed_record_validates(path):
    assert load_record(path)["kernels"]


def test_at_least_one_committed_record():
    assert RECORDS


def test_a_field_of_the_wrong_type_is_refused_with_file_and_field(tmp_path):
    record = json.loads(RECORDS[0].read_text())
    kernel = next(i for i, k in enumerate(record["kernels"]) if k.get("candidates"))
    record["kernels"][kernel]["candidates"][0]["speedup"] = "fast"
    bad = tmp_path / "bad.records.json"
    bad.write_text(json.dumps(record))
    with pytest.raises(RecordError) as err:
        load_record(bad)
    msg = str(err.value)
    assert str(bad) in msg
    assert f"kernels[{kernel}].candidates[0].speedup" in msg and "'fast' is not of type" in msg


def test_an_unknown_status_is_refused(tmp_path):
    record = json.loads(RECORDS[0].read_text())
    record["kernels"][0]["status"] = "great"
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(record))
    with pytest.raises(RecordError, match=r"r\.json: kernels\[0\]\.status: 'great' is not one of"):
        load_record(bad)


def test_the_schema_enums_are_the_record_vocabulary():
    defs = schema()["$defs"]
    assert set(defs["candidate"]["properties"]["fate"]["enum"]) == {f.value for f in Fate} | {None}
    assert set(defs["kernel"]["properties"]["status"]["enum"]) == {s.value for s in Status}
    assert set(defs["kernel"]["properties"]["decision"]["enum"]) == {d.value for d in Decision} | {None}
    # StrEnums serialize as their strings: the JSON is unchanged
    assert json.dumps({"fate": Fate.SAME_CODE, "status": Status.KEPT_BASELINE}) == \
        '{"fate": "same-code", "status": "kept-baseline"}'
