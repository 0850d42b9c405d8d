"""stage-stores on a real GPU: the staged kernels against nvcc's own code through the judge.

The CPU emulator runs a block's threads in lockstep, so it cannot show a missing barrier or a
write-back that races with the staging; the GPU runs warps out of step. Each rewritten
fixture kernel (tests/passes/data/stage_stores.cu) is checked by the project's differential
judge on the GPU at sizes that are not multiples of the tile and large enough for many
resident blocks per SM, launched with the block it was specialised for and with another
block (which must run the kept original code). Speed is measured by bench/programs
(transpose), not here."""
from __future__ import annotations

import pytest

import ptx_ir
from superopt.passes import get_pass
from superopt.specs.launch_spec import LaunchSpec
from tests.passes.data.ptx_tools import load

pytestmark = pytest.mark.gpu

TEXT = ptx_ir.emit(load("stage_stores.ptx"))


def _staged(kernel: str, block) -> str:
    module = ptx_ir.parse(TEXT)
    fn = next(f for f in module.kernels if f.name == kernel)
    assert get_pass("stage-stores")(fn, block=block), f"stage-stores did not fire on {kernel}"
    return ptx_ir.emit(module)


def _transpose_spec(kernel, elem, tile, block, w, h, extra=()):
    return LaunchSpec.from_dict({
        "kernel": kernel, "grid": [f"cdiv(w, {tile})", f"cdiv(h, {tile})", 1], "block": list(block),
        "params": [{"name": "out", "kind": "buffer", "type": elem, "length": "w*h", "direction": "out"},
                   {"name": "in", "kind": "buffer", "type": elem, "length": "w*h", "direction": "in"},
                   {"name": "w", "kind": "scalar", "type": "s32", "value": w},
                   {"name": "h", "kind": "scalar", "type": "s32", "value": h}, *extra]})


CASES = [
    # kernel, element, tile, block it is specialised for, another block it is launched with
    ("transpose_naive_32x8", "f32", 32, (32, 8, 1), (32, 4, 1)),
    ("transpose_naive_16x16", "f32", 16, (16, 16, 1), (32, 8, 1)),
    ("transpose_naive_f64", "f64", 32, (32, 8, 1), (16, 16, 1)),
    ("transpose_u16", "u16", 16, (16, 16, 1), (32, 8, 1)),
    ("transpose_u8", "u8", 32, (32, 32, 1), (32, 8, 1)),
]


@pytest.mark.parametrize("kernel, elem, tile, block, other", CASES)
def test_staged_transposes_match_nvcc_on_the_gpu(gpu, kernel, elem, tile, block, other):
    from superopt.judge.check import check
    staged = _staged(kernel, block)
    for launch in (block, other):
        for w, h in ((2049, 1531), (1000, 33), (4096, 4096)):
            spec = _transpose_spec(kernel, elem, tile, launch, w, h)
            v = check(TEXT, staged, spec, backend=gpu, sets=3)
            assert v.status == "accepted", f"{w}x{h} block {launch}: {v.summary()}"


def test_staged_transpose_with_computed_values(gpu):
    from superopt.judge.check import check
    staged = _staged("transpose_scale", (32, 8, 1))
    extra = ({"name": "alpha", "kind": "scalar", "type": "f32", "value": 1.5},
             {"name": "beta", "kind": "scalar", "type": "f32", "value": -0.25})
    spec = _transpose_spec("transpose_scale", "f32", 32, (32, 8, 1), 3001, 777, extra)
    v = check(TEXT, staged, spec, backend=gpu, sets=3)
    assert v.status == "accepted", v.summary()


def test_staged_layout_permute_on_a_3d_grid(gpu):
    from superopt.judge.check import check
    staged = _staged("nchw_to_nhwc", (32, 8, 1))
    for launch in ((32, 8, 1), (64, 4, 1)):
        spec = LaunchSpec.from_dict({
            "kernel": "nchw_to_nhwc", "grid": ["cdiv(hw, 32)", "cdiv(c, 8)", 3], "block": list(launch),
            "params": [{"name": "out", "kind": "buffer", "type": "f32", "length": "3*c*hw", "direction": "out"},
                       {"name": "in", "kind": "buffer", "type": "f32", "length": "3*c*hw", "direction": "in"},
                       {"name": "c", "kind": "scalar", "type": "s32", "value": 67},
                       {"name": "hw", "kind": "scalar", "type": "s32", "value": 224 * 224}]})
        v = check(TEXT, staged, spec, backend=gpu, sets=3)
        assert v.status == "accepted", f"block {launch}: {v.summary()}"


def test_at_another_block_the_staged_kernel_times_close_to_nvcc(gpu):
    """Issue 24: stage-stores specialises for one block behind its %ntid test; at any other
    block nvcc's code runs. It is close to nvcc's, not equal: the staged kernel's static shared
    memory (12.7 KB at 32x8) is reserved at every block and lowers the kept copy's occupancy. On
    the H200 at 32x4 it measured 0.980x, slower beyond the spread (2026-12-01), which is what the
    search's timing at the program's other blocks (superopt.search.launch_shapes) exists to see:
    a staged candidate is not kept where the program may launch another block and it is slower
    there."""
    from superopt.judge.timing import time_pair
    staged = _staged("transpose_naive_32x8", (32, 8, 1))
    spec = _transpose_spec("transpose_naive_32x8", "f32", 32, (32, 4, 1), 4096, 4096)
    t = time_pair(TEXT, staged, spec, backend=gpu, reps=60)
    assert t.status == "ok" and 0.95 <= t.speedup <= 1.05 and not t.faster, t.summary()
