"""The GPU worker's test of "this buffer is unchanged" (run on the CPU: no CUDA needed)."""
from __future__ import annotations

import numpy as np
import pytest

from superopt.judge.backends._gpu_worker import _same_bytes


@pytest.mark.parametrize("n", [0, 1, 3, 8, 12, 30, 64, 1001])
@pytest.mark.parametrize("shift", [0, 1, 4])
def test_same_bytes_finds_any_changed_byte(n, shift):
    rng = np.random.default_rng(n + 7 * shift)
    store = rng.integers(0, 256, n + 16, dtype=np.uint8)
    a = store[shift:shift + n]                       # also misaligned views
    b = a.copy()
    assert _same_bytes(a, b)
    for k in range(n):
        c = b.copy()
        c[k] ^= 0x10
        assert not _same_bytes(a, c), k
    if n:
        assert not _same_bytes(a, b[:-1])


@pytest.mark.parametrize("extra", [0, 5])
def test_same_bytes_in_chunks_sees_every_chunk(extra):
    """Buffers of several compare chunks (the compare stops at the first changed chunk): a
    changed byte in the first, a middle and the last chunk, each chunk's edges."""
    from superopt.judge.backends._gpu_worker import _COMPARE_CHUNK
    n = 3 * _COMPARE_CHUNK + extra
    a = np.random.default_rng(extra).integers(0, 256, n, dtype=np.uint8)
    assert _same_bytes(a, a.copy())
    for k in (0, _COMPARE_CHUNK - 1, _COMPARE_CHUNK, 2 * _COMPARE_CHUNK + 3, n - 1):
        c = a.copy()
        c[k] ^= 1
        assert not _same_bytes(a, c), k
