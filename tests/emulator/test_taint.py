"""The emulator's per-lane taint bit (issue 12): values derived from never-written registers,
shared or local memory stay tainted through arithmetic, moves, memory and warp shuffles; a
store or branch on them is reported in ``stats["taint"]`` lane by lane; written values are
clean, and kernels that never read anything unwritten report nothing (and pay nothing)."""
from __future__ import annotations

import numpy as np
import pytest

from superopt.judge.emulator import LoadedModule

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"
DECL = ".reg .pred %p<8>;\n.reg .b32 %r<32>;\n.reg .b64 %rd<16>;\n.reg .f32 %f<16>;\n"
TID = ("mov.u32 %r1, %tid.x;\nld.param.u64 %rd1, [out];\ncvta.to.global.u64 %rd1, %rd1;\n"
       "mul.wide.u32 %rd2, %r1, 4;\nadd.s64 %rd3, %rd1, %rd2;\n")


def run(body: str, *, block=64, grid=1, pre: str = "", fill: str = "random"):
    ptx = HEAD + pre + f".visible .entry k(.param .u64 out)\n{{\n{DECL}{body}\n}}\n"
    dev = LoadedModule(ptx)
    out = dev.alloc(4 * block * grid)
    dev.heap.write(out, np.zeros(block * grid, np.uint32))
    stats = dev.launch("k", (grid, 1, 1), (block, 1, 1), [out], register_fill=fill)
    return stats, dev.program("k")


def events(stats) -> dict:
    return {k: (v["lanes"], v["first"]) for k, v in stats.get("taint", {}).items()}


def test_clean_kernel_reports_nothing_and_tracks_nothing():
    stats, prog = run(TID + "add.u32 %r2, %r1, 7;\nsetp.lt.u32 %p1, %r2, 40;\n@%p1 bra SKIP;\n"
                            "st.global.u32 [%rd3], %r2;\nSKIP:\nret;")
    assert events(stats) == {}
    assert not prog.tracked and not prog.mem_taint
    assert all(ci.taint is None for ci in prog.insts)        # no cost for kernels like this


@pytest.mark.parametrize("fill", ["random", "zero"])
def test_unwritten_register_taints_arithmetic_and_the_store_per_lane(fill):
    # odd lanes write %r5; every lane computes from it and stores: only even lanes are tainted
    body = TID + """
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 1;
    @%p1 mov.u32 %r5, 3;
    mul.lo.u32 %r6, %r5, 2;
    add.u32 %r7, %r6, %r1;
    st.global.u32 [%rd3], %r7;
    ret;"""
    stats, prog = run(body, fill=fill)
    assert events(stats) == {"store": (32, "st.global.u32 [%rd3], %r7")}


@pytest.mark.parametrize("written", [False, True])
def test_local_and_shared_memory_taint_follows_stores(written):
    # a word of local and of shared memory, written (clean) or not, then branched on
    write = "st.local.u32 [scratch], %r1;\nst.shared.u32 [sbuf], %r1;\n" if written else ""
    body = TID + write + """
    ld.local.u32 %r2, [scratch];
    ld.shared.u32 %r3, [sbuf];
    setp.eq.u32 %p1, %r2, 1234567;
    @%p1 bra SKIP;
    setp.eq.u32 %p2, %r3, 1234567;
    @%p2 bra SKIP;
    st.global.u32 [%rd3], %r1;
SKIP:
    ret;"""
    ptx_body = ".local .align 4 .b8 scratch[16];\n.shared .align 4 .b8 sbuf[256];\n" + body
    stats, prog = run(ptx_body)
    assert prog.mem_taint
    if written:
        assert events(stats) == {}
    else:
        lanes, first = events(stats)["branch"]
        assert lanes == 2 * 64 and first == "@%p1 bra SKIP"   # both branches, every lane


def test_taint_moves_through_shared_memory_and_vector_elements():
    # lane t stores its (clean) id into slot t and garbage-derived data into slot t + 64; a
    # v2 load of (t, t + 1) is clean, one of (t + 64, t + 65) is not: only that store is reported
    body = TID + """
    shl.b32 %r2, %r1, 2;
    mov.u32 %r20, sbuf;
    add.u32 %r3, %r20, %r2;
    st.shared.u32 [%r3], %r1;
    add.u32 %r9, %r30, 1;
    st.shared.u32 [%r3+256], %r9;
    bar.sync 0;
    and.b32 %r4, %r2, -8;
    add.u32 %r5, %r20, %r4;
    ld.shared.v2.u32 {%r10, %r11}, [%r5];
    ld.shared.v2.u32 {%r12, %r13}, [%r5+256];
    st.global.u32 [%rd3], %r10;
    st.global.u32 [%rd3], %r13;
    ret;"""
    stats, _ = run(".shared .align 8 .b8 sbuf[512];\n" + body)
    assert events(stats) == {"store": (64, "st.global.u32 [%rd3], %r13")}


def test_shuffle_moves_taint_between_lanes():
    body = TID + """
    setp.eq.u32 %p1, %r1, 0;
    @!%p1 mov.u32 %r5, 9;
    shfl.sync.idx.b32 %r6, %r5, 0, 31, -1;
    st.global.u32 [%rd3], %r6;
    ret;"""
    stats, _ = run(body, block=32)
    # lane 0 never wrote %r5, and every lane reads lane 0's value
    assert events(stats) == {"store": (32, "st.global.u32 [%rd3], %r6")}


# ---------------------------------------------------------------- guards, addresses, calls (issue 25)
# %p2 is "a never-written shared word holds 1234567": false in every lane under random poison,
# so the guarded instruction never runs and the outputs equal a correct kernel's; only the
# taint bit of the guard shows that whether it runs depends on data nothing wrote
SHARED_FLAG = ".shared .align 4 .b8 sflag[4];\n"
GUARD = "ld.shared.u32 %r9, [sflag];\nsetp.eq.u32 %p2, %r9, 1234567;\n"


def test_a_guard_from_never_written_shared_memory_taints_what_it_guards():
    # @%p2 add: %r7 depends on the garbage in every lane (written or not), and is stored
    stats, _ = run(TID + GUARD + "mov.u32 %r7, %r1;\n@%p2 add.u32 %r7, %r7, 1;\nst.global.u32 [%rd3], %r7;\nret;",
                   pre=SHARED_FLAG)
    assert events(stats) == {"store": (64, "st.global.u32 [%rd3], %r7")}


def test_a_store_under_a_guard_from_never_written_shared_memory_is_a_sink():
    # @%p2 st.global: skipped in every lane, reported for every lane
    stats, _ = run(TID + GUARD + "@%p2 st.global.u32 [%rd3], %r1;\nret;", pre=SHARED_FLAG)
    assert events(stats) == {"store": (64, "@%p2 st.global.u32 [%rd3], %r1")}


def test_a_guard_from_written_shared_memory_is_clean():
    stats, prog = run(TID + "st.shared.u32 [sflag], %r1;\nbar.sync 0;\n" + GUARD
                      + "mov.u32 %r7, %r1;\n@%p2 add.u32 %r7, %r7, 1;\n@%p2 st.global.u32 [%rd3], %r7;\n"
                        "@!%p2 st.global.u32 [%rd3], %r1;\nret;", pre=SHARED_FLAG)
    assert events(stats) == {}


def test_a_guard_on_a_load_taints_the_loaded_value():
    body = TID + GUARD + "ld.global.u32 %r7, [%rd3];\n@%p2 ld.global.u32 %r7, [%rd3+4];\nst.global.u32 [%rd3], %r7;\nret;"
    stats, _ = run(body, pre=SHARED_FLAG, block=32)
    assert events(stats) == {"store": (32, "st.global.u32 [%rd3], %r7")}


def test_a_load_from_an_address_computed_from_never_written_data_is_a_sink():
    # the index is masked into the buffer, so nothing faults: only the taint shows it
    body = TID + """
    ld.shared.u32 %r9, [sflag];
    and.b32 %r10, %r9, 15;
    mul.wide.u32 %rd4, %r10, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r11, [%rd5];
    ret;"""
    stats, _ = run(body, pre=SHARED_FLAG)
    assert events(stats) == {"address": (64, "ld.global.u32 %r11, [%rd5]")}


def test_a_call_argument_from_never_written_data_is_a_sink():
    callee = ".func (.reg .b32 %rr) twice(.reg .b32 %ra)\n{\nadd.u32 %rr, %ra, %ra;\nret;\n}\n"
    body = TID + "ld.shared.u32 %r9, [sflag];\ncall (%r10), twice, (%r9);\nret;"
    stats, _ = run(body, pre=SHARED_FLAG + callee)
    assert "call" in events(stats)
    clean = TID + "call (%r10), twice, (%r1);\nst.global.u32 [%rd3], %r10;\nret;"
    stats, _ = run(clean, pre=callee)
    assert events(stats) == {}
