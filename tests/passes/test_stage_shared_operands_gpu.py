"""stage-shared-operands on a real GPU: the chunk machines against nvcc's own code through the
judge (warps run out of step there, which the emulator's schedules only approximate), at 1024^2
and at sizes that are not multiples of the tile, launched with the block the rewrite is
specialised for and with another (nvcc's kept code), f32 and f64; and the timing of the naive
GEMM at 1024^3 (the speed goal of issue 27 is measured by bench/restructure's naivegemm).

Run on the H200 on 2026-12-02 (at 3f88f45): 7 passed; the timing printed speedup 0.199x (chunk 4)
and 0.211x (chunk 8): right, and five times slower (the pass is out of the default set)."""
from __future__ import annotations

import pytest

import ptx_ir
from superopt.passes import get_pass
from superopt.specs.launch_spec import LaunchSpec
from tests.passes.data.ptx_tools import load

pytestmark = pytest.mark.gpu

TEXT = ptx_ir.emit(load("stage_shared_operands.ptx"))


def _staged(kernel: str, block, chunk=4) -> str:
    module = ptx_ir.parse(TEXT)
    fn = module.function(kernel)
    assert get_pass("stage-shared-operands")(fn, block=block, chunk=chunk), kernel
    return ptx_ir.emit(module)


def _gemm_spec(kernel, elem, block, m, n, k):
    return LaunchSpec.from_dict({
        "kernel": kernel, "grid": [f"cdiv(N, {block[0]})", f"cdiv(M, {block[1]})", 1], "block": list(block),
        "params": [{"name": "A", "kind": "buffer", "type": elem, "length": "M*K", "direction": "in"},
                   {"name": "B", "kind": "buffer", "type": elem, "length": "K*N", "direction": "in"},
                   {"name": "C", "kind": "buffer", "type": elem, "length": "M*N", "direction": "out"},
                   {"name": "M", "kind": "scalar", "type": "s32", "value": m},
                   {"name": "N", "kind": "scalar", "type": "s32", "value": n},
                   {"name": "K", "kind": "scalar", "type": "s32", "value": k}]})


@pytest.mark.parametrize("kernel, elem", [("gemm_f32", "f32"), ("gemm_f64", "f64")])
@pytest.mark.parametrize("chunk", [4, 8])
def test_gemm_matches_nvcc_on_the_gpu(gpu, kernel, elem, chunk):
    from superopt.judge.check import check
    staged = _staged(kernel, (16, 16, 1), chunk)
    for launch in ((16, 16, 1), (32, 8, 1)):
        for m, n, k in ((1024, 1024, 1024), (1000, 1000, 1000), (37, 45, 29), (513, 77, 3)):
            v = check(TEXT, staged, _gemm_spec(kernel, elem, launch, m, n, k), backend=gpu, sets=2)
            assert v.status == "accepted", f"{m}x{n}x{k} block {launch}: {v.summary()}"


def test_matvec_matches_nvcc_on_the_gpu(gpu):
    from superopt.judge.check import check
    staged = _staged("matvec", (128, 1, 1))
    for launch in ((128, 1, 1), (256, 1, 1)):
        for m, k in ((4097, 1000), (300, 37)):
            spec = LaunchSpec.from_dict({
                "kernel": "matvec", "grid": [f"cdiv(M, {launch[0]})", 1, 1], "block": list(launch),
                "params": [{"name": "A", "kind": "buffer", "type": "f32", "length": "M*K", "direction": "in"},
                           {"name": "x", "kind": "buffer", "type": "f32", "length": "K", "direction": "in"},
                           {"name": "y", "kind": "buffer", "type": "f32", "length": "M", "direction": "out"},
                           {"name": "M", "kind": "scalar", "type": "s32", "value": m},
                           {"name": "K", "kind": "scalar", "type": "s32", "value": k}]})
            v = check(TEXT, staged, spec, backend=gpu, sets=2)
            assert v.status == "accepted", f"{m}x{k} block {launch}: {v.summary()}"


@pytest.mark.parametrize("chunk", [4, 8])
def test_gemm_timing_is_reported(gpu, chunk):
    """Not a goal, a measurement: the speed-up at 1024^3 (printed; pytest -s shows it)."""
    from superopt.judge.timing import time_pair
    staged = _staged("gemm_f32", (16, 16, 1), chunk)
    t = time_pair(TEXT, staged, _gemm_spec("gemm_f32", "f32", (16, 16, 1), 1024, 1024, 1024), backend=gpu, reps=30)
    print(f"chunk {chunk}: {t.summary()}")
    assert t.status == "ok", t.summary()
