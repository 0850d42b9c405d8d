"""The differential check: does a candidate kernel compute exactly what the baseline does?

:func:`check` runs baseline and candidate on several fresh input sets and compares every
buffer. What it does, and why:

* **Fresh inputs, several distributions.** The master seed comes from ``os.urandom``
  unless given; set *i* uses its own generator. ``auto`` buffers rotate through
  distributions (floats: normal, specials with NaN/±Inf/denormals/-0, uniform, large, ...;
  ints: small, full range, near the bounds). :func:`run_baseline` and ``check(baseline=)``
  split the work so that a search can reuse the baseline's runs on one family of inputs
  for several candidates (``superopt.judge.judge.BackendJudge`` does, until a rejection, and checks the
  candidate it keeps once more on inputs of its own).
* **One input plan for every spec** (:func:`superopt.judge.inputs.input_plan`): main sets
  (the spec's sizes, and for a spec that lets sizes vary smaller ones, not multiples of
  block.x; an inferred spec's own traced sizes), small *tail* sets for every residue mod 8
  and 15 mod 16, one *large* set of whole blocks whose largest
  buffer passes 2^17 elements on the CPU emulator (2^20 on a GPU:
  ``Backend.large_target()``), and a whole-block set where the large set is not run. An
  inferred spec's extra sizes are first proven in bounds by the tracer
  (:mod:`superopt.judge.size_proof`); one that is not proven is not run and the notes say
  why. The large set runs after the others, in a backend call of its own, only when nvcc's
  launches there look affordable from its launches on the other sets (else a note);
  an extra set on which nvcc's code misbehaves (crashes, reads outside its buffers farther
  than on the main sets) is dropped with a note, never taking the main sets with it. Free
  float scalars get ``-a``, 0, -0.0 in sets 1..3 and values with a full random significand
  (inexact products) in the others. A spec that says ``vary_sizes = false`` itself, or
  lists explicit ``values``, keeps its sizes.
* **Baseline twice.** Run 1 with output poison P1 (NaNs for floats), run 2 on the same
  inputs with a poison P2 that differs from P1 in every element (finite for floats). Elements equal to the poison in both runs are
  "not written by the baseline"; all others must agree between the two runs, else the
  baseline is nondeterministic (atomics order, uninitialised memory, reads its output
  before writing it) and the verdict is *could not judge* (unless a tolerance policy
  absorbs the difference).
* **Candidate twice, in one loaded module.** Two launches per main set, whose output
  poisons vary by set (:data:`~superopt.judge.inputs.POISONS`: NaN, random bits, nvcc's own
  results), one of the two always unequal to the baseline's value in every element, so an
  element the candidate fails to write can never pass and code right only while its output
  holds NaN fails; tails and the large set once, from random bits. The module stays loaded
  across all sets, so state kept between launches (a "done" flag, a cache) shows.
  Candidate launches are limited to ``max(min_timeout, 50 x the slowest baseline launch)``.
  What a backend cannot choose (on a GPU: block order, register contents) is listed in
  ``evidence['not_chosen']``.
* **Guards and inputs.** Guard zones on both sides of every buffer must be intact; a
  buffer the baseline does not modify must not be modified by the candidate. Where the
  backend sees reads (the emulator: ``RunResult.guard_reads``), a candidate that reads
  farther outside a buffer than the baseline ever does is rejected ("reads outside buffer
  'x' (1 element past its end)"); on a GPU that stays compute-sanitizer memcheck's job
  (:mod:`superopt.judge.sanitize`).
* **Nothing unwritten decides anything.** Before anything runs, the static def-use check
  (:mod:`superopt.judge.static_check`) rejects a candidate whose branch, store, load address,
  return or call depends on a register that may be read before any write (guard predicates
  included), where nvcc's code has no such use (evidence ``static``). On the emulator,
  registers, shared and local memory start as fresh random bits every launch, so a result
  computed from them differs between runs; and they carry a per-lane taint bit through
  arithmetic, memory and guards: a candidate that stores, branches, loads from an address,
  passes a call argument or is predicated on a value derived from never-written data where
  nvcc's code never does is rejected even when the poison happened to give equal outputs
  (``RunResult.taint``).
* **Launches that fit, schedules that race.** Before anything runs, a candidate whose
  ``.maxntid``/``.reqntid``/``.minnctapersm`` one of the check's launches breaks is rejected
  (a GPU refuses such a launch; :func:`superopt.judge.launch_contract.launch_problem`). The
  emulator runs serial warp schedules, blocks in other orders and machine registers that
  vary (:func:`superopt.judge.backends.emulator.launch_plan`; nvcc's code that relies on a warp's
  lanes in step, legacy warp-synchronous code, is judged with them in step:
  :func:`run_baseline`); once the runs agree, the
  static race check (:mod:`superopt.judge.race_check`) rejects a candidate that reads data
  other threads of the launch write where nvcc's code does not (``ld.global.nc`` of a written
  buffer, another block's output, shared memory with no barrier after the store), and the
  atomic judge one that plainly accesses a buffer nvcc's code only updates with atomics
  (evidence ``races``; every backend).
* **Barriers at one instruction.** On the emulator a barrier completes wherever its threads wait;
  a candidate whose lanes of one warp wait at different barrier instructions, or whose block
  reaches an aligned barrier (``bar.sync``) at different instructions, where nvcc's code never
  does, is rejected (the run's ``barrier`` event): a GPU need not merge them (an H200 gave wrong
  rows for such a rewrite), and for aligned barriers PTX leaves it undefined.
* **Sizes that are whole blocks.** When no planned set gives a size parameter an exact
  multiple of block.x and of 16 (an inferred spec lists its own sizes), one set does.
* **Float atomics by their contributions.** When nvcc's kernel has float atomic adds to
  global memory (order-dependent sums: ``atomicAdd(double*)`` reductions), both kernels run
  instrumented (:mod:`superopt.judge.atomic_log`) and the targets of those adds are compared
  by the multiset of (buffer, element, added value) and each target's chain of returned old
  values (:mod:`superopt.judge.atomic_judge`), everything else bit-exactly; evidence
  ``atomic_log``. Still exact: the candidate can give exactly the results nvcc's code can.
* **Buffers that overlap.** For a kernel with a written buffer and another buffer parameter,
  up to six aliased layouts (:mod:`superopt.judge.alias_check`: a written buffer in place on,
  shifted by one element from, one element in common at either end with, or in the middle of
  another buffer, one allocation and guard zones
  around the union) at the smallest launch: nvcc's code runs each five times (other schedules on
  the emulator), a layout where it faults or races is dropped (evidence ``aliasing``), and every
  candidate must match it on the others, so one that silently assumes its buffers do not alias
  is rejected with the layout named. nvcc's runs there are part of :class:`BaselineRuns`.
* **Exact by default.** Bit-identical outputs, with every NaN equal to every NaN. A
  tolerance (``ulp:N`` or ``rel:X`` on float buffers) is an explicit opt-in and is
  recorded in the verdict.

A verdict is *accepted*, *rejected* (with the evidence: set, seed, sizes, buffer, first
differing index and both values) or *could not judge* (no GPU, no spec, baseline
misbehaves, ...), the three kept distinct (exit codes 0, 1, 2 of ``superopt verify``).
"""
from __future__ import annotations

import copy
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any, Union

import numpy as np

import ptx_ir
from superopt.judge import alias_check, atomic_judge, size_proof
from superopt.judge.backends.base import Backend, BackendUnavailable, get_backend
from superopt.judge.inputs import (POISONS, InputSet, candidate_poison, complement_poison, fresh_seed, input_plan,
                                   misalign, misalign_bytes,
                                   is_nan_bits, make_input_set, make_rng, snapshot_array, work_growth)
from superopt.judge.phases import measured, phase
from superopt.judge.policy import EXACT, Policy  # noqa: F401 - the check's policies, re-exported
from superopt.specs.launch_spec import Buffer, Bytes, ElemType, LaunchSpec, SpecError

__all__ = [
    "Policy", "EXACT", "Verdict", "Mismatch", "check", "compare_values", "diff_stats", "format_value",
    "entry_names", "entry_params", "resolve_kernel", "BaselineRuns", "run_baseline", "ACCEPTED", "REJECTED", "COULD_NOT_JUDGE",
]

ACCEPTED, REJECTED, COULD_NOT_JUDGE = "accepted", "rejected", "could_not_judge"
EXIT_CODES = {ACCEPTED: 0, REJECTED: 1, COULD_NOT_JUDGE: 2}


# --------------------------------------------------------------------------- comparison

def _bits(a: np.ndarray, et: ElemType) -> np.ndarray:
    return np.ascontiguousarray(a).view(et.bits_dtype)


def to_float64(a: np.ndarray, et: ElemType) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        if et.name == "bf16":
            return (np.ascontiguousarray(a).view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return a.astype(np.float64)


def _ulp_distance(b: np.ndarray, c: np.ndarray, et: ElemType) -> np.ndarray:
    """|ordered(b) - ordered(c)| as uint64 (±0 are 0 apart). Only meaningful for non-NaN."""
    w = et.size * 8
    sign = np.uint64(1 << (w - 1))
    bb = _bits(b, et).astype(np.uint64)
    cb = _bits(c, et).astype(np.uint64)
    bs, cs = (bb & sign) != 0, (cb & sign) != 0
    bm, cm = bb & ~sign, cb & ~sign
    same = bs == cs
    return np.where(same, np.where(bm > cm, bm - cm, cm - bm), bm + cm)


def compare_values(b: np.ndarray, c: np.ndarray, et: ElemType, policy: Policy = EXACT) -> np.ndarray:
    """Elementwise "equal under the policy" mask of two storage arrays of type ``et``."""
    bb, cb = _bits(b, et), _bits(c, et)
    eq = bb == cb
    if not et.is_float or eq.all():
        return eq
    bn, cn = is_nan_bits(b, et), is_nan_bits(c, et)
    eq = eq | (bn & cn)
    if policy.exact:
        return eq
    both_num = ~bn & ~cn
    if policy.kind == "ulp":
        close = both_num & (_ulp_distance(b, c, et) <= np.uint64(int(policy.bound)))
    else:
        bf, cf = to_float64(b, et), to_float64(c, et)
        finite = np.isfinite(bf) & np.isfinite(cf)
        with np.errstate(invalid="ignore", over="ignore"):
            close = both_num & finite & (np.abs(cf - bf) <= policy.bound * np.maximum(np.abs(bf), np.abs(cf)))
    return eq | close


def diff_stats(b: np.ndarray, c: np.ndarray, et: ElemType) -> dict:
    """Largest absolute difference and ULP distance over elements where both are numbers."""
    if b.size == 0:
        return {"max_abs_diff": 0.0, "max_ulp_diff": 0}
    if et.is_float:
        ok = ~is_nan_bits(b, et) & ~is_nan_bits(c, et)
        if not ok.any():
            return {"max_abs_diff": 0.0, "max_ulp_diff": 0}
        bf, cf = to_float64(b[ok], et), to_float64(c[ok], et)
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.abs(cf - bf)
        d = np.where(bf == cf, 0.0, d)          # inf == inf
        return {"max_abs_diff": float(np.nanmax(d)) if d.size else 0.0,
                "max_ulp_diff": int(_ulp_distance(b[ok], c[ok], et).max())}
    bu, cu = b.astype(np.uint64), c.astype(np.uint64)      # wraps; the difference below is exact
    d = np.where(b >= c, bu - cu, cu - bu)
    return {"max_abs_diff": int(d.max())}


def format_value(a: np.ndarray, i: int, et: ElemType) -> str:
    bits = int(_bits(a, et)[i])
    hexw = et.size * 2
    if et.is_float:
        v = float(to_float64(a[i:i + 1], et)[0])
        return f"{v!r} (0x{bits:0{hexw}x})"
    return f"{int(a[i])} (0x{bits:0{hexw}x})"


# --------------------------------------------------------------------------- PTX entries

@lru_cache(maxsize=8)
def _entries(ptx: str) -> dict[str, list[tuple[str, str, int]]]:
    """Every .entry of the module, by ptx_ir's parser: name -> (name, type, bytes) per param.
    Cached: a search asks about the same baseline for every candidate. A text ptx_ir cannot
    parse has no entries it can vouch for."""
    try:
        module = ptx_ir.parse(ptx, fragment=True)
    except ptx_ir.ParseError:
        return {}
    out: dict[str, list[tuple[str, str, int]]] = {}
    for f in module.functions:
        if f.is_entry:
            out.setdefault(f.name, [(p.name, p.type.lstrip("."), p.size or 0) for p in f.params])
    return out


def entry_names(ptx: str) -> list[str]:
    return list(_entries(ptx))


def entry_params(ptx: str, kernel: str) -> list[tuple[str, str, int]] | None:
    """(name, type, size in bytes) of each param of ``.entry kernel``; None if absent."""
    params = _entries(ptx).get(kernel)
    return None if params is None else list(params)


def resolve_kernel(ptx: str, name: str) -> str | None:
    """The entry called ``name``, or the only entry whose (mangled) name contains it."""
    names = entry_names(ptx)
    if name in names:
        return name
    hits = [n for n in names if name in n]
    return hits[0] if len(hits) == 1 else None


# --------------------------------------------------------------------------- verdict

@dataclass
class Mismatch:
    set_index: int
    set_label: str
    run: int                     # which candidate launch of that set (1 or 2)
    buffer: str
    kind: str                    # value | unwritten | wrote_where_baseline_did_not
    index: int                   # first differing flat index
    count: int                   # differing elements in that buffer
    baseline: str
    candidate: str
    length: int = 0
    max_abs_diff: float | None = None
    max_ulp_diff: int | None = None

    def describe(self) -> str:
        what = {"value": "differs", "unwritten": "was not written by the candidate",
                "wrote_where_baseline_did_not": "was written by the candidate but not by the baseline"}[self.kind]
        return (f"{self.set_label}, launch {self.run}: buffer {self.buffer!r} element {self.index} {what} "
                f"(baseline {self.baseline}, candidate {self.candidate}); {self.count} of {self.length} elements differ")


# The evidence key of a verdict on nvcc's own code (:func:`run_baseline` could not judge it:
# it faults, is not deterministic, writes outside its buffers ...): no candidate can be judged
# with these inputs at this shape, whatever it is.
BASELINE_UNJUDGED = "baseline_unjudged"


def baseline_unjudged(verdict) -> bool:
    """Whether ``verdict`` (a :class:`Verdict` or its ``to_dict()``) is about nvcc's own code."""
    ev = verdict.get("evidence") if isinstance(verdict, dict) else getattr(verdict, "evidence", None)
    return bool((ev or {}).get(BASELINE_UNJUDGED))


@dataclass
class Verdict:
    status: str                          # accepted | rejected | could_not_judge
    reason: str
    policy: str = "exact"
    evidence: dict = field(default_factory=dict)
    mismatch: Mismatch | None = None

    @property
    def accepted(self) -> bool:
        return self.status == ACCEPTED

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def to_dict(self) -> dict:
        d = {"status": self.status, "accepted": self.accepted, "reason": self.reason, "policy": self.policy,
             "evidence": self.evidence}
        d["mismatch"] = asdict(self.mismatch) if self.mismatch else None
        return d

    def summary(self) -> str:
        head = {ACCEPTED: "ACCEPTED", REJECTED: "REJECTED", COULD_NOT_JUDGE: "COULD NOT JUDGE"}[self.status]
        lines = [f"{head}: {self.reason}", f"policy: {self.policy}"]
        ev = self.evidence
        if "seed" in ev:
            lines.append(f"seed: {ev['seed']}  backend: {ev.get('backend', {}).get('backend', '?')}"
                         f" {ev.get('backend', {}).get('name', '') or ''}".rstrip())
        for s in ev.get("sets", []):
            lines.append(f"  {s['label']}: grid {s['grid']} block {s['block']} lengths {s['lengths']} "
                         f"dists {s['distributions']}")
        for n in ev.get("notes", []):
            lines.append(f"  note: {n}")
        if self.mismatch:
            lines.append(f"  first difference: {self.mismatch.describe()}")
        return "\n".join(lines)


def _verdict(status, reason, policy, evidence, mismatch=None) -> Verdict:
    return Verdict(status=status, reason=reason, policy=str(policy), evidence=evidence, mismatch=mismatch)


# --------------------------------------------------------------------------- the check

def _first_diff(bad: np.ndarray) -> int:
    return int(np.argmax(bad))


def _spec_fits(spec: LaunchSpec, params: list[tuple[str, str, int]]) -> str | None:
    kparams = spec.kernel_params
    if len(params) != len(kparams):
        return (f"the spec has {len(kparams)} params but .entry {spec.kernel} has {len(params)} "
                f"({', '.join(f'{t}' for _, t, _ in params)})")
    for p, (pname, ptype, size) in zip(kparams, params):
        if isinstance(p, Bytes):
            want, what = p.size, f"{p.size} raw bytes"
        elif isinstance(p, Buffer):
            want, what = 8, "a pointer"
        else:
            want, what = p.elem.size, p.type
        if size != want:
            return (f"param {p.name!r}: the spec says {what} "
                    f"({want} bytes) but the PTX param {pname} is .{ptype} ({size} bytes)")
    return None


def _predicted_seconds(spec: LaunchSpec, ov: dict, runs: list) -> float:
    """nvcc's launch time at the overrides ``ov``, from its launches on the sets ``runs``
    ((set, run 1, run 2) each): a fixed cost plus a cost per unit of work (the product of the
    size parameters, :func:`superopt.judge.inputs.work_growth`), through the sets of least and
    most work (a small launch is mostly the fixed cost)."""
    pts = []
    for s, r1, r2 in runs:
        ts = [r.elapsed for r in (r1, r2) if r.elapsed is not None]
        if ts:
            pts.append((work_growth(spec, {k: v for k, v in s.scalars.items()}), min(ts)))
    if not pts:
        return 0.0
    w = work_growth(spec, ov)
    lo, hi = min(pts), max(pts)
    if hi[0] <= lo[0]:
        return hi[1] * w / max(hi[0], 1e-12)
    slope = max(0.0, (hi[1] - lo[1]) / (hi[0] - lo[0]))
    return hi[1] + slope * max(0.0, w - hi[0])


def _sizes(spec: LaunchSpec, ov: dict) -> str:
    sizes = set(spec.size_params())
    return ", ".join(f"{k}={v}" for k, v in ov.items() if k in sizes) or "the spec's sizes"


def _equal_under(policy: Policy, et: ElemType):
    """The check's element equality under ``policy`` for type ``et``, as a function of two arrays."""
    return lambda a, b: compare_values(a, b, et, policy)


def _compare_run(base: np.ndarray, unwritten: np.ndarray, cand: np.ndarray, cand_poison: np.ndarray | None,
                 et: ElemType, policy: Policy):
    """Mismatch mask and kind for one buffer. ``unwritten``: elements the baseline left alone
    (None for buffers with real initial contents)."""
    eq = compare_values(base, cand, et, policy)
    if unwritten is None or cand_poison is None:
        return ~eq, None
    # where the baseline did not write, the candidate must not write either (bitwise poison)
    untouched = _bits(cand, et) == _bits(cand_poison, et)
    bad = np.where(unwritten, ~untouched, ~eq)
    return bad, untouched


@dataclass
class BaselineRuns:
    """What the baseline did on one family of input sets: the inputs, both baseline runs
    of every set, which elements it leaves unwritten, its slowest launch.

    A search judges many candidates against one baseline; the baseline's behaviour on a
    given set of inputs does not depend on the candidate, so :class:`~superopt.judge.judge.BackendJudge`
    reuses one ``BaselineRuns`` for the candidates of a kernel and draws fresh inputs again
    after a rejection, whose evidence reveals input values. The candidates' input sets (output
    poisons unlike the baseline's values, guard canaries) are made once per ``BaselineRuns``
    too (:attr:`candidate_sets`): a candidate is fixed code that never sees them, so each one
    still meets random poisons it cannot have been fitted to, exactly as it meets the reused
    inputs; the candidate the search keeps is checked once more on fresh inputs and poisons
    (``fresh``). At a captured size making them took longer than the GPU's runs."""
    baseline_ptx: str
    spec: LaunchSpec
    kernel: str
    policy: Policy
    seed: int
    sets: list                         # InputSet per set (index i)
    results: list                      # backend results: sets first, then the second runs
    valid: list[int]
    unwritten: dict
    writes_input: set
    slowest: float
    evidence: dict                     # seed, kernel, sets, notes, backend, phase_seconds
    uses: int = 0
    # per buffer: farthest bytes the baseline reads outside it, (before start, past end),
    # over all its runs (backends that see reads: the emulator)
    guard_reads: dict = field(default_factory=dict)
    static: Any = None                 # static_check.Unwritten of the baseline (or None)
    # sinks the baseline reaches with never-written data (the emulator's taint bit), over all
    # its runs: {"store"|"branch": {"count", "lanes", "first"}}
    taint: dict = field(default_factory=dict)
    # float atomics judged by their contributions (superopt.judge.atomic_judge.AtomicMode), or None
    atomic: Any = None
    # the backend the runs were made on when it is not the one asked for: nvcc's code relies on
    # the lanes of a warp running in step (Backend.lanes_in_step); candidates run there too
    backend: Any = None
    # nvcc's runs on the aliased layouts it is judged on (superopt.judge.alias_check.AliasRuns), or
    # None; made on first use (:attr:`aliased`): a check that leaves them out never pays for them
    aliased_runs: Any = None
    layouts_pending: Any = None        # a callable making ``aliased_runs``, until it has run
    # the candidates' input sets, made at the first candidate: (sets, launch number per set,
    # poison kinds per set label)
    candidate_sets: Any = None

    @property
    def aliased(self):
        """nvcc's runs on the aliased layouts (made now if they were not yet), or None."""
        if self.layouts_pending is not None:
            make, self.layouts_pending = self.layouts_pending, None
            self.aliased_runs = make()
        return self.aliased_runs


NOT_DETERMINISTIC = "the baseline is not deterministic"


def run_baseline(baseline_ptx: str, spec: LaunchSpec, *, backend: Union[str, Backend] = "gpu",
                 policy: Union[str, Policy, None] = None, sets: int = 4, seed: int | None = None,
                 launch_timeout: float | None = None,
                 prepared: BaselineInputs | None = None) -> Union[BaselineRuns, Verdict]:
    """The baseline half of :func:`check`: inputs, two baseline runs per set, determinism.
    Returns the runs, or a *could not judge* verdict when the baseline cannot be used.
    ``prepared``: the input sets, made ahead by :func:`prepare_baseline_inputs` with this
    baseline and spec (then its seed, sets and policy are the runs').

    When nvcc's code is not deterministic only because a schedule ran the lanes of a warp out of
    step (legacy warp-synchronous code: :meth:`Backend.lanes_in_step`), its runs are made again
    on the same inputs with the lanes in step, and the candidates are judged there too."""
    if prepared is not None:
        if prepared.baseline_ptx != baseline_ptx:
            raise ValueError("run_baseline(prepared=...): the sets were made for another baseline PTX")
        seed, policy, be = prepared.seed, prepared.policy, prepared.be
    else:
        seed = fresh_seed() if seed is None else int(seed)
        try:
            be = get_backend(backend) if isinstance(backend, str) else backend
        except BackendUnavailable:
            be = backend
    got = _run_baseline(baseline_ptx, spec, backend=be, policy=policy, sets=sets, seed=seed,
                        launch_timeout=launch_timeout, prepared=prepared)
    # only code that shares memory or barriers between lanes runs serial schedules at all
    shares = any(w in baseline_ptx for w in (".shared", "bar.sync", "barrier"))
    in_step = be.lanes_in_step() if isinstance(be, Backend) and shares else None
    if not (isinstance(got, Verdict) and got.status == COULD_NOT_JUDGE
            and got.reason.startswith(NOT_DETERMINISTIC) and in_step is not None):
        return got
    again = _run_baseline(baseline_ptx, spec, backend=in_step, policy=policy, sets=sets, seed=seed,
                          launch_timeout=launch_timeout)
    if isinstance(again, Verdict):
        return got
    again.backend = in_step
    again.evidence["lanes_in_step"] = True
    again.evidence["notes"].append(
        "nvcc's code gives different results when the lanes of a warp run out of step (" + got.reason.split(". ")[0]
        + "): it is warp-synchronous code that relies on a warp's lanes running together (no __syncwarp). It and "
        "every candidate are judged with the lanes of each warp in step; warps still run serially, so a dropped "
        "barrier between warps shows")
    return again


# A shape whose buffers hold at least this many bytes has its input sets made in parallel
# (:func:`_make_sets_at_once`); below it a thread costs more than it saves.
PARALLEL_INPUT_BYTES = 8 << 20
INPUT_THREADS = 4


def _make_sets_at_once(spec: LaunchSpec, seed: int, todo: list) -> list | None:
    """The input sets of ``todo`` (planned sets), made in parallel threads, in order and with the
    indices the sequential loop gives them when none fails: each set draws from its own
    generator (seed, index), and numpy draws and copies large arrays without the GIL, so the
    values are the sequential loop's. At captured sizes making them was the largest host cost
    of a search (the economy bench's profile, 2026-12-04: 85 s of 898 sets in one build). None
    (the caller makes them one by one) for small shapes, a single set, or when one fails."""
    if len(todo) < 2:
        return None
    try:
        nbytes = sum(b.nbytes for b in spec.resolved(todo[0].overrides).buffers)
    except SpecError:
        return None
    if nbytes < PARALLEL_INPUT_BYTES:
        return None
    from superopt.judge.at_once import run_at_once

    def chunk(indices):
        return [(i, make_input_set(spec, seed, i, scalars=todo[i].overrides, kind=todo[i].kind,
                                   rotation=todo[i].rotation(i))) for i in indices]
    n = max(1, min(INPUT_THREADS, os.cpu_count() or 1, len(todo)))
    try:
        chunks = run_at_once([lambda k=k: chunk(range(k, len(todo), n)) for k in range(n)], name="superopt-inputs")
    except SpecError:
        return None
    made: list = [None] * len(todo)
    for i, s in (pair for c in chunks for pair in c):
        made[i] = s
    return made


def _baseline_unjudged(reason: str, policy, ev: dict, t_start: float) -> "Verdict":
    """run_baseline's could-not-judge verdict: about nvcc's own code, so marked (baseline_unjudged)."""
    ev["wall_seconds"] = round(time.monotonic() - t_start, 4)
    ev[BASELINE_UNJUDGED] = True
    return _verdict(COULD_NOT_JUDGE, reason, policy, ev)


@dataclass
class BaselineInputs:
    """The host half of :func:`run_baseline`, before anything runs: the backend, the resolved
    kernel, the input plan, the sets and their second runs' inputs (complementary poisons), and
    the generator the rest of the check goes on drawing from. Made ahead of the check by
    :func:`prepare_baseline_inputs` (in a thread beside a search: at captured sizes drawing the
    sets is seconds of host work); the runs that follow are those the check would have made."""
    baseline_ptx: str
    spec: LaunchSpec
    be: Any
    kname: str
    policy: Policy
    seed: int
    ev: dict
    rng: Any
    prove: Any
    base_sets: list
    run2: list
    large_plan: list
    fallback: list
    outs: set
    t_start: float

    def second_runs(self, sets_):
        """The sets' second baseline runs: complementary poison, fresh guards."""
        return [s.with_outputs({n: complement_poison(s.data[n], s.spec.param(n).elem, self.rng) for n in self.outs},
                               self.rng, "baseline-2") for s in sets_]


def prepare_baseline_inputs(baseline_ptx: str, spec: LaunchSpec, *, backend: Union[str, Backend],
                            policy: Union[str, Policy, None], sets: int, seed: int | None = None,
                            availability: tuple[bool, str] | None = None) -> Union[BaselineInputs, Verdict]:
    """The input sets of :func:`run_baseline` for ``seed`` (default a fresh one), without
    running anything; a could-not-judge verdict where nvcc's code cannot be judged with the spec
    (no backend, a spec that does not fit the kernel, no inputs). ``run_baseline(...,
    prepared=...)`` goes on from here. ``availability``: the backend's ``available()``, asked
    by the caller already (a thread beside a search does not wait for the backend's lock)."""
    t_start = time.monotonic()
    policy = Policy.parse(policy)
    seed = fresh_seed() if seed is None else int(seed)
    ev: dict[str, Any] = {"seed": seed, "kernel": spec.kernel, "sets": [], "notes": [], "max_diff": {}}

    def fail(reason):
        return _baseline_unjudged(reason, policy, ev, t_start)

    # --- backend
    try:
        be = get_backend(backend) if isinstance(backend, str) else backend
    except BackendUnavailable as e:
        ev["backend"] = {"backend": str(backend)}
        return fail(str(e))
    ok, why = availability if availability is not None else be.available()
    ev["backend"] = be.describe()
    if not ok:
        return fail(why)

    # --- kernel and signature
    kname = resolve_kernel(baseline_ptx, spec.kernel)
    if kname is None:
        return fail(f"no kernel {spec.kernel!r} in the baseline PTX (entries: {', '.join(entry_names(baseline_ptx)) or 'none'})")
    if kname != spec.kernel:
        ev["notes"].append(f"kernel {spec.kernel!r} resolved to entry {kname!r}")
        spec = replace(spec, kernel=kname)
        ev["kernel"] = kname
    sig_b = entry_params(baseline_ptx, kname)
    misfit = _spec_fits(spec, sig_b)
    if misfit:
        return fail(f"the launch spec does not fit the kernel: {misfit}")

    # --- the input plan (superopt.judge.inputs.input_plan): the same for every spec origin
    phases = ev.setdefault("phase_seconds", {})
    t_phase = time.monotonic()
    rng = make_rng(seed, 0x5E7)
    prove = None
    if size_proof.needs_proof(spec):
        prove = lambda ov: size_proof.prove(baseline_ptx, spec, ov)        # noqa: E731
    plan = input_plan(spec, max(1, sets), rng, large=be.large_target(), prove=prove)
    if prove is not None:
        phases["size_proofs"] = round(time.monotonic() - t_phase, 4)
        t_phase = time.monotonic()
    ev["notes"].extend(plan.notes)
    if be.not_chosen:
        ev["not_chosen"] = list(be.not_chosen)
        ev["notes"].append(f"not chosen by the check on {be.name}: " + "; ".join(be.not_chosen))
    base_sets: list[InputSet] = []
    large_plan = [p for p in plan.sets if p.kind == "large"]
    fallback = [p for p in plan.sets if p.fallback]
    todo = [p for p in plan.sets if not (p.kind == "large" or p.fallback)]
    made = _make_sets_at_once(spec, seed, todo)
    for p in todo:
        try:
            if made is not None:
                base_sets.append(made[len(base_sets)])
                continue
            base_sets.append(make_input_set(spec, seed, len(base_sets), scalars=p.overrides, kind=p.kind,
                                            rotation=p.rotation(len(base_sets))))
        except SpecError as e:
            if not base_sets:
                return fail(f"cannot make inputs from the spec: {e}")
            ev["notes"].append(f"a {p.kind} set was skipped: {e}")
    _misalign_one(base_sets, baseline_ptx, kname, spec, rng, ev)
    pinned = [s.name for s in spec.scalars if s.pinned]
    if pinned:
        ev["pinned"] = pinned          # the spec's word that the kernel may rely on these values
    outs = {b.name for b in spec.buffers if b.direction == "out"}
    prepared = BaselineInputs(baseline_ptx=baseline_ptx, spec=spec, be=be, kname=kname, policy=policy, seed=seed,
                              ev=ev, rng=rng, prove=prove, base_sets=base_sets, run2=[], large_plan=large_plan,
                              fallback=fallback, outs=outs, t_start=t_start)
    prepared.run2 = prepared.second_runs(base_sets)
    phases["inputs"] = round(time.monotonic() - t_phase, 4)
    return prepared


def _extra(s: InputSet) -> bool:
    """A set past the main ones, or the misaligned one: nvcc's runs of it come last (a fault there
    must not take the others with it) and one on which nvcc's code fails is dropped, not the check."""
    return s.kind != "main" or bool(s.misaligned)


def _misalign_one(base_sets: list, baseline_ptx: str, kname: str, spec: LaunchSpec, rng, ev: dict) -> None:
    """Make one set misaligned (superopt.judge.inputs.misalign): every buffer a few bytes past a
    16-byte boundary, as a pointer into an array may be. The last main set past set 0 (set 0
    may hold the program's data), else the first tail set; none where nvcc's own accesses, a
    pointer parameter's declared ``.ptr .align`` or the buffers' elements need 16 bytes
    (superopt.judge.inputs.misalign_bytes)."""
    off = misalign_bytes(spec, alias_check.pointer_alignment(baseline_ptx, kname))
    if off is None or not spec.buffers:
        return
    if atomic_judge.AL.has_float_atomics(baseline_ptx, kname):
        return                      # their log (a buffer of the check's, in the same set) needs alignment
    mains = [i for i, s in enumerate(base_sets) if s.kind == "main" and i > 0]
    tails = [i for i, s in enumerate(base_sets) if s.kind == "tail"]
    pick = mains[-1] if mains else (tails[0] if tails else None)
    if pick is None:
        return
    base_sets[pick] = misalign(base_sets[pick], off, rng)
    ev["misaligned"] = {"set": base_sets[pick].label, "bytes": off}
    ev["notes"].append(f"{base_sets[pick].label}: a pointer into an array may start there; nvcc's code cannot assume "
                       f"more, and a wider access than its own needs a test at launch")


def _run_baseline(baseline_ptx: str, spec: LaunchSpec, *, backend: Union[str, Backend],
                  policy: Union[str, Policy, None], sets: int, seed: int,
                  launch_timeout: float | None, prepared: BaselineInputs | None = None) -> Union[BaselineRuns, Verdict]:
    """:func:`run_baseline` on one backend (``prepared``: its input sets, made ahead)."""
    if prepared is None:
        prepared = prepare_baseline_inputs(baseline_ptx, spec, backend=backend, policy=policy, sets=sets, seed=seed)
        if isinstance(prepared, Verdict):
            return prepared
    else:
        # made ahead: the check's own time starts now
        prepared.t_start = time.monotonic()
        prepared.ev["notes"].append("the input sets were made ahead of the check, beside the search")
    return _run_prepared(prepared, launch_timeout)


def _run_prepared(prep: BaselineInputs, launch_timeout: float | None) -> Union[BaselineRuns, Verdict]:
    """The baseline's runs on the prepared sets, the determinism and golden checks, the late sets."""
    baseline_ptx, spec, be, kname, policy, seed = prep.baseline_ptx, prep.spec, prep.be, prep.kname, prep.policy, prep.seed
    ev, rng, prove, base_sets, run2 = prep.ev, prep.rng, prep.prove, prep.base_sets, prep.run2
    large_plan, fallback, t_start = prep.large_plan, prep.fallback, prep.t_start
    second_runs = prep.second_runs
    phases = ev.setdefault("phase_seconds", {})
    atomic_refusal = None

    def fail(reason):
        return _baseline_unjudged(reason, policy, ev, t_start)

    atomic = atomic_judge.start(baseline_ptx, kname, base_sets)
    if isinstance(atomic, str):
        ev["notes"].append(f"float atomics are not judged by their contributions: {atomic}")
        atomic_refusal, atomic = atomic, None

    def run_pairs(first: list, second: list, timeout):
        """Both baseline runs of the sets ``first`` (their second runs ``second``), the main
        sets' runs before the extra sets' (a crash ends a backend's run: an extra set on which
        nvcc's code faults must not take the main sets with it). (runs 1, runs 2, logs 1, logs 2)."""
        order = [s for s in first if not _extra(s)] + [s for s in second if not _extra(s)] \
            + [s for s in first if _extra(s)] + [s for s in second if _extra(s)]
        if atomic is not None:
            res, logs = atomic.run_baseline(be, spec, order, timeout, rng)
        else:
            res, logs = be.run_many(baseline_ptx, spec, order, timeout=timeout), [None] * len(order)
        got = {id(s): (r, lg) for s, r, lg in zip(order, res, logs)}
        return ([got[id(s)][0] for s in first], [got[id(s)][0] for s in second],
                [got[id(s)][1] for s in first], [got[id(s)][1] for s in second])

    t_phase = time.monotonic()
    r1s, r2s, l1s, l2s = run_pairs(base_sets, run2, launch_timeout)
    phases["baseline_runs"] = round(time.monotonic() - t_phase, 4)
    t_phase = time.monotonic()
    valid: list[int] = []
    unwritten: dict[tuple[int, str], np.ndarray] = {}
    base_writes_input: set[str] = set()
    base_guard_reads: dict[str, tuple[int, int]] = {}
    base_taint: dict[str, dict] = {}
    slowest = 0.0

    def judge_set(i: int, s: InputSet, s2: InputSet, r1, r2, lg1, lg2) -> Verdict | None:
        """Take set ``i`` (runs r1, r2) into the baseline's runs, drop it with a note, or
        return the could-not-judge verdict that ends the check."""
        nonlocal slowest
        extra = _extra(s)
        bad = [r for r in (r1, r2) if not r.ok]
        if bad:
            r = bad[0]
            msg = f"baseline {r.status} on {s.label}: {r.error}" + (f"\n{r.log}" if r.log and r.status == "launch_error" else "")
            if i == 0 or (r.status in ("launch_error", "unsupported") and not extra):
                return fail(msg)
            ev["notes"].append(msg + " (set dropped)")
            return None
        damaged = [f"{n}: {d}" for r in (r1, r2) for n, d in r.guard_damage.items()]
        if damaged:
            msg = f"baseline writes outside its buffers on {s.label} ({'; '.join(sorted(set(damaged)))})"
            if i == 0:
                return fail(msg + ": the spec's buffer lengths look too small")
            ev["notes"].append(msg + " (set dropped)")
            return None
        reads: dict[str, tuple[int, int]] = {}
        for r in (r1, r2):
            for n, g in (r.guard_reads or {}).items():
                b0, p0 = reads.get(n, (0, 0))
                reads[n] = (max(b0, g.get("before_start_bytes", 0)), max(p0, g.get("past_end_bytes", 0)))
        if extra:
            farther = sorted(n for n, (b0, p0) in reads.items()
                             if b0 > base_guard_reads.get(n, (0, 0))[0] or p0 > base_guard_reads.get(n, (0, 0))[1])
            if farther:
                # the spec's lengths do not cover these sizes: a set nvcc's code is not judged on
                ev["notes"].append(f"baseline reads outside buffers {farther} on {s.label}, farther than on the "
                                   f"main sets (set dropped)")
                return None
        if atomic is not None:
            why = atomic.baseline_problem(s, s2, r1, r2, lg1, lg2)
            if why and (why[1] or i == 0):
                return fail(why[0])
            if why:
                ev["notes"].append(why[0] + " (set dropped)")
                return None
            atomic.accept_set(i, s, lg1, lg2)
        # determinism of the baseline
        masks: dict[str, np.ndarray] = {}
        writes_input: set[str] = set()
        for b in s.spec.buffers:
            et = b.elem
            x1, x2 = r1.outputs[b.name], r2.outputs[b.name]
            # targets of float atomics are compared by their contributions, not here
            tm = atomic.mask(i, b.name) if atomic is not None else None
            if b.direction == "out":
                p1, p2 = s.data[b.name], s2.data[b.name]
                un = (_bits(x1, et) == _bits(p1, et)) & (_bits(x2, et) == _bits(p2, et))
                if tm is not None:
                    un &= ~tm
                masks[b.name] = un
                diff = ~compare_values(x1, x2, et, policy) & ~un
            else:
                if r1.inputs_unchanged[b.name] and r2.inputs_unchanged[b.name]:
                    continue
                if b.direction == "in":
                    writes_input.add(b.name)
                diff = ~compare_values(x1, x2, et, policy)
            if tm is not None:
                diff &= ~tm
            if diff.any() and i > 0:
                # Defined behaviour is what the candidate must match; on varied sizes or
                # scalars where the baseline itself is not deterministic there is none.
                ev["notes"].append(f"the baseline is not deterministic on {s.label} "
                                   f"(buffer {b.name!r}); set dropped")
                return None
            if diff.any():
                j = _first_diff(diff)
                return fail(f"{NOT_DETERMINISTIC}: buffer {b.name!r} element {j} is "
                            f"{format_value(x1, j, et)} in one run and {format_value(x2, j, et)} in another on "
                            f"the same inputs ({s.label}; {int(diff.sum())} elements differ). Causes: atomics "
                            f"order, uninitialised (shared) memory or registers, or an output read before it is written "
                            f"(declare it inout). A tolerance policy can absorb order-dependent float sums."
                            + (f" (Float atomics could not be judged by their contributions: {atomic_refusal})"
                               if atomic_refusal else ""))
        for n, un in masks.items():
            unwritten[(i, n)] = un
        base_writes_input.update(writes_input)
        slowest = max(slowest, r1.elapsed or 0.0, r2.elapsed or 0.0)
        for r in (r1, r2):
            for what, e in (r.taint or {}).items():
                base_taint.setdefault(what, dict(e))
        for n, (b0, p0) in reads.items():
            ob, op = base_guard_reads.get(n, (0, 0))
            base_guard_reads[n] = (max(ob, b0), max(op, p0))
        valid.append(i)
        return None

    for i, s in enumerate(base_sets):
        ev["sets"].append(s.describe())
        stop = judge_set(i, s, run2[i], r1s[i], r2s[i], l1s[i], l2s[i])
        if stop is not None:
            return stop

    def run_late(p, timeout) -> Verdict | None:
        """Make, run and take in one more set after the others (its own backend call)."""
        try:
            s = make_input_set(spec, seed, len(base_sets), scalars=p.overrides, kind=p.kind,
                               rotation=p.rotation(len(base_sets)))
        except SpecError as e:
            ev["notes"].append(f"no {p.kind} set ({_sizes(spec, p.overrides)}): {e}")
            return None
        s2 = second_runs([s])[0]
        a1, a2, b1, b2 = run_pairs([s], [s2], timeout)
        i = len(base_sets)
        base_sets.append(s)
        run2.append(s2)
        r1s.append(a1[0])
        r2s.append(a2[0])
        ev["sets"].append(s.describe())
        return judge_set(i, s, s2, a1[0], a2[0], b1[0], b2[0])

    # --- the large set, after the others, in a backend call of its own: the first candidate that
    # nvcc's launches on the other sets say is affordable and (an inferred spec) the tracer proves;
    # else, or when nvcc's code misbehaves there, the whole-block set it stands for
    t_late = time.monotonic()
    late = list(fallback)
    target = be.large_target()
    rest = sum(r.elapsed or 0.0 for i in valid for r in (r1s[i], r2s[i]))
    for lp in large_plan if valid and valid[0] == 0 else []:
        predicted = _predicted_seconds(spec, lp.overrides, [(base_sets[i], r1s[i], r2s[i]) for i in valid])
        budget = max(target.max_seconds, target.time_factor * slowest, target.rest_factor * rest)
        if predicted > budget:
            ev["notes"].append(f"no large set at {_sizes(spec, lp.overrides)}: nvcc's own launch there would take about "
                               f"{predicted:.3g} s (its launches on the other sets, by the work's growth "
                               f"{work_growth(spec, lp.overrides):.3g}x), over the {budget:.3g} s a large set may "
                               f"take on {be.name}")
            continue
        why = prove(lp.overrides) if prove is not None else None
        if why:
            ev["notes"].append(f"no large set at {_sizes(spec, lp.overrides)}: the inferred spec's buffers are not "
                               f"proven to cover that launch ({why})")
            continue
        limit = max(2.0, 10 * predicted)
        stop = run_late(lp, min(limit, launch_timeout) if launch_timeout else limit)
        if stop is not None:
            return stop
        if valid[-1] == len(base_sets) - 1:
            late = []                     # judged there: the whole-block set it stands for is not needed
        break
    for p in late:
        stop = run_late(p, launch_timeout)
        if stop is not None:
            return stop
    t_after = time.monotonic()
    if large_plan or fallback:
        phases["late_sets"] = round(t_after - t_late, 4)
    bres = r1s + r2s
    if not valid:
        return fail("no input set on which the baseline runs cleanly")
    if atomic is not None:
        ev["atomic_log"] = atomic.evidence()
        ev["notes"].append(atomic.note())
    golden = _golden_problem(spec, base_sets, bres, unwritten, valid, policy, ev, atomic)
    if golden:
        return fail(golden)
    if base_writes_input:
        ev["notes"].append(f"the baseline modifies buffers declared 'in': {sorted(base_writes_input)} (compared as outputs)")
    if base_guard_reads:
        ev["baseline_guard_reads"] = {n: {"before_start_bytes": b, "past_end_bytes": a}
                                      for n, (b, a) in sorted(base_guard_reads.items())}
        ev["notes"].append(f"the baseline reads outside buffers {sorted(base_guard_reads)} (a candidate may read "
                           f"as far, no farther)")
    phases["baseline_compare"] = round((t_late - t_phase) + (time.monotonic() - t_after), 4)
    # --- buffers that overlap (superopt.judge.alias_check): nvcc's runs on the aliased layouts
    # (made when a candidate's check first needs them: BaselineRuns.aliased)
    def layouts():
        return alias_check.run_baseline_layouts(baseline_ptx, spec, be, policy, seed, base_sets, valid, ev,
                                                launch_timeout=launch_timeout, prove=prove, atomic=atomic)
    ev["baseline_seconds"] = [r.elapsed for r in bres if r.elapsed is not None]
    ev["baseline_wall_seconds"] = round(time.monotonic() - t_start, 4)
    return BaselineRuns(baseline_ptx=baseline_ptx, spec=spec, kernel=kname, policy=policy,
                        seed=seed, sets=base_sets, results=bres, valid=valid, unwritten=unwritten,
                        writes_input=base_writes_input, slowest=slowest, evidence=ev,
                        guard_reads=base_guard_reads, taint=base_taint, atomic=atomic, layouts_pending=layouts)


def _golden_problem(spec: LaunchSpec, base_sets, bres, unwritten, valid, policy, ev, atomic=None) -> str | None:
    """The golden test of a captured snapshot: on the set that starts from the program's own
    data (set 0), nvcc's code must leave every buffer as the program's run left it. A
    mismatch means the spec does not hold everything the kernel reads (globals, constant
    memory, pointers stored in buffers, a stream the program overlapped) or the capture is of
    another build; the check says so instead of judging anything on that spec."""
    after = (spec.snapshot or {}).get("after") or {}
    if not after or 0 not in valid:
        return None
    s0, r1 = base_sets[0], bres[0]
    if not any(d == "program data" for d in s0.distributions.values()):
        return None
    for name, path in sorted(after.items()):
        b = s0.spec.param(name)
        et = b.elem
        try:
            want = snapshot_array(path, et, b.length)
        except SpecError as e:
            return f"the program's output cannot be read: {e}"
        got = r1.outputs[name]
        bad = ~compare_values(want, got, et, policy)
        un = unwritten.get((0, name))
        if un is not None:
            bad &= ~un
        tm = atomic.mask(0, name) if atomic is not None else None
        if tm is not None:
            bad &= ~tm                        # float atomic targets: order-dependent sums
        if bad.any():
            j = _first_diff(bad)
            return (f"nvcc's code does not reproduce the program's own output on the program's data: buffer "
                    f"{name!r} element {j} is {format_value(got, j, et)} here and {format_value(want, j, et)} after "
                    f"the captured launch ({int(bad.sum())} elements differ). The kernel reads something the "
                    f"launch spec does not hold (globals, __constant__ memory, pointers stored in buffers), "
                    f"or the capture is of another build")
    ev["golden"] = {"buffers": sorted(after), "result": "nvcc's code reproduced the program's own output"}
    return None


def check(baseline_ptx: str, candidate_ptx: str, spec: LaunchSpec, *,
          backend: Union[str, Backend] = "gpu", policy: Union[str, Policy, None] = None, sets: int = 4,
          seed: int | None = None, launch_timeout: float | None = None, min_timeout: float = 2.0,
          baseline: BaselineRuns | None = None, aliasing: bool | str = True,
          prepared: BaselineInputs | None = None) -> Verdict:
    """Judge ``candidate_ptx`` against ``baseline_ptx`` for the kernel ``spec.kernel``.

    ``backend``: a name from the registry (``gpu``, ``emulator``) or a Backend instance.
    ``sets``: number of input sets (each run twice for the baseline and twice for the
    candidate). ``seed``: master seed (default: fresh from os.urandom). ``launch_timeout``:
    limit for each baseline launch (default: the backend's); candidate launches get
    ``max(min_timeout, 50 x slowest baseline launch)`` unless ``launch_timeout`` is given.
    ``baseline``: runs from :func:`run_baseline` of the same baseline PTX and spec to reuse
    (then ``sets``, ``seed`` and ``policy`` are those of the runs). ``aliasing``: True judges the
    candidate on the aliased layouts too (:mod:`superopt.judge.alias_check`); a string leaves them
    out and says why in the evidence (the judge does so at a costly shape for a candidate already
    judged there at another shape: :meth:`superopt.judge.judge.BackendJudge.verify`).
    ``prepared``: the baseline's input sets made ahead (:func:`prepare_baseline_inputs`).
    """
    t_start = time.monotonic()
    if baseline is None:
        kname = resolve_kernel(baseline_ptx, spec.kernel)
        # a changed signature is rejected before any baseline work
        if kname is not None and entry_params(baseline_ptx, kname) is not None:
            early = _signature_verdict(baseline_ptx, candidate_ptx, kname, Policy.parse(policy),
                                       {"seed": seed, "kernel": kname, "sets": [], "notes": [], "max_diff": {}})
            if early is not None:
                return early
        early = _static_verdict(baseline_ptx, candidate_ptx, kname or spec.kernel, Policy.parse(policy),
                                {"seed": seed, "kernel": kname or spec.kernel, "sets": [], "notes": [],
                                 "max_diff": {}}, t_start)
        if early is not None:
            return early
        runs = run_baseline(baseline_ptx, spec, backend=backend, policy=policy, sets=sets, seed=seed,
                            launch_timeout=launch_timeout, prepared=prepared)
        if isinstance(runs, Verdict):
            return runs
        reused = False
    else:
        if baseline.baseline_ptx != baseline_ptx:
            raise ValueError("check(baseline=...): the runs were made with another baseline PTX")
        runs, reused = baseline, True
    be = get_backend(backend) if isinstance(backend, str) else backend
    return _judge_candidate(runs, candidate_ptx, be, launch_timeout, min_timeout, t_start, reused, aliasing)


# Sets the candidate runs once, not twice: the tails (for the residues) and the large set (for
# the index range), with random bits in its outputs (an element it does not write shows; so does
# code right only while its output holds NaN). Repetition (state kept between launches, a zeroed
# register file, the emulator's serial warp schedule, the other poisons) is the main sets' job;
# nvcc's code still runs twice on every set (its determinism and the elements it leaves alone).
ONE_CANDIDATE_LAUNCH = ("tail", "large")

_STATIC_CACHE: dict = {}


def _static_of(ptx: str, kernel: str):
    from superopt.judge import static_check
    key = (hash(ptx), len(ptx), kernel)
    r = _STATIC_CACHE.get(key)
    if r is None:
        if len(_STATIC_CACHE) > 64:
            _STATIC_CACHE.clear()
        r = _STATIC_CACHE[key] = (static_check.analyze_ptx(ptx, kernel),)
    return r[0]


@measured("static")
def _static_verdict(baseline_ptx, candidate_ptx, kname, policy, ev, t_start) -> Verdict | None:
    """The static def-use check (superopt.judge.static_check), before anything runs: a
    candidate whose branch, store, return or call depends on a register nothing wrote,
    where nvcc's code has no such use, is rejected. Its findings go to ``evidence['static']``."""
    from superopt.judge import static_check
    t0 = time.monotonic()
    b, c = _static_of(baseline_ptx, kname), _static_of(candidate_ptx, kname)
    ev["static"] = {"baseline": b.to_dict() if b else None, "candidate": c.to_dict() if c else None,
                    "seconds": round(time.monotonic() - t0, 4)}
    why = static_check.compare(b, c)
    if why is None:
        return None
    ev["wall_seconds"] = round(time.monotonic() - t_start, 4)
    return _verdict(REJECTED, why, policy, ev)


def _race_verdict(baseline_ptx, candidate_ptx, kname, ev, spec: LaunchSpec | None = None) -> str | None:
    """The static race check (superopt.judge.race_check) and the atomic judge's rule for
    buffers nvcc's code touches only atomically (superopt.judge.atomic_judge), once the runs
    gave equal results: a candidate that reads what other threads of the launch write where
    nvcc's code does not, or plainly accesses an atomic target, gives those results only on
    some schedules. Findings go to ``evidence['races']``; the reason to reject, or None."""
    from superopt.judge import race_check
    t0 = time.monotonic()
    b, c = race_check.analyze_ptx(baseline_ptx, kname), race_check.analyze_ptx(candidate_ptx, kname)
    ev["races"] = {"baseline": b.to_dict() if b else None, "candidate": c.to_dict() if c else None,
                   "seconds": round(time.monotonic() - t0, 4)}
    names: dict = {}
    params = entry_params(baseline_ptx, kname) or []
    if spec is not None and len(params) == len(spec.kernel_params):
        names = {pname: p.name for (pname, _, _), p in zip(params, spec.kernel_params)}
    return atomic_judge.plain_access_problem(b, c, names) or race_check.compare(b, c, names)


def _launch_bounds_problem(candidate_ptx: str, kname: str, sets: list) -> str | None:
    """The candidate's ``.maxntid``/``.reqntid``/``.minnctapersm`` against every launch the check
    makes (superopt.judge.launch_contract.launch_problem); None when all fit."""
    from superopt.judge.launch_contract import launch_problem
    try:
        fn = ptx_ir.parse(candidate_ptx, fragment=True).function(kname)
    except (ptx_ir.ParseError, KeyError):
        return None                      # the runs say what is wrong with it
    return launch_problem(fn, [(s.label, s.spec.block) for s in sets])


def _signature_verdict(baseline_ptx, candidate_ptx, kname, policy, ev) -> Verdict | None:
    sig_b = entry_params(baseline_ptx, kname)
    sig_c = entry_params(candidate_ptx, kname)
    if sig_c is None:
        return _verdict(REJECTED, f"the candidate PTX has no entry {kname!r}", policy, ev)
    if [(t, s) for _, t, s in sig_b] != [(t, s) for _, t, s in sig_c]:
        return _verdict(REJECTED, f"the candidate changes the parameters of {kname}: "
                                  f"{[t for _, t, _ in sig_b]} -> {[t for _, t, _ in sig_c]}", policy, ev)
    return None


def _extent(nbytes: int, esize: int, where: str) -> str:
    if nbytes % esize == 0:
        k = nbytes // esize
        return f"{k} element{'s' if k != 1 else ''} {where}"
    return f"{nbytes} bytes {where}"


def _guard_read_excess(cand: dict, base: dict, spec: LaunchSpec) -> str | None:
    """The first buffer the candidate reads farther outside of than the baseline does,
    described ("reads outside buffer 'x' (1 element past its end)"), or None."""
    for n in sorted(cand or {}):
        g = cand[n]
        b0, a0 = base.get(n, (0, 0))
        before, past = int(g.get("before_start_bytes", 0)), int(g.get("past_end_bytes", 0))
        if before <= b0 and past <= a0:
            continue
        try:
            es = spec.param(n).elem.size
        except Exception:  # noqa: BLE001 - an unknown buffer name: describe in bytes
            es = 1
        parts = []
        if past > a0:
            parts.append(_extent(past, es, "past its end"))
        if before > b0:
            parts.append(_extent(before, es, "before its start"))
        return f"reads outside buffer {n!r} ({', '.join(parts)}; {g.get('count', 0)} loads)"
    return None


def _taint_excess(cres: list, base: dict) -> str | None:
    """Why the candidate's runs must be rejected by the taint bit (superopt.judge.emulator):
    it stores or branches on a value derived from something never written (a register, shared
    or local memory) where nvcc's code never does; None if not. Equal outputs do not clear it:
    the poison it read happened to give them, garbage on a GPU need not."""
    if any(what in base for what in _TAINT_SINKS):
        return None
    for r in cres:
        for what in _TAINT_SINKS:
            e = (r.taint or {}).get(what)
            if e:
                return (f"the candidate {_TAINT_SINKS[what]} a value derived from never-written data (a register, "
                        f"shared or local memory nothing wrote; taint bit) where nvcc's code does not: "
                        f"`{e['first']}` ({e['count']} times, {e['lanes']} lanes)")
    return None


def _split_barrier_excess(cres: list, base: dict) -> str | None:
    """Why the candidate must be rejected for waiting at a barrier from different instructions
    where nvcc's code never does (the emulator's ``barrier`` event): lanes of one warp at
    different instructions of one barrier (an H200 gave wrong results for it), or threads of one
    block at different aligned ones (``bar.sync``: undefined in PTX). The emulator releases
    them together, so its outputs may agree; a GPU's need not."""
    if "barrier" in base:
        return None
    for r in cres:
        e = (r.taint or {}).get("barrier")
        if e and e.get("warp"):
            return (f"lanes of one warp wait at different barrier instructions of the same barrier ({e['first']}; "
                    f"{e['count']} times, {e['lanes']} threads), where nvcc's code does not: a barrier counts a "
                    f"warp's arrival, and an H200 gave wrong results for such code")
        if e:
            return (f"threads of one block reach an aligned barrier at different instructions ({e['first']}; "
                    f"{e['count']} times, {e['lanes']} threads), where nvcc's code does not: undefined in PTX "
                    f"(bar.sync is barrier.sync.aligned: every thread of the block must execute the same one)")
    return None


# the emulator's taint sinks (superopt.judge.emulator.executor), as the rejection says them
_TAINT_SINKS = {"branch": "branches on", "store": "stores on", "predicate": "is predicated on",
                "address": "loads from an address computed from", "call": "passes to a call"}


def _candidate_sets(bl: BaselineRuns, outs: set, rng) -> tuple[list, list, dict]:
    """The candidates' input sets against ``bl``: twice per valid set (once for the kinds in
    ONE_CANDIDATE_LAUNCH), the outputs starting from the poisons :data:`POISONS` rotates
    through, fresh guards. (sets, launch number per set, {set label: poison kinds})."""
    csets: list[InputSet] = []
    reps: list[int] = []
    poisons: dict[str, list[str]] = {}
    for rep in (1, 2):
        for i in bl.valid:
            s = bl.sets[i]
            once = s.kind in ONE_CANDIDATE_LAUNCH
            if once and rep == 2:
                continue
            kind = "bits" if once else POISONS[(i + rep - 1) % len(POISONS)]
            if not outs:
                kind = "none"
            poisons.setdefault(s.label, []).append(kind)
            new = {n: candidate_poison(kind, bl.results[i].outputs[n], s.spec.param(n).elem, rng,
                                       equal=_equal_under(bl.policy, s.spec.param(n).elem)) for n in outs}
            csets.append(s.with_outputs(new, rng, f"candidate-{rep}"))
            reps.append(rep)
    return csets, reps, poisons


def _judge_candidate(bl: BaselineRuns, candidate_ptx: str, be: Backend, launch_timeout, min_timeout,
                     t_start: float, reused: bool, aliasing: bool | str = True) -> Verdict:
    """The candidate half of :func:`check`, against prepared baseline runs."""
    policy, spec = bl.policy, bl.spec
    if bl.backend is not None:
        be = bl.backend                # the lanes of a warp in step, as nvcc's code needs
    # nvcc's aliased runs are made (and written into its evidence) before the evidence is copied
    aliased = bl.aliased if aliasing is True else None
    ev = copy.deepcopy(bl.evidence)
    if aliasing is not True:
        ev["aliasing_left_out"] = str(aliasing)
        ev["notes"].append(f"aliased layouts not run at this shape: {aliasing}")
    bl.uses += 1
    if reused:
        ev["notes"].append(f"baseline runs reused (input seed {bl.seed}, use {bl.uses}): the baseline is "
                           f"deterministic, its results on these inputs do not depend on the candidate")
        ev["phase_seconds"] = {}
    phases = ev.setdefault("phase_seconds", {})

    def done(status, reason, mismatch=None):
        ev["wall_seconds"] = round(time.monotonic() - t_start, 4)
        return _verdict(status, reason, policy, ev, mismatch)

    early = _signature_verdict(bl.baseline_ptx, candidate_ptx, bl.kernel, policy, ev)
    if early is not None:
        early.evidence["wall_seconds"] = round(time.monotonic() - t_start, 4)
        return early
    static = _static_verdict(bl.baseline_ptx, candidate_ptx, bl.kernel, policy, ev, t_start)
    if static is not None:
        return static
    bounds = _launch_bounds_problem(candidate_ptx, bl.kernel, [bl.sets[i] for i in bl.valid]
                                    + (list(aliased.sets) if aliased is not None else []))
    if bounds:
        return done(REJECTED, f"the candidate cannot be launched as the check launches it: {bounds}")
    base_sets, bres, valid, unwritten = bl.sets, bl.results, bl.valid, bl.unwritten
    base_writes_input, slowest = bl.writes_input, bl.slowest
    outs = {b.name for b in spec.buffers if b.direction == "out"}
    # candidate poisons and aliased sets come from a generator of their own (not the inputs')
    rng = make_rng(fresh_seed(), 0xCA4D)

    # --- candidate, twice per set, one module load
    t_phase = time.monotonic()
    cand_timeout = launch_timeout if launch_timeout else max(min_timeout, 50 * slowest)
    ev["candidate_launch_timeout_s"] = cand_timeout
    if bl.candidate_sets is None:
        bl.candidate_sets = _candidate_sets(bl, outs, rng)
    else:
        ev["notes"].append("candidate input sets reused with the baseline runs (output poisons, guards)")
    csets, reps, poisons = bl.candidate_sets
    ev["candidate_poisons"] = poisons
    n_main = len(csets)
    # the aliased sets come last in the same module load: a fault there leaves the others' results
    aks, acsets = (alias_check.candidate_sets(aliased, policy, rng) if aliased is not None and bl.atomic is None
                   else ([], []))
    acres: list = []
    phases["candidate_inputs"] = round(time.monotonic() - t_phase, 4)
    t_phase = time.monotonic()
    atomic = bl.atomic
    if atomic is not None:
        cinst = atomic_judge.instrument_candidate(atomic, candidate_ptx)
        if isinstance(cinst, atomic_judge.Refused):
            return done(COULD_NOT_JUDGE, f"nvcc's code is judged by the contributions of its float atomics, and the "
                                         f"candidate's cannot be logged: {cinst.reason}")
        cres, clogs = atomic_judge.run_logged(be, cinst, spec, csets, cand_timeout, rng)
    else:
        extra = {}
        if getattr(be, "compares_expected", False):
            # the GPU compares each output with nvcc's result where it ran: a right candidate's
            # outputs do not cross the bus (superopt.judge.backends.gpu.GpuBackend.run_many)
            extra["expect"] = [{b.name: bres[cs.index].outputs[b.name] for b in cs.spec.buffers
                                if b.direction != "in" and b.name in bres[cs.index].outputs} for cs in csets]
            # the candidates' sets are run again for the next candidate: their buffers (output
            # poisons included) may stay on the GPU; the aliased sets are made per candidate
            extra["reused"] = [True] * len(csets)
        cres = be.run_many(candidate_ptx, spec, csets + acsets, timeout=cand_timeout, **extra)
        cres, acres = cres[:n_main], cres[n_main:]
    phases["candidate_runs"] = round(time.monotonic() - t_phase, 4)
    t_phase = time.monotonic()

    max_diff: dict[str, dict] = {}
    for j, (cs, cr) in enumerate(zip(csets, cres)):
        i = cs.index
        rep = reps[j]
        base = bres[i]
        where = f"{cs.label} (launch {rep})"
        if cr.status == "unsupported":
            return done(COULD_NOT_JUDGE, f"the backend cannot run the candidate: {cr.error}")
        if cr.status == "timeout":
            return done(REJECTED, f"the candidate timed out on {where}: {cr.error} "
                                  f"(limit {cand_timeout:.3g} s; baseline's slowest launch {slowest * 1e3:.3g} ms)")
        if cr.status == "crash":
            hint = (f" (its buffers start {cs.misaligned} bytes past a 16-byte boundary there, as pointers into arrays "
                    f"may: a wider access than nvcc's needs a test of the pointers at launch)" if cs.misaligned else "")
            return done(REJECTED, f"the candidate crashed on {where}: {cr.error}{hint}")
        if cr.status == "launch_error":
            return done(REJECTED, f"the candidate failed to load or launch: {cr.error}"
                                  + (f"\n{cr.log}" if cr.log and cr.log not in (cr.error or "") else ""))
        if cr.status != "ok":
            return done(REJECTED, f"the candidate did not run on {where}: {cr.status} {cr.error or ''}")
        if cr.guard_damage:
            n, d = sorted(cr.guard_damage.items())[0]
            return done(REJECTED, f"the candidate writes outside buffer {n!r} on {where}: {d}")
        gr = _guard_read_excess(cr.guard_reads, bl.guard_reads, cs.spec)
        if gr:
            ev["guard_reads"] = {n: dict(g) for n, g in cr.guard_reads.items()}
            return done(REJECTED, f"the candidate {gr} where nvcc's code does not, on {where}")
        if atomic is not None:
            why = atomic.candidate_problem(i, cs, cr, clogs[j])
            if why:
                return done(REJECTED, f"{why}, on {where}")
        for b in cs.spec.buffers:
            et = b.elem
            if b.direction == "in" and b.name not in base_writes_input and not cr.inputs_unchanged[b.name]:
                changed = np.nonzero(_bits(cr.outputs[b.name], et) != _bits(cs.data[b.name], et))[0]
                jx = int(changed[0]) if changed.size else 0
                mm = Mismatch(i, cs.label, rep, b.name, "value", jx, int(changed.size),
                              format_value(cs.data[b.name], jx, et), format_value(cr.outputs[b.name], jx, et),
                              b.length)
                return done(REJECTED, f"the candidate writes its input buffer {b.name!r} (the baseline does not) on {where}", mm)
            if b.direction == "in" and b.name not in base_writes_input:
                continue                          # unchanged by both
            x_b, x_c = base.outputs[b.name], cr.outputs[b.name]
            un = unwritten.get((i, b.name)) if b.direction == "out" else None
            bad, untouched = _compare_run(x_b, un, x_c, cs.data[b.name] if b.direction == "out" else None, et, policy)
            tm = atomic.mask(i, b.name) if atomic is not None else None
            if tm is not None:
                bad &= ~tm                        # compared by contributions and chain above
            written = ~un if un is not None else np.ones(x_b.shape, bool)
            md = max_diff.setdefault(b.name, {"max_abs_diff": 0, "max_ulp_diff": 0} if et.is_float else {"max_abs_diff": 0})
            if not policy.exact and et.is_float:
                # under exact, accepted elements differ by 0 by definition
                ok_el = written & ~bad
                st = diff_stats(x_b[ok_el], x_c[ok_el], et)
                for key, val in st.items():
                    md[key] = max(md[key], val)
            if bad.any():
                jx = _first_diff(bad)
                if un is not None and un[jx]:
                    kind = "wrote_where_baseline_did_not"
                    bval = "not written"
                else:
                    kind = "unwritten" if (untouched is not None and untouched[jx]) else "value"
                    bval = format_value(x_b, jx, et)
                cval = "not written (poison)" if kind == "unwritten" else format_value(x_c, jx, et)
                dst = diff_stats(x_b[bad & written], x_c[bad & written], et) if (bad & written).any() else {}
                mm = Mismatch(i, cs.label, rep, b.name, kind, jx, int(bad.sum()), bval, cval, b.length,
                              dst.get("max_abs_diff"), dst.get("max_ulp_diff"))
                return done(REJECTED, f"output differs: {mm.describe()}", mm)
    # the static race check before the aliased layouts': where both reject, its reason says what
    # is wrong in the candidate's code (a .nc read of a buffer the launch writes), not only where
    ev["max_diff"] = max_diff
    race = _race_verdict(bl.baseline_ptx, candidate_ptx, bl.kernel, ev, spec)
    if race:
        return done(REJECTED, race)
    if acsets:
        confirm = None
        if getattr(be, "not_chosen", ()):
            # a GPU's agreeing runs of nvcc's code where threads race are no behaviour to keep:
            # a rejection there is confirmed under the emulator's schedules (off the GPU)
            crng = make_rng(fresh_seed(), 0xC0F1)

            def confirm(s):
                with phase("alias_confirm"):
                    return alias_check.emulator_race(bl.baseline_ptx, spec, s, policy, crng)
        why = alias_check.judge_candidate(aliased, aks, acsets, acres, policy, bl.guard_reads, cand_timeout,
                                          confirm=confirm)
        alias_check.note_racy(aliased, ev)
        if why:
            return done(REJECTED, why[0], why[1])
    phases["candidate_compare"] = round(time.monotonic() - t_phase, 4)
    taint = _taint_excess(cres, bl.taint)
    if taint:
        return done(REJECTED, taint)
    split = _split_barrier_excess(cres, bl.taint)
    if split:
        return done(REJECTED, split)
    ev["candidate_seconds"] = [r.elapsed for r in cres if r.elapsed is not None]
    n_launch = len(cres)
    also = ""
    if atomic is not None:
        n = sum(len(clogs[j]) for j in range(len(cres)))
        also = (f"; float atomic adds judged by their contributions ({n} records, the same multiset as nvcc's "
                f"on every launch, each target's chain of old values consistent)")
        ev["atomic_log"]["candidate_records"] = n
    if acsets:
        ev["aliasing"]["candidate_launches"] = len(acsets)
        judged = len(aliased.active())
        also += (f"; {'identical' if policy.exact else f'within {policy}'} with buffers that overlap on "
                 f"{judged} aliased layouts ({len(acsets)} launches"
                 + (f"; {len(aliased.racy)} more dropped: nvcc's code races there on the CPU emulator"
                    if aliased.racy else "") + ")")
    return done(ACCEPTED, (f"identical on {len(valid)} input sets ({n_launch} candidate launches)"
                           if policy.exact else f"within {policy} on {len(valid)} input sets"
                           f" ({n_launch} candidate launches)") + also)
