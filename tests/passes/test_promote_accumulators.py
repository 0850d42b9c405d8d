"""promote-accumulators: a global accumulator kept in a register behind the launch-time no-alias
check, judged by the project's differential check on the emulator, aliased layouts included
(superopt.judge.alias_check): the promoted kernel must give nvcc's results bit for bit where
buffers are disjoint and where they overlap.

Kernels: tests/passes/alias_kernels/accumulate.cu (nvcc 13.0 PTX beside it; build.py regenerates).
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

import ptx_ir
from ptx_ir.nodes import Reg
from superopt.judge.check import ACCEPTED, REJECTED
from superopt.passes import get_pass
from superopt.passes._alias_footprint import build_alias_check
from superopt.passes._loop_tools import I
from superopt.passes.promote_accumulators import promote
from tests.passes.data.ptx_tools import buffer, judge_on_emulator, scalar
from tests.passes.test_alias_footprint import PTX

SPECS = {
    "mvt_row": {"grid": ["cdiv(nx, 32)", 1, 1], "block": [32, 1, 1], "params": [
        buffer("A", "f32", "nx*ny", "in"), buffer("x", "f32", "ny", "in"), buffer("tmp", "f32", "nx", "out"),
        {**scalar("nx", "s32", 37), "values": [5, 64]}, {**scalar("ny", "s32", 29), "values": [3, 8]}]},
    "mvt_col": {"grid": ["cdiv(ny, 32)", 1, 1], "block": [32, 1, 1], "params": [
        buffer("A", "f32", "nx*ny", "in"), buffer("t", "f32", "nx", "in"), buffer("y", "f32", "ny", "inout"),
        {**scalar("nx", "s32", 23), "values": [2, 9]}, {**scalar("ny", "s32", 41), "values": [7]}]},
    "gemm": {"grid": ["cdiv(nj, 8)", "cdiv(ni, 8)", 1], "block": [8, 8, 1], "params": [
        {**scalar("ni", "s32", 13), "values": [8]}, {**scalar("nj", "s32", 11), "values": [16]},
        {**scalar("nk", "s32", 9), "values": [3]}, scalar("alpha", "f32", 1.5), scalar("beta", "f32", 0.5),
        buffer("a", "f32", "ni*nk", "in"), buffer("b", "f32", "nk*nj", "in"), buffer("c", "f32", "ni*nj", "inout")]},
    "covar": {"grid": ["cdiv(m, 16)", 1, 1], "block": [16, 1, 1], "params": [
        {**scalar("m", "s32", 12), "values": [5]}, {**scalar("n", "s32", 7), "values": [2]},
        buffer("symmat", "f32", "m*m", "inout"), buffer("data", "f32", "n*m", "in")]},
    "early_exit": {"grid": ["cdiv(n, 32)", 1, 1], "block": [32, 1, 1], "params": [
        buffer("a", "f32", "n*n", "in"), buffer("acc", "f32", "n", "inout"),
        {**scalar("n", "s32", 21), "values": [6]}, scalar("limit", "f32", 1.0)]},
}


def module():
    return ptx_ir.parse(PTX)


def spec(kernel):
    return {"kernel": kernel, **SPECS[kernel]}


def promoted_module(kernel):
    m = module()
    changes = get_pass("promote-accumulators")(m.function(kernel))
    return m, changes


@pytest.mark.parametrize("kernel", sorted(SPECS))
def test_the_promoted_kernel_gives_nvccs_results_disjoint_and_aliased(kernel):
    m, changes = promoted_module(kernel)
    assert changes and "kept in registers" in changes[0].description, kernel
    fn = m.function(kernel)
    inside = [i for i in fn.instructions if i.opcode == "st"]
    assert inside, kernel
    v = judge_on_emulator(PTX, ptx_ir.emit(m), spec(kernel))
    assert v.status == ACCEPTED, (kernel, v.reason)


def test_an_early_return_stores_the_register_first():
    """early_exit leaves its loop once acc[i] > limit (or at the end): both ways out store."""
    m = module()
    fast = m.function("early_exit").clone()
    assert promote(fast)
    body = [s for s in fast.instructions]
    stores = [k for k, i in enumerate(body) if i.opcode == "st"]
    loop_stores = [i for i in body if i.opcode == "mov" and i.operands and isinstance(i.operands[0], Reg)
                   and i.operands[0].name.startswith("%np")]
    assert stores and loop_stores


def test_promotion_without_the_check_is_rejected_on_an_aliased_launch():
    """The promoted body alone (no check): the judge's aliased layouts (acc onto a: a one-thread
    launch) tell it from nvcc's code."""
    for kernel in ("mvt_row", "early_exit"):
        m = module()
        fn = m.function(kernel)
        assert promote(fn)
        v = judge_on_emulator(PTX, ptx_ir.emit(m), spec(kernel))
        assert v.status == REJECTED and "overlap" in v.reason, (kernel, v.reason)


def test_a_check_off_by_one_at_the_range_end_is_rejected():
    """The promoted mvt_row behind a check whose range for A ends one element early: the judge's
    layout with tmp starting on A's last element (one thread: deterministic) catches it; the
    real check is accepted there."""
    from superopt.passes._versioning import versioned
    m = module()
    fn = m.function("mvt_row")
    good = m.clone()
    assert get_pass("promote-accumulators")(good.function("mvt_row"))
    fast = fn.clone()
    assert promote(fast)
    check, _ = build_alias_check(fn)
    a = next(p.name for p in fn.params if p.name.endswith("_param_0"))
    others = [o for o in check.compared if o != check.written[0]]
    pair = others.index(a)                 # the judge lays tmp onto A (an input, first in order)
    # each pair's code: setp.le before, tmp.hi, A.lo; setp.le after, A.hi, tmp.lo; or
    starts = [k for k, i in enumerate(check.instructions) if i.opcode == "setp" and ".le" in i.modifiers
              and k + 2 < len(check.instructions) and check.instructions[k + 2].opcode == "or"]
    k = starts[pair]
    after = check.instructions[k + 1]
    short = fn.new_register(".s64")
    check.instructions[k + 1:k + 1] = [I("add", ".s64", short, after.operands[1], -4)]
    check.instructions[k + 2] = after.with_(operands=(after.operands[0], short, after.operands[2]))
    versioned(fn, fast, check, origin="off by one")
    v = judge_on_emulator(PTX, ptx_ir.emit(m), spec("mvt_row"))
    assert v.status == REJECTED and "last element" in v.reason, v.reason
    ok = judge_on_emulator(PTX, ptx_ir.emit(good), spec("mvt_row"))
    assert ok.status == ACCEPTED, ok.reason


def test_another_access_to_the_same_buffer_is_refused():
    m = module()
    fast = m.function("same_buffer").clone()
    assert promote(fast) == []
    assert get_pass("promote-accumulators")(m.function("same_buffer")) == []


def test_a_data_dependent_address_gives_no_check_and_no_change():
    m = module()
    assert get_pass("promote-accumulators")(m.function("gather")) == []


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
def test_promoted_kernels_assemble(tmp_path):
    for kernel in SPECS:
        m, changes = promoted_module(kernel)
        assert changes
        path = tmp_path / f"{kernel}.ptx"
        path.write_text(ptx_ir.emit(m))
        subprocess.run(["ptxas", "-arch=sm_90", str(path), "-o", str(tmp_path / "o.cubin")],
                       check=True, capture_output=True)
