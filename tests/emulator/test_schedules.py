"""The emulator's schedules: min-PC (threads at the smallest program counter together) and one
warp at a time (``warps-up``/``warps-down``). A GPU may run a block's warps in any order between
barriers; min-PC keeps them in step, which hides a missing ``bar.sync``. The judge repeats each
input set with a serial schedule for kernels whose warps share memory or barriers."""
import numpy as np
import pytest

from superopt.judge.backends.emulator import (SERIAL_MAX_WARPS, SERIAL_ROTATION, SERIAL_SAMPLE_WARPS, _schedule,
                                              launch_plan)
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


def test_which_launches_run_serially():
    g, b = (4, 1, 1), (256, 1, 1)
    assert _schedule(0, "zero", True, g, b) == "warps-up"
    assert _schedule(1, "zero", True, g, b) == "quarters-up"
    assert _schedule(2, "zero", True, g, b) == "interleave"
    assert _schedule(3, "zero", True, g, b) == "quarters-down"
    assert _schedule(4, "zero", True, g, b) == "warps-down"
    assert _schedule(0, "random", True, g, b) == "min-pc"          # the first launch of a set
    assert _schedule(0, "zero", False, g, b) == "min-pc"           # no shared memory, no barrier
    # the serially run blocks take every schedule in turn, from the set's
    assert launch_plan(1, "zero", True, False, g, b)["schedule"] == SERIAL_ROTATION[1:] + SERIAL_ROTATION[:1]
    assert "serial_warps" not in launch_plan(0, "zero", True, False, g, b)        # small: every block
    big = (SERIAL_MAX_WARPS // 8 + 1, 1, 1)
    plan = launch_plan(0, "zero", True, False, big, b)
    assert plan["serial_warps"] == SERIAL_SAMPLE_WARPS and plan["schedule"][0] == "warps-up"   # a sample
    # block orders only where a block may read what another writes
    assert "block_order" not in launch_plan(0, "random", True, False, g, b)
    orders = {launch_plan(i, f, False, True, g, b).get("block_order", "up") for i in range(3)
              for f in ("random", "zero")}
    assert orders == {"up", "down", "random"}
    assert launch_plan(0, "random", False, True, g, b) == {"schedule": "min-pc"}      # the natural one first


def test_the_judge_rejects_a_candidate_without_its_barrier():
    from superopt.judge.check import check
    from superopt.specs.launch_spec import LaunchSpec
    spec = LaunchSpec.from_dict({"kernel": "block_reverse", "grid": [3, 1, 1], "block": [256, 1, 1], "params": [
        {"name": "in", "kind": "buffer", "type": "f32", "length": 768, "direction": "in"},
        {"name": "out", "kind": "buffer", "type": "f32", "length": 768, "direction": "out"}]})
    assert check(REVERSE, REVERSE, spec, backend="emulator", sets=2).status == "accepted"
    v = check(REVERSE, NO_BARRIER, spec, backend="emulator", sets=2)
    assert v.status == "rejected", v.summary()


# ---------------------------------------------------------------- issue 25: more schedules
HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"


def _kernel(body: str, pre: str = "", directives: str = "") -> str:
    return (HEAD + pre + f".visible .entry k(.param .u64 out){directives}\n{{\n"
            ".reg .pred %p<8>;\n.reg .b32 %r<32>;\n.reg .b64 %rd<16>;\n"
            "ld.param.u64 %rd1, [out];\ncvta.to.global.u64 %rd1, %rd1;\nmov.u32 %r1, %tid.x;\n"
            "mov.u32 %r2, %ctaid.x;\nmov.u32 %r3, %ntid.x;\nmad.lo.s32 %r4, %r2, %r3, %r1;\n"
            "mul.wide.u32 %rd2, %r4, 4;\nadd.s64 %rd3, %rd1, %rd2;\n" + body + "\nret;\n}\n")


def _launch(ptx: str, blocks: int, threads: int, seed=5, words=1, **kw) -> tuple[np.ndarray, dict]:
    n = blocks * threads * words
    dev = LoadedModule(ptx)
    out = dev.alloc(4 * n)
    dev.heap.write(out, np.zeros(n, np.uint32))
    stats = dev.launch("k", (blocks, 1, 1), (threads, 1, 1), [out], seed=seed, **kw)
    return dev.heap.read(out, 4 * n).view(np.uint32).copy(), stats


# each lane writes its slot, then reads the slot 8 lanes up (in its warp): right only once the
# whole warp has written, which __syncwarp (bar.warp.sync) guarantees
WARP_EXCHANGE = """
    shl.b32 %r5, %r1, 2;
    mov.u32 %r6, s;
    add.s32 %r7, %r6, %r5;
    add.s32 %r8, %r1, 100;
    st.shared.u32 [%r7], %r8;
    SYNC
    and.b32 %r9, %r1, -32;
    add.s32 %r10, %r1, 8;
    and.b32 %r10, %r10, 31;
    add.s32 %r10, %r10, %r9;
    shl.b32 %r11, %r10, 2;
    add.s32 %r12, %r6, %r11;
    ld.shared.u32 %r13, [%r12];
    st.global.u32 [%rd3], %r13;"""
SMEM = ".shared .align 4 .b8 s[1024];\n"


def test_quarter_warps_show_a_warp_exchange_without_syncwarp():
    synced = _kernel(WARP_EXCHANGE.replace("SYNC", "bar.warp.sync -1;"), SMEM)
    racy = _kernel(WARP_EXCHANGE.replace("SYNC", ""), SMEM)
    want = (np.arange(256) & ~31) + ((np.arange(256) + 8) & 31) + 100
    for schedule in SCHEDULES:
        assert np.array_equal(_launch(synced, 1, 256, schedule=schedule)[0], want), schedule
    for schedule in ("min-pc", "warps-up", "warps-down", "interleave"):     # a warp in step
        assert np.array_equal(_launch(racy, 1, 256, schedule=schedule)[0], want), schedule
    for schedule in ("quarters-up", "quarters-down"):
        assert not np.array_equal(_launch(racy, 1, 256, schedule=schedule)[0], want), schedule


def test_shuffles_and_votes_complete_under_every_schedule():
    body = """
    mov.u32 %r5, %r1;
    shfl.sync.bfly.b32 %r6, %r5, 16, 31, -1;
    add.s32 %r5, %r5, %r6;
    shfl.sync.bfly.b32 %r6, %r5, 1, 31, -1;
    add.s32 %r5, %r5, %r6;
    setp.gt.u32 %p1, %r1, 40;
    vote.sync.ballot.b32 %r7, %p1, -1;
    add.s32 %r5, %r5, %r7;
    st.global.u32 [%rd3], %r5;"""
    ptx = _kernel(body, SMEM)
    want = _launch(ptx, 2, 128, schedule="min-pc")[0]
    for schedule in SCHEDULES:
        assert np.array_equal(_launch(ptx, 2, 128, schedule=schedule)[0], want), schedule


# warp 0 (thread 0) zeroes a shared word and puts its value back; the other warps read it
ZERO_RESTORE = """
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra L1;
    st.shared.u32 [s], 7;
L1:
    bar.sync 0;
    setp.lt.u32 %p2, %r1, 32;
    @!%p2 bra READ;
    @%p1 bra DONE;
    st.shared.u32 [s], 0;
    st.shared.u32 [s], 7;
    bra.uni DONE;
READ:
    ld.shared.u32 %r5, [s];
    st.global.u32 [%rd3], %r5;
DONE:"""


def test_interleaving_at_stores_shows_a_value_briefly_wrong():
    ptx = _kernel(ZERO_RESTORE, SMEM)
    want = np.where(np.arange(128) >= 32, 7, 0)
    for schedule in ("min-pc", "warps-up", "warps-down", "quarters-up", "quarters-down"):
        assert np.array_equal(_launch(ptx, 1, 128, schedule=schedule)[0], want), schedule
    got = _launch(ptx, 1, 128, schedule="interleave")[0]
    assert not np.array_equal(got, want) and set(got[32:].tolist()) <= {0, 7}


# each block stores out[i] = i + 1, then out[n + i] = out[i] + out[i - ntid]: the element the
# block before it stored (a race: nothing orders blocks); in step and in order the previous
# block has always stored already
PREVIOUS_BLOCK = """
    add.s32 %r5, %r4, 1;
    st.global.u32 [%rd3], %r5;
    mov.u32 %r20, %nctaid.x;
    mul.lo.s32 %r21, %r20, %r3;
    mul.wide.u32 %rd6, %r21, 4;
    add.s64 %rd7, %rd3, %rd6;
    mov.u32 %r6, 0;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra STORE;
    mul.wide.u32 %rd4, %r3, 4;
    sub.s64 %rd5, %rd3, %rd4;
    ld.volatile.global.u32 %r6, [%rd5];
STORE:
    add.s32 %r7, %r5, %r6;
    st.global.u32 [%rd7], %r7;"""


def test_block_orders_show_a_block_reading_another_blocks_output():
    ptx = _kernel(PREVIOUS_BLOCK)
    blocks, threads = 8, 64
    i = np.arange(blocks * threads)
    want = np.concatenate([i + 1, np.where(i >= threads, (i + 1) + (i - threads + 1), i + 1)])
    assert np.array_equal(_launch(ptx, blocks, threads, words=2)[0], want)
    assert np.array_equal(_launch(ptx, blocks, threads, words=2, min_chunks=4)[0], want)   # up: in order
    for order in ("down", "random"):
        got, stats = _launch(ptx, blocks, threads, words=2, block_order=order, min_chunks=4, seed=3)
        assert not np.array_equal(got, want), order
        assert stats["schedule"]["block_order"] == order and stats["schedule"]["chunks"] >= 4
    # every block runs once, whatever the order
    got, _ = _launch(_kernel("add.s32 %r5, %r4, 1;\nst.global.u32 [%rd3], %r5;"), blocks, threads,
                     block_order="random", min_chunks=8)
    assert np.array_equal(got, i + 1)


def test_a_sample_of_blocks_runs_serially_at_any_size():
    blocks = 200                                  # 1600 warps: far more than run serially whole
    right = _run(REVERSE, "min-pc", blocks=blocks)
    n = blocks * 256
    dev = LoadedModule(NO_BARRIER)
    inp, out = dev.alloc(n * 4), dev.alloc(n * 4)
    dev.heap.write(inp, (np.arange(n, dtype=np.float32) + 0.5).view(np.uint8))
    dev.heap.write(out, np.zeros(n * 4, np.uint8))
    stats = dev.launch("block_reverse", (blocks, 1, 1), (256, 1, 1), [inp, out], seed=5,
                       schedule=SERIAL_ROTATION, serial_warps=SERIAL_SAMPLE_WARPS)
    got = dev.heap.read(out, n * 4).view(np.float32).reshape(blocks, 256)
    bad = ~(got == right.reshape(blocks, 256)).all(axis=1)
    assert stats["schedule"]["serial_blocks"] == SERIAL_SAMPLE_WARPS // 8
    assert stats["schedule"]["serial"] == ["warps-up"]        # one chunk of them: the first schedule
    assert bad[0] and bad[-1]                     # the first and the last block are in every sample
    assert 2 <= bad.sum() <= SERIAL_SAMPLE_WARPS // 8   # the others ran in step: right
    # split into chunks, the sample takes the schedules in turn
    stats3 = dev.launch("block_reverse", (blocks, 1, 1), (256, 1, 1), [inp, out], seed=5,
                        schedule=SERIAL_ROTATION, serial_warps=SERIAL_SAMPLE_WARPS, min_chunks=5)
    assert set(stats3["schedule"]["serial"]) == set(SERIAL_ROTATION)
    # another seed, another sample
    stats2 = dev.launch("block_reverse", (blocks, 1, 1), (256, 1, 1), [inp, out], seed=6,
                        schedule=SERIAL_ROTATION, serial_warps=SERIAL_SAMPLE_WARPS)
    assert stats2["schedule"]["serial_blocks"] == stats["schedule"]["serial_blocks"]


def test_machine_registers_vary_between_launches():
    body = """
    mov.u32 %r5, %smid;
    mov.u32 %r6, %warpid;
    mov.u32 %r7, %nsmid;
    mov.u32 %r8, %clock;
    shl.b32 %r6, %r6, 8;
    shl.b32 %r7, %r7, 16;
    or.b32 %r5, %r5, %r6;
    st.global.u32 [%rd3], %r5;"""
    ptx = _kernel(body)

    def fields(seed):
        v, _ = _launch(ptx, 16, 128, seed=seed)
        return v & 0xFF, (v >> 8) & 0xFF
    smid, warp = fields(None)                     # no seed: fixed values
    assert (smid == 0).all() and np.array_equal(warp, (np.arange(16 * 128) % 128) // 32)
    seen_smid, seen_warp = set(), set()
    for seed in (1, 2, 3):
        smid, warp = fields(seed)
        per_block = warp.reshape(16, 4, 32)
        assert (per_block == per_block[:, :, :1]).all()            # one value per warp
        assert all(sorted(set(b.ravel().tolist())) == [0, 1, 2, 3] for b in per_block)  # unique in a block
        seen_smid.add(tuple(smid[::128].tolist()))
        seen_warp.add(tuple(warp[::32].tolist()))
    assert len(seen_smid) == 3 and len(seen_warp) > 1
    nsmid = {int(_launch(_kernel("mov.u32 %r5, %nsmid;\nst.global.u32 [%rd3], %r5;"), 1, 32, seed=s)[0][0])
             for s in range(12)}
    assert len(nsmid) > 1
    clocks = {int(_launch(_kernel("mov.u32 %r5, %clock;\nst.global.u32 [%rd3], %r5;"), 1, 32, seed=s)[0][0])
              for s in (1, 2)}
    assert len(clocks) == 2


def test_a_launch_the_kernels_bounds_refuse_is_refused():
    body = "st.global.u32 [%rd3], %r4;"
    for directive, ok, bad in ((".maxntid 32, 1, 1", 32, 64), (".reqntid 64, 1, 1", 64, 128)):
        ptx = _kernel(body, directives="\n" + directive)
        _launch(ptx, 1, ok)
        with pytest.raises(ValueError, match=r"launch refused.*(maxntid|reqntid)"):
            _launch(ptx, 1, bad)
