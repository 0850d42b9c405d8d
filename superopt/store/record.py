"""The per-kernel record: every candidate's fate, the evidence, the timings.

Records are plain JSON-able dicts in the versioned format that ``reports`` renders
(``reports/schema.json``, a JSON Schema that ``reports.load`` validates every record against,
describes it; its enums are :class:`Fate`, :class:`Status` and :class:`Decision`). ``SCHEMA_VERSION`` changes whenever a field
changes meaning.
"""
from __future__ import annotations

import datetime as _dt
import enum
import sys

SCHEMA = "nvcc-plus/record"
SCHEMA_VERSION = 1
#: the distribution's version, as pyproject.toml gives it (tests/driver/test_first_hour.py checks they
#: agree): what the records' ``tool`` says without importlib.metadata
TOOL_VERSION = "0.1.0"


class Fate(enum.StrEnum):
    """What happened to one candidate (``candidates[].fate``). A StrEnum: it is its string in
    JSON and compares equal to it."""
    REJECTED_PTXAS = "rejected-ptxas"      # ptxas refused it
    SAME_CODE = "same-code"                # ptxas made machine code already judged
    REJECTED_CHECK = "rejected-check"      # the differential check (or the sanitizer) found a difference
    NOT_JUDGED = "not-judged"              # the check could not judge it
    VERIFIED = "verified"                  # right, but no GPU to time it
    FASTER = "faster"                      # right and faster beyond noise in the search
    NOT_FASTER = "not-faster"              # right, not faster
    NOT_CONFIRMED = "not-confirmed"        # faster once, not when timed again
    SLOWER_ELSEWHERE = "slower-elsewhere"  # faster at the timed shape, slower at another the program may use
    BELOW_MIN_GAIN = "below-min-gain"      # faster beyond noise, by less than NVCC_PLUS_MIN_GAIN
    NOT_TIMED = "not-timed"                # right, but the timing failed
    WINNER = "winner"                      # kept: measured
    ESTIMATE_WINNER = "estimate-winner"    # kept: by the static estimate (no GPU)
    SKIPPED_BUDGET = "skipped-budget"      # never judged: the budget was used up
    SKIPPED_ROOFLINE = "skipped-roofline"  # never judged: nvcc's code already runs near the memory roofline
    ERROR = "error"                        # the search raised while judging it


class Status(enum.StrEnum):
    """What became of one kernel (``kernels[].status``)."""
    OPTIMIZED = "optimized"
    KEPT_BASELINE = "kept-baseline"
    NOT_VERIFIABLE = "not-verifiable"
    LOCKED = "locked"
    CACHED = "cached"
    ERROR = "error"
    ROLLED_BACK = "rolled-back"            # written by the driver: the build did not use the rewrite


class Decision(enum.StrEnum):
    """How the kept code was decided (``kernels[].decision``)."""
    MEASURED = "measured"
    ESTIMATE = "estimate"
    LOCKED = "locked"
    CACHED = "cached"


def tool_info() -> dict:
    """nvcc-plus's version (TOOL_VERSION, pyproject.toml's version; importlib.metadata would cost a GPU-less build
    30 ms per file) and Python's."""
    return {"nvcc_plus": TOOL_VERSION, "python": "{}.{}.{}".format(*sys.version_info[:3])}


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
        "status": None,          # a Status
        "decision": None,        # a Decision
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
        "fate": None,            # a Fate
        "reason": None,
    }


def resources_dict(res) -> dict | None:
    if res is None:
        return None
    return {"registers": res.registers, "spill_stores": res.spill_stores,
            "spill_loads": res.spill_loads, "shared_bytes": res.shared_bytes,
            "stack_bytes": res.stack_bytes}
