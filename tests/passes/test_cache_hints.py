"""cache-hints: ld.global.nc only where no write can be observed; streaming hints on
write-once outputs / read-once inputs; every output parses, validates and assembles.

data/cache_hints.ptx is nvcc 13.0 output of data/cache_hints.cu
(regenerate: cd tests/passes/data && nvcc -arch=sm_90 -O3 -ptx cache_hints.cu -o cache_hints.ptx).
"""
from __future__ import annotations

import numpy as np
import pytest

import ptx_ir
from superopt.passes.cache_hints import nc_eligible_loads
from tests.passes.data.ptx_tools import (
    apply, assemble, emulator_available, kernel_named, load, run_pass_on_corpus, same_results,
    sass_of,
)

PASS = "cache-hints"


@pytest.fixture(scope="module")
def module():
    return load("cache_hints.ptx")


def _names(fn, opcode):
    return [i.name for i in fn.instructions if i.opcode == opcode and i.space == ".global"]


def _assembles(new, arch="sm_90"):
    text = ptx_ir.emit(new)
    ptx_ir.parse(text)
    asm = assemble(text, arch)
    assert asm.ok, asm.log
    return text


def test_loads_ahead_of_every_store_use_the_read_only_path(module):
    k = kernel_named(module, "saxpy")
    new, fn, changes = apply(module, PASS, k, mode="nc")
    assert len(changes) == 2
    assert _names(fn, "ld") == ["ld.global.nc.f32", "ld.global.nc.f32"]
    assert _names(fn, "st") == ["st.global.f32"]
    text = _assembles(new)
    sass = sass_of(text, k)
    if sass is not None:
        assert sass.count("LDG.E.CONSTANT") == 2


def test_loop_loads_before_the_final_store(module):
    new, fn, changes = apply(module, PASS, kernel_named(module, "gemv_rows"), mode="nc")
    assert changes and all(n == "ld.global.nc.f32" for n in _names(fn, "ld"))
    _assembles(new)


def test_a_store_in_the_loop_reaches_every_load(module):
    _, fn, changes = apply(module, PASS, kernel_named(module, "prefix_rows"), mode="nc")
    assert changes == [] and "ld.global.nc.f32" not in _names(fn, "ld")


def test_a_load_after_a_store_to_the_same_buffer_stays_coherent(module):
    k = kernel_named(module, "rewrite_then_read")
    _, fn, changes = apply(module, PASS, k, mode="nc")
    # data[i] (read before the write) may be .nc; data[i ^ 1] (after it) may not
    assert _names(fn, "ld") == ["ld.global.nc.f32", "ld.global.f32"]
    # restrict=True (opt-in, __restrict__ semantics) never marks a written parameter
    _, fn, _ = apply(module, PASS, k, mode="nc", restrict=True)
    assert _names(fn, "ld") == ["ld.global.nc.f32", "ld.global.f32"]


def test_a_barrier_orders_other_threads_stores(module):
    k = kernel_named(module, "stage_then_read")
    _, fn, _ = apply(module, PASS, k, mode="nc")
    assert _names(fn, "ld") == ["ld.global.nc.f32", "ld.global.f32"]


def test_loads_before_atomics(module):
    k = kernel_named(module, "histogram")
    new, fn, changes = apply(module, PASS, k, mode="nc")
    assert _names(fn, "ld") == ["ld.global.nc.u8"]
    _assembles(new)


def test_no_write_at_all_makes_every_load_read_only():
    text = """.version 9.0
.target sm_90
.address_size 64
.visible .entry r(.param .u64 r_param_0)
{
	.reg .f32 %f<3>;
	.reg .b64 %rd<3>;
	.shared .align 4 .f32 s[32];
	ld.param.u64 %rd1, [r_param_0];
	cvta.to.global.u64 %rd2, %rd1;
	bar.sync 0;
	ld.global.f32 %f1, [%rd2];
	st.shared.f32 [s], %f1;
	bar.sync 0;
	ld.global.f32 %f2, [%rd2+4];
	st.shared.f32 [s+4], %f2;
	ret;
}
"""
    fn = ptx_ir.parse(text).function("r")
    assert len(nc_eligible_loads(fn)) == 2
    # ... but a .func is never rewritten: its caller may have stored before the call
    fn.kind = ".func"
    assert nc_eligible_loads(fn) == []


def test_streaming_stores_only_for_write_once_outputs(module):
    _, fn, _ = apply(module, PASS, kernel_named(module, "stencil3"), mode="st.cs")
    assert _names(fn, "st") == ["st.global.cs.f32"]
    # read-modify-write: not write-once
    _, fn, changes = apply(module, PASS, kernel_named(module, "scale_inplace"), mode="st.cs")
    assert changes == [] and _names(fn, "st") == ["st.global.f32"]
    # saxpy's y is read too
    _, fn, changes = apply(module, PASS, kernel_named(module, "saxpy"), mode="st.cs")
    assert changes == []


def test_streaming_loads_only_for_read_once_inputs(module):
    # saxpy: x is read once per thread; y is read and written (not an input)
    k = kernel_named(module, "saxpy")
    new, fn, _ = apply(module, PASS, k, mode="ld.cs+st.cs")
    assert sorted(_names(fn, "ld")) == ["ld.global.cs.f32", "ld.global.f32"]
    _assembles(new)
    # stencil: neighbours read the same elements
    _, fn, changes = apply(module, PASS, kernel_named(module, "stencil3"), mode="ld.lu")
    assert changes == []
    # gemv: x[c] is read by every thread
    _, fn, changes = apply(module, PASS, kernel_named(module, "gemv_rows"), mode="ld.lu")
    assert changes == []


@pytest.mark.parametrize("mode, expect", [
    ("ld.lu", "ld.global.lu.f32"),
    ("nc+ld.evict_first", "ld.global.nc.L1::evict_first.f32"),
    ("nc+ld.L2::evict_first", "ld.global.nc.L2::cache_hint.f32"),
    ("ld.cs+nc", "ld.global.cs.nc.f32"),
])
def test_every_load_hint_assembles(module, mode, expect):
    k = kernel_named(module, "saxpy")
    new, fn, _ = apply(module, PASS, k, mode=mode)
    assert expect in _names(fn, "ld")
    text = _assembles(new)
    if "L2" in mode:
        pol = next(i for i in fn.instructions if i.opcode == "createpolicy")
        assert fn.instructions.index(pol) == 0
        ld = next(i for i in fn.instructions if i.name == expect)
        assert ld.operands[-1] == pol.operands[0]
    sass = sass_of(text, k)
    if sass is not None and "evict_first" in mode and "L1" not in expect:
        assert "LDG.E.EF" in sass or "LDG.E.CONSTANT" in sass


def test_unknown_mode_is_an_error(module):
    with pytest.raises(ValueError):
        apply(module, PASS, kernel_named(module, "saxpy"), mode="nc+bogus")


@pytest.mark.parametrize("frag", ["saxpy", "gemv_rows", "rewrite_then_read", "stencil3",
                                  "scale_inplace"])
def test_rewrite_equals_baseline_on_the_emulator(module, frag):
    ok, why = emulator_available()
    if not ok:
        pytest.skip(why)
    from superopt.judge.emulator import Unsupported
    k = kernel_named(module, frag)
    new, _, changes = apply(module, PASS, k, mode="nc+st.cs")
    assert changes or frag == "scale_inplace"
    rng = np.random.default_rng(5)
    f = lambda n: rng.standard_normal(n).astype(np.float32)  # noqa: E731
    params = {
        "saxpy": [("buf", f(100), 0), ("buf", f(100), 0), np.float32(0.5), np.int32(90)],
        "gemv_rows": [("buf", f(40), 0), ("buf", f(400), 0), ("buf", f(10), 0), np.int32(33), np.int32(10)],
        "rewrite_then_read": [("buf", f(100), 0), ("buf", f(100), 0), np.int32(64)],
        "stencil3": [("buf", f(100), 0), ("buf", f(100), 0), np.int32(64)],
        "scale_inplace": [("buf", f(100), 0), np.float32(3.0), np.int32(64)],
    }[frag]
    try:
        assert same_results(ptx_ir.emit(module), ptx_ir.emit(new), k, (1, 1, 1), (64, 1, 1), params)
        if frag == "saxpy":   # x and y aliasing: y = x + one element
            aliased = [("alias", 1, 4), ("buf", f(100), 0), np.float32(0.5), np.int32(90)]
            assert same_results(ptx_ir.emit(module), ptx_ir.emit(new), k, (1, 1, 1), (64, 1, 1), aliased)
    except Unsupported as exc:
        pytest.skip(f"the emulator cannot run {k}: {exc}")


@pytest.mark.slow
def test_corpus_never_crashes_and_every_rewrite_assembles():
    def modes(entry):   # createpolicy / .L2::cache_hint need sm_80+
        arch = entry.get("ptxas_arch") or entry["arch"]
        sm = int("".join(ch for ch in arch if ch.isdigit()))
        return {"mode": "nc+ld.L2::evict_first"} if sm >= 80 else {"mode": "nc+st.cs"}
    run = run_pass_on_corpus(PASS, [{"mode": "ld.cs+st.cs"}, modes], max_bytes=100_000)
    assert not run.failures, "\n".join(run.failures[:5])
    assert run.fired_kernels > 50
    print(f"\ncache-hints on the corpus: {run.files} files, {run.kernels} kernel runs, fired on "
          f"{run.fired_kernels} ({run.changes} rewrites), {run.modules_assembled} modules "
          f"assembled, {run.seconds:.0f}s")


def test_the_differential_check_accepts_the_rewrite_on_the_emulator(module):
    ok, why = emulator_available()
    if not ok:
        pytest.skip(why)
    from tests.passes.data.ptx_tools import buffer, judge_on_emulator, scalar
    k = kernel_named(module, "saxpy")
    new, _, changes = apply(module, PASS, k, mode="nc+ld.cs")   # (no createpolicy on the emulator)
    assert changes
    spec = {"kernel": k, "grid": ["cdiv(n, 128)", 1, 1], "block": [128, 1, 1], "params": [
        buffer("y", "f32", "n", "inout"), buffer("x", "f32", "n", "in"),
        scalar("a", "f32", 0.75), scalar("n", "s32", 1000)]}
    verdict = judge_on_emulator(ptx_ir.emit(module), ptx_ir.emit(new), spec)
    if verdict.status == "could_not_judge":
        pytest.skip(verdict.reason)
    assert verdict.status == "accepted", verdict.reason


@pytest.mark.slow
def test_corpus_rewrites_pass_the_differential_check_on_the_emulator():
    ok, why = emulator_available()
    if not ok:
        pytest.skip(why)
    from tests.passes.data.ptx_tools import judge_corpus_rewrites
    result = judge_corpus_rewrites(PASS, {"mode": "nc+st.cs"},
                                   ["gemm.sm_90.ptx", "stencils.sm_90.ptx"])
    assert not result["rejected"], result["rejected"]
    assert len(result["accepted"]) >= 5, result
