"""The interval domain's arithmetic: canonical w-bit values and intervals on int64 arrays.

A register of w bits holds, per lane, an interval ``[lo, hi]`` of its *canonical* (signed)
values; exact values have ``lo == hi``. The helpers here wrap, normalise and widen such
intervals and give the interval images of the integer operations the tracer models. Exact
integer semantics (what ``div``/``rem`` compute) come from :mod:`ptx_ir.semantics.integer`;
the PTX type sets from the one type table :mod:`ptx_ir.types`.
"""
from __future__ import annotations

import numpy as np

from ptx_ir import types as ptx_types
from ptx_ir.nodes import type_size
from ptx_ir.semantics import integer as int_sem

# --------------------------------------------------------------------------- address map
PARAM_STRIDE = 1 << 41          # pointer param k lives at (k+1) * 2**41, offsets |o| < 2**40
SYM_BASE = 1 << 50              # module .global/.const variable j at SYM_BASE + (j+1) * 2**36
SYM_STRIDE = 1 << 36
SHARED_WIN = 1 << 51            # generic address of shared byte a (32-bit) is SHARED_WIN + a
SHARED_STRIDE = 1 << 21         # shared variable j at (j+1) * 2**21 (32-bit shared address)
LOCAL_WIN = (1 << 51) + (1 << 44)
LOCAL_END = (1 << 51) + (1 << 45)
BIG = 1 << 62                   # "unbounded" for 64-bit values
I64 = np.int64

# Integer types the domain tracks (int64 lanes hold at most 64 bits) and float types it does
# not track at all: both from the one type table.
INT_TYPES = frozenset(t for t in ptx_types.INT_TYPES if ptx_types.TYPES[t].bits <= 64)
FLOAT_TYPES = ptx_types.FLOAT_TYPES


def _width_of_type(t: str | None) -> int:
    if t is None:
        return 32
    if t == ".pred":
        return 1
    return type_size(t) * 8


def _signed_type(t: str | None) -> bool:
    return bool(t) and t.startswith(".s")


def _wrap(x: np.ndarray, w: int) -> np.ndarray:
    """Exact values to the canonical (signed) representation of a w-bit register."""
    if w >= 64:
        return x
    half = I64(1 << (w - 1))
    mask = I64((1 << w) - 1)
    return ((x + half) & mask) - half


def _unsigned_exact(x: np.ndarray, w: int) -> np.ndarray:
    """Exact canonical values as unsigned w-bit numbers (w < 64), int64."""
    if w >= 64:
        return x
    return x & I64((1 << w) - 1)


def _norm_interval(lo: np.ndarray, hi: np.ndarray, w: int):
    """Float64 (or int) interval bounds to canonical int64 bounds for a w-bit register."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if w >= 64:
        bad = (lo < -BIG) | (hi > BIG) | np.isnan(lo) | np.isnan(hi)
        lo = np.where(bad, -BIG, np.floor(lo))
        hi = np.where(bad, BIG, np.ceil(hi))
        return lo.astype(I64), hi.astype(I64)
    half = float(1 << (w - 1))
    full = float(1 << w)
    olo = np.floor(lo)
    ohi = np.ceil(hi)
    fits = (olo >= -half) & (ohi <= half - 1)
    upper = (olo >= half) & (ohi <= full - 1)
    lower = (olo >= -full) & (ohi < -half)
    rlo = np.where(fits, olo, np.where(upper, olo - full, np.where(lower, olo + full, -half)))
    rhi = np.where(fits, ohi, np.where(upper, ohi - full, np.where(lower, ohi + full, half - 1)))
    return rlo.astype(I64), rhi.astype(I64)


def _full(w: int, n: int):
    if w >= 64:
        return np.full(n, -BIG, I64), np.full(n, BIG, I64)
    if w == 1:
        return np.zeros(n, I64), np.ones(n, I64)
    return np.full(n, -(1 << (w - 1)), I64), np.full(n, (1 << (w - 1)) - 1, I64)


def _type_range(t: str) -> tuple[int, int]:
    """Value range of a loaded value of PTX type t, canonical in its own width."""
    w = _width_of_type(t)
    if t in (".u8", ".u16", ".u32") or (t.startswith(".b") and w < 32):
        return 0, (1 << w) - 1
    if w >= 64:
        return -BIG, BIG
    return -(1 << (w - 1)), (1 << (w - 1)) - 1


def _unsigned_view(lo, hi, w):
    """Interval (canonical signed) seen as unsigned w-bit numbers (float64 arrays)."""
    lo = lo.astype(np.float64)
    hi = hi.astype(np.float64)
    if w >= 64:
        neg = lo < 0
        return np.where(neg, 0.0, lo), np.where(neg, float(BIG), hi)
    full = float(1 << w)
    # the low w bits of every value in [lo, hi]: one contiguous range unless it wraps
    mlo = np.mod(lo, full)
    mhi = np.mod(hi, full)
    whole = (hi - lo >= full) | (mlo > mhi)
    return np.where(whole, 0.0, mlo), np.where(whole, full - 1, mhi)




def _uv(lo, hi, w):
    return _unsigned_view(np.asarray(lo), np.asarray(hi), w)


def _mul_iv(uns: bool, w: int):
    def iv(al, ah, bl, bh):
        if uns and w < 64:
            al, ah = _uv(al, ah, w)
            bl, bh = _uv(bl, bh, w)
        c = [al * bl, al * bh, ah * bl, ah * bh]
        return np.minimum.reduce(c), np.maximum.reduce(c)
    return iv


def _mulhi(a, b, w, uns):
    if w <= 32:
        if uns:
            return ((_unsigned_exact(a, w).astype(np.uint64) * _unsigned_exact(b, w).astype(np.uint64)) >> np.uint64(w)).astype(I64)
        return np.right_shift(a * b, w)
    # 64-bit: 32-bit limbs
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a0, a1 = ua & m32, ua >> s32
    b0, b1 = ub & m32, ub >> s32
    p00 = a0 * b0
    p01 = a0 * b1
    p10 = a1 * b0
    p11 = a1 * b1
    mid = (p00 >> s32) + (p01 & m32) + (p10 & m32)
    hi = p11 + (p01 >> s32) + (p10 >> s32) + (mid >> s32)
    if not uns:
        hi = hi - np.where(a < 0, ub, np.uint64(0)) - np.where(b < 0, ua, np.uint64(0))
    return hi.view(I64)


def _rewidth(lo, hi, w, wd, signed):
    """A w-bit result into a wd-bit register (ld/cvt style: zero/sign extension)."""
    if wd > w and not signed and w < 64:
        ex = lo == hi
        u = _unsigned_exact(lo, w)
        ulo, uhi = _unsigned_view(lo, hi, w)
        return np.where(ex, u, ulo.astype(I64)), np.where(ex, u, uhi.astype(I64))
    if wd < w:
        ex = lo == hi
        r = _wrap(lo, wd)
        nlo, nhi = _norm_interval(lo, hi, wd)
        return np.where(ex, r, nlo), np.where(ex, r, nhi)
    return lo, hi


def _pred_combine(kind, alo, ahi, blo, bhi):
    if kind == "and":
        return alo & blo, ahi & bhi
    if kind == "or":
        return alo | blo, ahi | bhi
    ex = (alo == ahi) & (blo == bhi)
    r = alo ^ blo
    return np.where(ex, r, 0), np.where(ex, r, 1)


def _const(v: int, w: int) -> int:
    v &= (1 << 64) - 1
    if w < 64:
        v &= (1 << w) - 1
        if v >= 1 << (w - 1):
            v -= 1 << w
        return v
    return v - (1 << 64) if v >= 1 << 63 else v


def _fit(lo, hi, w):
    """Canonical w-bit values: exact lanes wrapped, intervals normalised."""
    if w >= 64:
        return lo, hi
    ex = lo == hi
    r = _wrap(lo, w)
    nlo, nhi = _norm_interval(lo, hi, w)
    return np.where(ex, r, nlo), np.where(ex, r, nhi)


# --------------------------------------------------------------------------- exact div/rem
_NATURAL = {(8, False): np.uint8, (8, True): np.int8, (16, False): np.uint16, (16, True): np.int16,
            (32, False): np.uint32, (32, True): np.int32, (64, False): np.uint64, (64, True): np.int64}


def _natural(x: np.ndarray, w: int, signed: bool) -> np.ndarray:
    """Canonical int64 values of a w-bit register as the natural numpy dtype of the type."""
    dt = _NATURAL[(w, signed)]
    return _wrap(np.asarray(x, I64), w).astype(_NATURAL[(w, True)]).view(dt)


def exact_div(a: np.ndarray, b: np.ndarray, w: int, signed: bool) -> np.ndarray:
    """PTX ``div`` on canonical w-bit values (ptx_ir's semantics); int64, not yet wrapped."""
    r = int_sem.div(_natural(a, w, signed), _natural(b, w, signed))
    return r.view(I64) if w == 64 else r.astype(I64)


def exact_rem(a: np.ndarray, b: np.ndarray, w: int, signed: bool) -> np.ndarray:
    """PTX ``rem`` on canonical w-bit values (ptx_ir's semantics); int64, not yet wrapped."""
    r = int_sem.rem(_natural(a, w, signed), _natural(b, w, signed))
    return r.view(I64) if w == 64 else r.astype(I64)
