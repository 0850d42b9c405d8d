"""Decisions stored in the lockfile or the decision cache, applied to a module.

An entry is data anyone could have written, so before it changes a kernel: its plan must
parse and apply, give the PTX hash it recorded, keep the kernel's launch contract (directives
vs the launch specs in force: :mod:`superopt.judge.launch_contract`), and a step that carries
code (a pass that says ``carries_code``: a model's function body) is applied only after the
judge here accepts it against nvcc's code. Anything else is one line and a new search (or
nvcc's code).
"""
from __future__ import annotations

import ptx_ir
import superopt.model.rewrite  # noqa: F401 - registers model-rewrite: stored model wins re-apply without a model
from superopt.passes import registry
from superopt.search.candidates import PlanDidNotApply, Step, apply_plan, text_hash
from superopt.search.options import SearchOptions
from superopt.specs.sources import candidates_in_order
from superopt.store.record import Status

__all__ = ["apply_stored", "recheck_stored", "specs_in_force", "provenance", "carries_code"]


def carries_code(plan) -> list[str]:
    """The passes of ``plan`` whose parameters carry code (``PassInfo.carries_code``): a
    lockfile or cache entry is data anyone could have written, so such a step is applied only
    after the judge accepts the result against nvcc's code here."""
    passes = registry()
    return sorted({s.pass_name for s in plan if s.pass_name in passes and passes[s.pass_name].carries_code})


def provenance(stored: dict) -> str:
    """Where a stored decision came from, in words."""
    parts = []
    if stored.get("decision") == "estimate":
        parts.append("a static estimate (no GPU)")
    elif stored.get("searched_on"):
        parts.append(f"searched on {stored['searched_on']}")
    spec = stored.get("spec_origin")
    if spec == "captured":
        parts.append("at the program's captured launches")
    elif spec:
        parts.append(f"with launch specs from {spec}")
    return ", ".join(parts) or "origin not recorded"


def specs_in_force(module, kernel, source, settings, capture):
    """The kernel's launch-spec choices here (explicit, captured, inferred), computed once and
    only when a stored entry changes a block bound."""
    memo: list = []

    def get():
        if not memo:
            memo.append(candidates_in_order(module, kernel, source=source, settings=settings,
                                            capture=capture).choices)
        return memo[0]
    return get


def apply_stored(module, kernel: str, stored: dict, origin: str, records: dict, messages: list[str],
                  recheck=None, *, where: str | None = None, verbose: bool = False, specs_in_force=None):
    entry = f"{where}: {kernel}" if where else kernel
    try:
        plan = [Step.from_dict(s) for s in stored.get("plan", [])]
    except (KeyError, TypeError, AttributeError) as exc:
        messages.append(f"{entry}: {origin} decision is malformed ({exc!r}); searching again")
        return None
    kr = {"kernel": kernel, "status": origin, "decision": origin, "plan": stored.get("plan", []),
          "reason": f"{origin} decision applied", "candidates": [], "notes": [],
          "stored": {"file": where, "provenance": provenance(stored)}}
    announce = (f"{entry}: applied the {origin} entry: plan "
                f"{' + '.join(map(str, plan)) or 'keep nvcc code'}; {provenance(stored)}")
    if not plan:
        kr["reason"] = f"{origin} decision: keep nvcc's code"
        records["kernels"].append(kr)
        if verbose:
            messages.append(announce)
        return module, False
    try:
        new_module, _ = apply_plan(module, kernel, plan)
    except (PlanDidNotApply, KeyError, ValueError, TypeError) as exc:
        # a pass refusing the stored parameters (maxnreg=5, block="x") is a stale or tampered entry
        messages.append(f"{entry}: {origin} decision no longer applies ({exc}); searching again")
        return None
    got = text_hash(ptx_ir.printer.emit_function(new_module.function(kernel)))
    if stored.get("ptx_hash") and got != stored["ptx_hash"]:
        messages.append(f"{entry}: {origin} decision gives different PTX than recorded "
                        f"({got} != {stored['ptx_hash']}); searching again")
        return None
    from superopt.judge.launch_contract import contract_problem
    problem = contract_problem(module.function(kernel), new_module.function(kernel),
                               specs_in_force or (lambda: []))
    if problem:
        # A launch that fails is a broken program: never applied; nvcc's code unless a search
        # (with a GPU, or NVCC_PLUS_NO_GPU=estimate) finds something better.
        messages.append(f"{entry}: {origin} decision not applied: {problem}; nvcc's code is used "
                        f"unless a search (GPU or NVCC_PLUS_NO_GPU=estimate) finds better")
        return None
    coded = carries_code(plan)
    if coded:
        verdict = recheck(module, new_module, kernel) if recheck else "no judge available"
        if verdict != "accepted":
            messages.append(f"{entry}: {origin} decision carries code ({', '.join(coded)}) that "
                            f"could not be re-checked against nvcc's code here ({verdict}); not applied")
            kr.update(status=Status.KEPT_BASELINE, decision=None,
                      reason=f"{origin} decision not applied: its code was not re-checked ({verdict})")
            records["kernels"].append(kr)
            return module, False
        kr["notes"].append(f"{origin} code re-checked against nvcc's code: accepted")
    records["kernels"].append(kr)
    if verbose:
        messages.append(announce)
    return new_module, True


def recheck_stored(options: SearchOptions, source, settings, capture, judge):
    """Judge a stored rewrite against nvcc's code with whatever can judge here (the GPU, else
    the emulator); returns "accepted" or why not."""
    def recheck(module, new_module, kernel) -> str:
        found = candidates_in_order(module, kernel, source=source, settings=settings, capture=capture)
        if not found.choices:
            return f"no launch spec: {found.reason}"
        from superopt.judge import BackendJudge
        j = judge if judge is not None else BackendJudge(options.backend, options.policy, options.check_sets,
                                                         options.timing_reps)
        base, cand = ptx_ir.emit(module), ptx_ir.emit(new_module)
        for spec in found.choices[-1].specs:          # the small shapes (inferred or explicit)
            v = j.verify(base, cand, spec, fresh=True)
            if v.status != "accepted":
                return f"{v.status}: {v.reason}"
        return "accepted"
    return recheck


class _StoredSource:
    """What the lockfile and the cache share: applying an entry found for a kernel."""

    name = "stored"

    def __init__(self, run, judge=None):
        self.run = run
        self.judge = judge              # re-checks a stored model rewrite (None: one is made for it)

    def _apply(self, job, stored: dict, origin: str, where: str, keys: dict | None = None) -> bool:
        run = self.run
        count = len(run.records["kernels"])
        applied = apply_stored(run.result_module, job.kernel, stored, origin, run.records, run.messages,
                               recheck_stored(run.options, run.source, run.settings, run.capture, self.judge),
                               where=where, verbose=run.verbose,
                               specs_in_force=specs_in_force(run.module, job.kernel, run.source, run.settings,
                                                             run.capture))
        if applied is None:
            return False
        if keys and len(run.records["kernels"]) > count:
            # where the applied decision is stored (superopt tune reverts it there)
            run.records["kernels"][-1]["decision_keys"] = keys
        run.result_module, did_change = applied
        run.changed |= did_change
        return True

    def finish(self) -> None:
        pass


class LockedDecisions(_StoredSource):
    """Decisions in ``nvcc-plus.lock``. With a capture and a way to time, an entry made at
    guessed sizes is passed over: the kernel is searched again at the captured ones."""

    name = "locked"

    def __init__(self, run, judge=None, *, can_time=lambda: False):
        super().__init__(run, judge)
        self.can_time = can_time

    def decide(self, job) -> bool:
        run = self.run
        stored = run.lock.get(job.key.lock_digest()) if run.lock else None
        if stored is None:
            return False
        if run.capture is not None and stored.get("spec_origin") != "captured" and self.can_time():
            return False
        if not self._apply(job, stored, "locked", str(run.lock_path),
                           {"lock": job.key.lock_digest(), "lockfile": str(run.lock_path)}):
            return False
        run.stats["locked"] += 1
        return True


class CachedDecisions(_StoredSource):
    """Decisions in the cache: under the kernel's key, the key of its captured launches, and
    (with a cluster) the keys of the GPU models the cluster's workers measured on."""

    name = "cached"

    def __init__(self, run, judge=None, *, cluster=None):
        super().__init__(run, judge)
        self.cluster = cluster

    def _lookup(self, job):
        run = self.run
        key = job.key
        found = run.cache.get(key.digest())
        if found is not None:
            return found, key
        if self.cluster is None:
            return self._captured(job, key)
        for gpu in self.cluster.models():
            on_gpu = key.on_gpu(gpu)
            found = run.cache.get(on_gpu.digest())
            if found is not None:
                return found, on_gpu
            found, captured_key = self._captured(job, on_gpu)
            if found is not None:
                return found, captured_key
        return None, key

    def _captured(self, job, key):
        """The cached decision made at this kernel's captured launches, if any (no inference:
        the key is that of the captured specs alone)."""
        run = self.run
        if run.capture is None:
            return None, key
        from superopt.specs.capture.specs import captured_specs
        from superopt.specs.sources import specs_key
        found = captured_specs(run.capture, run.module, job.kernel)
        if not found.specs:
            return None, key
        at = key.at_captured(specs_key(found.specs))
        return run.cache.get(at.digest()), at

    def decide(self, job) -> bool:
        run = self.run
        stored, key = self._lookup(job)
        keys = {"cache": key.digest(), "cache_file": str(run.cache.path(key.digest()))}
        if stored is None or not self._apply(job, stored, "cached", str(run.cache.path(key.digest())), keys):
            run.stats["misses"] += 1
            return False
        run.stats["hits"] += 1
        run.stats["saved_s"] += _number(stored.get("search_s"))
        return True


def _number(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0
