"""Plan mode: the JSON schema a model's answer must follow, generated from the pass registry.

A plan is ``{"steps": [{"pass": NAME, "params": {...}}, ...]}``: the passes to apply to the
kernel, in order, each with one of the parameter values the pass declares. The schema is
made at run time from whatever passes are registered, so a new pass (or a user's pass
loaded with ``superopt try``) is on the menu without touching this file. Each step is a
``oneOf`` alternative per pass whose ``params`` object lists exactly that pass's parameters
with their allowed values as an ``enum``: a constrained decoder (xgrammar in vLLM or in
process) can then only produce plans that name real passes with legal parameters.
"""
from __future__ import annotations

import json

from superopt.search.candidates import Step

# Pseudo-passes that must never appear on the model's menu.
HIDDEN_PASSES = frozenset({"model-rewrite"})

DEFAULT_MAX_STEPS = 4


class PlanError(ValueError):
    """A plan that does not fit the registry (unknown pass, bad parameter value, ...)."""


def menu(passes: dict | None = None) -> dict:
    """The passes a model may choose from: name -> PassInfo (hidden ones left out)."""
    if passes is None:
        from superopt.passes import registry
        passes = registry()
    return {n: p for n, p in sorted(passes.items()) if n not in HIDDEN_PASSES}


def _json_value(v):
    """Parameter values as JSON can carry them (tuples become lists; others as text)."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    return str(v)


def step_schema(info) -> dict:
    props = {}
    for pname, values in info.params.items():
        vals = [_json_value(v) for v in values]
        uniq = []
        for v in vals:
            if v not in uniq:
                uniq.append(v)
        props[pname] = {"enum": uniq}
    params = {"type": "object", "properties": props, "required": list(props),
              "additionalProperties": False}
    return {
        "type": "object",
        "properties": {"pass": {"const": info.name}, "params": params},
        "required": ["pass", "params"],
        "additionalProperties": False,
    }


def plan_schema(passes: dict | None = None, *, max_steps: int = DEFAULT_MAX_STEPS) -> dict | None:
    """The JSON schema of a plan over the registered passes; None when there are none."""
    m = menu(passes)
    if not m:
        return None
    return {
        "title": "nvcc-plus rewrite plan",
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "items": {"oneOf": [step_schema(info) for info in m.values()]},
                "minItems": 1,
                "maxItems": int(max_steps),
            },
        },
        "required": ["steps"],
        "additionalProperties": False,
    }


def parse_plan(text: str, passes: dict | None = None, *, max_steps: int = DEFAULT_MAX_STEPS) -> list[Step]:
    """The steps of a model's JSON answer, checked against the registry (a server that
    ignored the schema, or a planted model, must not get an invalid plan through)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanError(f"not JSON: {e.msg} at character {e.pos}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        raise PlanError('expected an object {"steps": [...]}')
    extra = set(doc) - {"steps"}
    if extra:
        raise PlanError(f"unexpected keys {sorted(extra)}")
    steps = doc["steps"]
    if not steps:
        raise PlanError("the plan has no steps")
    if len(steps) > max_steps:
        raise PlanError(f"the plan has {len(steps)} steps (at most {max_steps})")
    m = menu(passes)
    out = []
    for i, s in enumerate(steps):
        if not isinstance(s, dict) or set(s) - {"pass", "params"} or "pass" not in s:
            raise PlanError(f"step {i}: expected {{\"pass\": NAME, \"params\": {{...}}}}")
        name = s["pass"]
        if name not in m:
            raise PlanError(f"step {i}: unknown pass {name!r} (known: {', '.join(m) or 'none'})")
        info = m[name]
        params = s.get("params") or {}
        if not isinstance(params, dict):
            raise PlanError(f"step {i}: params must be an object")
        unknown = set(params) - set(info.params)
        if unknown:
            raise PlanError(f"step {i}: pass {name} has no parameter(s) {sorted(unknown)}")
        missing = set(info.params) - set(params)
        if missing:
            raise PlanError(f"step {i}: pass {name} needs parameter(s) {sorted(missing)}")
        real = {}
        for k, v in params.items():
            allowed = list(info.params[k])
            hit = [a for a in allowed if _json_value(a) == v]
            if not hit:
                raise PlanError(f"step {i}: {name}.{k}={v!r} is not one of {allowed}")
            real[k] = hit[0]
        out.append(Step(name, real))
    return out
