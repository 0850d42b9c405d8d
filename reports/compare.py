"""Compare two sets of records kernel by kernel, and gate on regressions.

Kernels are matched by (source, target, kernel) — see :mod:`reports.keyed` — so one source
built for two ``-gencode`` targets stays two kernels. Records of the same program made in two
checkouts carry different absolute source paths; a kernel whose full key has no partner on the
other side is matched by (file name, target, kernel) when that is unambiguous on both sides.

The gate's rule is the search's: a kernel is a regression when its speedup fell by more than
its *noise floor*, the larger of ``max_regression`` and the relative spread of its timings in
either record (:func:`timing_noise`: half the sum of nvcc's and the kept code's IQR over their
medians, as the timing's own "beyond noise" rule). A change inside it is not, also when the
rewrite was lost (1.014x -> nvcc's code 1.000x is 1.4%, inside a 2% floor). Kernels measured at
different sizes, spec sources or GPUs are compared but warned about (:func:`mismatches`).
"""
from __future__ import annotations

import json
import math
import statistics
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
    noise_before: float | None = None     # relative timing spread in the old records (timing_noise)
    noise_after: float | None = None
    context_before: dict | None = None    # what the old timing was measured at (measured_at)
    context_after: dict | None = None

    def noise_floor(self, max_regression: float) -> float:
        return max([max_regression] + [n for n in (self.noise_before, self.noise_after) if n is not None])

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


def _relative_spread(t: dict | None) -> float | None:
    """(IQR/median of nvcc's code + IQR/median of the candidate) / 2 of one timing dict."""
    if not isinstance(t, dict):
        return None
    parts = []
    for side in ("baseline", "candidate"):
        st = t.get(side)
        if not isinstance(st, dict) or not st.get("median") or st.get("iqr") is None:
            return None
        parts.append(float(st["iqr"]) / float(st["median"]))
    return sum(parts) / 2


def timing_noise(kernel: dict) -> float | None:
    """The relative spread of a kernel's timings in its record: the kept candidate's
    confirmation (else its search timing); where nvcc's code was kept, the median over the
    candidates' timings. None when the record holds no timing (a locked or cached decision)."""
    from reports.load import winner_of
    win = winner_of(kernel)
    if win is not None:
        for key in ("confirmation", "timing"):
            n = _relative_spread(win.get(key))
            if n is not None:
                return n
        return None
    got = [n for c in kernel.get("candidates", []) for n in [_relative_spread(c.get("timing"))] if n is not None]
    return statistics.median(got) if got else None


def _gpu(kernel: dict) -> str | None:
    from reports.load import winner_of
    for c in [winner_of(kernel) or {}] + list(kernel.get("candidates", [])):
        for key in ("confirmation", "timing"):
            name = ((c.get(key) or {}).get("device") or {}).get("name")
            if name:
                return str(name)
    return (kernel.get("device") or {}).get("name") or (kernel.get("cluster") or {}).get("gpu")


def measured_at(kernel: dict) -> dict:
    """What a kernel's timing was measured at: the timed launch (the first spec: grid, block,
    shared memory, scalars, buffer lengths), where its specs came from, the GPU."""
    spec = (kernel.get("spec") or [None])[0]
    sizes = None
    if isinstance(spec, dict):
        params = [(p.get("name"), p.get("value", p.get("length"))) for p in spec.get("params") or []
                  if isinstance(p, dict)]
        sizes = json.dumps({"grid": spec.get("grid"), "block": spec.get("block"),
                            "shared_bytes": spec.get("shared_bytes", 0), "params": params}, default=str)
    origin = kernel.get("spec_origin") or (spec.get("origin") if isinstance(spec, dict) else None)
    return {"sizes": sizes, "spec_origin": origin, "gpu": _gpu(kernel)}


def compare(old, new) -> list[Row]:
    """Rows for every kernel in either set (records, loaded records or :class:`Kernels`)."""
    pairs = _pair(_kernels(old).by_key(), _kernels(new).by_key())
    labels = _labels([k for k, _, _ in pairs])
    rows = []
    for key, a, b in pairs:
        rows.append(Row(key,
                        kept_speedup(a.kernel) if a else None, kept_speedup(b.kernel) if b else None,
                        a.kernel["status"] if a else None, b.kernel["status"] if b else None,
                        labels[key],
                        timing_noise(a.kernel) if a else None, timing_noise(b.kernel) if b else None,
                        measured_at(a.kernel) if a else None, measured_at(b.kernel) if b else None))
    return sorted(rows, key=lambda r: (r.key.source, r.key.target, r.key.kernel))


def geomean(values) -> float | None:
    vals = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def row_problems(r: Row, max_regression: float) -> list[str]:
    """What fails the gate for one kernel (see :func:`gate`); empty when nothing does."""
    problems = []
    name = r.label or r.kernel
    floor = r.noise_floor(max_regression)
    beyond = r.change is not None and r.change < 1 - floor
    if beyond:
        problems.append(f"{name}: speedup fell from {r.before:.3f}x to {r.after:.3f}x "
                        f"(more than the noise floor, {100 * floor:.1f}%)")
    if r.status_before in STILL_OPTIMIZED and r.status_after not in STILL_OPTIMIZED:
        if r.status_after is None or r.change is None or beyond:
            problems.append(f"{name}: was {r.status_before}, now "
                            f"{r.status_after or 'missing from the new records'}")
    elif r.status_before is not None and r.status_after is None:
        problems.append(f"{name}: missing from the new records (was {r.status_before})")
    return problems


def gate(rows: list[Row], max_regression: float) -> list[str]:
    """Problems that should fail CI: kernels whose speedup fell by more than their noise floor
    (:meth:`Row.noise_floor`: at least ``max_regression``, 0.02 = 2%), kernels that lost their
    optimization by more than it (or to an unknown speed), and kernels missing from the new
    records. A change inside the noise floor is not a regression."""
    return [p for r in rows for p in row_problems(r, max_regression)]


def _describe_sizes(text: str | None) -> str:
    if not text:
        return "?"
    d = json.loads(text)
    scalars = ", ".join(f"{n}={v}" for n, v in d.get("params", []) if isinstance(v, (int, float)))
    return f"grid {d.get('grid')}, block {d.get('block')}" + (f", {scalars}" if scalars else "")


def mismatches(rows: list[Row]) -> list[str]:
    """Warnings for kernels whose old and new timings were measured at different launch sizes,
    from different spec sources, or on different GPUs: their speedups are compared all the same,
    but they do not measure the same thing."""
    out = []
    for r in rows:
        a, b = r.context_before, r.context_after
        if not a or not b:
            continue
        name = r.label or r.kernel
        if a["gpu"] and b["gpu"] and a["gpu"] != b["gpu"]:
            out.append(f"{name}: OLD was measured on {a['gpu']}, NEW on {b['gpu']}")
        if a["spec_origin"] and b["spec_origin"] and a["spec_origin"] != b["spec_origin"]:
            out.append(f"{name}: OLD was judged with specs from {a['spec_origin']}, NEW from {b['spec_origin']}")
        elif a["sizes"] and b["sizes"] and a["sizes"] != b["sizes"]:
            out.append(f"{name}: OLD and NEW were timed at different sizes ({_describe_sizes(a['sizes'])} vs "
                       f"{_describe_sizes(b['sizes'])})")
    return out
