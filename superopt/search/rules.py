"""The rule proposer: every registered pass alone with each of its parameter values.

Passes are tried in the order they declare (:attr:`superopt.passes.PassInfo.order`): structural
passes first, since within a budget the passes that change how memory is moved or how much work
is done are worth more time than hints and knobs.
"""
from __future__ import annotations

import ptx_ir
from superopt.passes import DEFAULT_ORDER, param_grid, registry
from superopt.search.candidates import Candidate, Step, make_candidate

def priority(name: str) -> tuple[int, str]:
    """Sort key of a pass: its declared order, then its name (unknown names last)."""
    info = registry().get(name)
    return (info.order if info is not None else DEFAULT_ORDER + 1, name)


def all_pass_names() -> list[str]:
    """Every pass a search may run, for the decision key: the built-in ones as their files
    declare them (read, not imported: a build that only applies stored decisions loads no
    pass) and the model's rewrite, registered here first so that every module's key holds it
    whatever the process did before (as keys always have: caches and lockfiles stay valid)."""
    import superopt.model.rewrite  # noqa: F401 - registers model-rewrite
    from superopt.passes import _REGISTRY, declared_names
    return sorted(set(declared_names()) | set(_REGISTRY))


def passes_problem(settings) -> str | None:
    """NVCC_PLUS_PASSES naming a pass that does not exist (no pass would run), in words; None if fine."""
    names = settings.names("NVCC_PLUS_PASSES")
    if not names:
        return None
    known = all_pass_names()              # the names the files declare: no pass imported
    unknown = [n for n in names if n not in known]
    if not unknown:
        return None
    return (f"passes ({settings.origin('NVCC_PLUS_PASSES')}): unknown pass(es) {', '.join(map(repr, unknown))}; "
            f"the passes are {', '.join(sorted(known))} (superopt passes --names)")


def ordered_pass_names() -> list[str]:
    """Every registered pass of the default set (``PassInfo.default``), in the order the rule
    search tries them; a pass outside it runs only where a search's passes name it."""
    return sorted((name for name, info in registry().items() if info.default), key=priority)


def rule_candidates(module: ptx_ir.Module, kernel: str, options, notes: list[str]) -> list[Candidate]:
    """Every pass alone with each parameter combination, deduplicated by text.
    ``options``: the search's (``passes``: which, None for all; ``extra_params``: per pass,
    parameters forced onto every combination)."""
    passes = registry()
    names = options.passes if options.passes is not None else ordered_pass_names()
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


class RuleProposer:
    """The registered passes as a :class:`superopt.search.proposer.Proposer`; judged within
    the search budget (the loop defers what does not fit, and combines the winners)."""

    name = "rules"
    own_budget = False

    def propose(self, module, kernel, context):
        return rule_candidates(module, kernel, context.options, context.notes)
