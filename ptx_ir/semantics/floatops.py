"""Float min/max/abs/neg/copysign/testp and compares (f16/bf16/f32/f64)."""
from __future__ import annotations

import numpy as np

from ptx_ir.semantics import fp

f16, f32, f64 = np.float16, np.float32, np.float64
u16, u32, u64 = np.uint16, np.uint32, np.uint64

_SIGN = {2: u16(0x8000), 4: u32(0x80000000), 8: u64(0x8000000000000000)}
_UT = {2: u16, 4: u32, 8: u64}


def _bits(x):
    x = np.asarray(x)
    return x.view(_UT[x.dtype.itemsize])


def _nan_result(a, r):
    """neg/abs of a NaN: f32 gives the canonical NaN, f64 the operand quieted (sign kept)."""
    n = np.isnan(a)
    if not n.any():
        return r
    if a.dtype == f64:
        return np.where(n, fp.quiet64(a), r)
    return np.where(n, fp.QNAN_F32.view(f32), r)


def fneg(a):
    a = np.asarray(a)
    return _nan_result(a, (_bits(a) ^ _SIGN[a.dtype.itemsize]).view(a.dtype))


def fabs(a):
    a = np.asarray(a)
    return _nan_result(a, (_bits(a) & ~_SIGN[a.dtype.itemsize]).view(a.dtype))


def copysign(a, b):
    """copysign d, a, b: the sign of a with the magnitude of b."""
    a, b = np.asarray(a), np.asarray(b)
    s = _SIGN[b.dtype.itemsize]
    return ((_bits(b) & ~s) | (_bits(a) & s)).view(b.dtype)


def _minmax(a, b, is_max, nan_prop=False):
    """IEEE-754-2019 minimumNumber/maximumNumber: NaN loses unless both are NaN; -0 < +0."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    dt = a.dtype
    an, bn = np.isnan(a), np.isnan(b)
    if is_max:
        r = np.where(a > b, a, b)
        # equal values: +0 beats -0
        eq = a == b
        r = np.where(eq, (_bits(a) & _bits(b)).view(dt), r)
    else:
        r = np.where(a < b, a, b)
        eq = a == b
        r = np.where(eq, (_bits(a) | _bits(b)).view(dt), r)
    if nan_prop:
        r = np.where(an | bn, np.array(np.nan, dt), r)
    else:
        r = np.where(an, b, np.where(bn, a, r))
    if dt == f64:
        return fp.nan_prop64(np.asarray(r, dt), a, b)
    return fp.canon_nan(np.asarray(r, dt))


def fmin(a, b, ftz=False, nan=False):
    if ftz:
        a, b = fp.ftz(a), fp.ftz(b)
    return _minmax(a, b, False, nan)


def fmax(a, b, ftz=False, nan=False):
    if ftz:
        a, b = fp.ftz(a), fp.ftz(b)
    return _minmax(a, b, True, nan)


def hminmax(a, b, fmt, is_max, nan=False):
    if fmt == "bf16":
        fa, fb = fp.bf16_bits_to_f32(a), fp.bf16_bits_to_f32(b)
        r = _minmax(fa, fb, is_max, nan)
        return fp.f32_to_bf16_bits(r)
    return _minmax(np.asarray(a, f16), np.asarray(b, f16), is_max, nan)


def testp(op, a):
    a = np.asarray(a)
    if op == "finite":
        return np.isfinite(a)
    if op == "infinite":
        return np.isinf(a)
    if op == "number":
        return ~np.isnan(a)
    if op == "notanumber":
        return np.isnan(a)
    tiny = np.finfo(a.dtype).tiny
    if op == "normal":        # a GPU counts zero as normal
        return np.isfinite(a) & ((np.abs(a) >= tiny) | (a == 0))
    if op == "subnormal":
        return (np.abs(a) < tiny) & (a != 0)
    raise ValueError(op)


# ------------------------------------------------------------------ comparisons

INT_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater,
    "hs": np.greater_equal,
}


def float_cmp(op, a, b):
    a, b = np.asarray(a), np.asarray(b)
    if op == "num":
        return ~(np.isnan(a) | np.isnan(b))
    if op == "nan":
        return np.isnan(a) | np.isnan(b)
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        r = INT_CMP[op](a, b)
        if op == "ne":                     # ordered: false when either is NaN
            r = r & ~(np.isnan(a) | np.isnan(b))
        return r
    if op in ("equ", "neu", "ltu", "leu", "gtu", "geu"):
        base = INT_CMP[op[:-1]](a, b)
        if op == "neu":
            return base                    # numpy's != is already true for NaN
        return base | np.isnan(a) | np.isnan(b)
    raise ValueError(op)
