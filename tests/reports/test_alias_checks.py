"""The report of a versioned candidate: its launch-time no-alias check (which buffers against
which, the ranges) and how often the fast body would run at the captured launches, in the
terminal, Markdown and HTML; and the record schema for it (reports/schema.json,
``$defs/alias_check``), old records without it included.

The entries are made by the search's own code (superopt.search.loop.candidate_entry) for the
restrict-body candidate of tests/search/alias_capture.py, so the schema is tested against what
the search writes."""
from __future__ import annotations

import copy
import io

import pytest
from rich.console import Console

from reports.load import LoadedRecord, RecordError, validate
from reports.render import html_report, markdown, terminal
from superopt.search.loop import candidate_entry
from superopt.specs.program_launches import ProgramLaunches
from tests.reports.records import kernel, module
from tests.search import alias_capture as ac

SENTENCE = "fast path ran on 5 of 7 captured launches (75.0% of the kernel's captured time)"


def _checks(with_capture: bool) -> list[dict]:
    launches = ProgramLaunches("captured", capture=ac.kernel_capture(
        ac.shape(tmp="own", count=5, ms=3.0), ac.shape(tmp="in-A", count=2, ms=1.0))) if with_capture else None
    return candidate_entry(ac.candidate(), launches)["alias_checks"]


def _kernel(with_capture: bool = True, on: str = "winner") -> dict:
    """An optimized kernel record (gemv_rows of the committed benchmark) renamed matvec_rows,
    whose ``on`` candidate ("winner", or another fate) carries the check."""
    k = kernel("gemv_rows")
    k["kernel"], k["signature"] = ac.KERNEL, "matvec_rows(float const*, float const*, float*, int)"
    cand = next(c for c in k["candidates"] if (c.get("fate") == "winner") == (on == "winner"))
    cand["alias_checks"] = _checks(with_capture)
    return k


def _record(k: dict) -> dict:
    return module([k])


def _terminal(record: dict) -> str:
    buf = io.StringIO()
    terminal([LoadedRecord("r.json", record)], console=Console(file=buf, width=300, color_system=None))
    return buf.getvalue()


def test_the_terminal_shows_the_check_and_how_often_the_fast_path_ran():
    out = _terminal(_record(_kernel()))
    assert "check of param_2 vs param_1, param_2 vs param_0 (63 instructions)" in out
    assert "(kept)" in out
    assert "param_2: [" in out and "(written)" in out             # the written range, in words
    assert SENTENCE in out


def test_without_a_capture_the_report_says_not_known():
    record = _record(_kernel(with_capture=False))
    for text in (_terminal(record), markdown([record]), html_report([LoadedRecord("r.json", record)])):
        assert "no capture: not known" in text
        assert "fast path ran on" not in text


def test_markdown_lists_each_captured_shape_and_its_path():
    md = markdown([_record(_kernel())])
    assert "Launch-time no-alias check of `" in md and SENTENCE in md
    assert "| 2 | 128 | 5 | 3.000 | fast body |" in md
    assert "| 2 | 128 | 2 | 1.000 | nvcc's code | the checked ranges overlap: param_2 overlaps param_0 |" in md


def test_the_html_shows_the_check_the_ranges_and_the_captured_shapes():
    html = html_report([LoadedRecord("r.json", _record(_kernel()))])
    assert "<h3>Launch-time no-alias checks</h3>" in html
    assert "restrict-compiled body from nvcc (cicc -kernel-params-are-restrict)" in html
    assert "<code>param_2 vs param_1</code>" in html and "<code>param_2 vs param_0</code>" in html
    assert "range of <code>param_0</code>" in html
    assert '<td class="fast-path">' + SENTENCE.replace("'", "&#39;") + "</td>" in html
    assert "<b>fast body</b>" in html
    assert "param_2 overlaps param_0" in html
    assert "param_2: bytes 1024–2048 of param_0&#39;s allocation (262144 B)" in html


def test_a_candidate_not_kept_shows_its_check_with_its_fate():
    k = _kernel(on="other")
    html = html_report([LoadedRecord("r.json", _record(k))])
    other = next(c for c in k["candidates"] if c.get("alias_checks"))
    assert f"<code>{other['id']}</code> <span class=\"muted\">({other['fate']})</span>" in html


def test_a_kernel_without_a_check_shows_no_check_section():
    html = html_report([LoadedRecord("r.json", module([kernel("gemv_rows")]))])
    assert "Launch-time no-alias checks" not in html


# ---------------------------------------------------------------------------------- schema

def test_the_schema_accepts_the_search_entries_with_and_without_a_capture():
    validate(_record(_kernel(with_capture=True)))
    validate(_record(_kernel(with_capture=False)))


def test_the_schema_accepts_an_old_record_without_the_field():
    k = kernel("gemv_rows")
    assert not any("alias_checks" in c for c in k["candidates"])
    validate(_record(k))


@pytest.mark.parametrize("damage, field", [
    (lambda chk: chk["capture"].update(fast_path_launches="many"), "fast_path_launches"),
    (lambda chk: chk.pop("body"), "'body' is a required property"),
    (lambda chk: chk["capture"]["shapes"][0].update(fast_path="yes"), "fast_path"),
])
def test_the_schema_refuses_a_malformed_check(damage, field):
    k = _kernel()
    win = next(c for c in k["candidates"] if c.get("fate") == "winner")
    damage(win["alias_checks"][0])
    with pytest.raises(RecordError, match="alias_checks") as err:
        validate(copy.deepcopy(_record(k)))
    assert field in str(err.value)
