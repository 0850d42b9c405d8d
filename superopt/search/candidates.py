"""Candidates: a whole PTX module plus where it came from.

A candidate is made by applying a *plan* — an ordered list of ``(pass, params)`` — to a
clone of the baseline module, for one kernel. Plans are what the cache and the lockfile
store: re-applying a plan to the same baseline gives the same text (passes are
deterministic), which is checked by hash before a stored decision is trusted.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import ptx_ir
from superopt.passes import Change, get_pass


@dataclass
class Step:
    pass_name: str
    params: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"pass": self.pass_name, "params": dict(self.params)}

    @staticmethod
    def from_dict(d: dict) -> "Step":
        return Step(d["pass"], dict(d.get("params") or {}))

    def __str__(self) -> str:
        args = ", ".join(f"{k}={_shown(v)}" for k, v in sorted(self.params.items()))
        return f"{self.pass_name}({args})" if args else self.pass_name


def _shown(value) -> str:
    """A parameter as a candidate's id shows it: code (a model's body, a restrict-compiled
    function) by size and hash, not in full; the record's ``plan`` holds it whole."""
    if isinstance(value, str) and ("\n" in value or len(value) > 80):
        return f"<code {len(value.encode())} B #{text_hash(value)[:8]}>"
    return str(value)


@dataclass
class Candidate:
    kernel: str
    plan: list[Step]
    ptx: str                          # the whole module
    changes: list[str]
    provenance: dict = field(default_factory=dict)   # {"proposer": "rules"} or model info
    # fast bodies the plan put behind a launch-time no-alias check, in the order it did
    # (superopt.passes._alias_check.FastPath): the record entry describes each
    fast_paths: list = field(default_factory=list)

    @property
    def id(self) -> str:
        return " + ".join(map(str, self.plan)) or "baseline"

    @property
    def hash(self) -> str:
        return text_hash(self.ptx)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class PlanDidNotApply(RuntimeError):
    pass


def apply_plan(module: ptx_ir.Module, kernel: str, plan: list[Step]) -> tuple[ptx_ir.Module, list[str]]:
    """A new module with ``plan`` applied to ``kernel``; raises PlanDidNotApply if a step
    changes nothing (a plan from a cache or a model must apply exactly)."""
    clone, made = _applied(module, kernel, plan)
    return clone, [f"{name}: {c}" for name, c in made]


def _applied(module: ptx_ir.Module, kernel: str, plan: list[Step]) -> tuple[ptx_ir.Module, list[tuple[str, Change]]]:
    """:func:`apply_plan`, keeping every :class:`Change` with the pass that made it."""
    clone = module.clone()
    fn = clone.function(kernel)
    changes: list[tuple[str, Change]] = []
    for step in plan:
        info = get_pass(step.pass_name)
        made: list[Change] = info(fn, **step.params)
        if not made:
            raise PlanDidNotApply(f"pass {step} did not fire on {kernel}")
        fn.validate()
        changes.extend((step.pass_name, c) for c in made)
    return clone, changes


def make_candidate(module: ptx_ir.Module, kernel: str, plan: list[Step],
                   provenance: dict | None = None) -> Candidate | None:
    """The candidate for ``plan``, or None when the plan does not apply."""
    try:
        return plan_candidate(module, kernel, plan, provenance or None)
    except PlanDidNotApply:
        return None


def plan_candidate(module: ptx_ir.Module, kernel: str, plan: list[Step], provenance: dict | None = None) -> Candidate:
    """The candidate for ``plan`` with the fast paths its passes made; raises PlanDidNotApply."""
    new, made = _applied(module, kernel, plan)
    return Candidate(kernel, list(plan), ptx_ir.emit(new), [f"{name}: {c}" for name, c in made],
                     dict(provenance) if provenance is not None else {"proposer": "rules"},
                     [c.fast_path for _, c in made if getattr(c, "fast_path", None) is not None])
