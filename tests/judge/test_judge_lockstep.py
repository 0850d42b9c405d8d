"""Legacy warp-synchronous code: a ``volatile`` shared-memory reduction whose last warp has no
``__syncwarp`` (the CUDA samples' ``warpReduce`` before Volta). Its lanes must run together,
so the emulator's quarter-warp schedules make nvcc's own results differ between runs. The
judge then judges nvcc's code and every candidate with the lanes of each warp in step
(``Backend.lanes_in_step``), says so, and still catches a barrier dropped between warps; a
baseline that is non-deterministic for another reason (never-written shared memory) still
cannot be judged.

The kernel is ``reduce_volatile_f32`` of tests/passes/data/warp_shuffle_reductions.ptx (nvcc
13.0 output; its .cu is beside it)."""
from __future__ import annotations

import re

import pytest

from superopt.judge.backends.emulator import IN_STEP_ROTATION, EmulatorBackend, launch_plan
from superopt.judge.check import ACCEPTED, COULD_NOT_JUDGE, REJECTED, check
from tests.passes.data.unroll_tools import buf, emulator_available, find_kernel, load, scalar, spec

pytestmark = pytest.mark.skipif(not emulator_available(), reason="the CPU emulator needs numpy")

TEXT = load("warp_shuffle_reductions.ptx")
KERNEL = find_kernel(TEXT, "reduce_volatile_f32")


def _launch(block: int = 256, shared_bytes: int | None = None):
    return spec(KERNEL, [block, 1, 1], [f"cdiv(n, {2 * block})", 1, 1],
                [buf("in", "f32", "n"), buf("out", "f32", f"cdiv(n, {2 * block})", "out"),
                 scalar("n", "s32", 3000)], shared_bytes=4 * block if shared_bytes is None else shared_bytes)


def _entry_body(text: str) -> str:
    return re.search(r"\.entry " + re.escape(KERNEL) + r"\((.|\n)*?\n}\n", text).group(0)


def _with_body(new_body: str) -> str:
    return TEXT.replace(_entry_body(TEXT), new_body)


def test_the_in_step_schedules_leave_out_only_the_quarter_warps():
    assert IN_STEP_ROTATION and all(not s.startswith("quarters") for s in IN_STEP_ROTATION)
    be = EmulatorBackend()
    in_step = be.lanes_in_step()
    assert in_step is not None and in_step.lane_splits is False and be.lane_splits is True
    assert in_step.lanes_in_step() is None
    for i in range(6):
        plan = launch_plan(i, "zero", True, False, (300, 1, 1), (256, 1, 1), lane_splits=False)
        assert not any(s.startswith("quarters") for s in plan["schedule"])
    # with lane splits, two consecutive sets run every schedule, quarters included
    both = {s for i in (0, 1) for s in launch_plan(i, "zero", True, False, (4, 1, 1), (256, 1, 1))["schedule"]}
    assert {"quarters-up", "quarters-down"} <= both


@pytest.mark.parametrize("seed", [1, 2])
def test_warp_synchronous_nvcc_code_is_judged_with_lanes_in_step(seed):
    v = check(TEXT, TEXT, _launch(), backend="emulator", sets=2, seed=seed)
    assert v.status == ACCEPTED, v.summary()
    assert v.evidence.get("lanes_in_step") is True
    assert any("lanes of a warp run out of step" in n for n in v.evidence["notes"])
    assert "quarter warps" not in v.evidence["backend"]["schedule"]


def test_a_barrier_dropped_between_warps_is_still_rejected():
    body = _entry_body(TEXT)
    at = body.index("$L__BB4_7:\n\tbar.sync \t0;")
    dropped = body[:at] + body[at:].replace("\tbar.sync \t0;\n", "", 1)
    assert dropped.count("bar.sync") == body.count("bar.sync") - 1
    v = check(TEXT, _with_body(dropped), _launch(), backend="emulator", sets=2, seed=3)
    assert v.status == REJECTED, v.summary()


def test_other_non_determinism_still_cannot_be_judged():
    """The last read comes from a shared slot nothing wrote: no schedule makes that defined."""
    body = _entry_body(TEXT)
    unwritten = body.replace("ld.shared.f32 \t%f28, [sdata];", "ld.shared.f32 \t%f28, [sdata+1024];")
    assert unwritten != body
    base = _with_body(unwritten)
    v = check(base, base, _launch(shared_bytes=2048), backend="emulator", sets=2, seed=4)
    assert v.status == COULD_NOT_JUDGE, v.summary()
    assert "not deterministic" in v.reason
    assert not v.evidence.get("lanes_in_step")
