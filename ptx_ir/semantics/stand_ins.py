"""Stand-ins for the approximate float instructions (``.approx`` transcendentals, ``div.full``).

A GPU computes ``rsqrt.approx``, ``ex2.approx``, ``div.full`` ... with hardware tables whose
results are not reproduced here (:func:`ptx_ir.semantics.decode_alu` refuses them). Where only
a program compared with itself matters (do two runs of one program under other thread
schedules give the same results?), a deterministic function of the inputs serves as well as
the GPU's: each stand-in computes the exact function in float64 and rounds it to the
instruction's type (inputs and result flushed under ``.ftz``). Never use these to compare two
programs: they are not the GPU's values, and a rewrite that swapped an approximation for
another could match here and not there.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ptx_ir.semantics import fp
from ptx_ir.semantics.errors import Unsupported

f32, f64 = np.float32, np.float64

_UNARY: dict[str, Callable] = {
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "sqrt": np.sqrt,
    "rcp": lambda x: 1.0 / x,
    "sin": np.sin,
    "cos": np.cos,
    "lg2": np.log2,
    "ex2": np.exp2,
    "tanh": np.tanh,
}


def _round(r64: np.ndarray, t: str, ftz_: bool) -> np.ndarray:
    if t == ".f64":
        return np.asarray(r64, f64)
    r = np.asarray(r64, f64).astype(f32)
    r = fp.canon_nan(r)
    return fp.ftz(r) if ftz_ else r


def unary(op: str, t: str, ftz_: bool) -> Callable:
    """``op.approx{.ftz}.t`` (rsqrt, sqrt, rcp, sin, cos, lg2, ex2, tanh) as a stand-in."""
    fn = _UNARY.get(op)
    if fn is None or t not in (".f32", ".f64") or (t == ".f64" and op not in ("rsqrt", "rcp")):
        raise Unsupported(f"no stand-in for {op}.approx{t}")

    def run(a):
        a = np.asarray(a, f32 if t == ".f32" else f64)
        if ftz_ and t == ".f32":
            a = fp.ftz(a)
        with np.errstate(all="ignore"):
            return _round(fn(a.astype(f64)), t, ftz_)
    return run


def div(t: str, ftz_: bool) -> Callable:
    """``div.approx`` / ``div.full`` of f32 as a stand-in (the quotient rounded to nearest)."""
    if t != ".f32":
        raise Unsupported(f"no stand-in for an approximate div{t}")

    def run(a, b):
        a, b = np.asarray(a, f32), np.asarray(b, f32)
        if ftz_:
            a, b = fp.ftz(a), fp.ftz(b)
        with np.errstate(all="ignore"):
            return _round(a.astype(f64) / b.astype(f64), t, ftz_)
    return run
