"""The misaligned set on a real GPU (superopt.judge.inputs.misalign): the GPU worker lays every
buffer of that set 4 (or 8) bytes past a 16-byte boundary through longer guard zones, its own
compare of a run's buffer with a kept copy goes byte by byte there (64-bit loads would fault),
and a float4 access nvcc's code cannot assume faults. Kernels and specs:
tests/judge/test_judge_misaligned.py. Needs an NVIDIA GPU."""
import pytest

from superopt.judge.check import ACCEPTED, REJECTED, check, run_baseline
from tests.judge.test_judge_misaligned import BASE, PAIR, QUAD, ptx

pytestmark = pytest.mark.gpu


def test_a_float4_access_nvcc_cannot_assume_is_rejected_on_a_gpu(gpu):
    v = check(BASE, ptx("vec4"), QUAD, backend=gpu, sets=3, seed=11)
    assert v.status == REJECTED and "4 bytes past a 16-byte boundary" in v.reason, v.reason
    w = check(BASE, ptx("vec4"), PAIR, backend=gpu, sets=3, seed=12)
    assert w.status == REJECTED and "8 bytes past a 16-byte boundary" in w.reason, w.reason


def test_right_candidates_are_accepted_with_the_misaligned_set_on_a_gpu(gpu):
    """nvcc's code against itself and the versioned float4 path, the baseline's runs reused: the
    candidates' outputs are compared with nvcc's on the GPU (kept copies, byte by byte on the
    misaligned set)."""
    bl = run_baseline(BASE, QUAD, backend=gpu, sets=3, seed=11)
    assert bl.evidence["misaligned"]["bytes"] == 4
    for cand in (BASE, ptx("versioned"), BASE):
        v = check(BASE, cand, QUAD, backend=gpu, baseline=bl)
        assert v.status == ACCEPTED, v.reason
    assert check(BASE, BASE, PAIR, backend=gpu, sets=3, seed=12).status == ACCEPTED
