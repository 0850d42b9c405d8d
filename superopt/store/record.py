"""The per-kernel record: every candidate's fate, the evidence, the timings.

Records are plain JSON-able dicts in the versioned format that ``reports`` renders
(``reports/schema.json`` describes it). ``SCHEMA_VERSION`` changes whenever a field
changes meaning.
"""
from __future__ import annotations

import datetime as _dt
import platform

SCHEMA = "nvcc-plus/record"
SCHEMA_VERSION = 1


def tool_info() -> dict:
    from importlib.metadata import PackageNotFoundError, version
    try:
        ours = version("nvcc-plus")
    except PackageNotFoundError:
        ours = "source"
    return {"nvcc_plus": ours, "python": platform.python_version()}


def module_record(*, source: str | None, target: str, mode: str) -> dict:
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "tool": tool_info(),
        "source": source,
        "target": target,
        "mode": mode,
        "kernels": [],
    }


def kernel_record(fn, target: str) -> dict:
    return {
        "kernel": fn.name,
        "signature": fn.signature,
        "target": target,
        "status": None,          # optimized | kept-baseline | not-verifiable | locked | cached | error
        "decision": None,        # measured | estimate | locked | cached
        "reason": None,
        "spec": None,
        "backend": None,
        "policy": None,
        "baseline": {"resources": None},
        "candidates": [],
        "winner": None,
        "notes": [],
    }


def candidate_entry(candidate) -> dict:
    return {
        "id": candidate.id,
        "plan": [s.to_dict() for s in candidate.plan],
        "provenance": candidate.provenance,
        "changes": candidate.changes[:50],
        "ptx_hash": candidate.hash,
        "fate": None,            # rejected-ptxas | same-code | rejected-check | not-judged | verified |
                                 # faster | not-faster | not-confirmed | not-timed | winner | estimate-winner |
                                 # skipped-budget | error
        "reason": None,
    }


def resources_dict(res) -> dict | None:
    if res is None:
        return None
    return {"registers": res.registers, "spill_stores": res.spill_stores,
            "spill_loads": res.spill_loads, "shared_bytes": res.shared_bytes,
            "stack_bytes": res.stack_bytes}
