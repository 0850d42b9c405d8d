"""The emulator's schedules: min-PC (threads at the smallest program counter together) and one
warp at a time (``warps-up``/``warps-down``). A GPU may run a block's warps in any order between
barriers; min-PC keeps them in step, which hides a missing ``bar.sync``. The judge repeats each
input set with a serial schedule for kernels whose warps share memory or barriers."""
import numpy as np
import pytest

from superopt.judge.backends.emulator import SERIAL_MAX_WARPS, _schedule
from superopt.judge.emulator.runner import SCHEDULES, LoadedModule

# nvcc -arch=sm_90 -ptx of:
#   extern "C" __global__ void block_reverse(const float *in, float *out) {
#     __shared__ float s[256];
#     int t = threadIdx.x, b = blockIdx.x * blockDim.x;
#     s[t] = in[b + t];
#     __syncthreads();
#     out[b + t] = s[blockDim.x - 1 - t];
#   }
REVERSE = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry block_reverse(
	.param .u64 block_reverse_param_0,
	.param .u64 block_reverse_param_1
)
{
	.reg .f32 	%f<3>;
	.reg .b32 	%r<12>;
	.reg .b64 	%rd<8>;
	.shared .align 4 .b8 _ZZ13block_reverseE1s[1024];
	ld.param.u64 	%rd1, [block_reverse_param_0];
	ld.param.u64 	%rd2, [block_reverse_param_1];
	cvta.to.global.u64 	%rd3, %rd2;
	cvta.to.global.u64 	%rd4, %rd1;
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mad.lo.s32 	%r4, %r2, %r3, %r1;
	mul.wide.s32 	%rd5, %r4, 4;
	add.s64 	%rd6, %rd4, %rd5;
	ld.global.f32 	%f1, [%rd6];
	shl.b32 	%r5, %r1, 2;
	mov.u32 	%r6, _ZZ13block_reverseE1s;
	add.s32 	%r7, %r6, %r5;
	st.shared.f32 	[%r7], %f1;
	bar.sync 	0;
	not.b32 	%r8, %r1;
	add.s32 	%r9, %r3, %r8;
	shl.b32 	%r10, %r9, 2;
	add.s32 	%r11, %r6, %r10;
	ld.shared.f32 	%f2, [%r11];
	add.s64 	%rd7, %rd3, %rd5;
	st.global.f32 	[%rd7], %f2;
	ret;
}
"""
NO_BARRIER = REVERSE.replace("bar.sync \t0;", "")


def _run(ptx: str, schedule: str, blocks: int = 3, threads: int = 256) -> np.ndarray:
    n = blocks * threads
    data = np.arange(n, dtype=np.float32) + 0.5
    dev = LoadedModule(ptx)
    inp, out = dev.alloc(n * 4, 256), dev.alloc(n * 4, 256)
    dev.heap.write(inp, data.view(np.uint8))
    dev.heap.write(out, np.zeros(n * 4, np.uint8))
    dev.launch("block_reverse", (blocks, 1, 1), (threads, 1, 1), [inp, out], schedule=schedule, seed=5)
    return dev.heap.read(out, n * 4).view(np.float32).copy()


def test_every_schedule_runs_a_correct_kernel_the_same():
    want = (np.arange(3 * 256, dtype=np.float32) + 0.5).reshape(3, 256)[:, ::-1].reshape(-1)
    assert NO_BARRIER != REVERSE
    for schedule in SCHEDULES:
        assert np.array_equal(_run(REVERSE, schedule), want), schedule


def test_a_missing_barrier_shows_only_when_warps_run_out_of_step():
    """min-PC runs every store before any load (all lanes in step): the race does not show.
    One warp at a time, the first warp reads slots the later warps have not written (and the
    last warp, run first, reads the first warps' slots): the result changes."""
    right = _run(REVERSE, "min-pc")
    assert np.array_equal(_run(NO_BARRIER, "min-pc"), right)
    for schedule in ("warps-up", "warps-down"):
        assert not np.array_equal(_run(NO_BARRIER, schedule), right), schedule


def test_an_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="schedule"):
        _run(REVERSE, "random")


def test_which_launches_run_one_warp_at_a_time():
    g, b = (4, 1, 1), (256, 1, 1)
    assert _schedule(0, "zero", True, g, b) == "warps-up"
    assert _schedule(1, "zero", True, g, b) == "warps-down"
    assert _schedule(0, "random", True, g, b) == "min-pc"          # the first launch of a set
    assert _schedule(0, "zero", False, g, b) == "min-pc"           # no shared memory, no barrier
    big = (SERIAL_MAX_WARPS // 8 + 1, 1, 1)
    assert _schedule(0, "zero", True, big, b) == "min-pc"          # too many warps to run serially


def test_the_judge_rejects_a_candidate_without_its_barrier():
    from superopt.judge.check import check
    from superopt.specs.launch_spec import LaunchSpec
    spec = LaunchSpec.from_dict({"kernel": "block_reverse", "grid": [3, 1, 1], "block": [256, 1, 1], "params": [
        {"name": "in", "kind": "buffer", "type": "f32", "length": 768, "direction": "in"},
        {"name": "out", "kind": "buffer", "type": "f32", "length": 768, "direction": "out"}]})
    assert check(REVERSE, REVERSE, spec, backend="emulator", sets=2).status == "accepted"
    v = check(REVERSE, NO_BARRIER, spec, backend="emulator", sets=2)
    assert v.status == "rejected", v.summary()
