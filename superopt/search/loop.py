"""The search: baseline, candidates from the proposers, judge each, keep the fastest verified.

For one kernel:

1. find a launch spec (explicit, or inferred); none means "not verifiable", keep nvcc's code;
2. make candidates: every registered pass alone with each of its parameter values (plus
   any extra candidates, from the model proposer, handed in), judged within the first
   ``SINGLES_SHARE`` of the budget; then the greedy combination of the passes whose best
   candidate won; then the singles that did not fit before, while the budget lasts;
3. for each candidate within the budget: ptxas (static check) → differential check
   (GPU, or the CPU emulator) → timing (GPU only);
4. keep the fastest candidate that verified and beat the baseline beyond the measured
   noise. Without a GPU there is no measured speed: by default (``no_gpu="locked"``) only
   decisions from the lockfile or cache are applied; ``no_gpu="estimate"`` picks a verified
   candidate by a static estimate and labels the decision an estimate.

Every candidate's fate is recorded (see :mod:`superopt.store.record`).
"""
from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field

import ptx_ir
from superopt.store import record as rec
from superopt.search.candidates import Candidate, Step, make_candidate, text_hash
from superopt.passes import param_grid, registry
from superopt.judge.ptxas import run_ptxas

NO_GPU_POLICIES = ("locked", "estimate")


@dataclass
class SearchOptions:
    budget_s: float = 30.0                  # per kernel, wall clock
    policy: str = "exact"
    backend: str = "auto"                   # auto | gpu | emulator
    no_gpu: str = "locked"                  # locked | estimate
    passes: list[str] | None = None         # None: every registered pass
    extra_params: dict = field(default_factory=dict)   # pass -> params forced (e.g. block size)
    check_sets: int = 4
    timing_reps: int = 60
    # compute-sanitizer tools run on the candidate to keep (GPU only; empty: none)
    sanitize: tuple = ("memcheck", "racecheck")


@dataclass
class KernelResult:
    kernel: str
    record: dict
    winner: Candidate | None


class Judge:
    """The differential check and the timer behind one backend."""

    def __init__(self, backend: str = "auto", policy: str = "exact", check_sets: int = 4,
                 timing_reps: int = 60):
        self.policy = policy
        self.check_sets = check_sets
        self.timing_reps = timing_reps
        self.backend = self._resolve(backend)
        self._baseline_runs: dict = {}

    @staticmethod
    def gpu_usable() -> tuple[bool, str]:
        # Cheap test first: a machine without the NVIDIA driver needs no CUDA process started
        # (this runs once per compiled PTX in a build).
        if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg")):
            return False, "no NVIDIA GPU device node on this machine (/dev/nvidiactl)"
        try:
            from superopt.judge.backends.base import get_backend
            be = get_backend("gpu")
            return be.available()
        except Exception as exc:
            return False, str(exc)

    def _resolve(self, backend: str) -> str:
        if backend != "auto":
            return backend
        ok, _ = self.gpu_usable()
        return "gpu" if ok else "emulator"

    @property
    def can_time(self) -> bool:
        return self.backend == "gpu"

    def verify(self, base_ptx: str, cand_ptx: str, spec, *, fresh: bool = False):
        """The differential check. The baseline's runs on one family of inputs are reused for
        the following candidates of the same baseline and spec (they do not depend on the
        candidate; at large sizes they are most of a check's time); a rejection draws fresh
        inputs for the next candidate, since its evidence shows input values. ``fresh``: a
        check on inputs drawn for this call alone (the search does that before keeping a
        candidate)."""
        from superopt.judge.check import BaselineRuns, check, run_baseline
        if fresh:
            return check(base_ptx, cand_ptx, spec, backend=self.backend, policy=self.policy,
                         sets=self.check_sets)
        key = (text_hash(base_ptx), repr(spec))
        runs = self._baseline_runs.get(key)
        if runs is None:
            runs = run_baseline(base_ptx, spec, backend=self.backend, policy=self.policy, sets=self.check_sets)
            self._baseline_runs = {key: runs}   # one kernel at a time: bounded memory
        if not isinstance(runs, BaselineRuns):
            return runs          # could not judge the baseline (e.g. not deterministic): not again per candidate
        verdict = check(base_ptx, cand_ptx, spec, backend=self.backend, baseline=runs)
        if verdict.status == "rejected":
            self._baseline_runs.pop(key, None)
        return verdict

    def sanitize(self, base_ptx: str, cand_ptx: str, spec, tools):
        """compute-sanitizer on baseline and candidate (see superopt.judge.sanitize); GPU only."""
        from superopt.judge.sanitize import SanitizerResult, sanitize_pair
        if self.backend != "gpu":
            return SanitizerResult("unavailable", "compute-sanitizer needs the GPU backend")
        return sanitize_pair(base_ptx, cand_ptx, spec, tools=tuple(tools))

    def time(self, base_ptx: str, cand_ptx: str, spec, *, fresh: bool = True):
        """Timing holds the GPU's lock: concurrent compilations (make -j) never time at once.
        Every call is a new measurement (``fresh`` is for wrappers that cache)."""
        from superopt.judge.gpu_lock import gpu_lock
        from superopt.judge.timing import time_pair
        device = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
        with gpu_lock(device):
            return time_pair(base_ptx, cand_ptx, spec, backend=self.backend, reps=self.timing_reps)


# Structural rewrites first: within a budget, the passes that change how memory is moved or
# how much work is done are worth more time than hints and knobs.
PASS_PRIORITY = ("vectorize-memory", "warp-shuffle-reduction", "unroll", "address-arithmetic",
                 "occupancy", "nounroll", "cache-hints")


def _priority(name: str) -> int:
    return PASS_PRIORITY.index(name) if name in PASS_PRIORITY else len(PASS_PRIORITY)


def rule_candidates(module: ptx_ir.Module, kernel: str, options: SearchOptions,
                    notes: list[str]) -> list[Candidate]:
    """Every pass alone with each parameter combination, deduplicated by text."""
    passes = registry()
    names = options.passes if options.passes is not None else sorted(passes, key=_priority)
    out: list[Candidate] = []
    seen: set[str] = set()
    for name in names:
        info = passes.get(name)
        if info is None:
            notes.append(f"unknown pass {name!r} skipped")
            continue
        for params in param_grid(info):
            params = {**params, **options.extra_params.get(name, {})}
            try:
                cand = make_candidate(module, kernel, [Step(name, params)])
            except Exception as exc:   # a crashing pass must not stop the search
                notes.append(f"pass {name}({params}) crashed on {kernel}: {type(exc).__name__}: {exc}")
                continue
            if cand is not None and cand.hash not in seen:
                seen.add(cand.hash)
                out.append(cand)
    return out


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


def evaluate(candidate: Candidate, baseline_ptx: str, spec, judge: Judge, target: str,
             base_resources, seen_code: dict | None = None) -> dict:
    """Run one candidate through ptxas, the check and timing; return its record entry.

    ``seen_code`` (cubin hash -> who made it, the baseline included) skips candidates that
    ptxas turns into machine code already judged: their fate is ``same-code``."""
    entry = rec.candidate_entry(candidate)
    static = run_ptxas(candidate.ptx, target, keep_cubin=seen_code is not None)
    if not static.ok:
        entry.update(fate="rejected-ptxas", reason=_first_error(static.log))
        return entry
    if seen_code is not None and static.cubin is not None:
        code = text_hash(static.cubin.hex())
        if code in seen_code:
            entry.update(fate="same-code", reason=f"ptxas made the same machine code as {seen_code[code]}")
            return entry
        seen_code[code] = candidate.id
    res = static.resources.get(candidate.kernel)
    entry["resources"] = rec.resources_dict(res)
    # Every launch shape of the spec must agree (inferred specs come with several).
    specs = spec if isinstance(spec, (list, tuple)) else [spec]
    verdict = None
    for one in specs:
        verdict = judge.verify(baseline_ptx, candidate.ptx, one)
        if verdict.status != "accepted":
            break
    entry["verdict"] = verdict.to_dict()
    entry["launch_shapes_checked"] = len(specs)
    if verdict.status == "rejected":
        entry.update(fate="rejected-check", reason=verdict.reason)
        return entry
    if verdict.status != "accepted":
        entry.update(fate="not-judged", reason=verdict.reason)
        return entry
    if not judge.can_time:
        entry.update(fate="verified", reason=f"verified on the {judge.backend}; no GPU, so no measured speed")
        return entry
    timing = judge.time(baseline_ptx, candidate.ptx, specs[0])
    entry["timing"] = timing.to_dict()
    entry["speedup"] = timing.speedup
    if timing.status != "ok":
        entry.update(fate="not-timed", reason=timing.reason)
    elif timing.faster:
        entry.update(fate="faster", reason=timing.reason)
    else:
        entry.update(fate="not-faster", reason=timing.reason)
    return entry


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line.lower() or "fatal" in line.lower():
            return line.strip()
    return log.strip().splitlines()[0] if log.strip() else "ptxas failed"


def search_kernel(module: ptx_ir.Module, kernel: str, spec, *, target: str, options: SearchOptions,
                  judge: Judge | None, extra: list[Candidate] | None = None) -> KernelResult:
    started = time.monotonic()
    fn = module.function(kernel)
    record = rec.kernel_record(fn, target)
    baseline_ptx = ptx_ir.emit(module)
    base_static = run_ptxas(baseline_ptx, target, keep_cubin=True)
    seen_code = {text_hash(base_static.cubin.hex()): "nvcc's own code"} if base_static.cubin else {}
    record["baseline"]["resources"] = rec.resources_dict(base_static.resources.get(kernel))
    record["baseline"]["ptx"] = ptx_ir.printer.emit_function(fn)
    if spec is None:
        record.update(status="not-verifiable", reason="no launch spec (none given, none inferred)")
        return KernelResult(kernel, record, None)
    specs = spec if isinstance(spec, (list, tuple)) else [spec]
    record["spec"] = [s.to_dict() if hasattr(s, "to_dict") else s for s in specs]
    if judge is None:
        record.update(status="kept-baseline", reason="no backend to judge candidates")
        return KernelResult(kernel, record, None)
    record["backend"] = judge.backend
    record["policy"] = judge.policy

    notes = record["notes"]
    candidates = rule_candidates(module, kernel, options, notes) + list(extra or [])
    entries = []
    by_id: dict[str, Candidate] = {}

    def run_one(cand):
        try:
            e = evaluate(cand, baseline_ptx, spec, judge, target, base_static.resources.get(kernel), seen_code)
        except Exception as exc:
            e = rec.candidate_entry(cand)
            e.update(fate="error", reason=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=5))
        entries.append(e)
        by_id[e["id"]] = cand
        return e

    def elapsed():
        return time.monotonic() - started

    # 1. single passes, within the first part of the budget; the rest is deferred
    deferred = []
    for cand in candidates:
        if elapsed() > options.budget_s * SINGLES_SHARE:
            deferred.append(cand)
        else:
            run_one(cand)
    # 2. greedy combination of the passes whose single candidates won
    _combine(module, kernel, entries, by_id, judge, run_one, lambda: elapsed() <= options.budget_s)
    # 3. what was deferred, while the budget lasts
    for cand in deferred:
        if elapsed() > options.budget_s:
            e = rec.candidate_entry(cand)
            e.update(fate="skipped-budget", reason=f"per-kernel budget of {options.budget_s:g} s used up")
            entries.append(e)
        else:
            run_one(cand)

    record["candidates"] = entries
    winner = _choose(entries, by_id, judge, options, kernel, record, baseline_ptx, specs)
    record["seconds"] = round(time.monotonic() - started, 3)
    return KernelResult(kernel, record, winner)


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
    good = ("faster",) if judge.can_time else ("verified",)
    best_per_pass: dict[str, tuple[float, str]] = {}
    for e in entries:
        if e["fate"] in good and len(e["plan"]) == 1:
            cand = by_id[e["id"]]
            score = (e.get("speedup") or 1.0) if judge.can_time else -_priority(cand.plan[0].pass_name)
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


def _fresh_check(judge: Judge, baseline_ptx: str, cand: Candidate, specs, entry: dict) -> bool:
    """Check the candidate to keep once more on inputs drawn for this check alone (the search's
    checks share one family of inputs per kernel). Records the verdict; False if not accepted."""
    for one in specs:
        v = judge.verify(baseline_ptx, cand.ptx, one, fresh=True)
        entry["fresh_verdict"] = v.to_dict()
        if v.status != "accepted":
            entry.update(fate="rejected-check" if v.status == "rejected" else "not-judged",
                         reason=f"on fresh inputs, before keeping it: {v.reason}")
            return False
    return True


def _sanitized(judge, options: SearchOptions, baseline_ptx: str, cand: Candidate, spec, entry: dict) -> bool:
    """compute-sanitizer on the candidate to keep, where the judge can run it. False only if
    the candidate has sanitizer errors that nvcc's code does not have."""
    run = getattr(judge, "sanitize", None)
    if not options.sanitize or run is None:
        return True
    res = run(baseline_ptx, cand.ptx, spec, options.sanitize)
    entry["sanitizer"] = res.to_dict()
    if res.rejected:
        entry.update(fate="rejected-check", reason=res.reason)
        return False
    return True


# How many of the fastest candidates get a confirmation timing before the baseline is kept.
CONFIRM_TRIES = 3


def _function_text(candidate: Candidate, kernel: str) -> str:
    return ptx_ir.printer.emit_function(ptx_ir.parse(candidate.ptx).function(kernel))


def _choose(entries, by_id, judge: Judge, options: SearchOptions, kernel: str, record: dict,
            baseline_ptx: str, specs):
    if judge.can_time:
        winners = sorted((e for e in entries if e["fate"] == "faster"), key=lambda e: -e["speedup"])
        if not winners:
            record.update(status="kept-baseline", reason="no verified candidate was faster beyond noise")
            return None
        best = None
        for e in winners[:CONFIRM_TRIES]:
            if not _fresh_check(judge, baseline_ptx, by_id[e["id"]], specs, e):
                continue
            # The fastest of several noisy measurements is biased upwards: the candidate to
            # keep is timed once more, independently, and kept only if it is faster again.
            again = judge.time(baseline_ptx, by_id[e["id"]].ptx, specs[0], fresh=True)
            e["confirmation"] = again.to_dict()
            if not (again.status == "ok" and again.faster):
                e.update(fate="not-confirmed", reason=f"faster in the search ({e['speedup']:.3f}x) but not "
                                                      f"when timed again: {again.reason}")
                continue
            if not _sanitized(judge, options, baseline_ptx, by_id[e["id"]], specs[0], e):
                continue
            best = e
            # what is reported is the independent measurement, not the selected one
            e["search_speedup"], e["speedup"] = e["speedup"], again.speedup
            break
        if best is None:
            record.update(status="kept-baseline",
                          reason=f"no verified candidate was faster beyond noise when timed again "
                                 f"({min(len(winners), CONFIRM_TRIES)} tried)")
            return None
        best["fate"] = "winner"
        best["ptx"] = _function_text(by_id[best["id"]], kernel)
        record.update(status="optimized", winner=best["id"], decision="measured",
                      reason=f"{best['id']}: {best['speedup']:.3f}x (confirmed by a second timing; "
                             f"{best['search_speedup']:.3f}x in the search), verified")
        return by_id[best["id"]]
    verified = [e for e in entries if e["fate"] == "verified"]
    if options.no_gpu != "estimate" or not verified:
        record.update(status="kept-baseline",
                      reason="no GPU: no measured speed; only locked decisions are applied "
                             "(set NVCC_PLUS_NO_GPU=estimate to choose by a static estimate)"
                      if verified else "no candidate verified")
        return None
    base_cost = static_estimate(baseline_ptx, kernel)
    scored = sorted(((static_estimate(by_id[e["id"]].ptx, kernel), i, e) for i, e in enumerate(verified)),
                    key=lambda t: (t[0], t[1]))
    best = None
    for cost, _, e in scored[:CONFIRM_TRIES]:
        if cost >= base_cost:
            break
        if _fresh_check(judge, baseline_ptx, by_id[e["id"]], specs, e):
            best = e
            break
    if best is None:
        record.update(status="kept-baseline",
                      reason=f"no GPU: no verified candidate is cheaper than nvcc's code by the static estimate "
                             f"({base_cost:g}) and passes a check on fresh inputs")
        return None
    best["fate"] = "estimate-winner"
    best["ptx"] = _function_text(by_id[best["id"]], kernel)
    best["estimated_cost"] = cost
    record.update(status="optimized", winner=best["id"], decision="estimate",
                  reason=f"{best['id']}: chosen by a static estimate (no GPU), verified on the emulator")
    return by_id[best["id"]]
