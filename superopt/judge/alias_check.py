"""Launches whose buffers overlap: the check's aliased layouts (issue 26).

Every ordinary input set gives each pointer parameter its own allocation, so a candidate that
silently assumes its buffers do not alias (a global accumulator ``tmp[i] += A[i*n+j]*x[j]`` kept
in a register, a load moved past a store, ``ld.global.nc`` of a buffer another pointer writes)
would pass there. nvcc's code stays right when a program passes overlapping pointers (in-place
calls such as ``scale(x, x)`` are common); a candidate must too, or test disjointness at launch
and run nvcc's code otherwise.

So, for a kernel with a written buffer (``out``/``inout``) and another buffer parameter, the check
runs up to :data:`~superopt.judge.inputs.MAX_ALIAS_LAYOUTS` aliased layouts
(:func:`superopt.judge.inputs.alias_layouts`): the written buffer on another of the same element
size in place, at +1 and at -1 element, and on the middle of a larger input. One allocation holds
both views, guard zones around the union; where they overlap, the input's data is what both
views start from (:func:`superopt.judge.inputs.normalize_alias`). They run at the smallest launch
of the sets nvcc's code ran cleanly on, and a layout on which nvcc's code is not usable there, or
whose views do not overlap there, runs again with one thread doing the work
(:func:`superopt.judge.inputs.one_thread_sizes`), and one that overlaps at neither at the
cheapest set nvcc's code ran cleanly on where it does. On a GPU (the hardware picks the schedule)
the one-thread size comes first and a layout it cannot form is left to the emulator's check of the
candidate to keep (``left_to_emulator``): at larger sizes nvcc's runs can agree where threads race.

The rule (:func:`run_baseline_layouts`, :func:`judge_candidate`): nvcc's code runs each aliased
set :data:`BASELINE_RUNS` times (on the emulator under other warp schedules and block orders each
time: :func:`superopt.judge.backends.emulator.alias_launch_plan`); a layout on which it fails,
writes outside the union or gives results that differ between its runs (a race the overlap
creates between threads) is no behaviour to preserve: it is dropped and the evidence says why.
On every other layout each candidate runs twice and must give nvcc's results, compared as the
check's policy compares (exact by default: bit for bit, any NaN equal to any NaN), the guards
around the union intact and reads no farther outside it than nvcc's; a mismatch rejects it with
a reason that names the layout ("tmp aliased onto x at +1 element"). The baseline's runs are
made once per kernel (they are part of :class:`superopt.judge.check.BaselineRuns`, reused for
every candidate of a search).

On a GPU nvcc's five runs can agree where its threads race (the hardware's schedule is much the
same each time), and a candidate with the same instructions but other timing then "differs". So
a GPU's rejection by the values on a layout at a size where threads could race (not the
one-thread size) is confirmed first (:func:`emulator_race`, once per layout and kernel, off the
GPU): nvcc's code runs there on the CPU emulator under its schedules, approximate instructions
by stand-ins (only nvcc's runs are compared with each other). Where its results differ between
those runs the layout is dropped (``dropped_on_emulator`` in the evidence) and the candidate is
judged on the others; otherwise the rejection stands and says what the emulator saw.
"""
from __future__ import annotations

import functools
import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from superopt.judge.inputs import (InputSet, alias_geometry, alias_layouts, aliased_set, candidate_poison,
                                   complement_poison, free_scalars, make_rng, one_thread_sizes, poison)

__all__ = ["AliasRuns", "run_baseline_layouts", "candidate_sets", "judge_candidate", "emulator_race", "ALIAS_INDEX",
           "BASELINE_RUNS"]

# aliased sets are numbered from here (a set index of their own: the emulator's schedules and
# register fills go by the launches of one index in a call)
ALIAS_INDEX = 1000
# nvcc's runs of each aliased set (its determinism there); a candidate's runs
BASELINE_RUNS = 5
CANDIDATE_RUNS = 2
# the limit on each of nvcc's launches when the emulator confirms a GPU's rejection (emulator_race),
# and on the seconds a kernel's confirmations take in all (past it, rejections stand unconfirmed)
CONFIRM_LAUNCH_TIMEOUT_S = 3.0
CONFIRM_BUDGET_S = 10.0


@dataclass
class AliasRuns:
    """nvcc's runs on the aliased layouts it is judged on: per judged set its first run's results,
    the elements it leaves as poison (``unwritten``), the elements of the overlap compared through
    the other view (``skip``: the loser's, superopt.judge.inputs.AliasGeometry) and the farthest
    reads outside each buffer (the emulator)."""
    sets: list = field(default_factory=list)
    results: list = field(default_factory=list)
    unwritten: list = field(default_factory=list)      # per set: {buffer: mask}
    skip: list = field(default_factory=list)           # per set: (buffer, mask)
    guard_reads: list = field(default_factory=list)    # per set: {buffer: (before, past)}
    slowest: float = 0.0
    # per set: whether it ran at the one-thread size (no thread to race with)
    one_thread: list = field(default_factory=list)
    # sets found racy for nvcc's code on the CPU emulator after a GPU's runs agreed there
    # (:func:`judge_candidate`): set -> why; no longer judged
    racy: dict = field(default_factory=dict)
    # sets on which the emulator's runs confirmed a GPU's rejection (or could not run): set -> note
    confirmed: dict = field(default_factory=dict)
    confirm_seconds: float = 0.0                        # spent by the emulator's confirmations
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def active(self) -> list[int]:
        """The sets still judged (in order)."""
        return [k for k in range(len(self.sets)) if k not in self.racy]


def _bits(a: np.ndarray, et) -> np.ndarray:
    return np.ascontiguousarray(a).view(et.bits_dtype)


def _poisonable(s: InputSet, name: str) -> np.ndarray | None:
    """Elements of an output buffer that start from its own poison in an aliased set (not from the
    other view's data); None for buffers that are not outputs."""
    p = s.spec.param(name)
    if p.direction != "out":
        return None
    m = np.ones(int(p.length), bool)
    geom = alias_geometry(s)
    if name == geom.loser:
        m &= ~geom.overlap
    return m


def _reruns(s: InputSet, rng) -> list[InputSet]:
    """The later baseline runs of an aliased set: other poisons (the complement, then fresh ones)
    where its outputs start from poison, fresh guards."""
    outs = [b.name for b in s.spec.buffers if b.direction == "out"]
    runs = []
    for k in range(1, BASELINE_RUNS):
        new = {n: (complement_poison(s.data[n], s.spec.param(n).elem, rng) if k == 1
                   else poison(s.spec.param(n).elem, int(s.spec.param(n).length), rng)) for n in outs}
        runs.append(s.with_outputs(new, rng, f"baseline-{k + 1}"))
    return runs


def _run_all(be, ptx: str, spec, sets: list, timeout, groups: list | None = None) -> list:
    """``be.run_many`` of ``sets``; sets a crash or hang left unrun are run again in a call of their
    own (a fault on one layout must not take the others with it). ``groups``: per set, its
    layout's number; a set whose layout already crashed or hung is not run (the same launch on
    the same layout: on a GPU each such fault is a sticky error and a worker restart), its
    result is that fault's."""
    from superopt.judge.backends.base import RunResult
    res = list(be.run_many(ptx, spec, sets, timeout=timeout))
    while True:
        if groups is not None:
            faulted = {}
            for k, r in enumerate(res):
                if r.status in ("crash", "timeout"):
                    faulted.setdefault(groups[k], r)
            for k, r in enumerate(res):
                if r.status == "not_run" and groups[k] in faulted:
                    f = faulted[groups[k]]
                    res[k] = RunResult(status=f.status, error=f"not run: an earlier run of this layout ended in "
                                                              f"{f.status}: {f.error}")
        left = [k for k, r in enumerate(res) if r.status == "not_run"]
        if not left:
            return res
        again = be.run_many(ptx, spec, [sets[k] for k in left], timeout=timeout)
        for k, r in zip(left, again):
            res[k] = r
        if all(r.status == "not_run" for r in again):
            return res


def _cost(s: InputSet) -> tuple:
    """Threads launched, then bytes: what a set costs to run."""
    rs = s.spec
    return (math.prod(rs.grid) * rs.threads, sum(b.nbytes for b in rs.buffers))


def _smallest(spec, sets: list, valid: list) -> dict:
    """Scalar values of the valid set with the fewest threads launched (then the fewest bytes)."""
    return dict(sets[min(valid, key=lambda i: (*_cost(sets[i]), i))].scalars)


@functools.lru_cache(maxsize=64)
def access_alignment(ptx: str, kernel: str) -> int:
    """The widest global (or generic) load, store or atomic of ``kernel`` in bytes, when wider
    than one byte: the alignment the aliased layouts keep (:class:`superopt.judge.inputs.AliasLayout`).
    A layout that shifts a buffer by one float under a kernel that reads it as ``float4`` is no
    program's input (its launch faults with a misaligned address, a sticky error that costs the
    GPU worker a restart per run; the economy bench's nbody: 61 restarts, 37 s, 2026-12-04).
    1 when the PTX cannot be read here (the layouts as before)."""
    try:
        import ptx_ir
        from ptx_ir.memory import collect_memory_accesses
        fn = ptx_ir.parse(ptx).function(kernel)
        widths = [a.bytes for a in collect_memory_accesses(fn) if a.space in (".global", "generic")]
    except Exception:  # noqa: BLE001 - an unreadable kernel keeps the element-aligned layouts
        return 1
    widest = max(widths, default=1)
    return widest if widest > 1 and widest & (widest - 1) == 0 else 1


@functools.lru_cache(maxsize=64)
def pointer_alignment(ptx: str, kernel: str) -> int:
    """The alignment a program's pointers to ``kernel`` have by its own word: the widest access
    nvcc's code makes (:func:`access_alignment`) or a pointer parameter's declared ``.ptr .align``
    (a type the compiler knows to be aligned), whichever is larger; 1 when unreadable."""
    widest = access_alignment(ptx, kernel)
    try:
        import ptx_ir
        fn = ptx_ir.parse(ptx).function(kernel)
        declared = max((int(p.ptr_align) for p in fn.params if p.ptr and p.ptr_align), default=1)
    except Exception:  # noqa: BLE001 - an unreadable kernel: its accesses' word alone
        declared = 1
    return max(widest, declared)


def run_baseline_layouts(baseline_ptx: str, spec, be, policy, seed: int, sets: list, valid: list, ev: dict,
                         launch_timeout=None, prove=None, atomic=None) -> AliasRuns | None:
    """nvcc's runs on the aliased layouts (module docstring); ``ev['aliasing']`` says what ran and
    what was dropped, and why. None when no layout is judged."""
    from superopt.judge.check import compare_values, format_value
    t0 = time.monotonic()
    info: dict = {"max_layouts": None, "layouts": []}
    ev["aliasing"] = info
    if not getattr(be, "aliasing", False):
        info["note"] = f"the {getattr(be, 'name', '?')} backend does not lay out aliased buffers"
        return None
    align = access_alignment(baseline_ptx, spec.kernel)
    layouts = alias_layouts(spec, align=align)
    from superopt.judge.inputs import MAX_ALIAS_LAYOUTS
    if align > 1:
        info["alignment_bytes"] = align
    info["max_layouts"] = MAX_ALIAS_LAYOUTS
    if not layouts:
        info["note"] = "no aliased layout: the kernel has no written buffer and another buffer parameter"
        return None
    if atomic is not None:
        info["note"] = "no aliased layout: float atomics are judged by their contributions"
        ev["notes"].append("aliased layouts not run: " + info["note"][len("no aliased layout: "):])
        return None
    rng = make_rng(seed, 0xA11A5)
    small = _smallest(spec, sets, valid)
    floats = {sc.name for sc in free_scalars(spec) if sc.elem.is_float}
    small = {k: v for k, v in small.items() if k not in floats}
    one = one_thread_sizes(spec, small)
    if one is not None and prove is not None:
        why = prove(one)
        if why:
            info["one_thread"] = f"not proven in bounds: {why}"
            one = None
    sizes = [small] + ([one] if one is not None else [])
    schedules_chosen = not getattr(be, "not_chosen", ())
    if not schedules_chosen and one is not None:
        # a GPU chooses its own schedule: nvcc's runs may agree on a layout where its threads
        # race, and a candidate's other timing then gives another outcome. There the one-thread
        # launch (no thread to race with) comes first; the kept candidate's emulator check
        # (superopt.search.loop._emulator_shadow) runs the others under chosen schedules
        sizes = [one, small]
    info["sizes"] = [dict(ov) for ov in sizes]
    out = AliasRuns()
    pending = list(range(len(layouts)))
    index = ALIAS_INDEX

    def judge_batch(made: list, ov: dict, draw: str | None = None) -> tuple[list, list]:
        """nvcc's runs of ``made`` [(layout number, set, reruns)]: (layouts dropped, judged)."""
        order = [x for _, s, rest in made for x in (s, *rest)]
        groups = [j for j, (_, s, rest) in enumerate(made) for _ in (s, *rest)]
        res = _run_all(be, baseline_ptx, spec, order, launch_timeout, groups) if order else []
        dropped_here, judged_here = [], []
        for j, (k, s, rest) in enumerate(made):
            runs = res[j * BASELINE_RUNS:(j + 1) * BASELINE_RUNS]
            entry = {"layout": s.alias.describe(), "set": s.label, **{key: s.describe()[key] for key in
                     ("grid", "block", "lengths", "scalars")}}
            if draw:
                entry["draw"] = draw
            why = _baseline_problem(s, [s, *rest], runs, policy, compare_values, format_value)
            if why:
                entry.update(status="dropped", why=why)
                dropped_here.append(k)
            else:
                entry["status"] = "judged"
                _take(out, s, [s, *rest], runs, one_thread=one is not None and ov == one)
                judged_here.append(k)
            info["layouts"].append(entry)
        return dropped_here, judged_here

    overlapped: set[int] = set()          # layouts whose views overlapped at a size tried

    def try_at(ov: dict, todo: list) -> list:
        """Judge the layouts ``todo`` at the sizes ``ov``; those to try at the next sizes: nvcc's
        code not usable there, or the views not overlapping there."""
        nonlocal index
        made, apart = [], []
        for k in todo:
            s = aliased_set(spec, seed, index, ov, layouts[k], rng)
            index += 1
            if s is None:
                info["layouts"].append({"layout": layouts[k].describe(), "scalars": dict(ov), "status": "dropped",
                                        "why": f"the views do not overlap at {_sizes_of(ov)}"})
                apart.append(k)
                continue
            overlapped.add(k)
            made.append((k, s, _reruns(s, rng)))
        still, judged_now = judge_batch(made, ov)
        if floats and judged_now:
            # A second draw of each layout judged here, the free float scalars at the spec's own
            # values: the first draw's have a random sign (inexact_float), and a kernel whose
            # loop ends on one (early_exit: ``if (acc[i] > limit) return``) then leaves after one
            # trip on most draws, before any overlap can show (a promoted accumulator with no
            # no-alias check passed 5 of 60 such checks, 2026-12-04)
            again = []
            for k in judged_now:
                s = aliased_set(spec, seed, index, ov, layouts[k], rng, spec_floats=True)
                index += 1
                if s is not None:
                    again.append((k, s, _reruns(s, rng)))
            judge_batch(again, ov, draw="the spec's values of the float scalars")
        # On a GPU only the one-thread size is free of races between threads; at a larger size
        # nvcc's runs can agree by the hardware's schedule where its threads race (a transpose's
        # output whose first element is its input's last: a race between the first and the last
        # block), and a faster candidate's other order would be rejected for it (stage-stores on
        # the economy bench's transposeNaive, 6.35x, 2026-12-07). A layout the first size cannot
        # form is the emulator's to judge there, under schedules it chooses (the candidate to
        # keep: superopt.search.loop._emulator_shadow)
        return sorted(still + (apart if schedules_chosen else []))

    for ov in sizes:
        if not pending:
            break
        pending = try_at(ov, pending)
    apart_everywhere = [k for k in pending if k not in overlapped]
    if apart_everywhere and schedules_chosen:
        # Views that overlap at none of those sizes (a 256-bin histogram onto the middle of an
        # image of 29 bytes) overlap at a larger set's: the cheapest valid set where they do.
        # Without it such a layout is judged nowhere at an inferred spec (and a build with a
        # capture runs it at the captured size instead: 4 s for 128 MiB, 2026-12-07)
        for i in sorted(valid, key=lambda i: _cost(sets[i])):
            ov = {k: v for k, v in sets[i].scalars.items() if k not in floats}
            if ov in sizes:
                continue
            fits = [k for k in apart_everywhere if layouts[k].at(sets[i].spec) is not None]
            if not fits:
                continue
            sizes.append(ov)
            info["sizes"].append(dict(ov))
            try_at(ov, fits)
            apart_everywhere = [k for k in apart_everywhere if k not in overlapped]
            if not apart_everywhere:
                break
    firsts = [e for e in info["layouts"] if not e.get("draw")]    # a layout's second draws apart
    seconds_judged = [e for e in info["layouts"] if e.get("draw") and e["status"] == "judged"]
    judged = [e for e in firsts if e["status"] == "judged"]
    done = {e["layout"].split(" (+")[0] for e in judged}          # a middle layout's offset varies with sizes
    dropped = [e for e in firsts if e["status"] == "dropped" and e["layout"].split(" (+")[0] not in done]
    retried = [e for e in firsts if e["status"] == "dropped" and e["layout"].split(" (+")[0] in done]
    info["judged"] = len(judged)
    info["dropped"] = len(dropped)           # layouts judged at no size
    info["second_draws_judged"] = len(seconds_judged)
    info["seconds"] = round(time.monotonic() - t0, 4)
    parts = [f"{len(judged)} aliased layouts judged" + (f" ({'; '.join(e['layout'] for e in judged)})" if judged else "")]
    if seconds_judged:
        parts.append(f"{len(seconds_judged)} of them also with the spec's values of the float scalars")
    if retried:
        later = "; ".join(_sizes_of(ov) for ov in sizes[1:])
        parts.append(f"{len(retried)} of them at later sizes ({later}) only, not usable or not overlapping at the "
                     f"first ({_sizes_of(sizes[0])})")
    if dropped:
        parts.append(f"{len(dropped)} dropped (" + "; ".join(f"{e['layout']}: {e['why']}" for e in dropped) + ")")
    left = [] if schedules_chosen else [k for k in range(len(layouts)) if k not in overlapped]
    if left:
        info["left_to_emulator"] = [layouts[k].describe() for k in left]
        parts.append(f"{len(left)} not formed at {_sizes_of(sizes[0])} left to the CPU emulator's check of the "
                     f"candidate to keep (at larger sizes threads can race, and a GPU's agreeing runs show no "
                     f"behaviour to keep)")
    ev["notes"].append("buffers that overlap: " + ", ".join(parts))
    ev.setdefault("phase_seconds", {})["aliased_baseline"] = info["seconds"]
    return out if out.sets else None


def _sizes_of(ov: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in ov.items() if isinstance(v, int)) or "the spec's sizes"


def _baseline_problem(s: InputSet, runs_in: list, runs: list, policy, compare_values, format_value) -> str | None:
    """Why nvcc's runs ``runs`` of the aliased set ``s`` (inputs ``runs_in``) give no behaviour to
    preserve, or None."""
    bad = [r for r in runs if not r.ok]
    if bad:
        return f"nvcc's code {bad[0].status} there: {bad[0].error}"
    damaged = sorted({f"{n}: {d}" for r in runs for n, d in r.guard_damage.items()})
    if damaged:
        return f"nvcc's code writes outside the buffers there ({'; '.join(damaged)})"
    geom = alias_geometry(s)
    for b in s.spec.buffers:
        et = b.elem
        xs = [r.outputs[b.name] for r in runs]
        keep = np.ones(int(b.length), bool)
        if b.name == geom.loser:
            keep &= ~geom.overlap
        pm = _poisonable(s, b.name)
        if pm is not None:
            un = pm.copy()
            for x, si in zip(xs, runs_in):
                un &= _bits(x, et) == _bits(si.data[b.name], et)
            keep &= ~un
        for x in xs[1:]:
            diff = ~compare_values(xs[0], x, et, policy) & keep
            if diff.any():
                j = int(np.argmax(diff))
                return (f"nvcc's results differ between its runs there (buffer {b.name!r} element {j}: "
                        f"{format_value(xs[0], j, et)} and {format_value(x, j, et)}; {int(diff.sum())} elements): "
                        f"the overlap makes its threads race")
    return None


def _take(out: AliasRuns, s: InputSet, runs_in: list, runs: list, one_thread: bool = False) -> None:
    geom = alias_geometry(s)
    un: dict = {}
    for b in s.spec.buffers:
        pm = _poisonable(s, b.name)
        if pm is None:
            continue
        m = pm.copy()
        for r, si in zip(runs, runs_in):
            m &= _bits(r.outputs[b.name], b.elem) == _bits(si.data[b.name], b.elem)
        un[b.name] = m
    reads: dict = {}
    for r in runs:
        for n, g in (r.guard_reads or {}).items():
            b0, p0 = reads.get(n, (0, 0))
            reads[n] = (max(b0, g.get("before_start_bytes", 0)), max(p0, g.get("past_end_bytes", 0)))
    out.sets.append(s)
    out.results.append(runs[0])
    out.unwritten.append(un)
    out.skip.append((geom.loser, geom.overlap))
    out.guard_reads.append(reads)
    out.one_thread.append(bool(one_thread))
    out.slowest = max([out.slowest] + [r.elapsed or 0.0 for r in runs])


def candidate_sets(ar: AliasRuns, policy, rng) -> tuple[list[int], list[InputSet]]:
    """The candidate's launches of the judged aliased sets (:data:`CANDIDATE_RUNS` each), with the
    number of the set each launches (in ``ar.sets``; sets found racy are left out): outputs start
    from poison unlike nvcc's results (NaN, then random bits) where they start from poison, the
    other view's data in the overlap."""
    from superopt.judge.check import _equal_under
    out, ks = [], []
    active = ar.active()
    for rep in range(1, CANDIDATE_RUNS + 1):
        for k in active:
            s = ar.sets[k]
            kind = "nan" if rep == 1 else "bits"
            new = {b.name: candidate_poison(kind, ar.results[k].outputs[b.name], b.elem, rng,
                                            equal=_equal_under(policy, b.elem))
                   for b in s.spec.buffers if b.direction == "out"}
            out.append(s.with_outputs(new, rng, f"candidate-{rep}"))
            ks.append(k)
    return ks, out


def judge_candidate(ar: AliasRuns, ks: list, csets: list, cres: list, policy, base_reads: dict, timeout: float,
                    confirm=None):
    """The first reason to reject the candidate's runs ``cres`` of the aliased sets ``csets`` (of
    ``ar.sets[k]`` for ``k`` in ``ks``), as (reason, Mismatch or None), or None when it gives
    nvcc's results on every one.

    ``confirm(set)`` (on a GPU: :func:`emulator_race`) is asked, once per set, before a set where
    threads could race (not the one-thread size) rejects the candidate by its values: on a GPU
    nvcc's runs can agree by the hardware's schedule where the overlap makes its threads race, and
    a faster candidate's other timing then "differs" (rowops' layernorm lost 1.28x so on an H100,
    2026-12-07). Where the emulator's schedules show nvcc's own results differ, the set is no
    behaviour to keep: it is dropped (``ar.racy``) and the candidate judged on the others."""
    from superopt.judge.check import Mismatch, _guard_read_excess, compare_values, diff_stats, format_value
    for j, (cs, cr) in enumerate(zip(csets, cres)):
        k = ks[j]
        if k in ar.racy:
            continue                             # dropped by an earlier launch's confirmation
        rep = sum(1 for kk in ks[:j] if kk == k) + 1
        s = ar.sets[k]
        lay = s.alias.describe()
        where = f"{cs.label} (launch {rep})"
        if cr.status == "unsupported":
            return f"the backend cannot run the candidate with buffers that overlap ({lay}): {cr.error}", None
        if cr.status == "timeout":
            return f"the candidate timed out when buffers overlap, on {where}: {cr.error} (limit {timeout:.3g} s)", None
        if cr.status != "ok":
            what = {"crash": "crashed", "launch_error": "failed to launch"}.get(cr.status, f"did not run ({cr.status})")
            return f"the candidate {what} when buffers overlap, on {where}: {cr.error}", None
        if cr.guard_damage:
            n, d = sorted(cr.guard_damage.items())[0]
            return f"the candidate writes outside buffer {n!r} when buffers overlap, on {where}: {d}", None
        reads = dict(base_reads)
        for n, (b0, p0) in ar.guard_reads[k].items():
            ob, op = reads.get(n, (0, 0))
            reads[n] = (max(ob, b0), max(op, p0))
        gr = _guard_read_excess(cr.guard_reads, reads, cs.spec)
        if gr:
            return f"the candidate {gr} where nvcc's code does not, when buffers overlap, on {where}", None
        base = ar.results[k]
        skip_name, skip = ar.skip[k]
        for b in cs.spec.buffers:
            et = b.elem
            x_b, x_c = base.outputs[b.name], cr.outputs[b.name]
            bad = ~compare_values(x_b, x_c, et, policy)
            un = ar.unwritten[k].get(b.name)
            untouched = None
            if un is not None:
                untouched = _bits(x_c, et) == _bits(cs.data[b.name], et)
                bad = np.where(un, ~untouched, bad)
            if b.name == skip_name:
                bad &= ~skip                     # the other view's elements: compared there
            if bad.any():
                jx = int(np.argmax(bad))
                if un is not None and un[jx]:
                    kind, bval = "wrote_where_baseline_did_not", "not written"
                else:
                    kind = "unwritten" if (untouched is not None and untouched[jx]) else "value"
                    bval = format_value(x_b, jx, et)
                cval = "not written (poison)" if kind == "unwritten" else format_value(x_c, jx, et)
                written = ~un if un is not None else np.ones(x_b.shape, bool)
                dst = diff_stats(x_b[bad & written], x_c[bad & written], et) if (bad & written).any() else {}
                mm = Mismatch(cs.index, cs.label, rep, b.name, kind, jx, int(bad.sum()), bval, cval, int(b.length),
                              dst.get("max_abs_diff"), dst.get("max_ulp_diff"))
                if confirm is not None and not ar.one_thread[k] and _racy_on_emulator(ar, k, confirm):
                    break                        # this set is dropped: the next
                seen = f" ({ar.confirmed[k]})" if ar.confirmed.get(k) else ""
                return (f"the candidate differs from nvcc's code when buffers overlap ({lay}): {mm.describe()}{seen}. "
                        f"A rewrite that assumes its buffers do not alias must test that at launch and run nvcc's "
                        f"code otherwise"), mm
    return None


def _racy_on_emulator(ar: AliasRuns, k: int, confirm) -> bool:
    """Whether set ``k`` is racy for nvcc's code under the emulator's schedules (asked once per set)."""
    with ar.lock:
        if k not in ar.racy and k not in ar.confirmed:
            if ar.confirm_seconds >= CONFIRM_BUDGET_S:
                ar.confirmed[k] = (f"not confirmed on the CPU emulator: its confirmations of this kernel took "
                                   f"{ar.confirm_seconds:.3g} s, the most they may ({CONFIRM_BUDGET_S:g} s)")
                return False
            t0 = time.monotonic()
            why, note = confirm(ar.sets[k])
            ar.confirm_seconds += time.monotonic() - t0
            if why:
                ar.racy[k] = why
            else:
                ar.confirmed[k] = note
        return k in ar.racy


def emulator_race(baseline_ptx: str, spec, s: InputSet, policy, rng,
                  timeout: float = CONFIRM_LAUNCH_TIMEOUT_S) -> tuple[str | None, str]:
    """nvcc's code run :data:`BASELINE_RUNS` times on the aliased set ``s`` on the CPU emulator,
    under its schedules (warps and blocks in other orders each run): (why the set is racy, or
    None; what the runs showed). Only results that differ between the runs make it racy; a run
    the emulator cannot make (over its caps, past ``timeout``) confirms nothing."""
    from superopt.judge.backends.emulator import EmulatorBackend
    from superopt.judge.check import compare_values, format_value
    t0 = time.monotonic()
    runs_in = [s, *_reruns(s, rng)]
    # nvcc's runs are compared with each other only: approximate instructions (a layernorm's
    # rsqrt.approx) and mul/add pairs ptxas may contract run as the emulator's stand-ins
    be = EmulatorBackend(fma_contraction="separate", stand_ins=True)
    runs = list(be.run_many(baseline_ptx, spec, runs_in, timeout=timeout))
    took = f"{time.monotonic() - t0:.2g} s"
    bad = [r for r in runs if not r.ok]
    if bad:
        return None, f"the CPU emulator could not run nvcc's code there ({bad[0].status}: {bad[0].error}; {took})"
    why = _baseline_problem(s, runs_in, runs, policy, compare_values, format_value)
    if why and why.startswith("nvcc's results differ"):
        return f"on the CPU emulator, under its schedules, {why} ({took})", ""
    if why:
        return None, f"on the CPU emulator {why} ({took})"
    return None, f"the CPU emulator's {len(runs)} runs of nvcc's code agree there ({took})"


def note_racy(ar: AliasRuns, ev: dict) -> None:
    """Write the sets found racy on the emulator (and the confirmed ones) into a verdict's evidence."""
    if not (ar.racy or ar.confirmed):
        return
    info = ev.setdefault("aliasing", {})
    if ar.racy:
        info["dropped_on_emulator"] = [{"layout": ar.sets[k].alias.describe(), "set": ar.sets[k].label, "why": why}
                                       for k, why in sorted(ar.racy.items())]
        ev["notes"].append("buffers that overlap: " + "; ".join(
            f"{ar.sets[k].alias.describe()} dropped after the GPU's runs: {why}" for k, why in sorted(ar.racy.items())))
    if ar.confirmed:
        info["confirmed_on_emulator"] = [{"layout": ar.sets[k].alias.describe(), "set": ar.sets[k].label,
                                          "note": note} for k, note in sorted(ar.confirmed.items())]
