"""Compare two sets of records kernel by kernel, and gate on regressions.

Kernels are matched by (source, target, kernel) — see :mod:`reports.keyed` — so one source
built for two ``-gencode`` targets stays two kernels. Records of the same program made in two
checkouts carry different absolute source paths; a kernel whose full key has no partner on the
other side is matched by (file name, target, kernel) when that is unambiguous on both sides.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePath

from reports.keyed import KernelEntry, KernelKey, Kernels, current_kernels, kept_speedup
from reports.load import LoadedRecord

# Statuses under which the build still runs a rewrite decided earlier.
STILL_OPTIMIZED = ("optimized", "locked", "cached")


@dataclass
class Row:
    key: KernelKey
    before: float | None      # speedup over nvcc in the old records (1.0 when baseline kept)
    after: float | None
    status_before: str | None
    status_after: str | None
    label: str = ""           # the shortest unambiguous name: kernel, then + target, then + file

    @property
    def kernel(self) -> str:
        return self.key.kernel

    @property
    def change(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after / self.before


def _kernels(records) -> Kernels:
    if isinstance(records, Kernels):
        return records
    loaded = [r if isinstance(r, LoadedRecord) else LoadedRecord("(in memory)", r) for r in records]
    return current_kernels(loaded)


def _loose(key: KernelKey) -> tuple[str, str, str]:
    return (PurePath(key.source).name, key.target, key.kernel)


def _pair(old: dict[KernelKey, KernelEntry], new: dict[KernelKey, KernelEntry]):
    pairs: list[tuple[KernelKey, KernelEntry | None, KernelEntry | None]] = []
    only_old = [k for k in old if k not in new]
    only_new = [k for k in new if k not in old]
    loose_old = Counter(_loose(k) for k in only_old)
    loose_new = {_loose(k): k for k in only_new if Counter(_loose(j) for j in only_new)[_loose(k)] == 1}
    matched_new = set()
    for k in old:
        if k in new:
            pairs.append((k, old[k], new[k]))
        elif loose_old[_loose(k)] == 1 and _loose(k) in loose_new:
            partner = loose_new[_loose(k)]
            matched_new.add(partner)
            pairs.append((partner, old[k], new[partner]))
        else:
            pairs.append((k, old[k], None))
    for k in only_new:
        if k not in matched_new:
            pairs.append((k, None, new[k]))
    return pairs


def _labels(keys: list[KernelKey]) -> dict[KernelKey, str]:
    names = Counter(k.kernel for k in keys)
    with_target = Counter((k.kernel, k.target) for k in keys)
    out = {}
    for k in keys:
        if names[k.kernel] == 1:
            out[k] = k.kernel
        elif with_target[(k.kernel, k.target)] == 1:
            out[k] = f"{k.kernel} [{k.target}]"
        else:
            out[k] = f"{k.kernel} [{k.target}, {k.source}]"
    return out


def compare(old, new) -> list[Row]:
    """Rows for every kernel in either set (records, loaded records or :class:`Kernels`)."""
    pairs = _pair(_kernels(old).by_key(), _kernels(new).by_key())
    labels = _labels([k for k, _, _ in pairs])
    rows = []
    for key, a, b in pairs:
        rows.append(Row(key,
                        kept_speedup(a.kernel) if a else None, kept_speedup(b.kernel) if b else None,
                        a.kernel["status"] if a else None, b.kernel["status"] if b else None,
                        labels[key]))
    return sorted(rows, key=lambda r: (r.key.source, r.key.target, r.key.kernel))


def geomean(values) -> float | None:
    vals = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def gate(rows: list[Row], max_regression: float) -> list[str]:
    """Problems that should fail CI: kernels slower by more than ``max_regression`` (0.02 =
    2%), kernels that lost their optimization, and kernels missing from the new records."""
    problems = []
    for r in rows:
        name = r.label or r.kernel
        if r.change is not None and r.change < 1 - max_regression:
            problems.append(f"{name}: speedup fell from {r.before:.3f}x to {r.after:.3f}x")
        if r.status_before in STILL_OPTIMIZED and r.status_after not in STILL_OPTIMIZED:
            problems.append(f"{name}: was {r.status_before}, now {r.status_after or 'missing from the new records'}")
        elif r.status_before is not None and r.status_after is None:
            problems.append(f"{name}: missing from the new records (was {r.status_before})")
    return problems
