"""unroll and nounroll: where they fire, where they must not, that the output assembles,
that the unrolled-path guard is exact (checked against the wrapping loop it stands for),
and (on the CPU emulator) that baseline and unrolled kernels give bit-identical outputs.

data/unroll_loops.ptx is nvcc 13.0 output of data/unroll_loops.cu (regenerate, in
tests/passes/data: nvcc -arch=sm_90 -O3 -ptx unroll_loops.cu -o unroll_loops.ptx).
"""
from __future__ import annotations

import random

import pytest

import ptx_ir
from ptx_ir import Reg
from superopt.passes._loop_tools import run_straight
from superopt.passes.unroll import DEC, INC, LoopPlan, _guard_possible, guard_code, loop_plans
from tests.passes.data.unroll_tools import (
    apply, assemble, buf, emulator_available, find_kernel, judge, load, ptxas_path,
    run_on_corpus, scalar, spec,
)

TEXT = load("unroll_loops.ptx")
FIRES = ["saxpy_gs", "scale_gs_u", "dot_gs", "sum_stride64", "find_first_negative", "reverse_gs"]
NEVER = ["tiled_sum", "shfl_loop", "chase", "rowsum_nounroll"]
needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas not on PATH")


@pytest.mark.parametrize("factor", [2, 4, 8])
def test_unroll_fires_exactly_where_expected(factor):
    out = apply("unroll", TEXT, factor=factor)
    for frag in FIRES:
        changes = out.changes[find_kernel(TEXT, frag)]
        assert len(changes) == 1 and f"unrolled x{factor}" in changes[0].description, frag
    for frag in NEVER:
        assert out.changes[find_kernel(TEXT, frag)] == [], frag
    if ptxas_path():
        ok, log = assemble(out.text)
        assert ok, log


def test_unrolled_copies_keep_every_memory_access_in_order():
    """The unrolled path is k verbatim copies of the body: the same memory instructions in
    the same order (registers renamed), and the original loop stays as the remainder."""
    kernel = find_kernel(TEXT, "dot_gs")
    base = next(f for f in ptx_ir.parse(TEXT).kernels if f.name == kernel)
    (loop,) = base.loops
    body_mem = [(i.opcode, i.modifiers) for b in loop.blocks for i in b.instructions
                if i.opcode in ("ld", "st", "fma", "add", "mul") and i.type in (".f32",)]
    out = apply("unroll", TEXT, kernels=[kernel], factor=4)
    fn = next(f for f in out.module.kernels if f.name == kernel)
    mem = [(i.opcode, i.modifiers) for i in fn.instructions
           if i.opcode in ("ld", "st", "fma", "add", "mul") and i.type in (".f32",)]
    assert mem.count(body_mem[0]) == 5 * body_mem.count(body_mem[0])
    i = mem.index(body_mem[0])
    assert mem[i:i + 4 * len(body_mem)] == body_mem * 4


def test_nvcc_remainder_loops_and_user_nounroll_are_left_alone():
    module = ptx_ir.parse(load("unroll_loops.ptx"))
    fn = next(f for f in module.kernels if "sum_stride64" in f.name)
    # nvcc unrolled this loop by 4 itself; its remainder loop carries .pragma "nounroll"
    plans = loop_plans(fn)
    assert len(plans) == 1 and len(fn.loops) == 2


def test_second_application_unrolls_the_new_loop_again_but_stays_valid():
    out = apply("unroll", TEXT, factor=2)
    again = apply("unroll", out.text, factor=2)
    if ptxas_path():
        ok, log = assemble(again.text)
        assert ok, log


# --------------------------------------------------------------------------- the guard


def _dummy_fn():
    return ptx_ir.parse(".version 9.0\n.target sm_90\n.address_size 64\n"
                        ".visible .entry k()\n{\n\t.reg .b32 %r<4>;\n\tret;\n}\n").function("k")


def _wrap(v, w):
    return v & ((1 << w) - 1)


def _interp(v, w, signed):
    v = _wrap(v, w)
    return v - (1 << w) if signed and v >> (w - 1) else v


def _cmp(op, a, b):
    return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "ne": a != b}[op]


def _runs_k_more(iv, bound, step, sign, op, signed, w, k) -> bool:
    """The loop this guard stands for: does it continue after each of the next k-1 updates?"""
    for _ in range(k - 1):
        iv = _wrap(iv + sign * step, w)
        if not _cmp(op, _interp(iv, w, signed), _interp(bound, w, signed)):
            return False
    return True


def _edge_values(w, signed):
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    vals = {lo, lo + 1, lo + 2, hi, hi - 1, hi - 2, 0, 1, 2, 3, 7, 8, 100, -1, -3, -8}
    return [_wrap(v, w) for v in vals]


@pytest.mark.parametrize("k", [2, 4, 8])
@pytest.mark.parametrize("w,signed", [(32, True), (32, False), (64, True), (64, False)])
@pytest.mark.parametrize("op", ["lt", "le", "gt", "ge", "ne"])
def test_guard_is_sound_constant_step(k, w, signed, op):
    rng = random.Random(k * 1000 + w + signed * 7 + len(op))
    fn = _dummy_fn()
    steps = [1, 2, 4, 3, 256, -1, -2, -4, -3, -256]
    checked = 0
    for step in steps:
        plan = LoopPlan(None, None, None, None, None, None, [], None, None, None, Reg("%iv"),
                        w, signed, op, Reg("%b"), step)
        if not _guard_possible(plan):
            continue
        code, g = guard_code(fn, plan, k)
        values = _edge_values(w, signed) + [rng.getrandbits(w) for _ in range(40)]
        for iv in values:
            for b in values[:24] + [_wrap(iv + d, w) for d in (-9, -3, -1, 0, 1, 3, 9)]:
                env = run_straight(code, {"%iv": iv, "%b": b}, strict=True)
                if env[g.name]:
                    assert _runs_k_more(iv, b, abs(step), 1 if step > 0 else -1, op, signed, w, k), \
                        (iv, b, step, op, signed, w, k)
                checked += 1
        # not vacuous: far from the bound the unrolled path is taken
        start, bound = (0, 1000 * abs(step)) if step > 0 else (1000 * abs(step), 0)
        if op == "ne":
            bound = start + step * 1000
        env = run_straight(code, {"%iv": _wrap(start, w), "%b": _wrap(bound, w)}, strict=True)
        assert env[g.name], (op, step, signed, w)
    if op in INC | DEC | {"ne"}:
        assert checked


def _register_plan(signed, op, sign):
    return LoopPlan(None, None, None, None, None, None, [], None, None, None, Reg("%iv"),
                    32, signed, op, Reg("%b"), Reg("%s"), step_sign=sign)


# the shapes with a register step whose direction the pass can prove (the others it leaves)
REGISTER_SHAPES = [(s, op, sign) for s in (True, False) for op in ("lt", "le", "gt", "ge")
                   for sign in (1, -1) if _guard_possible(_register_plan(s, op, sign))]


def test_register_step_shapes():
    assert sorted(REGISTER_SHAPES) == sorted(
        [(True, op, sign) for op in ("lt", "le", "gt", "ge") for sign in (1, -1)]
        + [(False, "lt", 1), (False, "le", 1), (False, "gt", -1), (False, "ge", -1)])


@pytest.mark.parametrize("k", [2, 4, 8])
@pytest.mark.parametrize("signed,op,sign", REGISTER_SHAPES)
def test_guard_is_sound_register_step(k, signed, op, sign):
    rng = random.Random(k + signed + len(op) + sign)
    fn = _dummy_fn()
    plan = _register_plan(signed, op, sign)
    code, g = guard_code(fn, plan, k)
    values = _edge_values(32, signed) + [rng.getrandbits(32) for _ in range(25)]
    steps = [_wrap(s, 32) for s in (1, 2, 3, 64, 1 << 20, -1, -2, -64, 1 << 31, (1 << 31) - 1, 0)]
    for iv in values:
        for b in values[:20] + [_wrap(iv + d, 32) for d in (-5, -1, 0, 1, 5)]:
            for st in steps:
                env = run_straight(code, {"%iv": iv, "%b": b, "%s": st}, strict=True)
                if env[g.name]:
                    assert _runs_k_more(iv, b, st, sign, op, signed, 32, k), (iv, b, st, op, signed, sign)


# --------------------------------------------------------------------------- nounroll


def test_nounroll_marks_loops_without_the_pragma():
    out = apply("nounroll", TEXT)
    for frag in FIRES + ["tiled_sum", "shfl_loop", "chase"]:
        assert len(out.changes[find_kernel(TEXT, frag)]) >= 1, frag
    assert out.changes[find_kernel(TEXT, "rowsum_nounroll")] == []
    # instructions unchanged, only directives added
    base = ptx_ir.parse(TEXT)
    for fn in out.module.kernels:
        old = base.function(fn.name)
        assert [(i.opcode, i.modifiers, i.operands) for i in fn.instructions] == \
            [(i.opcode, i.modifiers, i.operands) for i in old.instructions]
    again = apply("nounroll", out.text)
    assert not any(again.changes.values())
    if ptxas_path():
        ok, log = assemble(out.text)
        assert ok, log


def test_nounroll_scope_all_reaches_outer_loops():
    text = load("warp_shuffle_reductions.ptx")
    inner = apply("nounroll", text, scope="innermost")
    every = apply("nounroll", text, scope="all")
    name = find_kernel(text, "rows_sum")
    assert len(every.changes[name]) > len(inner.changes[name])


# --------------------------------------------------------------------------- corpus


@pytest.mark.slow
@needs_ptxas
def test_unroll_on_the_corpus():
    result = run_on_corpus("unroll", grid=[{"factor": 4}, {"factor": 8}])
    assert not result.failures, result.failures[:5]
    assert result.count({"factor": 4}) > 10


@pytest.mark.slow
@needs_ptxas
def test_nounroll_on_the_corpus():
    result = run_on_corpus("nounroll", grid=[{"scope": "all"}])
    assert not result.failures, result.failures[:5]
    assert result.count() > 10


# --------------------------------------------------------------------------- semantics

EMU_OK, EMU_WHY = emulator_available()
needs_emulator = pytest.mark.skipif(not EMU_OK, reason=f"CPU emulator unavailable: {EMU_WHY}")


def _launch(frag):
    k = find_kernel(TEXT, frag)
    g, b = [2, 1, 1], [64, 1, 1]
    threads = 128
    if frag == "saxpy_gs":
        return spec(k, b, g, [scalar("a", "f32", 1.5), buf("x", "f32", "n"),
                               buf("y", "f32", "n", "inout"), scalar("n", "s32", 3001)])
    if frag == "scale_gs_u":
        return spec(k, b, g, [buf("x", "f32", "n"), buf("y", "f32", "n", "out"),
                               scalar("n", "u32", 2999), scalar("s", "f32", -0.75)])
    if frag == "dot_gs":
        return spec(k, b, g, [buf("a", "f32", "n"), buf("b", "f32", "n"),
                               buf("partial", "f32", threads, "out"), scalar("n", "s32", 3001)])
    if frag == "sum_stride64":
        return spec(k, [256, 1, 1], [1, 1, 1], [buf("x", "f32", "n"), buf("out", "f32", 256, "out"),
                                                 scalar("n", "s64", 20000)])
    if frag == "find_first_negative":
        return spec(k, b, g, [buf("x", "f32", "n"), buf("pos", "s32", threads, "out"),
                               scalar("n", "s32", 3001)])
    if frag == "reverse_gs":
        return spec(k, b, g, [buf("x", "s32", "n"), buf("y", "s32", "n", "out"),
                               scalar("n", "s32", 3001)])
    raise KeyError(frag)


@needs_emulator
@pytest.mark.parametrize("factor", [2, 4, 8])
@pytest.mark.parametrize("frag", FIRES)
def test_unrolled_is_bit_identical_on_the_emulator(frag, factor):
    kernel = find_kernel(TEXT, frag)
    out = apply("unroll", TEXT, kernels=[kernel], factor=factor)
    assert out.fired(kernel)
    verdict = judge(TEXT, out.text, _launch(frag), sets=3)
    assert verdict.status == "accepted", verdict.summary()


@needs_emulator
def test_nounroll_is_bit_identical_on_the_emulator():
    kernel = find_kernel(TEXT, "dot_gs")
    out = apply("nounroll", TEXT, kernels=[kernel])
    verdict = judge(TEXT, out.text, _launch("dot_gs"), sets=2)
    assert verdict.status == "accepted", verdict.summary()
