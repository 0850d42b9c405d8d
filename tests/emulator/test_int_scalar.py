"""The Python-int entry points of ptx_ir.semantics.integer (py_*) agree with the numpy
functions the emulator runs, bit for bit, on edge and random values of every width."""
import random

import numpy as np
import pytest

from ptx_ir.semantics import integer as I
from ptx_ir.semantics.types import SINT_OF_SIZE, UINT_OF_SIZE


def _values(bits, n=60, seed=0):
    rng = random.Random(seed + bits)
    top = 1 << bits
    edge = [0, 1, 2, 3, 7, top - 1, top - 2, top >> 1, (top >> 1) - 1, (top >> 1) + 1, bits, bits - 1]
    return [v % top for v in edge] + [rng.randrange(top) for _ in range(n)]


def _arr(values, bits, signed):
    u = np.array(values, UINT_OF_SIZE[bits // 8])
    return u.view(SINT_OF_SIZE[bits // 8]) if signed else u


def _bits(arr):
    a = np.asarray(arr)
    return [int(x) for x in a.view(UINT_OF_SIZE[a.dtype.itemsize]).ravel()]


CASES = [(bits, signed) for bits in (8, 16, 32, 64) for signed in (False, True)]


@pytest.mark.parametrize("bits,signed", CASES)
@pytest.mark.parametrize("name,arrayf", [
    ("div", I.div), ("rem", I.rem), ("min", I.imin), ("max", I.imax), ("add", I.add),
    ("sub", I.sub), ("mul", I.mul_lo), ("and", np.bitwise_and), ("or", np.bitwise_or),
    ("xor", np.bitwise_xor),
])
def test_binops_match_arrays(bits, signed, name, arrayf):
    vals = _values(bits)
    pairs = [(a, b) for a in vals[:24] for b in vals[:24]] + list(zip(vals, reversed(vals)))
    a = _arr([p[0] for p in pairs], bits, signed)
    b = _arr([p[1] for p in pairs], bits, signed)
    with np.errstate(all="ignore"):
        want = _bits(arrayf(a, b))
    got = [I.PY_BINOPS[name](x, y, bits, signed) for x, y in pairs]
    assert got == want


@pytest.mark.parametrize("bits,signed", CASES)
def test_mul_hi_wide_shifts_match_arrays(bits, signed):
    vals = _values(bits)
    pairs = [(a, b) for a in vals[:20] for b in vals[:20]]
    a = _arr([p[0] for p in pairs], bits, signed)
    b = _arr([p[1] for p in pairs], bits, signed)
    assert [I.py_mul_hi(x, y, bits, signed) for x, y in pairs] == _bits(I.mul_hi(a, b))
    if bits in (16, 32):
        assert [I.py_mul_wide(x, y, bits, signed) for x, y in pairs] == _bits(I.mul_wide(a, b))
    amounts = [0, 1, bits - 1, bits, bits + 1, 200, (1 << 32) - 1]
    for n in amounts:
        nn = np.full(len(vals), n, np.uint32)
        av = _arr(vals, bits, signed)
        assert [I.py_shl(x, n, bits) for x in vals] == _bits(I.shl(av, nn)), n
        assert [I.py_shr(x, n, bits, signed) for x in vals] == _bits(I.shr(av, nn)), n


@pytest.mark.parametrize("bits", (8, 16, 32, 64))
def test_unary_match_arrays(bits):
    vals = _values(bits)
    s = _arr(vals, bits, True)
    u = _arr(vals, bits, False)
    assert [I.py_abs(x, bits) for x in vals] == _bits(I.iabs(s))
    assert [I.py_neg(x, bits) for x in vals] == _bits(I.ineg(s))
    assert [I.py_clz(x, bits) for x in vals] == _bits(I.clz(u))
    assert [I.py_popc(x, bits) for x in vals] == _bits(I.popc(u))


def test_zero_divisor_and_overflow():
    assert I.py_div(5, 0, 32, False) == 0xFFFFFFFF and I.py_div(5, 0, 32, True) == 0xFFFFFFFF
    assert I.py_rem(5, 0, 32, False) == 5 and I.py_rem(0xFFFFFFFB, 0, 32, True) == 0xFFFFFFFB
    assert I.py_div(0x80000000, 0xFFFFFFFF, 32, True) == 0x80000000      # INT_MIN / -1
    assert I.py_rem(0x80000000, 0xFFFFFFFF, 32, True) == 0
    assert I.py_rem(I.py_wrap(-7, 32), 2, 32, True) == I.py_wrap(-1, 32)   # sign of the dividend
    assert I.py_cvt_int(0x80, 32, 8, True) == 0xFFFFFF80 and I.py_cvt_int(0x80, 32, 8, False) == 0x80
    assert I.py_compare("lt", 0xFFFFFFFF, 0, 32, True) and not I.py_compare("lo", 0xFFFFFFFF, 0, 32, False)
