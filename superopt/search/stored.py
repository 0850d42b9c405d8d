"""Decisions stored in the lockfile or the decision cache, applied to a module.

An entry is data anyone could have written, so before it changes a kernel: its plan must
parse and apply, give the PTX hash it recorded, keep the kernel's launch contract (directives
vs the launch specs in force: :mod:`superopt.judge.launch_contract`), and a step that carries
code (a model's function body) is applied only after the judge here accepts it against nvcc's
code. Anything else is one line and a new search (or nvcc's code).
"""
from __future__ import annotations

import ptx_ir
from superopt.judge import BackendJudge
from superopt.search.candidates import PlanDidNotApply, Step, apply_plan, text_hash
from superopt.search.loop import SearchOptions
from superopt.specs.sources import candidates_in_order
from superopt.store.record import Status

__all__ = ["UNTRUSTED_PASSES", "apply_stored", "recheck_stored", "specs_in_force", "provenance"]


# Steps whose parameters carry code (a model's function body): a lockfile or cache entry is
# data anyone could have written, so such a step is applied only after the judge accepts
# the result against nvcc's code here.
UNTRUSTED_PASSES = ("model-rewrite",)


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


def specs_in_force(module, kernel, source, config, capture):
    """The kernel's launch-spec choices here (explicit, captured, inferred), computed once and
    only when a stored entry changes a block bound."""
    memo: list = []

    def get():
        if not memo:
            memo.append(candidates_in_order(module, kernel, source=source, config=config,
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
    if any(s.pass_name in UNTRUSTED_PASSES for s in plan):
        verdict = recheck(module, new_module, kernel) if recheck else "no judge available"
        if verdict != "accepted":
            messages.append(f"{entry}: {origin} decision carries code ({', '.join(UNTRUSTED_PASSES)}) that "
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


def recheck_stored(options: SearchOptions, source, config, capture, judge):
    """Judge a stored rewrite against nvcc's code with whatever can judge here (the GPU, else
    the emulator); returns "accepted" or why not."""
    def recheck(module, new_module, kernel) -> str:
        found = candidates_in_order(module, kernel, source=source, config=config, capture=capture)
        if not found.choices:
            return f"no launch spec: {found.reason}"
        j = judge if judge is not None else BackendJudge(options.backend, options.policy, options.check_sets,
                                                         options.timing_reps)
        base, cand = ptx_ir.emit(module), ptx_ir.emit(new_module)
        for spec in found.choices[-1].specs:          # the small shapes (inferred or explicit)
            v = j.verify(base, cand, spec, fresh=True)
            if v.status != "accepted":
                return f"{v.status}: {v.reason}"
        return "accepted"
    return recheck
