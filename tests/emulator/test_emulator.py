"""The emulator's runtime on small hand-written PTX kernels: scheduling (divergence,
barriers, warp synchronisation, spin locks), calls, memory faults, and the verdicts for
what it cannot or must not run (unsupported instructions, undefined behaviour, hangs)."""
from __future__ import annotations

import numpy as np
import pytest

from superopt.judge.emulator import (Deadlock, KernelFault, LoadedModule, RunTimeout, UndefinedBehavior,
                               Unsupported)

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"


def kernel(body: str, params: str = ".param .u64 out", regs: str = "") -> str:
    decl = (".reg .pred %p<8>;\n.reg .b32 %r<32>;\n.reg .b64 %rd<16>;\n.reg .f32 %f<16>;\n" + regs)
    return HEAD + f".visible .entry k({params})\n{{\n{decl}{body}\n}}\n"


def run(ptx, grid, block, nwords=256, extra=(), **kw):
    dev = LoadedModule(ptx)
    out = dev.alloc(4 * nwords)
    dev.heap.write(out, np.zeros(nwords, np.uint32))
    stats = dev.launch("k", grid, block, [out, *extra], **kw)
    return dev.heap.read(out, 4 * nwords).view(np.uint32), stats, dev


TID = "mov.u32 %r1, %tid.x;\nld.param.u64 %rd1, [out];\ncvta.to.global.u64 %rd1, %rd1;\nmul.wide.u32 %rd2, %r1, 4;\nadd.s64 %rd3, %rd1, %rd2;\n"


def test_divergent_loop_and_reconvergence_keep_warps_converged():
    # thread t loops t % 5 times, then all lanes shuffle: they must have reconverged
    body = TID + """
    rem.u32 %r2, %r1, 5;
    mov.u32 %r3, 0;
L1: setp.eq.u32 %p1, %r2, 0;
    @%p1 bra DONE;
    add.u32 %r3, %r3, %r1;
    sub.u32 %r2, %r2, 1;
    bra.uni L1;
DONE:
    shfl.sync.bfly.b32 %r4, %r3, 1, 31, -1;
    activemask.b32 %r5;
    add.u32 %r4, %r4, %r5;
    st.global.u32 [%rd3], %r4;
    ret;"""
    out, _, _ = run(kernel(body), 1, 64, 64)
    t = np.arange(64)
    acc = (t % 5) * t
    assert list(out) == list((acc[t ^ 1] + 0xFFFFFFFF) & 0xFFFFFFFF)


def test_block_size_not_a_multiple_of_32():
    body = TID + """
    and.b32 %r2, %r1, 1;
    setp.ne.u32 %p1, %r2, 0;
    vote.sync.ballot.b32 %r3, %p1, -1;
    st.global.u32 [%rd3], %r3;
    ret;"""
    out, _, _ = run(kernel(body), 1, 48, 48)
    assert set(out[:32]) == {0xAAAAAAAA} and set(out[32:48]) == {0x0000AAAA}


def test_spin_lock_makes_progress():
    # a lock taken with atom.cas, released with atom.exch: needs independent scheduling
    body = """
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    add.s64 %rd2, %rd1, 4;
SPIN:
    atom.global.cas.b32 %r1, [%rd1], 0, 1;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra SPIN;
    ld.volatile.global.u32 %r2, [%rd2];
    add.s32 %r2, %r2, 1;
    st.volatile.global.u32 [%rd2], %r2;
    membar.gl;
    atom.global.exch.b32 %r3, [%rd1], 0;
    ret;"""
    out, _, _ = run(kernel(body), 2, 64, 4, timeout=60)
    assert out[0] == 0 and out[1] == 128


def test_barrier_after_some_threads_exit():
    body = """
    .shared .align 4 .b32 s[64];
    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p1, %r1, 40;
    @%p1 bra END;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, s;
    add.u32 %r4, %r3, %r2;
    st.shared.u32 [%r4], %r1;
    bar.sync 0;
    xor.b32 %r5, %r1, 1;
    shl.b32 %r5, %r5, 2;
    add.u32 %r5, %r3, %r5;
    ld.shared.u32 %r6, [%r5];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
END:
    ret;"""
    out, _, _ = run(kernel(body), 1, 64, 64)
    assert list(out[:40]) == [t ^ 1 for t in range(40)] and not out[40:].any()


def test_barrier_in_a_loop_with_divergent_work():
    # the classic case that a pure min-PC scheduler gets wrong: threads that finish an
    # iteration early must wait at the barrier at the top of the next one
    body = """
    .shared .align 4 .b32 s[64];
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, s;
    shl.b32 %r2, %r1, 2;
    add.u32 %r2, %r9, %r2;
    st.shared.u32 [%r2], %r1;
    mov.u32 %r3, 0;
TOP:
    bar.sync 0;
    add.u32 %r4, %r1, 1;
    and.b32 %r4, %r4, 63;
    shl.b32 %r4, %r4, 2;
    add.u32 %r4, %r9, %r4;
    ld.shared.u32 %r5, [%r4];
    and.b32 %r6, %r1, 3;
    setp.ne.u32 %p1, %r6, 0;
    @%p1 bra SHORT;
    mov.u32 %r7, 20;
WORK:
    mul.lo.u32 %r5, %r5, 3;
    sub.u32 %r7, %r7, 1;
    setp.ne.u32 %p2, %r7, 0;
    @%p2 bra WORK;
SHORT:
    bar.sync 0;
    st.shared.u32 [%r2], %r5;
    add.u32 %r3, %r3, 1;
    setp.lt.u32 %p3, %r3, 3;
    @%p3 bra TOP;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;"""
    out, _, _ = run(kernel(body), 1, 64, 64)
    s = np.arange(64, dtype=np.uint64)
    for _ in range(3):
        v = s[(np.arange(64) + 1) % 64].copy()
        m = (np.arange(64) % 4) == 0
        v[m] = v[m] * (3 ** 20)
        s = v & 0xFFFFFFFF
    assert list(out) == list(s)


def test_recursion_and_stack_overflow():
    ptx = HEAD + """
.func (.param .b32 r) down(.param .b32 x)
{
    .reg .pred %p<2>; .reg .b32 %r<4>;
    ld.param.b32 %r1, [x];
    setp.eq.s32 %p1, %r1, 0;
    @%p1 bra BASE;
    sub.s32 %r2, %r1, 1;
    { .param .b32 a; st.param.b32 [a], %r2; .param .b32 b;
      call.uni (b), down, (a); ld.param.b32 %r3, [b]; }
    add.s32 %r3, %r3, 2;
    st.param.b32 [r], %r3;
    ret;
BASE:
    st.param.b32 [r], 0;
    ret;
}
.visible .entry k(.param .u64 out, .param .u32 depth)
{
    .reg .b32 %r<8>; .reg .b64 %rd<8>;
    mov.u32 %r1, %tid.x;
    ld.param.u32 %r2, [depth];
    add.u32 %r2, %r2, %r1;
    { .param .b32 a; st.param.b32 [a], %r2; .param .b32 b;
      call.uni (b), down, (a); ld.param.b32 %r3, [b]; }
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;
}
"""
    out, _, _ = run(ptx, 1, 32, 32, extra=[np.uint32(5)])
    assert list(out) == [2 * (5 + t) for t in range(32)]
    with pytest.raises(KernelFault, match="stack overflow"):
        run(ptx, 1, 32, 32, extra=[np.uint32(100000)])


def test_shadowing_in_nested_scopes():
    body = TID + """
    mov.u32 %r2, 7;
    setp.eq.u32 %p1, %r1, 3;
    {
      .reg .pred %p1;
      .reg .b32 %r2;
      mov.u32 %r2, 100;
      setp.ne.u32 %p1, %r1, 3;
      @%p1 add.u32 %r2, %r2, 1;
    }
    selp.u32 %r4, %r2, 0, %p1;
    st.global.u32 [%rd3], %r4;
    ret;"""
    out, _, _ = run(kernel(body), 1, 8, 8)
    assert list(out) == [0, 0, 0, 7, 0, 0, 0, 0]


def test_faults_are_reported():
    oob = TID + "st.global.u32 [%rd1+-64], %r1;\nret;"
    with pytest.raises(KernelFault, match="out-of-range"):
        run(kernel(oob), 1, 32)
    mis = TID + "st.global.u32 [%rd1+2], %r1;\nret;"
    with pytest.raises(KernelFault, match="misaligned"):
        run(kernel(mis), 1, 32)
    with pytest.raises(KernelFault, match="trap"):
        run(kernel("trap;\nret;"), 1, 32)


def test_shfl_reading_an_exited_lane_is_undefined():
    body = TID + """
    setp.ge.u32 %p1, %r1, 20;
    @%p1 bra END;
    shfl.sync.down.b32 %r2, %r1, 16, 31, -1;
    st.global.u32 [%rd3], %r2;
END:
    ret;"""
    with pytest.raises(UndefinedBehavior, match="exited"):
        run(kernel(body), 1, 32)


def test_hang_times_out():
    body = """
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
SPIN:
    ld.volatile.global.u32 %r1, [%rd1];
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra SPIN;
    ret;"""
    with pytest.raises(RunTimeout):
        run(kernel(body), 1, 32, timeout=0.5)


def test_named_barriers_with_a_partial_count_are_unsupported():
    with pytest.raises(Unsupported, match="barrier"):
        run(kernel("bar.sync 1, 32;\nret;"), 1, 64)


def test_unsupported_instruction_names_itself():
    body = TID + "mov.f32 %f1, 0f3F800000;\nex2.approx.ftz.f32 %f2, %f1;\nret;"
    with pytest.raises(Unsupported, match=r"ex2\.approx\.ftz\.f32 %f2, %f1"):
        run(kernel(body), 1, 32)


def test_mul_add_contraction_is_refused_unless_asked():
    body = TID + """
    mov.f32 %f1, 0f3F800001;
    mul.f32 %f2, %f1, %f1;
    add.f32 %f3, %f2, 0fBF800000;
    mov.b32 %r2, %f3;
    st.global.u32 [%rd3], %r2;
    ret;"""
    with pytest.raises(Unsupported, match="contract"):
        run(kernel(body), 1, 32)
    dev = LoadedModule(kernel(body), fma_contraction="separate")
    out = dev.alloc(128)
    dev.launch("k", 1, 32, [out])
    assert dev.heap.read(out, 4).view(np.float32)[0] == np.float32(2.0 ** -22)


def test_brx_idx_and_out_of_range_index():
    body = TID + """
    and.b32 %r2, %r1, 3;
    ld.param.u32 %r9, [bias];
    add.u32 %r2, %r2, %r9;
TBL: .branchtargets A, B, C, D;
    brx.idx %r2, TBL;
A:  mov.u32 %r3, 10; bra.uni E;
B:  mov.u32 %r3, 20; bra.uni E;
C:  mov.u32 %r3, 30; bra.uni E;
D:  mov.u32 %r3, 40;
E:  st.global.u32 [%rd3], %r3;
    ret;"""
    ptx = kernel(body, ".param .u64 out, .param .u32 bias")
    out, _, _ = run(ptx, 1, 8, 8, extra=[np.uint32(0)])
    assert list(out) == [10, 20, 30, 40] * 2
    with pytest.raises(UndefinedBehavior):
        run(ptx, 1, 8, 8, extra=[np.uint32(2)])


def test_printf_is_captured_when_its_value_is_unused():
    ptx = HEAD + """
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 f, .param .b64 a);
.global .align 1 .b8 fmt[4] = {104, 105, 10, 0};
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<4>; .reg .b64 %rd<4>;
    cvta.global.u64 %rd1, fmt;
    { .param .b64 p0; st.param.b64 [p0], %rd1; .param .b64 p1; st.param.b64 [p1], 0;
      .param .b32 rv; call.uni (rv), vprintf, (p0, p1); ld.param.b32 %r1, [rv]; }
    ret;
}
"""
    _, stats, dev = run(ptx, 2, 32)
    assert len(stats["printf"]) == 64
    assert bytes(dev.heap.read(stats["printf"][0][1], 3)) == b"hi\n"


def test_module_variables_persist_across_launches():
    ptx = HEAD + """
.global .align 4 .u32 counter = 5;
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<4>; .reg .b64 %rd<4>;
    atom.global.add.u32 %r1, [counter], 1;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.global.u32 %r2, [counter];
    st.global.u32 [%rd1], %r2;
    ret;
}
"""
    dev = LoadedModule(ptx)
    out = dev.alloc(16)
    dev.launch("k", 1, 32, [out])
    dev.launch("k", 1, 32, [out])
    assert int(dev.heap.read(out, 4).view(np.uint32)[0]) in (5 + 64,)


def test_chunking_and_many_blocks():
    body = TID + """
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r6, %ntid.x;
    mad.lo.s32 %r7, %r5, %r6, %r1;
    mul.wide.u32 %rd4, %r7, 4;
    add.s64 %rd5, %rd1, %rd4;
    mul.lo.u32 %r8, %r7, %r7;
    st.global.u32 [%rd5], %r8;
    ret;"""
    ptx = kernel(body)
    for lanes in (64, 100000):
        dev = LoadedModule(ptx)
        out = dev.alloc(4 * 96 * 100)
        dev.launch("k", 100, 96, [out], chunk_lanes=lanes)
        got = dev.heap.read(out, 4 * 96 * 100).view(np.uint32)
        i = np.arange(9600, dtype=np.uint64)
        assert np.array_equal(got, (i * i).astype(np.uint32))
