"""Proofs that an inferred spec's buffers cover the extra sizes the check gives it.

An inferred spec (:mod:`superopt.specs.inference`) is a family: its buffer lengths and grid
are formulas over its size parameters (``n``, ``cdiv(n, 256)``, ``w*h``), fitted to the
launches the tracer followed and proven only there (its ``values``; ``vary_sizes`` is off).
The check's input plan (:func:`superopt.judge.inputs.input_plan`) gives every spec the same
extra sets: tails at every residue, a whole-block size, one large size. For an inferred spec
each of those launches is traced here first, over every thread, as inference traces its own
(:func:`superopt.specs.inference.launch_problems`): every access inside the buffers the
formulas give, no shared-memory access out of bounds or of bytes no thread of the block
writes, no trap, no access misaligned at these sizes. A launch that is not proven (or whose
trace passes the budget below) is not run: the verdict's notes say which and why, and nvcc's
own code stays judgeable on the sizes that are proven.

Proofs are deterministic in (PTX, spec, integer sizes) and cached per process: a search
checks every candidate of a kernel against the same baseline, so the traces run once.
Float scalars are traced as unknown (the check varies them freely).
"""
from __future__ import annotations

import time
from functools import lru_cache

from superopt.judge.inputs import is_inferred
from superopt.specs.launch_spec import LaunchSpec, SpecError

__all__ = ["needs_proof", "prove", "PROOF_LANE_STEPS", "PROOF_SECONDS", "clear_cache"]

# The tracer's work for one proof: up to ~0.3 s for simple kernels (6-60 M thread-steps per
# second), and never more than PROOF_SECONDS. A launch past it is not proven: a GPU's large
# set then falls back to the CPU's smaller size, and that to the whole-block set.
PROOF_LANE_STEPS = 12_000_000
PROOF_SECONDS = 2.0


def needs_proof(spec: LaunchSpec) -> bool:
    """Extra sizes of this spec must be proven before they run: it was inferred (an explicit
    spec's formulas are its author's word, as for the main sets' sizes)."""
    return is_inferred(spec) and not spec.vary_sizes


@lru_cache(maxsize=8)
def _function(ptx: str, kernel: str):
    import ptx_ir
    module = ptx_ir.parse(ptx)
    for fn in module.functions:
        if fn.is_entry and fn.name == kernel:
            return module, fn
    return module, None


@lru_cache(maxsize=512)
def _prove(ptx: str, kernel: str, spec_json: str, sizes: tuple) -> str | None:
    from superopt.specs.inference import launch_problems
    spec = LaunchSpec.from_json(spec_json)
    try:
        rs = spec.resolved(dict(sizes))
    except SpecError as e:
        return f"the spec cannot be resolved there: {e}"
    try:
        module, fn = _function(ptx, kernel)
    except Exception as e:  # noqa: BLE001 - nvcc's PTX that ptx_ir cannot parse proves nothing
        return f"the PTX cannot be analysed ({type(e).__name__}: {e})"
    if fn is None:
        return f"no entry {kernel!r} to trace"
    try:
        problems = launch_problems(module, fn, rs, max_lane_steps=PROOF_LANE_STEPS,
                                   deadline=time.monotonic() + PROOF_SECONDS, alignment=True)
    except Exception as e:  # noqa: BLE001 - a tracer failure proves nothing (TraceTimeout is a BaseException)
        return f"the tracer failed ({type(e).__name__}: {e})"
    return problems[0] if problems else None


def prove(baseline_ptx: str, spec: LaunchSpec, overrides: dict) -> str | None:
    """None when ``spec`` at the integer ``overrides`` is proven to keep every access of
    ``baseline_ptx``'s kernel inside its buffers (and the launch sound: see the module doc);
    else the first problem found. Cached."""
    ints = tuple(sorted((k, int(v)) for k, v in overrides.items() if not spec.param(k).elem.is_float))
    return _prove(baseline_ptx, spec.kernel, spec.to_json(), ints)


def clear_cache() -> None:
    _prove.cache_clear()
    _function.cache_clear()
