"""Compare two sets of records kernel by kernel, and gate on regressions."""
from __future__ import annotations

import math
from dataclasses import dataclass

from reports.load import winner_of


@dataclass
class Row:
    kernel: str
    before: float | None      # speedup over nvcc in the old records (1.0 when baseline kept)
    after: float | None
    status_before: str | None
    status_after: str | None

    @property
    def change(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after / self.before


def speedups(records: list[dict]) -> dict[str, tuple[float | None, str]]:
    out = {}
    for r in records:
        for k in r["kernels"]:
            win = winner_of(k)
            if k["status"] == "rolled-back":       # the build used nvcc's code after all
                out[k["kernel"]] = (1.0, k["status"])
            elif win is not None and win.get("speedup"):
                out[k["kernel"]] = (float(win["speedup"]), k["status"])
            elif k["status"] in ("kept-baseline",):
                out[k["kernel"]] = (1.0, k["status"])
            else:
                out[k["kernel"]] = (None, k["status"])
    return out


def compare(old: list[dict], new: list[dict]) -> list[Row]:
    a, b = speedups(old), speedups(new)
    rows = []
    for name in sorted(set(a) | set(b)):
        sa, sta = a.get(name, (None, None))
        sb, stb = b.get(name, (None, None))
        rows.append(Row(name, sa, sb, sta, stb))
    return rows


def geomean(values) -> float | None:
    vals = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def gate(rows: list[Row], max_regression: float) -> list[str]:
    """Problems that should fail CI: kernels slower by more than ``max_regression`` (0.02 =
    2%), kernels that lost their optimization, and verification failures kept."""
    problems = []
    for r in rows:
        if r.change is not None and r.change < 1 - max_regression:
            problems.append(f"{r.kernel}: speedup fell from {r.before:.3f}x to {r.after:.3f}x")
        if r.status_before == "optimized" and r.status_after not in ("optimized", "locked", "cached"):
            problems.append(f"{r.kernel}: was optimized, now {r.status_after or 'missing'}")
    return problems
