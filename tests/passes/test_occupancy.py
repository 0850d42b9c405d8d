"""occupancy: .maxnreg / .minnctapersm / .maxntid, only with a launch block, never below it.

data/occupancy.ptx is nvcc 13.0 output of data/occupancy.cu
(regenerate: cd tests/passes/data && nvcc -arch=sm_90 -O3 -ptx occupancy.cu -o occupancy.ptx).
"""
from __future__ import annotations

import pytest

import ptx_ir
from superopt.passes import get_pass, param_grid
from tests.passes.data.ptx_tools import apply, assemble, kernel_named, load, run_pass_on_corpus

PASS = "occupancy"


@pytest.fixture(scope="module")
def module():
    return load("occupancy.ptx")


def _directives(fn) -> dict:
    return {d.name: [str(a) for a in d.args] for d in fn.directives}


def _registers(new, kernel) -> int:
    asm = assemble(ptx_ir.emit(new))
    assert asm.ok, asm.log
    assert "warning" not in asm.log.lower(), asm.log
    return asm.registers[kernel]


def test_does_not_fire_without_a_launch_block(module):
    k = kernel_named(module, "sgemm_8x8")
    for params in param_grid(get_pass(PASS)):
        _, fn, changes = apply(module, PASS, k, **params)
        assert changes == [] and fn.directives == []
    for bad in (None, 0, (0, 1), (2048,), (64, 64), "x", (1, 2, 3, 4)):
        _, _, changes = apply(module, PASS, k, block=bad, maxnreg=32)
        assert changes == [], bad


def test_maxnreg_caps_the_registers_ptxas_uses(module):
    k = kernel_named(module, "sgemm_8x8")
    before = _registers(module, k)
    assert before > 64
    new, fn, changes = apply(module, PASS, k, block=(16, 16), maxnreg=64)
    assert [str(c) for c in changes] == [".maxnreg 64"]
    assert _directives(fn) == {".maxnreg": ["64"]}     # no .maxntid needed for this one
    assert _registers(new, k) <= 64


def test_minnctapersm_adds_maxntid_equal_to_the_launch_block(module):
    k = kernel_named(module, "sgemm_8x8")
    new, fn, changes = apply(module, PASS, k, block=(16, 16, 1), minnctapersm=4)
    assert _directives(fn) == {".maxntid": ["256"], ".minnctapersm": ["4"]}
    # 4 blocks of 256 threads in 64K registers: at most 64 registers per thread
    assert _registers(new, k) <= 64
    # infeasible: 16 blocks x 256 threads > 2048 threads per SM
    _, fn, changes = apply(module, PASS, k, block=256, minnctapersm=16)
    assert changes == [] and fn.directives == []


def test_the_users_launch_bounds_are_kept(module):
    k = kernel_named(module, "bounded")
    # a block larger than __launch_bounds__ cannot be launched: the spec is wrong, no-op
    _, fn, changes = apply(module, PASS, k, block=256, maxnreg=32, minnctapersm=4)
    assert changes == []
    # within the bounds: .maxntid stays 128 (never tightened to the spec's 64)
    new, fn, changes = apply(module, PASS, k, block=64, maxnreg=32, minnctapersm=4)
    d = _directives(fn)
    assert d[".maxntid"] == ["128", "1", "1"] and d[".minnctapersm"] == ["4"] and d[".maxnreg"] == ["32"]
    _registers(new, k)
    # printed in nvcc's order, parses back
    text = ptx_ir.emit(new)
    head = text[text.index(k):text.index("{", text.index(k))]
    assert head.index(".maxntid") < head.index(".minnctapersm") < head.index(".maxnreg")
    assert _directives(ptx_ir.parse(text).function(k)) == d


def test_a_declared_smaller_maxnreg_is_never_raised():
    text = """.version 9.0
.target sm_90
.address_size 64
.visible .entry m(.param .u64 m_param_0)
.maxnreg 40
{
	ret;
}
"""
    module = ptx_ir.parse(text)
    _, fn, changes = apply(module, PASS, "m", block=128, maxnreg=64)
    assert changes == [] and _directives(fn) == {".maxnreg": ["40"]}
    _, fn, changes = apply(module, PASS, "m", block=128, maxnreg=32)
    assert _directives(fn) == {".maxnreg": ["32"]}


def test_device_functions_are_left_alone():
    text = """.version 9.0
.target sm_90
.address_size 64
.visible .func f()
{
	ret;
}
"""
    module = ptx_ir.parse(text)
    _, fn, changes = apply(module, PASS, "f", block=128, maxnreg=32)
    assert changes == []


@pytest.mark.slow
def test_corpus_never_crashes_and_every_rewrite_assembles():
    run = run_pass_on_corpus(PASS, [{"block": 128, "maxnreg": 32, "minnctapersm": 2},
                                    {"block": (32, 8), "maxnreg": 128}],
                             max_bytes=60_000)
    assert not run.failures, "\n".join(run.failures[:5])
    assert run.fired_kernels > 50
    print(f"\noccupancy on the corpus: {run.files} files, {run.kernels} kernel runs, fired on "
          f"{run.fired_kernels}, {run.modules_assembled} modules assembled, {run.seconds:.0f}s")


def test_kernels_that_call_functions_are_left_alone():
    text = """.version 9.0
.target sm_90
.address_size 64
.extern .func (.param .b32 r) g(.param .b32 a);
.visible .entry c(.param .u32 c_param_0)
{
	.reg .b32 %r<3>;
	ld.param.u32 %r1, [c_param_0];
	{
	.param .b32 a;
	st.param.b32 [a], %r1;
	.param .b32 r;
	call.uni (r), g, (a);
	ld.param.b32 %r2, [r];
	}
	ret;
}
"""
    module = ptx_ir.parse(text)
    _, fn, changes = apply(module, PASS, "c", block=128, maxnreg=32, minnctapersm=2)
    assert changes == [] and fn.directives == []


def test_the_differential_check_accepts_the_rewrite_on_the_emulator():
    from tests.passes.data.ptx_tools import buffer, emulator_available, judge_on_emulator, scalar
    ok, why = emulator_available()
    if not ok:
        pytest.skip(why)
    module = load("occupancy.ptx")
    k = kernel_named(module, "bounded")
    new, _, changes = apply(module, PASS, k, block=128, maxnreg=32, minnctapersm=4)
    assert changes
    spec = {"kernel": k, "grid": ["cdiv(n, 128)", 1, 1], "block": [128, 1, 1], "params": [
        buffer("out", "f32", "n", "out"), buffer("in", "f32", "n", "in"), scalar("n", "s32", 500)]}
    verdict = judge_on_emulator(ptx_ir.emit(module), ptx_ir.emit(new), spec)
    if verdict.status == "could_not_judge":
        pytest.skip(verdict.reason)
    assert verdict.status == "accepted", verdict.reason
