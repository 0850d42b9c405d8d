"""One kernel's search over its launch-spec sources in order, as a build and a cluster worker
run it: the per-kernel options (budget, deadline, the launch facts passes ask for) and the
next spec source only when nvcc's own code could not be judged with one."""
from __future__ import annotations

import time
from dataclasses import replace

from superopt.search.options import SearchOptions
from superopt.store.record import Fate

MIN_SEARCH_S = 2.0          # a search given less time than this is not started
MAJOR_SHARE = 0.05          # a captured kernel with this share of GPU time gets twice the budget


def time_left(deadline) -> float | None:
    return None if deadline is None else float(deadline) - time.time()


def search_choices(module, kernel: str, choices, *, options: SearchOptions, deadline, share, judge, target):
    """The search of one kernel with its spec sources in order (the next source only when nvcc's
    code could not be judged with one): (record, winner or None, index of the choice used or
    None, notes on the sources tried). This is what a cluster worker runs, too."""
    from superopt.model.proposer import search_with_model
    kr, result, chosen = None, None, None
    tried: list[str] = []
    for i, choice in enumerate(choices or [None]):
        specs = choice.specs if choice else None
        kernel_options = kernel_search_options(options, choice, deadline, share)
        # The model proposer adds candidates when a model is configured; otherwise this is
        # exactly the rule search.
        result = search_with_model(module, kernel, specs, target=target, options=kernel_options, judge=judge)
        kr, chosen = result.record, (i if choice is not None else None)
        unjudged = baseline_unjudgeable(kr)
        if result.winner is not None or not unjudged or i == len(choices or [None]) - 1:
            break
        tried.append(f"specs from {choice.origin} could not be judged ({unjudged}); tried the next source")
    return kr, result.winner, chosen, tried


def _field(spec, name, default=None):
    return spec.get(name, default) if isinstance(spec, dict) else getattr(spec, name, default)


def _block(spec) -> tuple | None:
    try:
        return tuple(int(d) for d in _field(spec, "block"))
    except (TypeError, ValueError):
        return None


def launch_facts(choice) -> dict:
    """The facts of :data:`superopt.passes.LAUNCH_FACTS` that the spec source ``choice`` gives."""
    specs = list(getattr(choice, "specs", None) or [])
    facts: dict = {}
    if specs and not any(_field(s, "shared_bytes", 0) for s in specs):
        block = _block(specs[0])
        if block is not None:
            facts["timed_block"] = block
    if specs and str(getattr(choice, "origin", "")).startswith(("toml", "comment", "file", "captured")):
        # An explicit or captured spec is the program's launch contract: occupancy knobs may
        # rely on its block.
        blocks = [b for b in map(_block, specs) if b is not None]
        # every block the capture saw: a .maxntid must let each of them launch
        blocks += [tuple(b) for b in getattr(getattr(choice, "launches", None), "captured_blocks", ())]
        if blocks:
            facts["contract_block"] = max(blocks, key=lambda b: b[0] * b[1] * b[2])
    return facts


def launch_params(choice, extra: dict | None = None) -> dict:
    """``{pass: {param: value}}`` for every registered pass that asks for launch facts this
    spec source has (``PassInfo.launch_params``); ``extra``: the kernel's facts of the module
    (``SearchOptions.facts``: ``restrict_body``), given the same way."""
    from superopt.passes import registry
    facts = {**launch_facts(choice), **(extra or {})}
    out: dict = {}
    for name, info in registry().items():
        params = {p: facts[f] for p, f in info.launch_params.items() if f in facts}
        if params and len(params) == len(info.launch_params):
            out[name] = params
    return out


def kernel_search_options(options: SearchOptions, choice, deadline, share=None) -> SearchOptions:
    out = options
    if share is not None and share >= MAJOR_SHARE:
        # Where the program spends its time is where the search spends its own.
        out = replace(out, budget_s=2 * out.budget_s)
    filled = launch_params(choice, out.facts)
    if filled:
        out = replace(out, extra_params={**out.extra_params, **filled})
    if getattr(choice, "launches", None) is not None:
        out = replace(out, launches=choice.launches)
    left = time_left(deadline)
    if left is not None:
        room = max(0.0, left - MIN_SEARCH_S)
        out = replace(out, budget_s=min(out.budget_s, room), wall_limit_s=room)
    return out


def baseline_unjudgeable(kr: dict) -> str | None:
    """The reason when nvcc's own code could not be judged with the specs (every candidate
    that reached the check on every launch shape was not judged), else None. Candidates the
    search left unchecked at its costly shapes (``launch_shapes_unchecked``: not kept, so never
    checked at the captured size) say nothing about those shapes and are not counted."""
    if kr.get("baseline_unjudged"):
        return kr["baseline_unjudged"]
    judged = (Fate.NOT_JUDGED, Fate.REJECTED_CHECK, Fate.VERIFIED, Fate.FASTER, Fate.NOT_FASTER,
              Fate.NOT_CONFIRMED, Fate.SLOWER_ELSEWHERE, Fate.BELOW_MIN_GAIN, Fate.NOT_TIMED, Fate.WINNER,
              Fate.ESTIMATE_WINNER)
    fates = [c for c in kr.get("candidates", [])
             if c.get("fate") in judged and not c.get("launch_shapes_unchecked")]
    if fates and all(c.get("fate") == Fate.NOT_JUDGED for c in fates):
        return fates[0].get("reason") or "not judged"
    return None
