"""The static race check (superopt.judge.race_check), the atomic judge's rule for buffers nvcc's
code only updates atomically, and the launch bounds check, on small hand-written kernels
(issue 25). The corpus cases are in test_cheat_corpus_races.py."""
from __future__ import annotations

from pathlib import Path

import pytest

import ptx_ir
from superopt.judge import atomic_judge, race_check
from superopt.judge.launch_contract import block_problem, launch_problem

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"
RACES = Path(__file__).resolve().parent / "cheats_races"
CHEATS = Path(__file__).resolve().parent / "cheats"


def kernel(body: str, pre: str = "", directives: str = "") -> str:
    return (HEAD + pre + f".visible .entry k(.param .u64 x, .param .u64 y, .param .u32 n){directives}\n{{\n"
            ".reg .pred %p<8>;\n.reg .b32 %r<32>;\n.reg .b64 %rd<16>;\n.reg .f32 %f<8>;\n"
            ".shared .align 4 .b8 s[1024];\n"
            "ld.param.u64 %rd1, [x];\nld.param.u64 %rd2, [y];\ncvta.to.global.u64 %rd1, %rd1;\n"
            "cvta.to.global.u64 %rd2, %rd2;\nmov.u32 %r1, %tid.x;\nmov.u32 %r2, %ctaid.x;\nmov.u32 %r3, %ntid.x;\n"
            "mad.lo.s32 %r4, %r2, %r3, %r1;\nmul.wide.s32 %rd3, %r4, 4;\nadd.s64 %rd4, %rd1, %rd3;\n"
            "add.s64 %rd5, %rd2, %rd3;\n" + body + "\nret;\n}\n")


def races(ptx: str, name: str = "k") -> race_check.Races:
    r = race_check.analyze(ptx_ir.parse(ptx), name)
    return r


def keys(r) -> set:
    return {h.key for h in r.hazards}


# y[i] = x[i] + y[i]: every thread reads and writes its own element
OWN = "ld.global.f32 %f1, [%rd4];\nld.global.f32 %f2, [%rd5];\nadd.rn.f32 %f3, %f1, %f2;\nst.global.f32 [%rd5], %f3;"


def test_own_elements_are_no_race():
    assert keys(races(kernel(OWN))) == set()
    assert not races(kernel(OWN)).cross_block
    # the read-only path for x, which nothing writes: fine
    assert keys(races(kernel(OWN.replace("ld.global.f32 %f1", "ld.global.nc.f32 %f1")))) == set()


def test_non_coherent_read_of_a_written_buffer():
    # y read through ld.global.nc after a barrier (another thread's write may be visible)
    body = ("ld.global.f32 %f1, [%rd4];\nst.global.f32 [%rd5], %f1;\nbar.sync 0;\nld.global.nc.f32 %f2, [%rd5];\n"
            "add.rn.f32 %f3, %f1, %f2;\nst.global.f32 [%rd5], %f3;")
    r = races(kernel(body))
    assert keys(r) == {("nc", "y")} and r.cross_block
    assert "through the non-coherent cache" in r.hazards[0].describe()
    # ... or after its own store: the read-only path need not see it
    r = races(kernel(body.replace("bar.sync 0;\n", "")))
    assert keys(r) == {("nc", "y")}


def test_a_non_coherent_read_ahead_of_every_write_is_a_plain_read():
    """ld.global.nc of y before anything in the thread may make a write of the launch visible
    reads y as it was at launch (what the cache-hints pass proves): judged as a plain read,
    no race for the thread's own element."""
    early = OWN.replace("ld.global.f32 %f2", "ld.global.nc.f32 %f2")
    assert keys(races(kernel(early))) == set()
    # ahead of every write, but another thread's element: a plain read of it is a race too
    other = early.replace("ld.global.nc.f32 %f2, [%rd5];", "ld.global.nc.f32 %f2, [%rd5+4];")
    assert keys(races(kernel(other))) == {("cross", "y")}


def test_reading_another_threads_element_of_a_written_buffer():
    # y[i] = x[i], then y[i] += y[i + 1]: thread i + 1's element
    body = ("ld.global.f32 %f1, [%rd4];\nst.global.f32 [%rd5], %f1;\nld.global.f32 %f2, [%rd5+4];\n"
            "add.rn.f32 %f3, %f1, %f2;\nst.global.f32 [%rd5], %f3;")
    r = races(kernel(body))
    assert keys(r) == {("cross", "y")}
    # the same element of every block (no %ctaid in the address): blocks share it
    shared_by_blocks = ("mul.wide.u32 %rd6, %r1, 4;\nadd.s64 %rd7, %rd2, %rd6;\nld.global.f32 %f1, [%rd7];\n"
                        "add.rn.f32 %f1, %f1, 0f3F800000;\nst.global.f32 [%rd7], %f1;")
    assert keys(races(kernel(shared_by_blocks))) == {("cross", "y")}


def test_a_pointer_advanced_in_a_loop_keeps_its_buffer():
    # for (k = 0; k < n; k++) y[i] += x[i + k * 4]: the x pointer is a loop register
    body = ("mov.u32 %r10, 0;\nmov.u64 %rd8, %rd4;\nmov.f32 %f1, 0f00000000;\n$LOOP:\nld.global.nc.f32 %f2, [%rd8];\n"
            "add.rn.f32 %f1, %f1, %f2;\nadd.s64 %rd8, %rd8, 16;\nadd.s32 %r10, %r10, 1;\nsetp.lt.u32 %p1, %r10, 8;\n"
            "@%p1 bra $LOOP;\nst.global.f32 [%rd5], %f1;")
    r = races(kernel(body))
    assert keys(r) == set()         # x (read-only, through nc) is not y (written)


SHARED_SUM = """
    shl.b32 %r5, %r1, 2;
    mov.u32 %r6, s;
    add.s32 %r7, %r6, %r5;
    ld.global.f32 %f1, [%rd4];
    st.shared.f32 [%r7], %f1;
    bar.sync 0;
    setp.gt.u32 %p1, %r1, 127;
    @%p1 bra $A;
    ld.shared.f32 %f2, [%r7];
    ld.shared.f32 %f3, [%r7+512];
    add.rn.f32 %f2, %f2, %f3;
    st.shared.f32 [%r7], %f2;
$A:
    BARRIER
    setp.gt.u32 %p2, %r1, 63;
    @%p2 bra $B;
    ld.shared.f32 %f2, [%r7];
    ld.shared.f32 %f3, [%r7+256];
    add.rn.f32 %f2, %f2, %f3;
    st.shared.f32 [%r7], %f2;
$B:
    bar.sync 0;
    st.global.f32 [%rd5], %f2;"""


@pytest.mark.parametrize("barrier, want", [("bar.sync 0;", set()), ("bar.warp.sync -1;", set()),
                                           ("", {("shared", "s")})])
def test_shared_reads_a_store_reaches_without_a_barrier(barrier, want):
    r = races(kernel(SHARED_SUM.replace("BARRIER", barrier)))
    assert keys(r) == want
    assert not r.cross_block           # shared memory only: no block orders needed


def test_a_loop_back_edge_without_a_barrier_is_a_path():
    body = """
    shl.b32 %r5, %r1, 2;
    mov.u32 %r6, s;
    add.s32 %r7, %r6, %r5;
    mov.u32 %r10, 0;
$L:
    ld.shared.u32 %r11, [%r7+4];
    add.s32 %r11, %r11, 1;
    st.shared.u32 [%r7], %r11;
    BARRIER
    add.s32 %r10, %r10, 1;
    setp.lt.u32 %p1, %r10, 4;
    @%p1 bra $L;"""
    assert keys(races(kernel(body.replace("BARRIER", "bar.sync 0;")))) == set()
    assert keys(races(kernel(body.replace("BARRIER", "")))) == {("shared", "s")}


def test_compare_rejects_only_new_hazards_and_names_the_buffer_as_the_spec_does():
    base = races(kernel(OWN))
    cand = races(kernel(OWN.replace("ld.global.f32 %f2, [%rd5];", "ld.global.f32 %f2, [%rd5+4];")))
    why = race_check.compare(base, cand, {"y": "out"})
    assert why.startswith("static race check: the candidate `ld.global.f32 %f2, [%rd5+4]`") and "'out'" in why
    assert race_check.compare(cand, cand) is None           # nvcc's code reads it so too
    assert race_check.compare(None, cand) is None and race_check.compare(base, None) is None
    assert race_check.analyze_ptx("not ptx", "k") is None


def test_nvccs_corpus_kernels():
    """nvcc's own code of the corpus kernels: the hazards the check finds are the ones the
    kernels have by design (pairswap reads its neighbour's t after the block's barrier)."""
    want = {"treesum": set(), "scale": set(), "pairsq": set(), "pairswap": {("cross", "_Z8pairswapiPKiPiS1__param_2")},
            "stencil3": set(), "bucketsum": set()}
    for k, hz in want.items():
        ptx = (RACES / f"{k}.ptx").read_text()
        m = ptx_ir.parse(ptx)
        assert keys(race_check.analyze(m, m.kernels[0].name)) == hz, k
    for k in ("saxpy", "blocksum"):
        m = ptx_ir.parse((CHEATS / f"{k}.ptx").read_text())
        assert keys(race_check.analyze(m, m.kernels[0].name)) == set(), k


# ---------------------------------------------------------------- atomic targets

ATOMIC = "ld.global.f32 %f1, [%rd4];\nPLAIN\nred.global.add.f32 [%rd2], %f1;"


def test_plain_access_to_a_buffer_nvcc_only_updates_atomically():
    base = races(kernel(ATOMIC.replace("PLAIN", "")))
    assert base.atomic_only() == {"y"}
    copy = races(kernel(ATOMIC.replace("PLAIN", "ld.global.f32 %f2, [%rd2];\nst.global.f32 [%rd2], %f2;")))
    why = atomic_judge.plain_access_problem(base, copy, {"y": "total"})
    assert "buffer 'total', which nvcc's code updates only with atomics" in why and "ld.global.f32 %f2" in why
    # atomics only, in another order or width: fine
    again = races(kernel(ATOMIC.replace("PLAIN", "red.global.add.f32 [%rd2], %f1;")))
    assert atomic_judge.plain_access_problem(base, again) is None
    # nvcc's code reads it plainly itself: not an atomic-only buffer
    reads = races(kernel(ATOMIC.replace("PLAIN", "ld.global.f32 %f2, [%rd2];")))
    assert atomic_judge.plain_access_problem(reads, copy) is None


# ---------------------------------------------------------------- launch bounds

def _fn(directives: str):
    return ptx_ir.parse(kernel(OWN, directives="\n" + directives)).function("k")


def test_launch_bounds_against_every_launch():
    assert block_problem(_fn(""), (1024, 1, 1)) is None
    assert ".maxntid 32, 1, 1 allows at most 32 threads per block, the launch has 256" in \
        block_problem(_fn(".maxntid 32, 1, 1"), (256, 1, 1))
    assert block_problem(_fn(".maxntid 16, 16, 1"), (256, 1, 1)) is None         # the product bounds it
    assert ".reqntid 64, 1, 1 requires block [64, 1, 1]" in block_problem(_fn(".reqntid 64, 1, 1"), (256, 1, 1))
    assert block_problem(_fn(".reqntid 64"), (64, 1, 1)) is None
    why = launch_problem(_fn(".maxntid 128"), [("set 0", (128, 1, 1)), ("set 3", (256, 1, 1))])
    assert why.endswith("on set 3: a GPU refuses such a launch")
    assert launch_problem(_fn(".maxntid 1024, 1, 1"), [("set 0", (256, 1, 1))]) is None
    # a residency bound that cannot hold beside the block bound
    assert "cannot be resident" in launch_problem(_fn(".maxntid 1024\n.minnctapersm 4"), [("set 0", (256, 1, 1))])
    assert launch_problem(_fn(".maxntid 256\n.minnctapersm 4"), [("set 0", (256, 1, 1))]) is None



def test_pointers_exchanged_through_shared_memory_keep_their_buffer():
    """The staging passes hand global addresses to other threads through shared memory: the
    loaded pointer still points into x (read-only), not into some unknown written buffer."""
    body = """
    shl.b32 %r5, %r1, 3;
    mov.u32 %r6, s;
    add.s32 %r7, %r6, %r5;
    st.shared.u64 [%r7], %rd4;
    bar.sync 0;
    xor.b32 %r8, %r5, 8;
    add.s32 %r9, %r6, %r8;
    ld.shared.u64 %rd8, [%r9];
    ld.global.f32 %f1, [%rd8];
    st.global.f32 [%rd5], %f1;"""
    assert keys(races(kernel(body))) == set()
    # a pointer loaded from global memory may point anywhere, into y too
    loaded = body.replace("ld.shared.u64 %rd8, [%r9];", "ld.global.u64 %rd8, [%rd4];")
    assert keys(races(kernel(loaded))) == {("cross", "?")}


def test_an_unrolled_grid_stride_loop_reads_only_its_own_elements():
    """unroll on a grid-stride saxpy: each load of y has the address of one of the stores (its
    own element, another iteration's); the remainder loop's counter is an opaque register."""
    from superopt.search.candidates import Step, apply_plan
    m = ptx_ir.parse((Path(__file__).resolve().parents[1] / "corpus" / "ptx" / "elementwise.sm_90.ptx").read_text())
    k = "_Z17saxpy_grid_strideifPKfPf"
    assert keys(race_check.analyze(m, k)) == set()
    for factor in (2, 4):
        nm, _ = apply_plan(m, k, [Step("unroll", {"factor": factor})])
        assert keys(race_check.analyze(nm, k)) == set(), factor
