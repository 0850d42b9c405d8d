"""unroll and nounroll: where they fire, where they must not, that the output assembles,
that the unrolled-path guard is exact (checked against the wrapping loop it stands for),
and (on the CPU emulator) that baseline and unrolled kernels give bit-identical outputs.

data/unroll_loops.ptx is nvcc 13.0 output of data/unroll_loops.cu (regenerate, in
tests/passes/data: nvcc -arch=sm_90 -O3 -ptx unroll_loops.cu -o unroll_loops.ptx), and
data/unroll_loops64.ptx of data/unroll_loops64.cu (64-bit indices with a register step:
size_t and long long grid-stride loops, and probe kernels that run one loop per thread
from chosen start, bound and step).
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


# --------------------------------------------------------------------------- 64-bit indices,
# register step (size_t / long long grid-stride loops)

TEXT64 = load("unroll_loops64.ptx")
FIRES64 = ["residual_sq_gs64", "saxpy_gs64", "histogram_gs64", "sum_incl_gs64",
           "histogram_gs_s64", "find_first_negative_s64", "sum_incl_s64", "reverse_gs64"]
# probe kernel -> (signed, op, step_sign) of its exit test and update
PROBES64 = {"probe_lt_u64": (False, "lt", 1), "probe_le_u64": (False, "le", 1),
            "probe_gt_u64": (False, "gt", -1), "probe_lt_s64": (True, "lt", 1),
            "probe_le_s64": (True, "le", 1), "probe_gt_s64": (True, "gt", -1),
            "probe_ge_s64": (True, "ge", 1)}
NEVER64 = ["scale_gs_s64"]      # nvcc unrolled it itself
M64 = (1 << 64) - 1


@pytest.mark.parametrize("factor", [2, 4, 8])
def test_unroll_fires_on_64bit_register_step_loops(factor):
    out = apply("unroll", TEXT64, factor=factor)
    for frag in FIRES64 + list(PROBES64):
        changes = out.changes[find_kernel(TEXT64, frag)]
        assert len(changes) == 1 and f"unrolled x{factor}" in changes[0].description, frag
    for frag in NEVER64:
        assert out.changes[find_kernel(TEXT64, frag)] == [], frag
    plan = loop_plans(ptx_ir.parse(TEXT64).function(find_kernel(TEXT64, "residual_sq_gs64")))[0]
    assert (plan.width, plan.signed, plan.op, isinstance(plan.step, Reg)) == (64, False, "lt", True)
    if ptxas_path():
        ok, log = assemble(out.text)
        assert ok, log


def _register_plan64(signed, op, sign, bound=None):
    return LoopPlan(None, None, None, None, None, None, [], None, None, None, Reg("%iv"),
                    64, signed, op, Reg("%b") if bound is None else bound, Reg("%s"),
                    step_sign=sign)


REGISTER_SHAPES64 = [(s, op, sign) for s in (True, False) for op in ("lt", "le", "gt", "ge")
                     for sign in (1, -1) if _guard_possible(_register_plan64(s, op, sign))]


def test_register_step_shapes_64():
    assert sorted(REGISTER_SHAPES64) == sorted(REGISTER_SHAPES)


def _ideal_guard(iv, b, st, sign, op, signed, k) -> bool:
    """The exact G for a register step: the counter moves towards the bound (a run-time
    sign test for signed comparisons), the current value passes the test, and so does
    the value k-1 updates later, in exact arithmetic (then every value in between is in
    range: no add wraps and every test is taken)."""
    v, bnd = _interp(iv, 64, signed), _interp(b, 64, signed)
    delta = sign * _interp(st, 64, signed)
    if (op in INC and delta < 0) or (op in DEC and delta > 0) or (signed and delta == 0):
        return False
    return _cmp(op, v, bnd) and _cmp(op, v + (k - 1) * delta, bnd)


def _wraps_within(iv, st, sign, signed, k) -> bool:
    """Whether one of the next k-1 updates of the original loop wraps (leaves the range)."""
    lo, hi = (-(1 << 63), (1 << 63) - 1) if signed else (0, M64)
    v = _interp(iv, 64, signed)
    delta = sign * _interp(st, 64, signed)
    return any(not lo <= v + j * delta <= hi for j in range(1, k))


def _values64(rng, k):
    edges = [0, 1, 2, 3, 100, (1 << 63) - 2, (1 << 63) - 1, 1 << 63, (1 << 63) + 1,
             M64 - 1, M64, M64 - 100, (1 << 32) - 1, 1 << 32]
    return [v & M64 for v in edges] + [rng.getrandbits(64) for _ in range(4)]


def _steps64(rng, k):
    c = M64 // max(1, k - 1)          # the largest step whose (k-1) multiple is exact
    steps = [0, 1, 2, 3, 1024, 1 << 32, c - 1, c, c + 1, (c >> 1), (1 << 62),
             (1 << 63) - 1, 1 << 63, M64, M64 - 1, -3, -1024, -(1 << 62)]
    return [v & M64 for v in steps] + [rng.getrandbits(64), rng.getrandbits(40)]


def _bounds64(rng, iv, st, sign, values):
    """Bounds near where the guard flips: the value k-1 updates on, +-2, and edges."""
    near = [(iv + sign * j * st + d) & M64 for j in (1, 3, 7, 15) for d in (-2, -1, 0, 1, 2)]
    return near + values[:8] + [(iv + d) & M64 for d in (-1, 0, 1)]


@pytest.mark.parametrize("k", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("signed,op,sign", REGISTER_SHAPES64)
def test_guard_is_exact_register_step_64(k, signed, op, sign):
    """The emitted instructions (run by ptx_ir's integer semantics) give exactly the
    overflow-free G: never true when an add of the next k-1 updates would wrap or a test
    fail, and true whenever the next k-1 values all stay between the counter and the bound."""
    rng = random.Random(hash((k, signed, op, sign)) & 0xFFFF)
    fn = _dummy_fn()
    code, g = guard_code(fn, _register_plan64(signed, op, sign), k)
    assert not any(i.opcode == "div" for i in code)
    values = _values64(rng, k)
    true = false = 0
    for st in _steps64(rng, k):
        for iv in values:
            for b in _bounds64(rng, iv, st, sign, values):
                got = run_straight(code, {"%iv": iv, "%b": b, "%s": st}, strict=True)[g.name]
                want = _ideal_guard(iv, b, st, sign, op, signed, k)
                assert got == want, (iv, b, st, signed, op, sign, k)
                if got:
                    assert _runs_k_more(iv, b, st, sign, op, signed, 64, k)
                    assert not _wraps_within(iv, st, sign, signed, k)
                    true += 1
                else:
                    false += 1
    assert true > 50 and false > 50


@pytest.mark.parametrize("k", [2, 4, 8])
@pytest.mark.parametrize("signed,op,sign", [(False, "lt", 1), (True, "gt", -1), (True, "ge", 1)])
def test_guard_register_step_64_constant_bound(k, signed, op, sign):
    """A literal bound (reverse_gs64's ``i > -1``) goes through a register."""
    from ptx_ir.nodes import Imm
    rng = random.Random(k)
    values = _values64(rng, k)
    for b in [0, -1 & M64, 1000, M64, 1 << 63]:
        lit = str(_interp(b, 64, signed)) if signed else str(b)
        fn = _dummy_fn()
        code, g = guard_code(fn, _register_plan64(signed, op, sign, Imm(lit)), k)
        for st in _steps64(rng, k)[:12]:
            for iv in values + [(b - sign * j * st) & M64 for j in (k - 2, k - 1, k)]:
                got = run_straight(code, {"%iv": iv, "%s": st}, strict=True)[g.name]
                assert got == _ideal_guard(iv, b, st, sign, op, signed, k), (iv, b, st, k)


# ---- the same, on the CPU emulator: the guard as printed PTX, and whole probe loops

_GUARD_KERNEL = """.version 9.0
.target sm_90
.address_size 64
.visible .entry guard_probe(.param .u64 inp, .param .u64 out)
{
\t.reg .pred %p<2>;
\t.reg .b32 %r<8>;
\t.reg .b64 %rd<12>;
\tld.param.u64 %rd1, [inp];
\tld.param.u64 %rd2, [out];
\tcvta.to.global.u64 %rd1, %rd1;
\tcvta.to.global.u64 %rd2, %rd2;
\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, %ctaid.x;
\tmov.u32 %r3, %ntid.x;
\tmad.lo.s32 %r1, %r2, %r3, %r1;
\tmul.wide.u32 %rd3, %r1, 24;
\tadd.s64 %rd3, %rd1, %rd3;
\tld.global.u64 %rd4, [%rd3];
\tld.global.u64 %rd5, [%rd3+8];
\tld.global.u64 %rd6, [%rd3+16];
\tmul.wide.u32 %rd7, %r1, 4;
\tadd.s64 %rd7, %rd2, %rd7;
\tmov.u32 %r4, 0;
\tst.global.u32 [%rd7], %r4;
\tret;
}
"""


def _emulate(text, kernel, arrays, out_words, block=128):
    """Launch ``kernel`` with the given u64 input arrays and one output of ``out_words``
    64-bit words (32-bit words when out_words is negative); returns the output."""
    import numpy as np

    from superopt.judge.emulator import LoadedModule
    dev = LoadedModule(text)
    params = []
    for a in arrays:
        a = np.asarray(a, dtype=np.uint64)
        addr = dev.alloc(max(8, a.nbytes))
        dev.heap.write(addr, a)
        params.append(addr)
    dt = np.uint64 if out_words > 0 else np.uint32
    n = abs(out_words)
    out = dev.alloc(n * dt().itemsize)
    dev.heap.write(out, np.full(n, 0xAB, dt))
    threads = len(arrays[0]) // 3
    dev.launch(kernel, (-(-threads // block), 1, 1), (block, 1, 1), [*params, out], seed=1,
               timeout=30)
    return dev.heap.read(out, n * dt().itemsize).view(dt)


def _pad_triples(triples, op="lt", block=128):
    """Fill the last block with loops that run no iteration."""
    triples = list(triples)
    while len(triples) % block:
        triples.append((1, 0, 1) if op in INC else (0, 1, 1))
    return triples


@needs_emulator
@pytest.mark.parametrize("k", [2, 4, 8])
@pytest.mark.parametrize("signed,op,sign", REGISTER_SHAPES64)
def test_guard_register_step_64_on_the_emulator(k, signed, op, sign):
    """The guard as printed PTX, run by the emulator: one (counter, bound, step) per thread,
    G stored as 0/1, equal to the exact G everywhere."""
    from ptx_ir.nodes import Instruction
    module = ptx_ir.parse(_GUARD_KERNEL)
    fn = module.function("guard_probe")
    plan = LoopPlan(None, None, None, None, None, None, [], None, None, None, Reg("%rd4"),
                    64, signed, op, Reg("%rd5"), Reg("%rd6"), step_sign=sign)
    code, g = guard_code(fn, plan, k)
    store = next(i for i in fn.instructions if i.opcode == "st")
    from superopt.passes._loop_tools import I
    fn.insert_before(store, [*code, I("selp", "u32", Reg("%r4"), 1, 0, g)])
    fn.validate()
    text = ptx_ir.emit(module)
    rng = random.Random(k * 31 + sign)
    values = _values64(rng, k)
    triples = [(iv, b, st) for st in _steps64(rng, k) for iv in values[::2]
               for b in _bounds64(rng, iv, st, sign, values)[::2]]
    triples = _pad_triples(triples)
    flat = [x for t in triples for x in t]
    got = _emulate(text, "guard_probe", [flat], -len(triples))
    want = [int(_ideal_guard(iv, b, st, sign, op, signed, k)) for iv, b, st in triples]
    bad = [(triples[i], int(got[i]), want[i]) for i in range(len(triples)) if got[i] != want[i]]
    assert not bad, bad[:5]
    assert 0 < sum(want) < len(want)


def _probe_trips(iv, b, st, sign, op, signed, limit=200):
    """Iterations of the probe loop ``for (; iv OP b; iv += sign*st)``, or None past limit."""
    for n in range(limit + 1):
        if not _cmp(op, _interp(iv, 64, signed), _interp(b, 64, signed)):
            return n
        iv = (iv + sign * st) & M64
    return None


def _probe_triples(signed, op, sign, k, rng):
    """Starts, bounds and steps around every edge, the loop running at most 200 times."""
    out = []
    starts = [0, 5, (1 << 63) - 40, 1 << 63, M64 - 40, M64 - 3, (-(1 << 62)) & M64]
    steps = [1, 2, 3, 7, 8, 1 << 60, (1 << 63) - 1, 1 << 63, M64, M64 - 9, M64 // (k - 1),
             M64 // (k - 1) + 1, (-5) & M64, (-8) & M64]
    steps = [v & M64 for v in steps]
    for iv in starts:
        for st in steps:
            for j in range(0, 2 * k + 2):
                for d in (-1, 0, 1):
                    b = (iv + sign * j * st + d) & M64
                    if _probe_trips(iv, b, st, sign, op, signed) is not None:
                        out.append((iv, b, st))
    # wrapping steps: the counter wraps around and the original loop goes on or stops
    out += [(50, 100, (-10) & M64), (M64 - 5, 3, 4), (M64 - 5, M64, 2), ((1 << 63) - 3, (1 << 63) - 1, 5)]
    out = [t for t in out if _probe_trips(*t, sign, op, signed) is not None]
    rng.shuffle(out)
    return out


@needs_emulator
@pytest.mark.parametrize("factor", [2, 4, 8])
@pytest.mark.parametrize("frag", list(PROBES64))
def test_probe_loops_64_bit_identical_on_the_emulator(frag, factor):
    """Whole loops, baseline vs unrolled, from counter values near 0, 2^63 and 2^64 with
    steps near the guard's overflow limit and wrapping ones: the same counter sequence
    (hashed) and trip count on every thread, and both as the loop's definition says."""
    signed, op, sign = PROBES64[frag]
    kernel = find_kernel(TEXT64, frag)
    out = apply("unroll", TEXT64, kernels=[kernel], factor=factor)
    assert out.fired(kernel)
    triples = _pad_triples(_probe_triples(signed, op, sign, factor, random.Random(factor)), op)
    flat = [x for t in triples for x in t]
    base = _emulate(TEXT64, kernel, [flat], 2 * len(triples))
    cand = _emulate(out.text, kernel, [flat], 2 * len(triples))
    assert list(base) == list(cand)
    long_ = 0
    for t, (iv, b, st) in enumerate(triples):
        n = _probe_trips(iv, b, st, sign, op, signed)
        h, v = 0, iv
        for _ in range(n):
            h = (h * 1000003 + v) & M64
            v = (v + sign * st) & M64
        assert (int(base[2 * t]), int(base[2 * t + 1])) == (h, n), (iv, b, st)
        long_ += n >= 2 * factor
    assert long_ > 20          # the unrolled path ran


def _launch64(frag, grid, block, n):
    """A spec for a realistic 64-bit kernel: ``n`` the list of sizes to try, first first."""
    k = find_kernel(TEXT64, frag)
    threads = grid * block
    g, b = [grid, 1, 1], [block, 1, 1]
    size = lambda name, t: scalar(name, t, n[0], values=n[1:])   # noqa: E731
    if frag == "residual_sq_gs64":
        return spec(k, b, g, [buf("a", "f32", "n"), buf("b", "f32", "n"), size("n", "u64"),
                              buf("partial", "f64", threads, "out")])
    if frag == "saxpy_gs64":
        return spec(k, b, g, [scalar("s", "f32", 1.5), buf("x", "f32", "n"),
                              buf("y", "f32", "n", "inout"), size("n", "u64")])
    if frag in ("histogram_gs64", "histogram_gs_s64"):
        return spec(k, b, g, [buf("in", "u8", "n"), buf("hist", "u32", 64, "inout"),
                              size("n", "u64" if frag == "histogram_gs64" else "s64")])
    if frag in ("sum_incl_gs64", "sum_incl_s64"):
        return spec(k, b, g, [buf("x", "f32", "last + 1"), buf("partial", "f32", threads, "out"),
                              size("last", "u64" if frag == "sum_incl_gs64" else "s64")])
    if frag == "find_first_negative_s64":
        return spec(k, b, g, [buf("x", "f32", "n"), buf("pos", "s64", threads, "out"),
                              size("n", "s64")])
    if frag == "reverse_gs64":
        return spec(k, b, g, [buf("x", "s32", "n"), buf("y", "s32", "n", "out"), size("n", "s64")])
    raise KeyError(frag)


@needs_emulator
@pytest.mark.parametrize("factor", [2, 4, 8])
@pytest.mark.parametrize("grid,block", [(3, 64), (1, 32), (5, 96)])
@pytest.mark.parametrize("frag", FIRES64)
def test_unrolled_64_is_bit_identical_on_the_emulator(frag, grid, block, factor):
    """Sizes around the grid stride ``step`` and its k-fold: 0, 1, step-1, step, step*k-1,
    step*k, step*k+1, a few k-fold strides more, and a large one."""
    kernel = find_kernel(TEXT64, frag)
    out = apply("unroll", TEXT64, kernels=[kernel], factor=factor)
    assert out.fired(kernel)
    step = grid * block
    n = [step * factor * 3 + 5, 0, 1, step - 1, step, step * factor - 1, step * factor,
         step * factor + 1, 12345]
    if frag in ("sum_incl_gs64", "sum_incl_s64"):
        n = [v for v in n if v > 0]           # last = n - 1 >= 0 elements past the first
        n = [v - 1 for v in n]
    verdict = judge(TEXT64, out.text, _launch64(frag, grid, block, n), sets=len(n))
    assert verdict.status == "accepted", verdict.summary()
