"""The kernels whose GPU outputs are recorded as fixtures (tests/emulator/golden/).

Each case names a kernel of a PTX file in golden/ (compiled from kernels/*.cu for
sm_90), a launch shape and its parameters. ``make_inputs(rng)`` gives the initial
contents of every buffer (outputs are pre-filled with 0xCD bytes); the recorder stores
the inputs with the outputs, so the tests never regenerate them.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

POISON = 0xCD


@dataclass
class Buf:
    name: str
    dtype: str
    count: int
    role: str = "in"            # in | out | inout


@dataclass
class Scalar:
    name: str
    dtype: str
    value: int | float


@dataclass
class Case:
    name: str
    ptx: str                    # file in golden/ (stem of kernels/*.cu)
    kernel: str
    grid: tuple
    block: tuple
    params: list
    make_inputs: Callable | None = None
    shared_bytes: int = 0
    seed: int = 0
    launches: int = 1           # launch this many times in a row (module state persists)

    def buffers(self):
        return [p for p in self.params if isinstance(p, Buf)]


# --------------------------------------------------------------------------- value mixes

def _f32_bits(vals):
    return np.asarray(vals, np.uint32).view(np.float32)


F32_SPECIAL = _f32_bits([
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
    0x7FFFFFFF, 0xFFBFFFFF, 0x7FA12345, 0xFFC01234, 0x00000001, 0x80000001, 0x007FFFFF,
    0x807FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000,
    0x3F000000, 0x40000000, 0x40400000, 0x3F800001, 0x3F7FFFFF, 0x4B800000, 0x4B800001,
    0x4EFFFFFF, 0x4F000000, 0xCF000000, 0x4F800000, 0x5F000000, 0xDF000000, 0x3EFFFFFF,
    0x3FC00000, 0x40200000, 0xBFC00000, 0x00400000, 0x34000000, 0x33800000, 0x477FE000,
    0x477FF000, 0x38800000, 0x33000000,
])
F64_SPECIAL = np.array([
    0x0, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000,
    0xFFF8000000000000, 0x7FF0000000000001, 0x7FFFFFFFFFFFFFFF, 0x7FF4000000012345,
    0xFFF8000000001234, 0x0000000000000001, 0x8000000000000001, 0x000FFFFFFFFFFFFF,
    0x0010000000000000, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x3FF0000000000000,
    0xBFF0000000000000, 0x3FE0000000000000, 0x3FF0000000000001, 0x3FEFFFFFFFFFFFFF,
    0x4340000000000000, 0x4340000000000001, 0x43E0000000000000, 0xC3E0000000000000,
    0x43F0000000000000, 0x41E0000000000000, 0xC1E0000000000000, 0x41EFFFFFFFE00000,
    0x47EFFFFFE0000000, 0x47EFFFFFF0000000, 0x36A0000000000000, 0x3690000000000000,
    0x3FF8000000000000, 0x4004000000000000, 0x380FFFFFE0000000, 0x3810000000000000,
    0x40EFFE0000000000, 0x40EFFF0000000000, 0x3E70000000000000,
], np.uint64).view(np.float64)


def f32_mix(rng, n):
    kind = rng.integers(0, 10, n)
    out = np.empty(n, np.float32)
    sp = kind < 2
    out[sp] = rng.choice(F32_SPECIAL, sp.sum())
    rb = (kind >= 2) & (kind < 5)
    out[rb] = rng.integers(0, 2**32, rb.sum(), dtype=np.uint64).astype(np.uint32).view(np.float32)
    nm = (kind >= 5) & (kind < 8)
    out[nm] = (rng.standard_normal(nm.sum()) * 10.0 ** rng.integers(-6, 7, nm.sum())).astype(np.float32)
    sm = kind >= 8
    out[sm] = (rng.integers(-12, 13, sm.sum()) / 2).astype(np.float32)
    return out


def f64_mix(rng, n):
    kind = rng.integers(0, 10, n)
    out = np.empty(n, np.float64)
    sp = kind < 2
    out[sp] = rng.choice(F64_SPECIAL, sp.sum())
    rb = (kind >= 2) & (kind < 5)
    out[rb] = rng.integers(0, 2**63, rb.sum(), dtype=np.uint64).view(np.float64) * rng.choice([-1, 1], rb.sum())
    nm = (kind >= 5) & (kind < 8)
    out[nm] = rng.standard_normal(nm.sum()) * 10.0 ** rng.integers(-12, 13, nm.sum())
    sm = kind >= 8
    out[sm] = rng.integers(-12, 13, sm.sum()) / 2
    return out


def related(rng, a, b, mix):
    """Make b partly depend on a: equal, negated, nearby values, to exercise cancellation."""
    b = b.copy()
    k = rng.integers(0, 8, a.size)
    eq = k == 0
    b[eq] = a[eq]
    ng = k == 1
    b[ng] = -a[ng]
    near = k == 2
    eps = np.finfo(a.dtype).eps
    with np.errstate(all="ignore"):
        b[near] = (a[near] * (1 + eps * rng.integers(-4, 5, near.sum()))).astype(a.dtype)
    return b


def fma_addend(rng, a, b, c):
    c = c.copy()
    k = rng.integers(0, 6, a.size)
    m = k == 0
    with np.errstate(all="ignore"):
        c[m] = -(a[m] * b[m])
    m = k == 1
    with np.errstate(all="ignore"):
        c[m] = -(a[m] * b[m]) * (1 + np.finfo(a.dtype).eps)
    return c


def f16_bits_mix(rng, n, specials):
    kind = rng.integers(0, 10, n)
    out = rng.integers(0, 2**16, n, dtype=np.uint32).astype(np.uint16)
    sp = kind < 3
    out[sp] = rng.choice(np.asarray(specials, np.uint16), sp.sum())
    sm = kind >= 7
    vals = (rng.integers(-40, 41, sm.sum()) / 4).astype(np.float32)
    out[sm] = vals.astype(np.float16).view(np.uint16) if specials is F16_SPECIAL else \
        (vals.view(np.uint32) >> 16).astype(np.uint16)
    return out


F16_SPECIAL = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7FFF, 0x0001, 0x8001,
               0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00, 0x3800, 0x3C01, 0x3BFF, 0x5BFF]
BF16_SPECIAL = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x7FFF, 0x0001, 0x8001,
                0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x3F80, 0xBF80, 0x3F00, 0x3F81, 0x3F7F]

I32_EDGE = np.array([0, 1, -1, 2, -2, -2**31, 2**31 - 1, -2**31 + 1, 0x7FFF, 0x8000, 0xFFFF,
                     0x10000, 31, 32, 33, 63, 64, 255, 256, 3, 7, -7, 1 << 24, (1 << 24) - 1], np.int64)


def i32_mix(rng, n, zeros=0.0):
    kind = rng.integers(0, 20, n)
    out = rng.integers(-2**31, 2**31, n, dtype=np.int64)
    e = kind < 3
    out[e] = rng.choice(I32_EDGE, e.sum())
    s = kind >= 13
    out[s] = rng.integers(-1000, 1001, s.sum())
    if zeros:
        z = rng.random(n) < zeros
        out[z] = 0
        m1 = rng.random(n) < zeros / 2
        out[m1] = -1
    return out.astype(np.int32)


def i64_mix(rng, n, zeros=0.0):
    kind = rng.integers(0, 20, n)
    out = rng.integers(-2**63, 2**63, n, dtype=np.int64)
    e = kind < 4
    edges = np.array([0, 1, -1, -2**63, 2**63 - 1, 2**32, 2**32 - 1, -2**32, 2**31, -2**31,
                      63, 64, 65, 127, 128, 2**53, 2**53 + 1, 2**62], np.int64)
    out[e] = rng.choice(edges, e.sum())
    m = (kind >= 4) & (kind < 8)
    out[m] = rng.integers(-2**31, 2**31, m.sum())
    s = kind >= 15
    out[s] = rng.integers(-1000, 1001, s.sum())
    if zeros:
        z = rng.random(n) < zeros
        out[z] = 0
        m1 = rng.random(n) < zeros / 2
        out[m1] = -1
    return out


# explicit (a, b) pairs at the start of every float input: signed zeros, NaN payloads
_PAIRS32 = [(0x00000000, 0x80000000), (0x80000000, 0x00000000), (0x80000000, 0x80000000),
            (0x7FC00000, 0x3F800000), (0x3F800000, 0x7FC00000), (0x7FA12345, 0xFFC01234),
            (0xFFC01234, 0x7FA12345), (0x7F800000, 0xFF800000), (0x7F800001, 0x3F800000),
            (0x00000001, 0x80000001), (0x007FFFFF, 0x00000001), (0x7F7FFFFF, 0x7F7FFFFF),
            (0x00800000, 0x80000001), (0x3F800000, 0xBF800000), (0xFFFFFFFF, 0x00000000),
            (0x00000000, 0x00000000)]
_PAIRS64 = [(0x0, 0x8000000000000000), (0x8000000000000000, 0x0),
            (0x8000000000000000, 0x8000000000000000), (0x7FF8000000000000, 0x3FF0000000000000),
            (0x3FF0000000000000, 0x7FF8000000000000), (0x7FF4000000012345, 0xFFF8000000001234),
            (0xFFF8000000001234, 0x7FF4000000012345), (0x7FF0000000000000, 0xFFF0000000000000),
            (0x7FF0000000000001, 0x3FF0000000000000), (0x1, 0x8000000000000001),
            (0x000FFFFFFFFFFFFF, 0x1), (0x7FEFFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF),
            (0x0010000000000000, 0x8000000000000001), (0x3FF0000000000000, 0xBFF0000000000000),
            (0xFFFFFFFFFFFFFFFF, 0x0), (0x0, 0x0)]


def _ew_float(dt, n):
    def make(rng):
        mix = f32_mix if dt == "f4" else f64_mix
        a, b, c = mix(rng, n), mix(rng, n), mix(rng, n)
        b = related(rng, a, b, mix)
        c = fma_addend(rng, a, b, c)
        pairs = _PAIRS32 if dt == "f4" else _PAIRS64
        ut = np.uint32 if dt == "f4" else np.uint64
        for j, (x, y) in enumerate(pairs):
            a.view(ut)[j], b.view(ut)[j] = x, y
            c.view(ut)[j] = y if j % 2 else x
            a.view(ut)[len(pairs) + j], b.view(ut)[len(pairs) + j] = y, x
        return {"A": a, "B": b, "C": c}
    return make


N_EW = 1024


def _ints(rng):
    a = i32_mix(rng, N_EW)
    b = i32_mix(rng, N_EW, zeros=0.1)
    b[:4] = [-1, -1, 0, 0]
    a[:4] = [-2**31, 5, -2**31, 7]
    return {"A": a, "B": b, "C": i32_mix(rng, N_EW)}


def _longs(rng):
    a = i64_mix(rng, N_EW)
    b = i64_mix(rng, N_EW, zeros=0.1)
    b[:4] = [-1, -1, 0, 0]
    a[:4] = [-2**63, 5, -2**63, 7]
    return {"A": a, "B": b, "C": i64_mix(rng, N_EW)}


def _cvt_float(rng):
    a = f32_mix(rng, N_EW)
    d = f64_mix(rng, N_EW)
    # values around integer and float32 rounding boundaries
    k = rng.integers(0, 4, N_EW) == 0
    d[k] = (rng.integers(-2**40, 2**40, k.sum()) / 2.0 ** rng.integers(0, 30, k.sum()))
    k2 = rng.integers(0, 6, N_EW) == 0
    a[k2] = (rng.integers(-2**20, 2**20, k2.sum()) / 4).astype(np.float32)
    return {"A": a, "D": d}


def _cvt_int(rng):
    s = i32_mix(rng, N_EW)
    l = i64_mix(rng, N_EW)
    k = rng.integers(0, 4, N_EW) == 0
    l[k] = rng.integers(-2**60, 2**60, k.sum()) >> rng.integers(0, 60, k.sum())
    return {"S": s, "L": l, "H": f16_bits_mix(rng, N_EW, F16_SPECIAL),
            "G": f16_bits_mix(rng, N_EW, BF16_SPECIAL)}


_PAIRS16 = [(0x0000, 0x8000), (0x8000, 0x0000), (0x7E00, 0x3C00), (0x3C00, 0x7E00),
            (0x7C01, 0xFE12), (0xFE12, 0x7C01), (0x7C00, 0xFC00), (0x0001, 0x8001),
            (0x7F80, 0xFF80), (0x7FC0, 0x3F80), (0x7F81, 0xFFC5), (0x3F80, 0xBF80)]


def _halves(rng):
    a = f16_bits_mix(rng, N_EW, F16_SPECIAL)
    b = f16_bits_mix(rng, N_EW, F16_SPECIAL)
    for j, (x, y) in enumerate(_PAIRS16):
        a[j], b[j] = x, y
        a[len(_PAIRS16) + j], b[len(_PAIRS16) + j] = y, x
    k = rng.integers(0, 6, N_EW) == 0
    b[k] = a[k]
    k = rng.integers(0, 6, N_EW) == 0
    b[k] = a[k] ^ 0x8000
    return {"A": a, "B": b, "C": f16_bits_mix(rng, N_EW, BF16_SPECIAL)}


def _warp(rng):
    n = 1024
    return {"V": rng.integers(-10**6, 10**6, n).astype(np.int32),
            "S": rng.integers(0, 2**16, n).astype(np.int32),
            "D": (rng.standard_normal(n) * 100).astype(np.float64)}


def _vote(rng):
    n = 1024
    p = rng.integers(0, 16, n).astype(np.int32)
    p[64:96] |= 3          # one warp where all hold
    p[96:128] = 0          # one warp where none hold
    v = rng.integers(-50, 50, n).astype(np.int32)
    v[128:160] = 5         # a uniform warp
    return {"V": v, "P": p}


def _reduce(rng):
    n = 5000
    return {"in": rng.integers(-10**6, 10**6, n).astype(np.int32),
            "fin": (rng.standard_normal(n) * 10).astype(np.float32)}


def _histo(rng):
    n = 3000
    words = np.array([0x80000000, 0x7FFFFFFF, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0, 5, 3, 0,
                      0xDEADBEEF, 0], np.uint32)
    v = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    v[rng.random(n) < 0.5] &= 0xFFFF
    return {"in": v, "gh": np.zeros(37 + 64, np.uint32), "words": words,
            "w64": np.array([0, 2**63], np.uint64), "fsum": np.zeros(2, np.float32),
            "dsum": np.zeros(1, np.float64)}


def _grid2d(rng):
    return {"in": rng.standard_normal(50 * 37).astype(np.float32)}


def _memory(rng):
    n = 1024
    return {"v4": rng.standard_normal(4 * n).astype(np.float32),
            "v2": rng.integers(-2**31, 2**31, 2 * n, dtype=np.int64).astype(np.int32),
            "d2": rng.standard_normal(2 * n) * 1e3,
            "bytes": rng.integers(0, 256, n).astype(np.uint8),
            "shorts": rng.integers(-2**15, 2**15, n).astype(np.int16)}


def _transpose(rng):
    return {"in": rng.standard_normal(100 * 70).astype(np.float32)}


def _barrier_loop(rng):
    return {"in": rng.integers(-2**20, 2**20, 96 * 6).astype(np.int32)}


def _dyn(rng):
    return {"in": rng.standard_normal(2000) * 100}


def _last_block(rng):
    return {"in": rng.integers(-1000, 1000, 5000).astype(np.int32)}


E = N_EW
G_EW = ((E + 127) // 128,)

CASES = [
    Case("f32_ops", "float_ops", "f32_ops", G_EW, (128,),
         [Buf("A", "f4", E), Buf("B", "f4", E), Buf("C", "f4", E), Buf("out", "f4", 64 * E, "out"),
          Scalar("n", "i4", E)], _ew_float("f4", E), seed=1),
    Case("f64_ops", "float_ops", "f64_ops", G_EW, (128,),
         [Buf("A", "f8", E), Buf("B", "f8", E), Buf("C", "f8", E), Buf("out", "f8", 42 * E, "out"),
          Scalar("n", "i4", E)], _ew_float("f8", E), seed=2),
    Case("i32_ops", "int_ops", "i32_ops", G_EW, (128,),
         [Buf("A", "i4", E), Buf("B", "i4", E), Buf("C", "i4", E), Buf("out", "u4", 86 * E, "out"),
          Scalar("n", "i4", E)], _ints, seed=3),
    Case("i64_ops", "int_ops", "i64_ops", G_EW, (128,),
         [Buf("A", "i8", E), Buf("B", "i8", E), Buf("C", "i8", E), Buf("out", "u8", 48 * E, "out"),
          Scalar("n", "i4", E)], _longs, seed=4),
    Case("cvt_from_float", "convert", "cvt_from_float", G_EW, (128,),
         [Buf("A", "f4", E), Buf("D", "f8", E), Buf("o32", "u4", 36 * E, "out"),
          Buf("o64", "u8", 20 * E, "out"), Buf("o16", "u2", 16 * E, "out"), Scalar("n", "i4", E)],
         _cvt_float, seed=5),
    Case("cvt_from_int", "convert", "cvt_from_int", G_EW, (128,),
         [Buf("S", "i4", E), Buf("L", "i8", E), Buf("H", "u2", E), Buf("G", "u2", E),
          Buf("o32", "u4", 26 * E, "out"), Buf("o64", "u8", 16 * E, "out"),
          Buf("o16", "u2", 16 * E, "out"), Scalar("n", "i4", E)], _cvt_int, seed=6),
    Case("f16_ops", "half_ops", "f16_ops", G_EW, (128,),
         [Buf("A", "u2", E), Buf("B", "u2", E), Buf("C", "u2", E), Buf("out", "u2", 50 * E, "out"),
          Scalar("n", "i4", E)], _halves, seed=7),
    Case("shfl_ops", "warp", "shfl_ops", (8,), (128,),
         [Buf("V", "i4", 1024), Buf("S", "i4", 1024), Buf("D", "f8", 1024),
          Buf("out", "i4", 24 * 1024, "out"), Buf("outd", "f8", 1024, "out"), Scalar("n", "i4", 1024)],
         _warp, seed=8),
    Case("vote_ops", "warp", "vote_ops", (8,), (128,),
         [Buf("V", "i4", 1024), Buf("P", "i4", 1024), Buf("out", "u4", 22 * 1024, "out"),
          Scalar("n", "i4", 1024)], _vote, seed=9),
    Case("tree_reduce", "shared", "tree_reduce", (20,), (256,),
         [Buf("in", "i4", 5000), Buf("fin", "f4", 5000), Buf("out", "i4", 20, "out"),
          Buf("fout", "f4", 20, "out"), Scalar("n", "i4", 5000)], _reduce, seed=10),
    Case("dyn_reduce", "shared", "dyn_reduce", (16,), (128,),
         [Buf("in", "f8", 2000), Buf("out", "f8", 16, "out"), Buf("counts", "i4", 48, "out"),
          Scalar("n", "i4", 2000)], _dyn, shared_bytes=128 * 8, seed=11),
    Case("transpose", "shared", "transpose", (4, 3), (32, 8),
         [Buf("in", "f4", 7000), Buf("out", "f4", 7000, "out"), Scalar("w", "i4", 100),
          Scalar("h", "i4", 70)], _transpose, seed=12),
    Case("barrier_loop", "shared", "barrier_loop", (6,), (96,),
         [Buf("in", "i4", 576), Buf("out", "i4", 576, "out"), Scalar("iters", "i4", 5)],
         _barrier_loop, seed=13),
    Case("histo", "atomics", "histo", (12,), (256,),
         [Buf("in", "i4", 3000), Buf("gh", "u4", 101, "inout"), Buf("words", "u4", 12, "inout"),
          Buf("w64", "u8", 2, "inout"), Buf("fsum", "f4", 2, "inout"), Buf("dsum", "f8", 1, "inout"),
          Scalar("n", "i4", 3000), Scalar("bins", "i4", 37)], _histo, seed=14),
    Case("last_block_sum", "atomics", "last_block_sum", (40,), (128,),
         [Buf("in", "i4", 5000), Buf("partial", "i4", 40, "out"), Buf("total", "i4", 1, "out"),
          Scalar("n", "i4", 5000)], _last_block, seed=15, launches=2),
    Case("control", "control", "control", (16,), (64,),
         [Buf("in", "i4", 1000), Buf("out", "i4", 10 * 1000, "out"), Buf("out64", "i8", 2000, "out"),
          Buf("outf", "f4", 1000, "out"), Scalar("n", "i4", 1000)], None, seed=16),
    Case("grid2d", "control", "grid2d", (4, 5), (16, 8),
         [Buf("in", "f4", 50 * 37), Buf("out", "f4", 50 * 37 * 3, "out"), Scalar("w", "i4", 50),
          Scalar("h", "i4", 37), Scalar("reps", "i4", 2)], _grid2d, seed=17),
    Case("memory_ops", "memory", "memory_ops", (8,), (128,),
         [Buf("v4", "f4", 4096), Buf("v2", "i4", 2048), Buf("d2", "f8", 2048), Buf("bytes", "u1", 1024),
          Buf("shorts", "i2", 1024), Buf("outf", "f4", 8 * 1024, "out"), Buf("outi", "i4", 5 * 1024, "out"),
          Buf("outb", "u1", 2048, "out"), Scalar("n", "i4", 1024)], _memory, seed=18),
]


def _control_inputs(rng):
    n = 1000
    v = rng.integers(-5000, 5000, n).astype(np.int32)
    big = rng.random(n) < 0.3
    v[big] = rng.integers(-2**31, 2**31, int(big.sum()), dtype=np.int64).astype(np.int32)
    return {"in": v}


for _c in CASES:
    if _c.name == "control":
        _c.make_inputs = _control_inputs


def case(name: str) -> Case:
    for c in CASES:
        if c.name == name:
            return c
    raise KeyError(name)


def initial_buffers(c: Case, rng) -> dict:
    """Initial contents of every buffer: inputs from make_inputs, outputs poisoned."""
    given = c.make_inputs(rng) if c.make_inputs else {}
    out = {}
    for b in c.buffers():
        dt = np.dtype(b.dtype)
        if b.name in given:
            a = np.asarray(given[b.name]).astype(dt) if np.asarray(given[b.name]).dtype != dt else np.asarray(given[b.name])
            a = np.ascontiguousarray(a).reshape(-1)
            if a.size != b.count:
                raise ValueError(f"{c.name}.{b.name}: {a.size} values, {b.count} expected")
        else:
            a = np.full(b.count * dt.itemsize, POISON, np.uint8).view(dt)
        out[b.name] = a
    return out


def scalar_bytes(s: Scalar) -> bytes:
    if s.dtype == "bytes":
        return bytes(s.value)
    return np.asarray(s.value, np.dtype(s.dtype)).tobytes()


def scalar_arg(s: Scalar):
    """The scalar as a kernel argument: a numpy scalar, or raw bytes (by-value structs)."""
    if s.dtype == "bytes":
        return bytes(s.value)
    return np.asarray(s.value, np.dtype(s.dtype))[()]


# --------------------------------------------------------------------------- batch 2

def _cp_async(rng):
    n = 512
    return {"in": rng.standard_normal(4 * n).astype(np.float32),
            "in2": rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)}


def _struct_param(rng):
    return {"sel": rng.integers(0, 2**16, 1000).astype(np.int32)}


def _table_bytes() -> bytes:
    w = (np.arange(16, dtype=np.float32) * 0.75 - 3).astype(np.float32)
    idx = np.array([3, -1, 4, 1, -5, 9, 2, -6], np.int32)
    return w.tobytes() + idx.tobytes() + np.float64(0.125).tobytes()


def _half2(rng):
    n = 1000
    return {"a": f16_bits_mix(rng, 2 * n, F16_SPECIAL), "b": f16_bits_mix(rng, 2 * n, F16_SPECIAL),
            "acc": np.zeros(32, np.uint16), "bacc": np.zeros(16, np.uint16)}


def _fptr(rng):
    n = 1000
    return {"in": (rng.standard_normal(n) * 10).astype(np.float32),
            "sel": rng.integers(0, 100, n).astype(np.int32)}


def _syncwarp(rng):
    return {"in": rng.integers(-1000, 1000, 256).astype(np.int32)}


def _debug_mul_add(rng):
    n = 1000
    a, b, c = (f32_mix(rng, n) for _ in range(3))
    c = fma_addend(rng, a, b, c)
    d = f64_mix(rng, n)
    return {"a": a, "b": b, "c": c, "d": d}


CASES += [
    Case("cp_async_copy", "features", "cp_async_copy", (4,), (128,),
         [Buf("in", "f4", 2048), Buf("out", "f4", 2048, "out"), Buf("in2", "i4", 512),
          Buf("out2", "i4", 512, "out"), Scalar("n", "i4", 512)], _cp_async, seed=19),
    Case("struct_param", "features", "struct_param", (8,), (128,),
         [Scalar("tab", "bytes", _table_bytes()), Buf("sel", "i4", 1000), Buf("out", "f4", 1000, "out"),
          Scalar("n", "i4", 1000)], _struct_param, seed=20),
    Case("half2_ops", "features", "half2_ops", (8,), (128,),
         [Buf("a", "u2", 2000), Buf("b", "u2", 2000), Buf("sum", "u2", 2000, "out"),
          Buf("masks", "u4", 3000, "out"), Buf("acc", "u2", 32, "inout"), Buf("bacc", "u2", 16, "inout"),
          Scalar("n", "i4", 1000)], _half2, seed=21),
    Case("fptr_table", "features", "fptr_table", (8,), (128,),
         [Buf("in", "f4", 1000), Buf("sel", "i4", 1000), Buf("out", "f4", 1000, "out"), Scalar("n", "i4", 1000)],
         _fptr, seed=22),
    Case("syncwarp_masks", "features", "syncwarp_masks", (2,), (128,),
         [Buf("in", "i4", 256), Buf("out", "i4", 256, "out")], _syncwarp, seed=23),
    Case("debug_mul_add", "debug_mul_add", "debug_mul_add", (8,), (128,),
         [Buf("a", "f4", 1000), Buf("b", "f4", 1000), Buf("c", "f4", 1000), Buf("d", "f8", 1000),
          Buf("out", "f4", 1000, "out"), Buf("outd", "f8", 1000, "out"), Scalar("n", "i4", 1000)],
         _debug_mul_add, seed=24),
]

# The benchmark kernels (bench/kernels/kernels.cu, specs in bench/kernels/specs.toml) at
# small sizes, with inputs from the judge's own generator (superopt.judge.inputs).
BENCH_SIZES = {
    "scale4": {"n": 4099}, "axpby4": {"n": 4099}, "saxpy": {"n": 4099},
    "gemv_rows": {"rows": 67, "cols": 61}, "bicg_cols": {"rows": 61, "cols": 67},
    "gemm_naive": {"M": 33, "N": 35, "K": 17}, "gemm_tiled": {"M": 33, "N": 35, "K": 17},
    "reduce_tree": {"n": 5003}, "reduce_int_tail": {"n": 5003}, "histogram256": {"n": 5003},
    "transpose_naive": {"rows": 45, "cols": 47}, "stencil2d": {"w": 47, "h": 45},
    "stencil3d": {"nx": 17, "ny": 13, "nz": 9}, "softmax_rows": {"rows": 63, "cols": 40},
    "layernorm_rows": {"rows": 63, "cols": 40}, "scan_block": {"n": 3001},
    "conv1d": {"n": 4099, "taps": 9},
}


def _bench_case(name: str, seed: int) -> Case:
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    if root not in sys.path:
        sys.path.insert(0, root)
    from superopt.specs.launch_spec import Scalar as SScalar, load_specs
    specs = load_specs(os.path.join(here, "..", "..", "bench", "kernels", "specs.toml"))
    spec = specs[name].resolved(BENCH_SIZES[name])
    params = []
    for p in spec.params:
        if isinstance(p, SScalar):
            params.append(Scalar(p.name, p.elem.dtype.str[1:] if p.elem.name != "bf16" else "u2", p.value))
        else:
            role = {"in": "in", "out": "out", "inout": "inout"}[p.direction]
            params.append(Buf(p.name, p.elem.dtype.str[1:], p.length, role))

    def make(rng, spec=specs[name]):
        from superopt.judge.inputs import make_input_set
        s = make_input_set(spec, seed, 0, scalars=BENCH_SIZES[name])
        return {b.name: s.data[b.name] for b in s.spec.buffers if b.direction != "out"}
    return Case(f"bench_{name}", "bench_kernels", name, tuple(spec.grid), tuple(spec.block), params, make,
                shared_bytes=spec.shared_bytes, seed=seed)


def bench_cases() -> list:
    return [_bench_case(n, 100 + i) for i, n in enumerate(BENCH_SIZES)]


try:
    CASES += bench_cases()
except Exception:          # superopt not importable: the recorder still has the others
    pass
