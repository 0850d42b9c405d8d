"""The search: baseline, candidates from the proposers, judge each, keep the fastest verified.

For one kernel (:func:`search_kernel`):

1. without launch specs the kernel is "not verifiable" and keeps nvcc's code;
2. each proposer in turn (:mod:`superopt.search.proposer`; the rule passes first,
   :class:`superopt.search.rules.RuleProposer`, then the model where one is configured) is asked
   for candidates. A proposer judged within the search budget has its candidates judged within
   the first ``SINGLES_SHARE`` of the budget, the rest deferred; then the greedy combination of
   the passes whose best candidate won; then the deferred ones while the budget lasts. A
   proposer with its own budget (the model) has each candidate judged as it is yielded and
   reads the verdict back for its repair rounds. A later proposer sees the record as it stands,
   with the choice among the earlier candidates made;
3. judging one candidate (:func:`evaluate`): ptxas (static check) → differential check on every
   launch shape (GPU, or the CPU emulator) → timing (GPU only). The judge is wrapped in a
   :class:`superopt.judge.cache.CachingJudge`, so nothing is checked or timed twice;
4. keep the fastest candidate that verified and beat the baseline beyond the measured
   noise, after a second timing and timings at the other launch shapes the program may use,
   at none of which it may be slower (:mod:`superopt.search.launch_shapes`), then the check at
   the large shapes and a check on fresh inputs (the cheap verdicts first: each drops
   candidates, and the checks at full size cost most). Without a GPU there is no measured
   speed: by default (``no_gpu="locked"``) only decisions from the lockfile or cache are
   applied; ``no_gpu="estimate"`` picks a verified candidate by a static estimate and labels the
   decision an estimate.

Every candidate's fate is recorded (see :mod:`superopt.store.record`).
"""
from __future__ import annotations

import copy
import math
import os
import time
import traceback
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Sequence

import ptx_ir
from superopt.judge.cache import CachingJudge
from superopt.judge.phases import in_context, phase
from superopt.judge.protocol import Judge
from superopt.judge.ptxas import run_ptxas
from superopt.search.candidates import Candidate, make_candidate, text_hash
from superopt.search.launch_shapes import judge_other_shapes, summary as other_shapes_summary
from superopt.search.options import SearchOptions
from superopt.search.proposer import ProposalContext, Proposer
from superopt.search.rules import RuleProposer, priority
from superopt.store import record as rec
from superopt.store.record import Decision, Fate, Status


@dataclass
class KernelResult:
    kernel: str
    record: dict
    winner: Candidate | None
    judged: list[Candidate] = field(default_factory=list)   # every candidate the search judged


STATIC_ESTIMATE_NOTE = ("static estimate: global memory instructions weigh 4, others 1, each counted once "
                        "(loop trip counts are not weighted); not a measurement")


def static_estimate(ptx: str, kernel: str) -> float:
    """A crude cost: memory instructions weigh by transactions, all else by one.
    Used only without a GPU under ``no_gpu="estimate"``, and labelled as such."""
    fn = ptx_ir.parse(ptx).function(kernel)
    cost = 0.0
    for inst in fn.instructions:
        if inst.opcode in ("ld", "st", "atom", "red") and inst.space in (".global", None):
            cost += 4.0
        else:
            cost += 1.0
    return cost


# A launch shape whose buffers hold more than this is costly to check (the program's captured
# sizes: hundreds of MB per input set, seconds per check). A candidate is checked on the cheaper
# shapes first, timed, and checked at the costly shapes only if the search is about to keep it:
# a candidate that is not kept is dropped whether it is right or not, so checking it at full
# size would only spend the budget. Timing an unchecked-at-size candidate is safe: the GPU runs
# in a restartable worker, timing uses copies of the inputs, and a fault there is a failed
# timing, never a verdict.
COSTLY_CHECK_BYTES = 8 << 20


def _check_bytes(spec) -> int | None:
    from superopt.judge.judge import spec_bytes
    return spec_bytes(spec)


def _split_by_cost(specs: list) -> tuple[list, list]:
    """(cheap shapes, costly shapes), each in the given order."""
    sizes = [_check_bytes(s) for s in specs]
    cheap = [s for s, n in zip(specs, sizes) if n is None or n <= COSTLY_CHECK_BYTES]
    costly = [s for s, n in zip(specs, sizes) if n is not None and n > COSTLY_CHECK_BYTES]
    return cheap, costly


def _verify_each(judge: Judge, baseline_ptx: str, cand_ptx: str, specs: list, *, fresh: bool = False):
    """The verdict on every shape of ``specs`` in order, stopping at the first not accepted;
    (verdict, shapes checked). ``fresh``: on inputs drawn for each check alone."""
    verdict, checked = None, 0
    for one in specs:
        verdict = judge.verify(baseline_ptx, cand_ptx, one, fresh=fresh)
        checked += 1
        if verdict.status != "accepted":
            break
    return verdict, checked


def _set_verdict_fate(entry: dict, verdict, prefix: str = "") -> bool:
    """Record a verdict that is not "accepted" as the entry's fate; True when it was accepted."""
    if verdict.status == "accepted":
        return True
    fate = Fate.REJECTED_CHECK if verdict.status == "rejected" else Fate.NOT_JUDGED
    entry.update(fate=fate, reason=prefix + verdict.reason)
    return False


def candidate_entry(candidate: Candidate, launches=None) -> dict:
    """The record entry of ``candidate`` before it is judged: :func:`superopt.store.record.candidate_entry`
    and, for a fast body behind a launch-time no-alias check, the check and at how many of the
    program's captured launches (``launches``, a ProgramLaunches) it would run
    (:mod:`superopt.search.fast_path`)."""
    entry = rec.candidate_entry(candidate)
    if getattr(candidate, "fast_paths", None):
        from superopt.search.fast_path import alias_check_entries
        entry["alias_checks"] = alias_check_entries(candidate, launches)
    return entry


def evaluate(candidate: Candidate, baseline_ptx: str, specs: list, judge: Judge, target: str,
             seen_code: dict | None = None, static=None, launches=None) -> dict:
    """Run one candidate through ptxas, the check on every launch shape of ``specs`` and timing
    (on the first shape); return its record entry.

    With a GPU and costly shapes (see ``COSTLY_CHECK_BYTES``), the costly ones are left out
    when cheaper shapes were checked first or the candidate comes from the built-in passes
    (:func:`_built_in`): the entry says how many (``launch_shapes_unchecked``), and only the
    candidate the search is about to keep is checked there (:func:`_late_check`, before the
    check on fresh inputs).

    ``seen_code`` (cubin hash -> who made it, the baseline included) skips candidates that
    ptxas turns into machine code already judged: their fate is ``same-code``. ``static``:
    ptxas's result when it ran ahead (:class:`PtxasAhead`). ``launches``: the program's launches
    the search knows (:class:`~superopt.specs.program_launches.ProgramLaunches`), for
    :func:`candidate_entry`."""
    entry = check_candidate(candidate, baseline_ptx, specs, judge, target, seen_code, static, launches)
    if awaits_timing(entry):
        time_candidate(entry, candidate, baseline_ptx, specs, judge)
    return entry


def awaits_timing(entry: dict) -> bool:
    """Checked and right, not timed yet (:func:`check_candidate` left its fate open)."""
    return entry.get("fate") is None


def check_candidate(candidate: Candidate, baseline_ptx: str, specs: list, judge: Judge, target: str,
                    seen_code: dict | None = None, static=None, launches=None) -> dict:
    """:func:`evaluate` up to its timing: ptxas, the same-code test and the checks. The entry's
    fate is set unless the candidate is right and the judge can time it (:func:`awaits_timing`)."""
    entry = candidate_entry(candidate, launches)
    if static is None:
        static = run_ptxas(candidate.ptx, target, keep_cubin=seen_code is not None)
    if not static.ok:
        entry.update(fate=Fate.REJECTED_PTXAS, reason=_first_error(static.log))
        return entry
    if seen_code is not None and static.cubin is not None:
        code = text_hash(static.cubin.hex())
        if code in seen_code:
            entry.update(fate=Fate.SAME_CODE, reason=f"ptxas made the same machine code as {seen_code[code]}")
            return entry
        seen_code[code] = candidate.id
    res = static.resources.get(candidate.kernel)
    entry["resources"] = rec.resources_dict(res)
    # Every launch shape must agree (inferred specs come with several).
    cheap, costly = _split_by_cost(specs)
    deferred = costly if (judge.can_time and costly and (cheap or _built_in(candidate))) else []
    first = cheap if deferred else specs
    checked = 0
    if first:
        verdict, checked = _verify_each(judge, baseline_ptx, candidate.ptx, first)
        entry["verdict"] = verdict.to_dict()
        entry["launch_shapes_checked"] = checked
        if not _set_verdict_fate(entry, verdict):
            return entry
    if not judge.can_time:
        entry.update(fate=Fate.VERIFIED, reason=f"verified on the {judge.backend}; no GPU, so no measured speed")
        return entry
    if deferred:
        entry["launch_shapes_unchecked"] = len(deferred)
    return entry


def time_candidate(entry: dict, candidate: Candidate, baseline_ptx: str, specs: list, judge: Judge) -> dict:
    """The timing part of :func:`evaluate`, for an entry that :func:`awaits_timing`."""
    timing = judge.time(baseline_ptx, candidate.ptx, specs[0], fresh=False)
    entry["timing"] = timing.to_dict()
    entry["speedup"] = timing.speedup
    if timing.status != "ok":
        entry.update(fate=Fate.NOT_TIMED, reason=timing.reason)
    elif timing.faster:
        entry.update(fate=Fate.FASTER, reason=timing.reason)
    else:
        entry.update(fate=Fate.NOT_FASTER, reason=timing.reason)
    unchecked = entry.get("launch_shapes_unchecked")
    if unchecked:
        entry["reason"] += (f"; not checked at the {unchecked} large launch shape(s): only the "
                            f"candidate to keep needs to be")
    return entry


def _late_check(judge: Judge, baseline_ptx: str, cand: Candidate, specs: list, entry: dict,
                fresh_done: list | None = None) -> bool:
    """The check at the costly launch shapes that :func:`evaluate` left for the candidate to
    keep. Records the verdict; False (and the fate rejected or not judged) if not accepted.

    It runs on fresh inputs (drawn for this check alone), and the shapes it checked are added to
    ``fresh_done``: no verdict at those shapes took part in choosing the candidate, so this check
    is also its check on fresh inputs there (:func:`_fresh_check` leaves them out). Checking them
    on the search's family of inputs first and on fresh inputs again drew and ran nvcc's code on
    two families of inputs at the program's real size for every kept kernel (2026-12-04, the
    economy bench on the H200: 3-4 s of host work each, most of a kept kernel's checks)."""
    if not entry.get("launch_shapes_unchecked"):
        return True
    costly = _split_by_cost(specs)[1]
    verdict, more = _verify_each(judge, baseline_ptx, cand.ptx, costly, fresh=True)
    if fresh_done is not None:
        fresh_done.extend(costly[:more])
    entry["verdict"] = entry["fresh_verdict"] = verdict.to_dict()
    entry["launch_shapes_checked"] = entry.get("launch_shapes_checked", 0) + more
    del entry["launch_shapes_unchecked"]
    return _set_verdict_fate(entry, verdict, prefix="faster, but at the large launch shape: ")


def _built_in(candidate: Candidate) -> bool:
    """A candidate made by the built-in rule passes alone. Each proves its precondition from
    the IR, so with only costly launch shapes it is timed before it is checked; a model's
    rewrite or a user's pass file is checked first (a hang or fault at full size would cost
    far more than the check)."""
    from superopt.passes import registry
    if (candidate.provenance or {}).get("proposer", "rules") != "rules":
        return False
    passes = registry()
    return bool(candidate.plan) and all(
        st.pass_name in passes and passes[st.pass_name].source.startswith("superopt.passes.")
        and not passes[st.pass_name].carries_code for st in candidate.plan)


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line.lower() or "fatal" in line.lower():
            return line.strip()
    return log.strip().splitlines()[0] if log.strip() else "ptxas failed"


def search_kernel(module: ptx_ir.Module, kernel: str, specs: list | None, *, target: str,
                  options: SearchOptions, judge: Judge | None,
                  proposers: Sequence[Proposer] | None = None) -> KernelResult:
    """The search for one kernel. ``specs``: the launch shapes every candidate is checked on
    (a list; None or empty: not verifiable). ``proposers``: asked in order; default the rule
    passes alone."""
    if specs is not None and not isinstance(specs, list):
        raise TypeError(f"search_kernel takes a list of launch specs, not {type(specs).__name__}")
    started = time.monotonic()
    waited_before = _gpu_waited()          # the budget leaves out waiting from here on, screening included
    fn = module.function(kernel)
    record = rec.kernel_record(fn, target)
    baseline_ptx = ptx_ir.emit(module)
    base_static = run_ptxas(baseline_ptx, target, keep_cubin=True)
    record["baseline"]["resources"] = rec.resources_dict(base_static.resources.get(kernel))
    record["baseline"]["ptx"] = ptx_ir.printer.emit_function(fn)
    if not specs:
        record.update(status=Status.NOT_VERIFIABLE, reason="no launch spec (none given, none inferred)")
        return KernelResult(kernel, record, None)
    record["spec"] = [s.to_dict() if hasattr(s, "to_dict") else s for s in specs]
    if judge is None:
        record.update(status=Status.KEPT_BASELINE, reason="no backend to judge candidates")
        return KernelResult(kernel, record, None)
    judge = judge if isinstance(judge, CachingJudge) else CachingJudge(judge)
    record["backend"] = judge.backend
    record["policy"] = judge.policy
    unjudged = _screen_random_layout(judge, baseline_ptx, specs)
    if unjudged:
        # nvcc's own code cannot be judged at a shape the program uses: no candidate could be
        # (the next spec source is tried: superopt.search.choices)
        record.update(status=Status.KEPT_BASELINE, baseline_unjudged=unjudged,
                      reason=f"nvcc's own code cannot be judged with these launch specs: {unjudged}")
        record["seconds"] = round(time.monotonic() - started, 3)
        return KernelResult(kernel, record, None)
    specs, dropped = _screen_extra_shapes(judge, baseline_ptx, specs)
    specs, scaled = _with_timing_shape(judge, baseline_ptx, specs)
    if dropped or scaled:
        record["spec"] = [s.to_dict() if hasattr(s, "to_dict") else s for s in specs]
        record["notes"] = list(record.get("notes") or []) + dropped + scaled

    _prefetch_timed_set(judge, baseline_ptx, specs)
    state = _Search(module, kernel, specs, target, options, judge, baseline_ptx, record, started, waited_before)
    if base_static.cubin:
        state.seen_code[text_hash(base_static.cubin.hex())] = "nvcc's own code"
    proposers = [RuleProposer()] if proposers is None else list(proposers)
    for i, proposer in enumerate(proposers):
        # a later proposer sees the choice among the earlier candidates (on a copy: the final
        # choice is made once every proposer has been asked)
        seen = record if i == 0 else state.provisional_record()
        context = ProposalContext(target, options, specs, baseline_ptx, seen, notes=record["notes"])
        state.stage(proposer, context)
        record.update(context.sections)

    winner = _choose(state.entries, state.by_id, judge, options, kernel, record, baseline_ptx, specs)
    record["seconds"] = round(time.monotonic() - started, 3)
    return KernelResult(kernel, record, winner, list(state.by_id.values()))


def _prefetch_timed_set(judge: Judge, baseline_ptx: str, specs: list) -> None:
    """Candidates are timed at the first launch shape on one input set, made at the first
    timing; at a costly shape (a captured size) making it is a second or more of host work
    while the search waits (transpose's 8192^2, 2026-12-07). It is made beside the first
    checks instead (``Judge.prefetch_inputs``)."""
    prefetch = getattr(judge, "prefetch_inputs", None)
    if prefetch is not None and judge.can_time and specs and _split_by_cost(specs[:1])[1]:
        prefetch(baseline_ptx, specs[0], ("timed",))


def _gpu_waited() -> float:
    """Seconds this search's phases recorded waiting for a GPU so far (0 outside a recording)."""
    from superopt.judge.phases import current
    phases = current()
    return phases.get("gpu_wait") if phases is not None else 0.0


def _screen_random_layout(judge: Judge, baseline_ptx: str, specs: list) -> str | None:
    """Why nvcc's own code cannot be judged at a shape of ``specs`` whose buffers that decide
    addresses or loop trips are drawn at random (``LaunchSpec.random_layout``: a captured
    launch without its data, such as a CSR matrix's row offsets), or None. On such inputs
    nvcc's code may read far outside its buffers and fault; the search would learn it only when
    it checks the candidate to keep at that shape (a costly shape is checked last), after its
    whole budget. Asked first, it costs the baseline's runs there: the judge keeps them for the
    checks at that shape not on fresh inputs (a model's or a user's candidates are checked
    there first); a rule candidate's late check there draws its own, so where nvcc's code runs
    well the question costs one more baseline run at the captured size."""
    if not judge.can_time:
        return None             # the emulator's checks of a captured size are bounded by its own caps
    for one in specs:
        layout = getattr(one, "random_layout", ())
        if not layout:
            continue
        v = judge.verify(baseline_ptx, baseline_ptx, one)
        if v.status != "accepted":
            return (f"{v.reason} (at grid {list(one.grid)}, block {list(one.block)}, where "
                    f"{', '.join(layout)} hold random contents, not the program's: capture with --data to "
                    f"judge it on the program's own data)")
    return None


def _screen_extra_shapes(judge: Judge, baseline_ptx: str, specs: list) -> tuple[list, list[str]]:
    """Drop the inferred shapes added beside captured ones on which nvcc's own code cannot be
    judged (not deterministic, out of its buffers): inference guessed their sizes, and one such
    shape would leave every candidate "not judged" although the program's own launches judge
    it well. The captured shapes are never dropped (the next spec source is for those).
    Returns (specs kept, a note per shape dropped)."""
    if len(specs) < 2 or getattr(specs[0], "origin", None) != "captured":
        return specs, []
    kept, notes = [], []
    for one in specs:
        if getattr(one, "origin", None) == "captured":
            kept.append(one)
            continue
        v = judge.verify(baseline_ptx, baseline_ptx, one)
        if v.status == "accepted":
            kept.append(one)
        else:
            notes.append(f"an inferred launch shape (grid {list(one.grid)}, block {list(one.block)}) was "
                         f"dropped: nvcc's own code cannot be judged with it ({v.reason})")
    return kept, notes


SCALED_TRIES = 3              # scaled shapes tried, each a quarter of the last factor


def _with_timing_shape(judge: Judge, baseline_ptx: str, specs: list) -> tuple[list, list[str]]:
    """Inferred shapes only (no capture, no spec a person wrote): put a scaled-up copy of the
    first one in front, the shape candidates are timed at (:mod:`superopt.specs.scaled`),
    when nvcc's own code can be judged there. Past ``COSTLY_CHECK_BYTES`` it counts as costly:
    candidates are checked on the proven small shapes and only the one to keep is checked at
    it. Returns (specs, notes)."""
    if not specs or not judge.can_time or any(getattr(s, "origin", None) != "inferred" for s in specs):
        return specs, []
    if _split_by_cost(specs)[1]:
        return specs, []
    from superopt.specs.scaled import MAX_TIMED_LAUNCH_S, describe, scale_factor, timing_shape
    big = timing_shape(specs[0])
    for _ in range(SCALED_TRIES):
        if big is None:
            return specs, []
        sizes = describe(specs[0], big)
        v = judge.verify(baseline_ptx, baseline_ptx, big)
        if v.status != "accepted":
            return specs, [f"no timing at scaled-up sizes ({sizes}): nvcc's own code cannot be judged there "
                           f"({v.reason}); timed at the inferred sizes"]
        slowest = max((t for t in (v.evidence or {}).get("baseline_seconds", []) if t), default=0.0)
        if slowest <= MAX_TIMED_LAUNCH_S:
            mb = (_check_bytes(big) or 0) / 1e6
            return [big] + specs, [f"timed at the inferred launch scaled up ({sizes}; {mb:.0f} MB of buffers): "
                                   f"the program's real sizes are unknown without a capture (superopt capture)"]
        # the work grows faster than the sizes (an all-pairs loop): a quarter of the factor
        big = timing_shape(specs[0], max_factor=scale_factor(specs[0], big) // 4, min_threads=1)
    return specs, [f"no timing at scaled-up sizes: nvcc's own launch takes over {MAX_TIMED_LAUNCH_S * 1e3:g} ms "
                   f"there; timed at the inferred sizes"]


class _Search:
    """One kernel's search in progress: the judged entries, and how a proposer's stage runs."""

    def __init__(self, module, kernel, specs, target, options, judge, baseline_ptx, record, started,
                 waited0: float | None = None):
        self.module, self.kernel, self.specs, self.target = module, kernel, specs, target
        self.options, self.judge, self.baseline_ptx = options, judge, baseline_ptx
        self.record, self.started = record, started
        self.entries: list[dict] = record["candidates"]
        self.by_id: dict[str, Candidate] = {}
        self.seen_code: dict[str, str] = {}
        self.at_roofline: str | None = None      # why the rest is not judged (see _note_roofline)
        self.prefetched = False                  # the keep checks' inputs asked for (_prefetch_keep_checks)
        # the GPU wait already recorded when the search started (``started``): what it waits
        # from then on, the screening of its launch shapes included, is not its time
        self.waited0 = _gpu_waited() if waited0 is None else waited0

    def elapsed(self) -> float:
        """The search's own time: wall time less what it spent waiting for the GPU while other
        compilations used it (waiting is not searching; the wall limit below bounds it)."""
        return time.monotonic() - self.started - (_gpu_waited() - self.waited0)

    def over_budget(self, share: float = 1.0) -> bool:
        """Past ``share`` of the per-kernel budget, or past the wall-clock limit the compilation's
        deadline leaves (``SearchOptions.wall_limit_s``)."""
        limit = self.options.wall_limit_s
        return self.elapsed() > self.options.budget_s * share or \
            (limit is not None and time.monotonic() - self.started > limit)

    def run_one(self, cand: Candidate, static=None) -> dict:
        """Check and time ``cand`` now; its entry."""
        e = self.check_one(cand, static)
        if awaits_timing(e):
            self._time_one(cand, e)
        return e

    def check_one(self, cand: Candidate, static=None) -> dict:
        """Check ``cand`` (its entry is recorded); a right one :func:`awaits_timing`."""
        if self.at_roofline:
            e = candidate_entry(cand, self.options.launches)
            e.update(fate=Fate.SKIPPED_ROOFLINE, reason=self.at_roofline)
            self.entries.append(e)
            return e
        try:
            e = check_candidate(cand, self.baseline_ptx, self.specs, self.judge, self.target, self.seen_code,
                                static=static, launches=self.options.launches)
        except Exception as exc:
            e = candidate_entry(cand, self.options.launches)
            e.update(fate=Fate.ERROR, reason=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=5))
        self.entries.append(e)
        self.by_id[e["id"]] = cand
        return e

    def _time_one(self, cand: Candidate, e: dict) -> None:
        try:
            time_candidate(e, cand, self.baseline_ptx, self.specs, self.judge)
        except Exception as exc:
            e.update(fate=Fate.ERROR, reason=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=5))
        self._note_roofline(e)
        self._prefetch_keep_checks(e)

    def _prefetch_keep_checks(self, e: dict) -> None:
        """The first candidate found faster with costly launch shapes left unchecked: the checks
        before keeping one (a confirmation timing, the late check on fresh inputs there) will
        draw input sets at the program's real size, seconds of host work each (transpose's
        8192^2 on the H100, 2026-12-07: 3.8 s of a 10 s late check). Their inputs are made now,
        beside the rest of the search (``Judge.prefetch_inputs``), not after it. Not where no
        candidate can be kept anyway (compute-sanitizer's bound)."""
        if self.prefetched or not _worth_keeping(e, self.options) or not e.get("launch_shapes_unchecked"):
            return
        self.prefetched = True
        prefetch = getattr(self.judge, "prefetch_inputs", None)
        if prefetch is None or _sanitizer_too_costly(self.options, _smallest_spec(self.specs) or self.specs[0]):
            return
        for one in _split_by_cost(self.specs)[1]:
            prefetch(self.baseline_ptx, one, ("check", "time") if one is self.specs[0] else ("check",))

    def time_waiting(self, waiting: list) -> None:
        """Time the checked candidates in ``waiting`` ((candidate, entry) pairs) in one window of
        the GPU alone (``Judge.timing_window``): other compilations' checks drain once for them all.
        One whose turn comes past :data:`TIMING_GRACE` of the budget is not timed (its checks
        are paid; the grace bounds what a batch adds to a search)."""
        if not waiting:
            return
        window = getattr(self.judge, "timing_window", None)
        with window() if window is not None else nullcontext():
            for cand, e in waiting:
                if self.over_budget(TIMING_GRACE):
                    e.update(fate=Fate.SKIPPED_BUDGET, reason=f"verified, not timed: the per-kernel budget of "
                                                              f"{self.options.budget_s:g} s was used up first")
                    continue
                self._time_one(cand, e)
        waiting.clear()

    def _note_roofline(self, entry: dict) -> None:
        """Stop judging once a timing shows nvcc's code moving its buffers at ROOFLINE_SHARE of
        the measured peak: no rewrite of the same work can gain more than the rest."""
        t = entry.get("timing") or {}
        rate, peak = (t.get("implied_bytes_per_s") or {}).get("baseline"), t.get("peak_bytes_per_s")
        if t.get("status") == "ok" and rate and peak and rate >= ROOFLINE_SHARE * peak and not self.at_roofline:
            self.at_roofline = (f"not judged: nvcc's code already moves its buffers at {100 * rate / peak:.0f}% of "
                                f"the measured peak bandwidth ({rate / 1e9:.0f} of {peak / 1e9:.0f} GB/s), so no "
                                f"rewrite of the same work gains more than {100 * (peak / rate - 1):.0f}%")
            self.record["notes"] = list(self.record.get("notes") or []) + [self.at_roofline.removeprefix("not judged: ")]

    def stage(self, proposer: Proposer, context: ProposalContext) -> None:
        budget = self.options.budget_s
        deferred = []
        # 1. the proposer's candidates; within the search budget only the first part of it.
        # The rule passes' candidates are all made first, so that ptxas assembles the next
        # ones while the current one is judged (PtxasAhead).
        ahead = None
        try:
            if proposer.own_budget:
                proposed = proposer.propose(self.module, self.kernel, context)
            else:
                with phase("propose"):
                    proposed = list(proposer.propose(self.module, self.kernel, context))
                ahead = PtxasAhead(self.target, proposed)
            # A rule pass's candidates are checked as they come and timed TIMING_BATCH at a time
            # (Judge.timing_window); the first right one at once, so that a kernel already at the
            # roofline stops before the others are checked. A model's candidates (own_budget)
            # are timed one by one: what it proposes next may depend on how the last one did.
            batch = TIMING_BATCH if not proposer.own_budget else 1
            waiting: list = []
            timed_any = False
            try:
                for i, cand in enumerate(_timed_proposals(proposed, proposer.own_budget)):
                    if not proposer.own_budget and self.over_budget(SINGLES_SHARE):
                        deferred.append(cand)
                        continue
                    e = self.check_one(cand, ahead.result(i) if ahead else None)
                    context.remember(cand, e)
                    if awaits_timing(e):
                        waiting.append((cand, e))
                    if waiting and (not timed_any or len(waiting) >= batch):
                        self.time_waiting(waiting)
                        timed_any = True
            finally:
                self.time_waiting(waiting)
        except Exception as exc:   # a broken proposer must not stop the search
            context.notes.append(f"proposer {proposer.name} raised: {type(exc).__name__}: {exc}")
        finally:
            if ahead is not None:
                ahead.close()
        # 2. greedy combination of the passes whose single candidates won
        _combine(self.module, self.kernel, self.entries, self.by_id, self.judge, self.run_one,
                 lambda: not self.over_budget() and not self.at_roofline)
        # 3. what was deferred, while the budget lasts
        for cand in deferred:
            if self.over_budget():
                e = candidate_entry(cand, self.options.launches)
                e.update(fate=Fate.SKIPPED_BUDGET, reason=f"per-kernel budget of {budget:g} s used up")
                self.entries.append(e)
            else:
                context.remember(cand, self.run_one(cand))

    def provisional_record(self) -> dict:
        """A copy of the record with the choice among the candidates so far made in it, for a
        later proposer's context (the model's prompt shows the rules' fates). On a GPU the
        fastest candidate worth keeping is marked the winner as the search timed it: its
        confirmation, its timings at the other launch shapes, its checks at full size and
        compute-sanitizer belong to the final choice, once. Made here on the copy, they ran
        again for every later proposer (a confirmation is never cached: seconds of GPU work
        at a program's real sizes)."""
        seen = copy.deepcopy(self.record)
        if self.judge.can_time:
            _provisional_choice(seen, self.options)
        else:
            _choose(seen["candidates"], self.by_id, self.judge, self.options, self.kernel, seen,
                    self.baseline_ptx, self.specs)
        return seen


# nvcc's code at this share of the measured peak bandwidth (useful bytes of its buffers) leaves
# at most 11% to gain: the search stops there.
ROOFLINE_SHARE = 0.9


def _timed_proposals(proposed, own_budget: bool):
    """The candidates of a proposer; a proposer that yields them as it goes (the model) has the
    time it takes between them counted as proposing."""
    if not own_budget:
        yield from proposed
        return
    it = iter(proposed)
    while True:
        with phase("propose"):
            try:
                cand = next(it)
            except StopIteration:
                return
        yield cand


class PtxasAhead:
    """ptxas on the next candidates while the current one is judged: assembly (a process per
    candidate, hundreds of ms) runs on the host's other cores and overlaps the GPU steps of the
    candidate before it, so the GPU does not wait for the host between candidates. At most
    ``window`` runs are ahead of the judge (a search cut by its budget wastes little)."""

    WORKERS = max(1, min(4, (os.cpu_count() or 2) // 2))

    def __init__(self, target: str, candidates: list, window: int | None = None):
        from concurrent.futures import ThreadPoolExecutor
        self.target, self.candidates = target, candidates
        self.window = window or 2 * self.WORKERS
        self.pool = ThreadPoolExecutor(self.WORKERS, thread_name_prefix="superopt-ptxas")
        self.futures: dict[int, object] = {}
        self._feed(0)

    def _feed(self, start: int) -> None:
        for i in range(start, min(len(self.candidates), start + self.window)):
            if i not in self.futures:
                self.futures[i] = self.pool.submit(in_context(run_ptxas), self.candidates[i].ptx, self.target,
                                                   keep_cubin=True)

    def result(self, i: int):
        """ptxas's result for candidate ``i`` (and the next ones started)."""
        self._feed(i + 1)
        future = self.futures.pop(i, None)
        return future.result() if future is not None else None

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


# Checked candidates are timed this many at a time, in one hold of the GPU alone: every timing
# makes all other compilations' checks drain first (2026-12-02, economy bench, 8 compilations on
# one H200: the drains, not the GPU's work, set the build's pace).
TIMING_BATCH = 4
# A batch's timings may run past the per-kernel budget by this share, no further.
TIMING_GRACE = 1.25

# Singles may use this share of the per-kernel budget; the rest is kept for combinations,
# which are where the largest wins come from (vectorized loads + occupancy, unroll + hints).
SINGLES_SHARE = 0.7

# Passes that act on the same thing in opposite directions are never combined.
CONFLICTS = (frozenset({"unroll", "nounroll"}),)


def _conflicts(plan) -> bool:
    names = {st.pass_name for st in plan}
    return any(c <= names for c in CONFLICTS)


def _combine(module, kernel, entries, by_id, judge: Judge, run_one, within_budget) -> None:
    """Greedy combination: start from the best single candidate; add the best candidate of
    each other winning pass in order of its own speedup; keep an addition when the
    combination verified and beat the best so far. Without a GPU, the verified passes are
    combined in priority order and kept when they verify."""
    good = (Fate.FASTER,) if judge.can_time else (Fate.VERIFIED,)
    best_per_pass: dict[str, tuple[float, str]] = {}
    for e in entries:
        if e["fate"] in good and len(e["plan"]) == 1:
            cand = by_id[e["id"]]
            score = (e.get("speedup") or 1.0) if judge.can_time else -priority(cand.plan[0].pass_name)[0]
            name = cand.plan[0].pass_name
            if name not in best_per_pass or score > best_per_pass[name][0]:
                best_per_pass[name] = (score, e["id"])
    if len(best_per_pass) < 2:
        return
    ordered = sorted(best_per_pass.values(), key=lambda t: -t[0])
    current_score, current_id = ordered[0]
    tried = {c.hash for c in by_id.values()}
    for score, cid in ordered[1:]:
        if not within_budget():
            return
        plan = list(by_id[current_id].plan) + list(by_id[cid].plan)
        if _conflicts(plan):
            continue
        combo = make_candidate(module, kernel, plan)
        if combo is None or combo.hash in tried:
            continue
        tried.add(combo.hash)
        e = run_one(combo)
        if e["fate"] in good:
            combo_score = (e.get("speedup") or 1.0) if judge.can_time else current_score
            if not judge.can_time or combo_score > current_score:
                current_score, current_id = combo_score, e["id"]


def _nvcc_code_unjudged(entry: dict) -> bool:
    """Whether the entry's last check failed on nvcc's own code, not on the candidate."""
    from superopt.judge.check import baseline_unjudged
    verdict = entry.get("fresh_verdict") or entry.get("verdict")
    return entry.get("fate") == Fate.NOT_JUDGED and verdict is not None and baseline_unjudged(verdict)


def _fresh_check(judge: Judge, baseline_ptx: str, cand: Candidate, specs: list, entry: dict,
                 done: list | None = None) -> bool:
    """Check the candidate to keep once more on inputs drawn for this check alone (the search's
    checks share one family of inputs per kernel), at every shape but those in ``done`` (checked
    on fresh inputs already: :func:`_late_check`). Records the verdict; False if not accepted."""
    done = done or []
    left = [one for one in specs if not any(one is d for d in done)]
    if len(left) < len(specs):
        entry["fresh_checked_late"] = len(specs) - len(left)
    for one in left:
        v = judge.verify(baseline_ptx, cand.ptx, one, fresh=True)
        entry["fresh_verdict"] = v.to_dict()
        if v.status != "accepted":
            entry.update(fate=Fate.REJECTED_CHECK if v.status == "rejected" else Fate.NOT_JUDGED,
                         reason=f"on fresh inputs, before keeping it: {v.reason}")
            return False
    return True


SHADOW_LAUNCH_TIMEOUT_S = 3.0


def _smallest_spec(specs: list):
    """The spec with the least work (threads, then buffer bytes) once resolved, or None."""
    best, best_key = None, None
    for one in specs:
        try:
            rs = one.resolved()
            key = (math.prod(rs.grid) * math.prod(rs.block), sum(b.nbytes for b in rs.buffers))
        except Exception:  # noqa: BLE001 - an unresolvable spec is just not a candidate here
            continue
        if best_key is None or key < best_key:
            best, best_key = one, key
    return best


def _emulator_shadow(judge: Judge, options: SearchOptions, baseline_ptx: str, cand: Candidate, specs: list,
                     entry: dict) -> bool:
    """On a GPU, never-written registers and shared or local memory hold whatever ran before,
    so a candidate that branches or stores on them can match nvcc's code by luck. The CPU
    emulator poisons them and follows a taint bit: the candidate to keep is checked there too,
    on the smallest launch shape, when the emulator can run it (its size caps and a short
    limit on nvcc's own launches bound the cost; the candidate's limit is the check's usual
    one, relative to nvcc's code, so slowness on the emulator is never a verdict). False only
    if the emulator rejects it; "could not judge" there leaves the GPU's verdict."""
    if getattr(judge, "backend", None) != "gpu":
        return True
    with phase("shadow"):
        return _shadow_check(options, baseline_ptx, cand, specs, entry)


def _shadow_beside(judge: Judge, options: SearchOptions, baseline_ptx: str, cand: Candidate, specs: list):
    """:func:`_emulator_shadow` on the candidate to keep, started now in a thread of its own
    beside the last checks (CPU work on the emulator, about a second per kept kernel on the
    program benchmark, 2026-12-07, after the checks on the build's last compilation); returns a
    call that takes the entry, waits, records the verdict in it and gives it (True: not
    rejected). Its verdict is read after the checks' and the sanitizer's, as when it ran after
    them; it writes into the entry only then."""
    if getattr(judge, "backend", None) != "gpu":
        return lambda entry: True
    from superopt.judge.at_once import beside
    from superopt.judge.phases import in_context
    scratch: dict = {}
    wait = beside(in_context(lambda: _emulator_shadow(judge, options, baseline_ptx, cand, specs, scratch)),
                  name="superopt-shadow-beside")

    def read(entry: dict | None = None) -> bool:
        ok = wait()
        if entry is not None:
            entry.update(scratch)
        return ok
    return read


def _shadow_check(options: SearchOptions, baseline_ptx: str, cand: Candidate, specs: list, entry: dict) -> bool:
    small = _smallest_spec(specs)
    if small is None:
        return True
    from superopt.judge.check import BaselineRuns, check, run_baseline
    runs = run_baseline(baseline_ptx, small, backend="emulator", policy=options.policy, sets=1,
                        launch_timeout=SHADOW_LAUNCH_TIMEOUT_S)
    v = check(baseline_ptx, cand.ptx, small, backend="emulator", baseline=runs) \
        if isinstance(runs, BaselineRuns) else runs
    entry["emulator_verdict"] = {"status": v.status, "reason": v.reason}
    if v.status == "rejected":
        entry.update(fate=Fate.REJECTED_CHECK,
                     reason=f"the CPU emulator (never-written data poisoned and tracked) rejects it: {v.reason}")
        return False
    return True


def _sanitizer_verdict(res, entry: dict) -> bool:
    """Record a compute-sanitizer result (None: not run) in the entry; False if the candidate
    has sanitizer errors that nvcc's code does not have, or if the tool ran nvcc's code but could
    not run the candidate (``not-judged``: its instrumented launch did not complete): a candidate
    is not kept without the verdict the tool gave nvcc's code. Where the tool cannot run at all
    (``unavailable``: not installed, cannot attach) nothing is rejected for it."""
    if res is None:
        return True
    entry["sanitizer"] = res.to_dict()
    if res.rejected:
        entry.update(fate=Fate.REJECTED_CHECK, reason=res.reason)
        return False
    if res.status == "not-judged":
        entry.update(fate=Fate.NOT_JUDGED, reason=f"not kept without compute-sanitizer's verdict: {res.reason}")
        return False
    return True


# compute-sanitizer's instrumented launches cost about 15 ns per byte of the launch's buffers
# (the H200, 2026-12-04: scan's scatter_flagged, 1 GiB at its one launch shape, a captured one,
# held the GPU 13-16 s per tool and candidate, while every other compilation's timings waited).
# A kernel whose smallest launch shape moves more than this keeps nvcc's code: no candidate is
# kept without the sanitizer's verdict, and it is not run where it would hold the GPU for seconds.
SANITIZE_MAX_BYTES = 256 << 20


def _sanitizer_too_costly(options: SearchOptions, spec) -> str | None:
    """Why compute-sanitizer is not run at ``spec`` (the kernel's smallest launch shape), or None."""
    if not options.sanitize:
        return None
    from superopt.judge.judge import spec_bytes
    nbytes = spec_bytes(spec)
    if nbytes is None or nbytes <= SANITIZE_MAX_BYTES:
        return None
    return (f"the kernel's smallest launch shape moves {nbytes / 2**20:.0f} MiB, over the "
            f"{SANITIZE_MAX_BYTES >> 20} MiB at which instrumented launches would hold the GPU for seconds "
            f"(about 15 ns a byte); give a smaller launch in a spec (docs/launch-specs.md) to have it judged, "
            f"or set NVCC_PLUS_SANITIZE=off")


def _sanitize_beside(judge: Judge, options: SearchOptions, baseline_ptx: str, cand: Candidate, spec):
    """compute-sanitizer on the candidate to keep, started now in a thread of its own on this
    thread's GPU, while this thread runs its last checks; returns a call that waits for its
    result (None when no tool is asked for). A sanitizer run is mostly its own processes
    starting and instrumenting (2-4 s per kept kernel on the H200, 2026-12-04), not this
    process's work: beside the checks it takes no time of the search's own. Where this thread
    cannot hand its GPU to another (a GPU step or timing window held), it runs when waited for.
    The verdicts stay those of the checks in turn: the caller reads them in the same order."""
    if not options.sanitize:
        return lambda: None

    def call():
        return judge.sanitize(baseline_ptx, cand.ptx, spec, options.sanitize)
    from superopt.judge import devices
    from superopt.judge.phases import in_context
    runner = devices.in_thread(call)
    if runner is None:
        return call
    from superopt.judge.at_once import beside
    return beside(in_context(runner), name="superopt-sanitize-beside")


# How many of the fastest candidates get a confirmation timing before the baseline is kept.
CONFIRM_TRIES = 3


def _function_text(candidate: Candidate, kernel: str) -> str:
    return ptx_ir.printer.emit_function(ptx_ir.parse(candidate.ptx).function(kernel))


def _worth_keeping(entry: dict, options: SearchOptions) -> bool:
    """Faster beyond noise and by at least the least gain a rewrite is kept for."""
    return entry.get("fate") == Fate.FASTER and (entry.get("speedup") or 0.0) >= 1.0 + options.min_gain


def _min_gain_text(options: SearchOptions) -> str:
    return f"the {100 * options.min_gain:g}% a rewrite is kept for (NVCC_PLUS_MIN_GAIN)"


def _below_min_gain(entries, options: SearchOptions) -> list[dict]:
    """The candidates faster beyond noise by less than ``options.min_gain``, marked so: each
    would cost a second timing, the checks at the program's sizes and compute-sanitizer, and a
    gain that small is within what differs between runs, clocks and GPUs (the economy bench on
    an H100, 2026-12-07: keeping a copy kernel's 1.008x and a tiled GEMM's 1.007x took 6 and 9 s
    of their searches' 13 and 18 s). They stay available to the combination of passes, which
    runs before (two small gains can add up to one worth keeping)."""
    small = [e for e in entries if e.get("fate") == Fate.FASTER and not _worth_keeping(e, options)]
    for e in small:
        e.update(fate=Fate.BELOW_MIN_GAIN, reason=f"{e.get('speedup') or 0:.3f}x, faster beyond noise but below "
                                                  f"{_min_gain_text(options)}: {e.get('reason') or ''}".rstrip(": "))
    return small


def _winners(entries, options: SearchOptions, record: dict) -> list[dict]:
    """The candidates worth keeping, fastest first (those below the least gain marked so); with
    none, the record says nvcc's code is kept and why."""
    small = _below_min_gain(entries, options)
    winners = sorted((e for e in entries if e["fate"] == Fate.FASTER), key=lambda e: -e["speedup"])
    if not winners:
        record.update(status=Status.KEPT_BASELINE,
                      reason="no verified candidate was faster beyond noise" if not small else
                             f"no verified candidate gained {_min_gain_text(options)}: the best was "
                             f"{max(e.get('speedup') or 0 for e in small):.3f}x")
    return winners


def _provisional_choice(record: dict, options: SearchOptions) -> None:
    """The choice so far, without the steps that keep a candidate (see
    ``_Search.provisional_record``): the fastest candidate worth keeping is the winner."""
    winners = _winners(record["candidates"], options, record)
    if not winners:
        return
    best = winners[0]
    best.update(fate=Fate.WINNER, reason=f"the fastest so far ({best['speedup']:.3f}x in the search), not yet "
                                         f"timed again nor checked at full size")
    record.update(status=Status.OPTIMIZED, winner=best["id"], decision=Decision.MEASURED,
                  reason=f"{best['id']}: provisional, {best['speedup']:.3f}x in the search")


def _choose(entries, by_id, judge: Judge, options: SearchOptions, kernel: str, record: dict,
            baseline_ptx: str, specs: list):
    if judge.can_time:
        winners = _winners(entries, options, record)
        if not winners:
            return None
        sanitize_at = _smallest_spec(specs) or specs[0]
        too_costly = _sanitizer_too_costly(options, sanitize_at)
        if too_costly:
            for e in winners[:CONFIRM_TRIES]:
                e.update(fate=Fate.NOT_JUDGED, reason=f"not kept without compute-sanitizer's verdict: {too_costly}")
            record.update(status=Status.KEPT_BASELINE,
                          reason=f"a candidate was faster ({winners[0]['speedup']:.3f}x in the search), but none "
                                 f"is kept without compute-sanitizer's verdict: {too_costly}")
            return None
        best = None
        for e in winners[:CONFIRM_TRIES]:
            # The cheap verdicts first: the timings that most often drop a candidate come before
            # the checks at full size (the late check, the check on fresh inputs), which then run
            # only for a candidate that is still to be kept. Timing first is as safe as the
            # search's own timing of it: the shape timed is the one it was timed at already,
            # and an other launch shape is checked before it is timed there.
            # The fastest of several noisy measurements is biased upwards: the candidate to
            # keep is timed once more, independently, and kept only if it is faster again.
            again = judge.time(baseline_ptx, by_id[e["id"]].ptx, specs[0], fresh=True)
            e["confirmation"] = again.to_dict()
            if not (again.status == "ok" and again.faster):
                e.update(fate=Fate.NOT_CONFIRMED, reason=f"faster in the search ({e['speedup']:.3f}x) but not "
                                                         f"when timed again: {again.reason}")
                continue
            if (again.speedup or 0.0) < 1.0 + options.min_gain:
                e.update(fate=Fate.NOT_CONFIRMED, reason=f"{e['speedup']:.3f}x in the search, {again.speedup:.3f}x "
                                                         f"when timed again: below {_min_gain_text(options)}")
                continue
            # Never slower in the program: timed at the other launch shapes it may use too
            # (superopt.search.launch_shapes), for this candidate alone.
            if not judge_other_shapes(judge, baseline_ptx, by_id[e["id"]], kernel, specs, options.launches, e,
                                      min_gain=options.min_gain):
                continue
            # instrumented launches are slow (racecheck on a shared-memory kernel at a captured
            # 2048^3 took minutes): the sanitizer runs at the smallest launch shape, beside the
            # last checks; its verdict is read after theirs, as when it ran after them
            sanitized = _sanitize_beside(judge, options, baseline_ptx, by_id[e["id"]], sanitize_at)
            shadowed = _shadow_beside(judge, options, baseline_ptx, by_id[e["id"]], specs)
            fresh_done: list = []
            checked = (_late_check(judge, baseline_ptx, by_id[e["id"]], specs, e, fresh_done)
                       and _fresh_check(judge, baseline_ptx, by_id[e["id"]], specs, e, fresh_done))
            if not checked:
                for waited in (sanitized, shadowed):
                    try:
                        waited()        # waited for, its result not needed; a limit still stops the search
                    except Exception:  # noqa: BLE001 - a failure of a run whose verdict is not read
                        pass
                if _nvcc_code_unjudged(e):
                    # nvcc's own code could not be judged at a shape (it faults on the inputs drawn
                    # there, ...): the next winner would meet the same baseline, and its
                    # confirmation, checks and sanitizer run would be spent for nothing
                    break
                continue
            if not _sanitizer_verdict(sanitized(), e):
                continue
            if not shadowed(e):
                continue
            best = e
            # what is reported is the independent measurement, not the selected one
            e["search_speedup"], e["speedup"] = e["speedup"], again.speedup
            break
        if best is None:
            tried = [e for e in winners[:CONFIRM_TRIES] if e["fate"] != Fate.FASTER]
            elsewhere = [e for e in tried if e["fate"] == Fate.SLOWER_ELSEWHERE]
            record.update(status=Status.KEPT_BASELINE,
                          reason=(f"no verified candidate was faster beyond noise when timed again "
                                  f"({len(tried)} tried)") if not elsewhere else
                                 (f"no verified candidate was faster at the timed shape and not slower at the "
                                  f"program's other launch shapes ({len(tried)} tried, {len(elsewhere)} slower "
                                  f"elsewhere: {elsewhere[0]['reason']})"))
            return None
        best["fate"] = Fate.WINNER
        best["ptx"] = _function_text(by_id[best["id"]], kernel)
        record.update(status=Status.OPTIMIZED, winner=best["id"], decision=Decision.MEASURED,
                      reason=f"{best['id']}: {best['speedup']:.3f}x (confirmed by a second timing; "
                             f"{best['search_speedup']:.3f}x in the search), verified"
                             + other_shapes_summary(best))
        return by_id[best["id"]]
    verified = [e for e in entries if e["fate"] == Fate.VERIFIED]
    if options.no_gpu != "estimate" or not verified:
        record.update(status=Status.KEPT_BASELINE,
                      reason="no GPU: no measured speed; only locked decisions are applied "
                             "(set NVCC_PLUS_NO_GPU=estimate to choose by a static estimate)"
                      if verified else "no candidate verified")
        return None
    base_cost = static_estimate(baseline_ptx, kernel)
    scored = sorted(((static_estimate(by_id[e["id"]].ptx, kernel), i, e) for i, e in enumerate(verified)),
                    key=lambda t: (t[0], t[1]))
    # The scores go into the record: a reader sees what the choice rested on (and how crude
    # it is: instructions counted once each, loops not weighted; see docs/search.md, "Without a GPU").
    record["static_estimate"] = {"baseline": base_cost, "note": STATIC_ESTIMATE_NOTE}
    for cost, _, e in scored:
        e["estimated_cost"] = cost
    best = None
    for cost, _, e in scored[:CONFIRM_TRIES]:
        if cost >= base_cost:
            break
        if _fresh_check(judge, baseline_ptx, by_id[e["id"]], specs, e):
            best = e
            break
    if best is None:
        record.update(status=Status.KEPT_BASELINE,
                      reason=f"no GPU: no verified candidate is cheaper than nvcc's code by the static estimate "
                             f"({base_cost:g}) and passes a check on fresh inputs")
        return None
    best["fate"] = Fate.ESTIMATE_WINNER
    best["ptx"] = _function_text(by_id[best["id"]], kernel)
    best["estimated_cost"] = cost
    record.update(status=Status.OPTIMIZED, winner=best["id"], decision=Decision.ESTIMATE,
                  reason=f"{best['id']}: chosen by a static estimate (no GPU), verified on the emulator")
    return by_id[best["id"]]
