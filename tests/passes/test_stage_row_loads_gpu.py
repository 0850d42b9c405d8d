"""stage-row-loads on a real GPU: the staged row walks against nvcc's own code through the judge,
and their speed.

The CPU emulator runs warps in an order it chooses (the CPU tests also run them one at a time up
and down); the GPU runs them out of step and holds exited threads its own way. Each rewritten
fixture kernel (tests/passes/data/stage_row_loads.cu) is checked by the project's differential
judge on the GPU at sizes where n is not a multiple of the unroll or the chunk and rows are not
a multiple of the block, large enough for many resident blocks per SM, launched with the block
it was specialised for and with another block (which runs the kept original code).

Run on the H200 on 2026-12-02 (at a9d0660): every check REJECTED the staged kernel (e.g.
row_matvec_f32 at 4097x1031, block 128: y[4096] differs, the one row of the last block, whose
other 127 threads return before the loop), and every staged kernel timed 3-6x SLOWER than
nvcc's (row_matvec_f32 0.19x). The emulator accepts the same kernels: its schedules do not
reproduce what the GPU does there. The pass is out of the search's default set until both are
fixed; these tests are strict xfails so that a fix shows here."""
from __future__ import annotations

import pytest

import ptx_ir
from superopt.passes import get_pass
from superopt.specs.launch_spec import LaunchSpec
from tests.passes.data.ptx_tools import load

pytestmark = pytest.mark.gpu

TEXT = ptx_ir.emit(load("stage_row_loads.ptx"))
PASS = "stage-row-loads"


def _staged(kernel: str, block) -> str:
    module = ptx_ir.parse(TEXT)
    fn = next(f for f in module.kernels if f.name == kernel)
    assert get_pass(PASS)(fn, block=block), f"{PASS} did not fire on {kernel}"
    return ptx_ir.emit(module)


def _buf(name, t, length, direction="in"):
    return {"name": name, "kind": "buffer", "type": t, "length": length, "direction": direction}


def _s32(name, value):
    return {"name": name, "kind": "scalar", "type": "s32", "value": value}


def _spec(kernel, block, m, n):
    t = "f64" if kernel.endswith("f64") or kernel == "row_sum_rolled" else "f32"
    grid = [f"cdiv(m, {block[0]})", 1, 1]
    if kernel.startswith("row_matvec"):
        params = [_buf("A", t, "m*n"), _buf("x", t, "n"), _buf("y", t, "m", "out"), _s32("m", m), _s32("n", n)]
    elif kernel == "row_mean_var":
        params = [_buf("A", t, "m*n"), _buf("mean", t, "m", "out"), _buf("var", t, "m", "out"),
                  _s32("m", m), _s32("n", n)]
    else:
        params = [_buf("A", t, "m*n"), _buf("out", t, "m", "out"), _s32("m", m), _s32("n", n)]
    return LaunchSpec.from_dict({"kernel": kernel, "grid": grid, "block": list(block), "params": params})


KERNELS = ["row_matvec_f32", "row_matvec_f64", "row_sum", "row_max", "row_mean_var", "row_sum_rolled"]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("block, other", [((128, 1, 1), (256, 1, 1)), ((256, 1, 1), (128, 1, 1))])
@pytest.mark.xfail(strict=True, reason="H200 2026-12-02: rejected by the judge (a wrong row where a block's "
                   "other threads returned before the loop)")
def test_staged_row_walks_match_nvcc_on_the_gpu(gpu, kernel, block, other):
    from superopt.judge.check import check
    staged = _staged(kernel, block)
    for launch in (block, other):
        for m, n in ((4097, 1031), (1000, 37), (4096, 4096)):
            v = check(TEXT, staged, _spec(kernel, launch, m, n), backend=gpu, sets=3)
            assert v.status == "accepted", f"{m}x{n} block {launch}: {v.summary()}"


@pytest.mark.parametrize("kernel, block", [("row_matvec_f32", (128, 1, 1)), ("row_matvec_f64", (128, 1, 1)),
                                           ("row_sum", (256, 1, 1)), ("row_max", (128, 1, 1))])
@pytest.mark.xfail(strict=True, reason="H200 2026-12-02: the staged kernels ran 3-6x slower than nvcc's")
def test_staged_row_walks_are_faster(gpu, kernel, block):
    """The issue's goal is 3x on row walks (32x over-fetching). Measured here, asserted only
    faster beyond the spread; the speedup goes in the failure message and the summary."""
    from superopt.judge.timing import time_pair
    staged = _staged(kernel, block)
    t = time_pair(TEXT, staged, _spec(kernel, block, 16384, 1024), backend=gpu, reps=60)
    print(kernel, block, t.summary())
    assert t.status == "ok" and t.faster, t.summary()
