"""warp-shuffle-reduction: where it fires, where it must not, that the output assembles,
that the rewrite keeps the operation order, and (on the CPU emulator) that baseline and
rewritten kernels give bit-identical outputs, the fallback path included.

data/warp_shuffle_reductions.ptx is nvcc 13.0 output of data/warp_shuffle_reductions.cu
(regenerate, in tests/passes/data:
 nvcc -arch=sm_90 -O3 -ptx warp_shuffle_reductions.cu -o warp_shuffle_reductions.ptx).
"""
from __future__ import annotations

import re

import pytest

import ptx_ir
from tests.passes.data.unroll_tools import (
    apply, assemble, buf, emulator_available, find_kernel, judge, load, ptxas_path,
    run_on_corpus, scalar, spec,
)

PASS = "warp-shuffle-reduction"
TEXT = load("warp_shuffle_reductions.ptx")

# kernel name fragment -> (shape with partials=keep, shape with partials=drop or None)
FIRES = {
    "reduce_loop_f32": ("loop", "loop"),
    "reduce_loop_i32": ("loop", "loop"),
    "reduce_loop_signed": ("loop", "loop"),
    "reduce_max_broadcast": ("loop", "loop"),       # everyone reads sdata[0] afterwards: fine
    "reduce_volatile_f32": ("volatile", "volatile"),
    "reduce_tmpl_sync": ("barrier steps", "barrier steps"),
    "reduce_tmpl_volatile": ("volatile", "volatile"),
    "dot_double": ("barrier steps", "barrier steps"),
    "rows_sum": ("barrier steps", None),           # next row's steps read sdata[1..]
    "reduce_reads_partials": ("barrier steps", None),   # out[tid] = sdata[tid] afterwards
}
NEVER = ["neg_interleaved", "neg_wrong_guard", "neg_2d_index", "neg_loop_start",
         "neg_shuffle_already"]
needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas not on PATH")


def _shape(changes) -> str | None:
    if not changes:
        return None
    (c,) = changes
    text = c.description
    return "loop" if text.startswith("barrier loop") else \
        "volatile" if text.startswith("warp-synchronous") else "barrier steps"


@pytest.fixture(scope="module", params=["keep", "drop"])
def rewritten(request):
    return request.param, apply(PASS, TEXT, partials=request.param)


def test_fires_exactly_where_expected(rewritten):
    partials, out = rewritten
    for frag, (keep, drop) in FIRES.items():
        name = find_kernel(TEXT, frag)
        want = keep if partials == "keep" else drop
        assert _shape(out.changes[name]) == want, (frag, partials, out.changes[name])
    for frag in NEVER:
        assert out.changes[find_kernel(TEXT, frag)] == [], frag


@needs_ptxas
def test_rewritten_module_assembles(rewritten):
    partials, out = rewritten
    ok, log = assemble(out.text)
    assert ok, log


def _body(module, frag):
    fn = next(f for f in module.kernels if frag in f.name)
    return fn, [s for s in fn.body if isinstance(s, ptx_ir.Instruction)]


def test_barrier_steps_structure():
    out = apply(PASS, TEXT, kernels=[find_kernel(TEXT, "reduce_tmpl_sync")])
    fn, insts = _body(out.module, "reduce_tmpl_sync")
    text = ptx_ir.emit(out.module)
    fast, orig = text.split("$Lnp_ws_orig_0:")[0], text.split("$Lnp_ws_orig_0:")[1]
    # the fast path: 5 shuffles, predicated adds, one barrier for steps 16..1
    shfl = [i for i in insts if i.opcode == "shfl"]
    assert [i.operands[2].value for i in shfl] == [16, 8, 4, 2, 1]
    assert all(i.modifiers == (".sync", ".down", ".b32") for i in shfl)
    guarded_adds = [i for i in insts if i.opcode == "add" and i.type == ".f32" and i.guard]
    assert len(guarded_adds) == 5
    # the original steps are still there as the other path (6 barriers after the label)
    assert orig.count("bar.sync") >= 5 and "ld.shared.f32" in orig
    # the runtime test: one-dimensional block of at least 32 threads
    assert "%ntid.y" in fast and "%ntid.z" in fast


def _original_own_first(fn) -> list[bool]:
    """For each shared-memory step OP of the original, in order: does it read its own
    element (the address it stores to) as the first source?"""
    insts = fn.instructions
    out = []
    for k, st in enumerate(insts):
        if st.opcode != "st" or st.space != ".shared" or not isinstance(st.operands[1], ptx_ir.Reg):
            continue
        op = next((i for i in reversed(insts[:k]) if i.operands and i.operands[0] == st.operands[1]), None)
        if op is None or op.opcode != "add":
            continue
        loads = {}
        for src in op.operands[1:]:
            ld = next((i for i in reversed(insts[:k]) if i.opcode == "ld" and i.operands[0] == src), None)
            loads[src] = ld
        if any(v is None for v in loads.values()):
            continue
        first = loads[op.operands[1]]
        out.append(first.operands[1] == st.operands[0])
    return out


@pytest.mark.parametrize("frag", ["reduce_loop_f32", "reduce_loop_signed", "reduce_loop_i32",
                                  "reduce_tmpl_sync", "dot_double", "reduce_tmpl_volatile",
                                  "reduce_volatile_f32"])
def test_operation_order_is_kept(frag):
    """Lane t computes OP(own, partner) with the operands where the original had them."""
    original = next(f for f in ptx_ir.parse(TEXT).kernels if frag in f.name)
    want = _original_own_first(original)
    want = want * 5 if len(want) == 1 else want[-5:]
    out = apply(PASS, TEXT, kernels=[original.name], partials="drop")
    fn = next(f for f in out.module.kernels if frag in f.name)
    partners = set()
    for i in fn.instructions:
        if i.opcode == "shfl":
            d = i.operands[0]
            partners.add((d.first if isinstance(d, ptx_ir.Pair) else d).name)
        if i.opcode == "mov" and isinstance(i.operands[1], ptx_ir.Vec) and i.operands[0].name.startswith("%np"):
            partners.add(i.operands[0].name)
    ops = [i for i in fn.instructions if i.opcode == "add" and len(i.operands) == 3
           and any(isinstance(o, ptx_ir.Reg) and o.name in partners for o in i.operands[1:])]
    assert len(ops) == 5
    got = [op.operands[1] == op.operands[0] for op in ops]      # own value is the destination
    assert got == want


def test_reqntid_proves_the_block_shape_statically():
    text = TEXT.replace(".visible .entry _Z16reduce_tmpl_syncILj256EEvPKfPfi(",
                        ".visible .entry _Z16reduce_tmpl_syncILj256EEvPKfPfi(", 1)
    module = ptx_ir.parse(text)
    fn = next(f for f in module.kernels if "reduce_tmpl_sync" in f.name)
    fn.directives.append(ptx_ir.Directive(".reqntid", [ptx_ir.Imm("256"), ptx_ir.Imm("1"),
                                                       ptx_ir.Imm("1")], False))
    before = sum(1 for i in fn.instructions if i.opcode == "bar")
    from superopt.passes import get_pass
    assert get_pass(PASS)(fn)
    fn.validate()
    after = sum(1 for i in fn.instructions if i.opcode == "bar")
    assert after == before - 4          # 5 barriers of steps 16..1 became 1; no second path
    assert not any(isinstance(s, ptx_ir.Label) and "ws_orig" in s.name for s in fn.body)
    assert not any(isinstance(o, ptx_ir.Reg) and o.name == "%ntid.y"
                   for i in fn.instructions for o in i.operands)
    if ptxas_path():
        ok, log = assemble(ptx_ir.emit(module))
        assert ok, log


def test_second_application_does_not_fire():
    out = apply(PASS, TEXT)
    again = apply(PASS, out.text)
    assert not any(again.changes.values())


def test_64_bit_values_use_two_shuffles():
    out = apply(PASS, TEXT, kernels=[find_kernel(TEXT, "dot_double")])
    fn, insts = _body(out.module, "dot_double")
    assert sum(1 for i in insts if i.opcode == "shfl") == 10


# --------------------------------------------------------------------------- corpus


@pytest.mark.slow
@needs_ptxas
def test_corpus_never_crashes_and_rewrites_assemble():
    result = run_on_corpus(PASS)
    assert not result.failures, result.failures[:5]
    fired = {(f, fn) for (f, p), fns in result.fired.items() for fn in fns}
    # the corpus's textbook reductions
    names = {fn for f, fn in fired if f.startswith("ptx/reductions.")}
    assert any("reduce_sequential" in n for n in names)
    assert any("reduce_unrolled" in n for n in names)
    assert any("dot_product_double" in n for n in names)


# --------------------------------------------------------------------------- semantics

EMU_OK, EMU_WHY = emulator_available()
needs_emulator = pytest.mark.skipif(not EMU_OK, reason=f"CPU emulator unavailable: {EMU_WHY}")


def _launch(frag: str, block: int, n: int = 3000, block_y: int = 1):
    kernel = find_kernel(TEXT, frag)
    b = [block, block_y, 1]
    bx = block
    f32 = "s32" if frag.endswith("i32") or "volatile" in frag and "tmpl" in frag else "f32"
    if frag in ("reduce_loop_f32", "reduce_loop_i32", "reduce_loop_signed"):
        return spec(kernel, b, [f"cdiv(n, {bx})", 1, 1],
                    [buf("in", f32, "n"), buf("out", f32, f"cdiv(n, {bx})", "out"),
                     scalar("n", "s32", n)], shared_bytes=4 * bx * block_y)
    if frag == "reduce_max_broadcast":
        return spec(kernel, b, [f"cdiv(n, {bx})", 1, 1],
                    [buf("in", "f32", "n"), buf("out", "f32", "n", "out"), scalar("n", "s32", n)])
    if frag == "reduce_volatile_f32":
        return spec(kernel, b, [f"cdiv(n, {2 * bx})", 1, 1],
                    [buf("in", "f32", "n"), buf("out", "f32", f"cdiv(n, {2 * bx})", "out"),
                     scalar("n", "s32", n)], shared_bytes=4 * bx)
    if frag in ("reduce_tmpl_sync", "reduce_tmpl_volatile"):
        return spec(kernel, b, ["cdiv(n, 256)", 1, 1],
                    [buf("in", f32, "n"), buf("out", f32, "cdiv(n, 256)", "out"),
                     scalar("n", "s32", n)])
    if frag == "dot_double":
        return spec(kernel, b, [1, 1, 1],
                    [buf("a", "f64", "n"), buf("b", "f64", "n"), buf("out", "f64", 1, "inout"),
                     scalar("n", "s32", n)])
    if frag == "rows_sum":
        return spec(kernel, b, [3, 1, 1],
                    [buf("in", "f32", "rows * cols"), buf("out", "f32", "rows", "out"),
                     scalar("rows", "s32", 7), scalar("cols", "s32", 300)], vary_sizes=False)
    if frag == "reduce_reads_partials":
        return spec(kernel, b, ["cdiv(n, 256)", 1, 1],
                    [buf("in", "f32", "cdiv(n, 256) * 256"),
                     buf("out", "f32", "cdiv(n, 256) * 32", "out"), scalar("n", "s32", n)])
    raise KeyError(frag)


CASES = [
    # (kernel, block.x, block.y): fast paths and the fallback (non-power-of-two, small, 2-D)
    ("reduce_loop_f32", 256, 1), ("reduce_loop_f32", 1024, 1), ("reduce_loop_f32", 64, 1),
    ("reduce_loop_f32", 96, 1), ("reduce_loop_f32", 32, 1), ("reduce_loop_f32", 64, 2),
    ("reduce_loop_i32", 128, 1), ("reduce_loop_signed", 512, 1), ("reduce_loop_signed", 160, 1),
    ("reduce_max_broadcast", 256, 1),
    ("reduce_volatile_f32", 128, 1), ("reduce_volatile_f32", 512, 1), ("reduce_volatile_f32", 96, 1),
    ("reduce_tmpl_sync", 256, 1), ("reduce_tmpl_volatile", 256, 1), ("dot_double", 256, 1),
    ("rows_sum", 128, 1), ("reduce_reads_partials", 256, 1),
]


@needs_emulator
@pytest.mark.parametrize("partials", ["keep", "drop"])
@pytest.mark.parametrize("frag,bx,by", CASES)
def test_bit_identical_on_the_emulator(frag, bx, by, partials):
    if FIRES[frag][1 if partials == "drop" else 0] is None:
        pytest.skip("the pass does not fire here in this mode")
    kernel = find_kernel(TEXT, frag)
    out = apply(PASS, TEXT, kernels=[kernel], partials=partials)
    assert out.fired(kernel)
    verdict = judge(TEXT, out.text, _launch(frag, bx, block_y=by), sets=3)
    if by > 1:
        # the baseline itself races across warps in a 2-D block: only "not rejected" counts
        assert verdict.status != "rejected", verdict.summary()
    else:
        assert verdict.status == "accepted", verdict.summary()


@needs_emulator
def test_a_wrong_shuffle_is_caught():
    """The judge is sensitive to the rewrite: a shuffle offset off by a factor of two fails."""
    kernel = find_kernel(TEXT, "reduce_loop_f32")
    out = apply(PASS, TEXT, kernels=[kernel])
    broken, n = re.subn(r"(shfl\.sync\.down\.b32\s+\S+ \S+) 8, 31, -1", r"\1 4, 31, -1", out.text)
    assert n == 1
    verdict = judge(TEXT, broken, _launch("reduce_loop_f32", 256), sets=2)
    assert verdict.status == "rejected", verdict.summary()
