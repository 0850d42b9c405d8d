"""Reading and validating records (schema ``nvcc-plus/record``)."""
from __future__ import annotations

import json
from pathlib import Path

SUPPORTED_VERSIONS = (1,)
FATES = ("rejected-ptxas", "same-code", "rejected-check", "not-judged", "verified", "faster", "not-faster",
         "not-confirmed", "not-timed", "winner", "estimate-winner", "skipped-budget", "error", None)


class RecordError(ValueError):
    pass


def validate(record: dict, where: str = "record") -> dict:
    if record.get("schema") != "nvcc-plus/record":
        raise RecordError(f"{where}: not an nvcc-plus record (schema {record.get('schema')!r})")
    if record.get("schema_version") not in SUPPORTED_VERSIONS:
        raise RecordError(f"{where}: record version {record.get('schema_version')} is not supported "
                          f"(this nvcc-plus reads {SUPPORTED_VERSIONS})")
    kernels = record.get("kernels")
    if not isinstance(kernels, list):
        raise RecordError(f"{where}: 'kernels' must be a list")
    for k in kernels:
        if "kernel" not in k or "status" not in k:
            raise RecordError(f"{where}: a kernel entry lacks 'kernel' or 'status'")
        for c in k.get("candidates", []):
            if c.get("fate") not in FATES:
                raise RecordError(f"{where}: {k['kernel']}: unknown candidate fate {c.get('fate')!r}")
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
