"""Reading and validating records (schema ``nvcc-plus/record``).

Every record read is validated against ``reports/schema.json`` (JSON Schema, draft 2020-12,
shipped with the package): a field of the wrong type is refused with the file and the field
named, e.g. ``r.json: kernels[0].candidates[2].speedup: 'fast' is not of type 'number', 'null'``.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

SUPPORTED_VERSIONS = (1,)


class RecordError(ValueError):
    pass


@lru_cache(maxsize=1)
def schema() -> dict:
    """The record format's JSON Schema (``reports/schema.json``)."""
    return json.loads(files("reports").joinpath("schema.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validator():
    from jsonschema import Draft202012Validator
    return Draft202012Validator(schema())


def _field(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the record)"


def validate(record: dict, where: str = "record") -> dict:
    """``record`` if it is a record this version reads; else RecordError naming ``where`` and
    the first offending field."""
    if not isinstance(record, dict) or record.get("schema") != "nvcc-plus/record":
        got = record.get("schema") if isinstance(record, dict) else type(record).__name__
        raise RecordError(f"{where}: not an nvcc-plus record (schema {got!r})")
    if record.get("schema_version") not in SUPPORTED_VERSIONS:
        raise RecordError(f"{where}: record version {record.get('schema_version')} is not supported "
                          f"(this nvcc-plus reads {SUPPORTED_VERSIONS})")
    errors = sorted(_validator().iter_errors(record), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise RecordError(f"{where}: {_field(first.absolute_path)}: {first.message}{more}")
    return record


def load_record(path: str | Path) -> dict:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not JSON ({exc})") from None
    return validate(data, str(path))


def load_records(paths) -> list[dict]:
    out = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(load_record(q) for q in sorted(p.glob("*.json")))
        else:
            out.append(load_record(p))
    return out


def winner_of(kernel: dict) -> dict | None:
    return next((c for c in kernel.get("candidates", []) if c.get("fate") in ("winner", "estimate-winner")), None)
