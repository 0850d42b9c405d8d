"""The GPU worker's own helper kernels (``_gpu_worker.UTIL_PTX``) on the CPU emulator: the
device-side compare of a kept input with a run's buffer and the kept copies' checksum
(superopt.judge.backends.resident), at sizes with and without a tail past the last 64-bit
word, with more threads than words and fewer. On a GPU: tests/judge/test_resident_gpu.py."""
from __future__ import annotations

import numpy as np
import pytest

from superopt.judge.backends._gpu_worker import UTIL_PTX
from superopt.judge.emulator.runner import LoadedModule

SIZES = [0, 1, 7, 8, 9, 1000, 4099]
SHAPES = [((3, 1, 1), (64, 1, 1)), ((1, 1, 1), (32, 1, 1))]


def _differ(a: np.ndarray, b: np.ndarray, grid, block, shift: int = 0) -> int:
    """``shift``: ``a`` starts that many bytes past an aligned allocation (a misaligned set's
    buffer, superopt.judge.inputs.misalign)."""
    dev = LoadedModule(UTIL_PTX)
    n = a.nbytes
    pa, pb, pf = dev.alloc(max(n, 1) + shift) + shift, dev.alloc(max(n, 1)), dev.alloc(4)
    dev.heap.write(pa, a.tobytes())
    dev.heap.write(pb, b.tobytes())
    dev.heap.write(pf, bytes(4))
    dev.launch("superopt_bytes_differ", grid=grid, block=block,
               params=[np.uint64(pa), np.uint64(pb), np.uint64(n), np.uint64(pf)])
    return int(np.frombuffer(dev.heap.read(pf, 4), np.uint32)[0])


def _checksum(a: np.ndarray, grid, block) -> int:
    dev = LoadedModule(UTIL_PTX)
    n = a.nbytes
    pa, po = dev.alloc(max(n, 1)), dev.alloc(8)
    dev.heap.write(pa, a.tobytes())
    dev.heap.write(po, bytes(8))
    dev.launch("superopt_checksum", grid=grid, block=block, params=[np.uint64(pa), np.uint64(n), np.uint64(po)])
    return int(np.frombuffer(dev.heap.read(po, 8), np.uint64)[0])


def _formula(a: np.ndarray) -> int:
    """sum of w_i * (2i + 1) over the 64-bit words, plus byte_k * (k + 1) * 2^40 for the tail, mod 2^64."""
    n = a.nbytes
    words = n // 8
    total = 0
    for i in range(words):
        total += int.from_bytes(a[8 * i:8 * i + 8].tobytes(), "little") * (2 * i + 1)
    for k in range(8 * words, n):
        total += int(a[k]) * ((k + 1) << 40)
    return total % (1 << 64)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("grid,block", SHAPES)
def test_compare_sees_equal_bytes_and_every_changed_byte(n, grid, block):
    a = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    assert _differ(a, a.copy(), grid, block) == 0
    for k in sorted({0, n - 1, n // 2, 8 * (n // 8)} & set(range(n))):
        b = a.copy()
        b[k] ^= 0x10
        assert _differ(a, b, grid, block) == 1, k


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("shift", [1, 4])
def test_compare_of_a_buffer_past_an_8_byte_boundary(n, shift):
    """A misaligned set's buffer (every buffer 4 bytes past a 16-byte boundary) compared with a
    kept, aligned copy: byte by byte (64-bit loads there fault), every byte seen."""
    a = np.random.default_rng(n + 7).integers(0, 256, n, dtype=np.uint8)
    for grid, block in SHAPES:
        assert _differ(a, a.copy(), grid, block, shift) == 0
        for k in sorted({0, n - 1, n // 2} & set(range(n))):
            b = a.copy()
            b[k] ^= 0x40
            assert _differ(a, b, grid, block, shift) == 1, (k, grid)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("grid,block", SHAPES)
def test_checksum_is_its_formula_and_sees_a_changed_byte(n, grid, block):
    a = np.random.default_rng(n + 1).integers(0, 256, n, dtype=np.uint8)
    got = _checksum(a, grid, block)
    assert got == _formula(a)
    for k in sorted({0, n - 1, 8 * (n // 8)} & set(range(n))):
        b = a.copy()
        b[k] ^= 0x01
        assert _checksum(b, grid, block) != got, k
