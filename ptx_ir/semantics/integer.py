"""Integer and bit-manipulation semantics of PTX on numpy arrays (natural dtypes).

Arithmetic wraps modulo 2^n as on the GPU. Functions take and return arrays (or numpy
scalars) of the natural dtype of the instruction type (``int32`` for ``.s32``...).
"""
from __future__ import annotations

import numpy as np

from ptx_ir.semantics.types import UINT_OF_SIZE

u8, u16, u32, u64 = np.uint8, np.uint16, np.uint32, np.uint64
i32, i64 = np.int32, np.int64
M32 = u64(0xFFFFFFFF)


def _u(x):
    """Reinterpret as unsigned of the same width."""
    x = np.asarray(x)
    return x.view(UINT_OF_SIZE[x.dtype.itemsize])


def as_dtype(x, dt):
    return np.asarray(x).view(dt) if np.asarray(x).dtype.itemsize == np.dtype(dt).itemsize else np.asarray(x).astype(dt)


# ------------------------------------------------------------------ add/sub/mul

def add(a, b):
    return np.add(a, b)


def sub(a, b):
    return np.subtract(a, b)


def add_sat_s32(a, b):
    r = np.asarray(a, i64) + np.asarray(b, i64)
    return np.clip(r, -2**31, 2**31 - 1).astype(i32)


def sub_sat_s32(a, b):
    r = np.asarray(a, i64) - np.asarray(b, i64)
    return np.clip(r, -2**31, 2**31 - 1).astype(i32)


def add_cc(a, b, cin=None):
    """(sum, carry-out) of unsigned a + b (+ cin)."""
    ua, ub = _u(a), _u(b)
    r = ua + ub
    carry = r < ua
    if cin is not None:
        r2 = r + cin.astype(r.dtype)
        carry = carry | (r2 < r)
        r = r2
    return r.view(np.asarray(a).dtype), carry


def sub_cc(a, b, bin_=None):
    """(difference, borrow-out) of a - b (- bin)."""
    ua, ub = _u(a), _u(b)
    r = ua - ub
    borrow = ua < ub
    if bin_ is not None:
        bb = bin_.astype(r.dtype)
        borrow = borrow | (r < bb)
        r = r - bb
    return r.view(np.asarray(a).dtype), borrow


def mul_lo(a, b):
    return np.multiply(a, b)


def mul_wide(a, b):
    a = np.asarray(a)
    dt = {np.dtype(np.int16): i32, np.dtype(np.uint16): u32, np.dtype(np.int32): i64,
          np.dtype(np.uint32): u64}[a.dtype]
    return np.asarray(a, dt) * np.asarray(b, dt)


def _mulhi_u64(a, b):
    a, b = np.asarray(a, u64), np.asarray(b, u64)
    al, ah = a & M32, a >> u64(32)
    bl, bh = b & M32, b >> u64(32)
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> u64(32)) + (lh & M32) + (hl & M32)
    return hh + (lh >> u64(32)) + (hl >> u64(32)) + (mid >> u64(32))


def mul_hi(a, b):
    a = np.asarray(a)
    dt = a.dtype
    if dt.itemsize <= 4:
        wide = i64 if dt.kind == "i" else u64
        r = (np.asarray(a, wide) * np.asarray(b, wide)) >> (dt.itemsize * 8)
        return r.astype(dt)
    if dt == np.dtype(u64):
        return _mulhi_u64(a, b)
    ua, ub = a.view(u64), np.asarray(b).view(u64)
    h = _mulhi_u64(ua, ub)
    h = h - np.where(a < 0, ub, u64(0)) - np.where(np.asarray(b) < 0, ua, u64(0))
    return h.view(i64)


def mul24(a, b, hi=False):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "i":
        a24 = (np.asarray(a, i64) << 40) >> 40
        b24 = (np.asarray(b, i64) << 40) >> 40
        p = a24 * b24
        r = (p >> 16) if hi else p
        return (r & 0xFFFFFFFF).astype(u32).view(i32)
    p = (np.asarray(a, u64) & u64(0xFFFFFF)) * (np.asarray(b, u64) & u64(0xFFFFFF))
    r = (p >> u64(16)) if hi else p
    return (r & M32).astype(u32)


def sad(a, b, c):
    a = np.asarray(a)
    if a.dtype.kind == "i":
        d = np.abs(np.asarray(a, i64) - np.asarray(b, i64))
        return (d.astype(u64) + np.asarray(c).astype(a.dtype).view(UINT_OF_SIZE[a.dtype.itemsize])).astype(
            UINT_OF_SIZE[a.dtype.itemsize]).view(a.dtype)
    ua, ub = _u(a), _u(np.asarray(b))
    d = np.where(ua > ub, ua - ub, ub - ua)
    return d + np.asarray(c, d.dtype)


# ------------------------------------------------------------------ division

# What the GPU computes for a zero divisor (ptxas's expansion, recorded on an H200):
# the quotient is all ones (-1 when signed), the remainder the dividend.
def div(a, b):
    a, b = np.asarray(a), np.asarray(b)
    a, b = np.broadcast_arrays(a, b)
    dt = a.dtype
    if dt.kind == "u":
        zero = b == 0
        q = a // np.where(zero, dt.type(1), b)
        return np.where(zero, dt.type(np.iinfo(dt).max), q).astype(dt)
    ut = UINT_OF_SIZE[dt.itemsize]
    ua = np.where(a < 0, (-(a.view(ut))), a.view(ut)).astype(ut)
    ub = np.where(b < 0, (-(b.view(ut))), b.view(ut)).astype(ut)
    zero = ub == 0
    uq = ua // np.where(zero, ut(1), ub)
    neg = (a < 0) != (b < 0)
    q = np.where(neg, -uq, uq).astype(ut)
    q = np.where(zero, ut(np.iinfo(ut).max), q).astype(ut)
    return q.view(dt)


def rem(a, b):
    a, b = np.asarray(a), np.asarray(b)
    a, b = np.broadcast_arrays(a, b)
    dt = a.dtype
    if dt.kind == "u":
        zero = b == 0
        r = a % np.where(zero, dt.type(1), b)
        return np.where(zero, a, r).astype(dt)
    ut = UINT_OF_SIZE[dt.itemsize]
    ua = np.where(a < 0, (-(a.view(ut))), a.view(ut)).astype(ut)
    ub = np.where(b < 0, (-(b.view(ut))), b.view(ut)).astype(ut)
    zero = ub == 0
    ur = ua % np.where(zero, ut(1), ub)
    ur = np.where(zero, ua, ur).astype(ut)
    r = np.where(a < 0, -ur, ur).astype(ut)
    return r.view(dt)


# ------------------------------------------------------------------ min/max/abs/neg

def imin(a, b):
    return np.minimum(a, b)


def imax(a, b):
    return np.maximum(a, b)


def iabs(a):
    a = np.asarray(a)
    return np.where(a < 0, -a, a).astype(a.dtype)   # abs(INT_MIN) = INT_MIN


def ineg(a):
    a = np.asarray(a)
    return (-(_u(a))).view(a.dtype)


# ------------------------------------------------------------------ shifts

def shl(a, b):
    a = np.asarray(a)
    bits = a.dtype.itemsize * 8
    ua = _u(a)
    n = np.asarray(b, u32).astype(np.uint64)
    big = n >= bits
    r = ua << np.where(big, 0, n).astype(ua.dtype)
    return np.where(big, ua.dtype.type(0), r).astype(ua.dtype).view(a.dtype)


def shr(a, b):
    """Arithmetic for signed types, logical for .u/.b (the caller passes the right dtype)."""
    a = np.asarray(a)
    bits = a.dtype.itemsize * 8
    n = np.asarray(b, u32).astype(np.uint64)
    n = np.minimum(n, bits - 1 if a.dtype.kind == "i" else bits)
    big = n >= bits
    r = a >> np.where(big, 0, n).astype(a.dtype)
    if a.dtype.kind == "i":
        return r
    return np.where(big, a.dtype.type(0), r).astype(a.dtype)


def shf(a, b, c, left: bool, clamp: bool, bits=32):
    """Funnel shift of {b:a} (b high) by c; returns 32 bits."""
    a = np.asarray(a, u64) & M32
    b = np.asarray(b, u64) & M32
    n = np.asarray(c, u64) & M32
    n = np.minimum(n, u64(32)) if clamp else (n & u64(31))
    x = (b << u64(32)) | a
    if left:
        r = np.where(n == 32, a, (x << n) >> u64(32) & M32)
    else:
        r = np.where(n == 32, b, (x >> n) & M32)
    return r.astype(u32)


# ------------------------------------------------------------------ bit ops

def popc(a):
    return np.bitwise_count(_u(a)).astype(u32)


def _msb_pos(ua):
    """Position of the most significant set bit of unsigned ua (-1 for 0), as int64."""
    ua = np.asarray(ua)
    if ua.dtype.itemsize == 8:
        hi = (ua >> u64(32)).astype(u32)
        lo = (ua & M32).astype(u32)
        ph, pl = _msb_pos(hi), _msb_pos(lo)
        return np.where(hi != 0, ph + 32, pl)
    f = np.asarray(ua, np.float64)
    _, e = np.frexp(f)
    return np.where(ua == 0, -1, e.astype(np.int64) - 1)


def clz(a):
    ua = _u(np.asarray(a))
    bits = ua.dtype.itemsize * 8
    return (bits - 1 - _msb_pos(ua)).astype(u32)


def bfind(a, shiftamt=False):
    a = np.asarray(a)
    bits = a.dtype.itemsize * 8
    ua = _u(a)
    if a.dtype.kind == "i":
        ua = np.where(a < 0, ~ua, ua).astype(ua.dtype)
    p = _msb_pos(ua)
    if shiftamt:
        p = np.where(p < 0, -1, bits - 1 - p)
    return np.where(p < 0, u32(0xFFFFFFFF), p.astype(u32)).astype(u32)


_REV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=np.uint8)


def brev(a):
    a = np.asarray(a)
    ua = np.ascontiguousarray(_u(a))
    n = ua.dtype.itemsize
    by = ua.reshape(-1).view(u8).reshape(-1, n)[:, ::-1]
    r = _REV8[by].copy().view(ua.dtype).reshape(ua.shape)
    return r.view(a.dtype)


def bfe(a, b, c):
    a = np.asarray(a)
    bits = a.dtype.itemsize * 8
    signed = a.dtype.kind == "i"
    ua = _u(a).astype(u64)
    pos = np.asarray(b, u64) & u64(0xFF)
    ln = np.asarray(c, u64) & u64(0xFF)
    msb = bits - 1
    # sign bit: a[min(pos+len-1, msb)] when signed and len != 0
    sidx = np.minimum(pos + ln - u64(1), u64(msb))
    if signed:
        sbit = np.where(ln == 0, u64(0), (ua >> np.where(ln == 0, u64(0), sidx)) & u64(1))
    else:
        sbit = u64(0)
    take = np.where(pos > msb, u64(0), np.minimum(ln, u64(bits) - np.minimum(pos, u64(bits))))
    shifted = np.where(pos > msb, u64(0), ua >> np.minimum(pos, u64(63)))
    full = u64(0xFFFFFFFFFFFFFFFF)
    mask = np.where(take >= 64, full, (u64(1) << np.minimum(take, u64(63))) - u64(1))
    field = shifted & mask
    r = field | np.where(sbit != 0, ~mask, u64(0))
    ut = UINT_OF_SIZE[a.dtype.itemsize]
    return (r & (full >> u64(64 - bits))).astype(ut).view(a.dtype)


def bfi(a, b, c, d):
    """bfi f, a, b, c, d: insert low bits of a into b at position c, length d."""
    b = np.asarray(b)
    bits = b.dtype.itemsize * 8
    ut = UINT_OF_SIZE[b.dtype.itemsize]
    ua = _u(np.asarray(a)).astype(u64)
    ub = _u(b).astype(u64)
    pos = np.asarray(c, u64) & u64(0xFF)
    ln = np.asarray(d, u64) & u64(0xFF)
    inrange = pos < bits
    leff = np.where(inrange, np.minimum(ln, u64(bits) - np.minimum(pos, u64(bits))), u64(0))
    full = u64(0xFFFFFFFFFFFFFFFF)
    lmask = np.where(leff >= 64, full, (u64(1) << np.minimum(leff, u64(63))) - u64(1))
    sp = np.where(inrange, pos, u64(0))
    mask = lmask << sp
    r = (ub & ~mask) | ((ua << sp) & mask)
    return (r & (full >> u64(64 - bits))).astype(ut).view(b.dtype)


def prmt(a, b, c, mode=None):
    a = np.asarray(a, u32).astype(u64)
    b = np.asarray(b, u32).astype(u64)
    c = np.asarray(c, u32).astype(u64)
    x = a | (b << u64(32))                       # bytes 0..7
    a, b, c, x = np.broadcast_arrays(a, b, c, x)

    def byte(k):
        return (x >> (np.asarray(k, u64) * u64(8))) & u64(0xFF)

    out = np.zeros(x.shape, u64)
    if mode is None:
        for i in range(4):
            sel = (c >> u64(4 * i)) & u64(0xF)
            v = byte(sel & u64(7))
            v = np.where((sel & u64(8)) != 0, np.where((v & u64(0x80)) != 0, u64(0xFF), u64(0)), v)
            out |= v << u64(8 * i)
        return out.astype(u32)
    s = (c & u64(3)).astype(np.int64)
    for i in range(4):
        if mode == "f4e":
            k = (s + i) & 7
        elif mode == "b4e":
            k = (s - i) & 7
        elif mode == "rc8":
            k = s
        elif mode == "ecl":
            k = np.maximum(s, i)
        elif mode == "ecr":
            k = np.minimum(s, i)
        elif mode == "rc16":
            k = (s & 1) * 2 + (i & 1)
        else:
            raise ValueError(mode)
        out |= byte(k.astype(u64)) << u64(8 * i)
    return out.astype(u32)


def lop3(a, b, c, lut: int):
    ua, ub, uc = _u(np.asarray(a)), _u(np.asarray(b)), _u(np.asarray(c))
    ua, ub, uc = np.broadcast_arrays(ua, ub, uc)
    r = np.zeros(ua.shape, ua.dtype)
    for i in range(8):
        if (lut >> i) & 1:
            ta = ua if (0xF0 >> i) & 1 else ~ua
            tb = ub if (0xCC >> i) & 1 else ~ub
            tc = uc if (0xAA >> i) & 1 else ~uc
            r |= ta & tb & tc
    return r


def bmsk(a, b, clamp: bool):
    a = np.asarray(a, u64) & M32
    b = np.asarray(b, u64) & M32
    if clamp:
        pos, w = np.minimum(a, u64(32)), np.minimum(b, u64(32))
    else:
        pos, w = a & u64(31), b & u64(31)
    m = np.where(w >= 32, M32, (u64(1) << w) - u64(1))
    r = np.where(pos >= 32, u64(0), (m << np.minimum(pos, u64(31))) & M32)
    return r.astype(u32)


def szext(a, b, signed: bool, clamp: bool):
    a = np.asarray(a, u64) & M32
    b = np.asarray(b, u64) & M32
    n = np.minimum(b, u64(32)) if clamp else (b & u64(31))
    mask = np.where(n >= 32, M32, (u64(1) << n) - u64(1))
    v = a & mask
    if signed:
        sb = np.where(n == 0, u64(0), (a >> np.where(n == 0, u64(0), n - u64(1))) & u64(1))
        v = np.where((sb != 0) & (n < 32), v | (M32 & ~mask), v)
    return v.astype(u32).view(i32 if signed else u32)


def dp4a(a, b, c, sa: bool, sb: bool):
    a32, b32 = np.asarray(a, u32), np.asarray(b, u32)
    acc = np.asarray(c).astype(i64)
    for i in range(4):
        x = ((a32 >> u32(8 * i)) & u32(0xFF)).astype(i64)
        y = ((b32 >> u32(8 * i)) & u32(0xFF)).astype(i64)
        if sa:
            x = np.where(x >= 128, x - 256, x)
        if sb:
            y = np.where(y >= 128, y - 256, y)
        acc = acc + x * y
    return (acc & 0xFFFFFFFF).astype(u32)


def dp2a(a, b, c, sa: bool, sb: bool, hi: bool):
    a32, b32 = np.asarray(a, u32), np.asarray(b, u32)
    acc = np.asarray(c).astype(i64)
    for i in range(2):
        x = ((a32 >> u32(16 * i)) & u32(0xFFFF)).astype(i64)
        if sa:
            x = np.where(x >= 32768, x - 65536, x)
        bi = i + (2 if hi else 0)
        y = ((b32 >> u32(8 * bi)) & u32(0xFF)).astype(i64)
        if sb:
            y = np.where(y >= 128, y - 256, y)
        acc = acc + x * y
    return (acc & 0xFFFFFFFF).astype(u32)


# ------------------------------------------------------------------ one value, Python ints
#
# The same semantics for one value at a time, on Python ints: a value is the unsigned bit
# pattern of a ``bits``-wide register (0 <= v < 2**bits), ``signed`` says whether the
# instruction type is .sN. For callers that evaluate instructions millions of times on
# single values (the passes' prover, superopt.passes._loop_tools.int_eval; the spec tracer),
# where numpy scalars would cost ~20x. tests/emulator/test_int_scalar.py checks every
# function here against its array counterpart above.

def py_wrap(value: int, bits: int) -> int:
    """``value`` modulo 2**bits (the unsigned bit pattern)."""
    return value & ((1 << bits) - 1)


def py_signed(value: int, bits: int) -> int:
    """The bit pattern read as a two's-complement integer."""
    value = py_wrap(value, bits)
    return value - (1 << bits) if value >> (bits - 1) else value


def _py_ops(a: int, b: int, bits: int, signed: bool) -> tuple[int, int]:
    return (py_signed(a, bits), py_signed(b, bits)) if signed else (py_wrap(a, bits), py_wrap(b, bits))


def py_div(a: int, b: int, bits: int, signed: bool) -> int:
    """div: truncating; a zero divisor gives all ones (-1 when signed), as :func:`div`."""
    x, y = _py_ops(a, b, bits, signed)
    if y == 0:
        return (1 << bits) - 1
    q = abs(x) // abs(y)
    return py_wrap(q if (x < 0) == (y < 0) else -q, bits)


def py_rem(a: int, b: int, bits: int, signed: bool) -> int:
    """rem: the sign of the dividend; a zero divisor gives the dividend, as :func:`rem`."""
    x, y = _py_ops(a, b, bits, signed)
    if y == 0:
        return py_wrap(x, bits)
    r = abs(x) % abs(y)
    return py_wrap(-r if x < 0 else r, bits)


def py_mul_hi(a: int, b: int, bits: int, signed: bool) -> int:
    x, y = _py_ops(a, b, bits, signed)
    return py_wrap((x * y) >> bits, bits)


def py_mul_wide(a: int, b: int, bits: int, signed: bool) -> int:
    """mul.wide: the full product, 2*bits wide."""
    x, y = _py_ops(a, b, bits, signed)
    return py_wrap(x * y, 2 * bits)


def py_shl(a: int, n: int, bits: int) -> int:
    """shl: n is an unsigned 32-bit amount; n >= bits gives 0."""
    return py_wrap(a << min(py_wrap(n, 32), bits), bits)


def py_shr(a: int, n: int, bits: int, signed: bool) -> int:
    """shr: arithmetic when signed (clamped at bits-1), logical otherwise (0 past bits)."""
    n = py_wrap(n, 32)
    if signed:
        return py_wrap(py_signed(a, bits) >> min(n, bits - 1), bits)
    return py_wrap(a, bits) >> n if n < bits else 0


def py_min(a: int, b: int, bits: int, signed: bool) -> int:
    x, y = _py_ops(a, b, bits, signed)
    return py_wrap(min(x, y), bits)


def py_max(a: int, b: int, bits: int, signed: bool) -> int:
    x, y = _py_ops(a, b, bits, signed)
    return py_wrap(max(x, y), bits)


def py_abs(a: int, bits: int) -> int:
    """abs of a signed value; abs(INT_MIN) = INT_MIN."""
    return py_wrap(abs(py_signed(a, bits)), bits)


def py_neg(a: int, bits: int) -> int:
    return py_wrap(-a, bits)


def py_clz(a: int, bits: int) -> int:
    return bits - py_wrap(a, bits).bit_length()


def py_popc(a: int, bits: int) -> int:
    return py_wrap(a, bits).bit_count()


def py_compare(cmp: str, a: int, b: int, bits: int, signed: bool) -> bool:
    """setp's integer comparisons (eq ne lt le gt ge, and the unsigned lo ls hi hs)."""
    x, y = _py_ops(a, b, bits, signed)
    return {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y,
            "lo": x < y, "ls": x <= y, "hi": x > y, "hs": x >= y}[cmp]


def py_cvt_int(a: int, dbits: int, sbits: int, src_signed: bool) -> int:
    """cvt between integer types without .sat: sign- or zero-extend, then truncate."""
    v = py_signed(a, sbits) if src_signed else py_wrap(a, sbits)
    return py_wrap(v, dbits)


# two-source integer instructions by PTX opcode (mul is mul.lo), as f(a, b, bits, signed)
PY_BINOPS = {
    "add": lambda a, b, bits, s: py_wrap(a + b, bits),
    "sub": lambda a, b, bits, s: py_wrap(a - b, bits),
    "mul": lambda a, b, bits, s: py_wrap(a * b, bits),
    "and": lambda a, b, bits, s: py_wrap(a & b, bits),
    "or": lambda a, b, bits, s: py_wrap(a | b, bits),
    "xor": lambda a, b, bits, s: py_wrap(a ^ b, bits),
    "shl": lambda a, b, bits, s: py_shl(a, b, bits),
    "shr": py_shr, "min": py_min, "max": py_max, "div": py_div, "rem": py_rem,
}
