"""stage-loads: strided global loads gathered coalesced into shared memory (phase A computes
the addresses, an exchange between two barriers loads them warp-contiguously, phase B runs
the body on the gathered values), behind a runtime check ``%ntid == block`` that keeps
nvcc's code.

Where it fires (read-strided transposes f32/f64/u16, a computed value, a select on the
loaded value, an NHWC->NCHW permutation on a 3-D grid, store-to-load forwarding), where it
must not (a branch on a loaded value, a gather, a scatter, an extra non-staged global load,
loops, shared memory, atomics, coalesced loads, a store of another width or a 2-byte load
after a store), that the output assembles, and on the CPU emulator that baseline and
rewritten kernels leave bit-identical memory (guard zones included, outputs poisoned) at
sizes that are not multiples of the tile, launched with the block the pass was given and
with another one (fallback path), the candidate also run one warp at a time (warps-up,
warps-down). Broken rewrites (a barrier dropped, a non-bijective exchange, a flipped flag
test) must be caught, and the project's judge accepts the rewrite and rejects it without a
barrier.

data/stage_loads.ptx is nvcc 13.0 output of data/stage_loads.cu (regenerate:
cd tests/passes/data && nvcc -ptx -arch=sm_90 -O3 stage_loads.cu -o stage_loads.ptx).
"""
from __future__ import annotations


import numpy as np
import pytest

import ptx_ir
from ptx_ir.nodes import Imm
from ptx_ir.printer import emit_function
from superopt.passes import Change, get_pass
from superopt.passes.stage_loads import plan_load_staging
from tests.passes.data.ptx_tools import assemble, emulator_available, load, ptxas_path
from tests.passes.test_stage_stores import (GUARD, Alias, Buf, cdiv, differ, emulate,
                                            judge_staged_scale_unroll4_contiguous, poison)

PASS = "stage-loads"
MODULE = load("stage_loads.ptx")
TEXT = ptx_ir.emit(MODULE)

needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas not on PATH")


def _need_emulator():
    ok, why = emulator_available()
    if not ok:
        pytest.skip(why)


# kernel -> (block it is written for, element dtype, loads per thread)
POSITIVE = {
    "ld_transpose_32x8": ((32, 8, 1), np.float32, 4),
    "ld_transpose_16x16": ((16, 16, 1), np.float32, 1),
    "ld_transpose_f64": ((32, 8, 1), np.float64, 4),
    "ld_transpose_u16": ((16, 16, 1), np.uint16, 1),
    "ld_transpose_scale": ((32, 8, 1), np.float32, 4),
    "ld_transpose_relu": ((16, 16, 1), np.float32, 1),
    "nhwc_to_nchw": ((32, 8, 1), np.float32, 1),
    "ld_reread": ((16, 16, 1), np.float32, 2),
}
# kernel -> a fragment of the refusal reason (None: any reason)
NEGATIVE = {
    "ld_coalesced": "already coalesced",
    "neg_branch_on_load": "depends on a loaded value",
    "neg_gather": None,                 # idx and in differ in type; in[] is not affine anyway
    "neg_scatter": "address depends on a loaded value",
    "neg_extra_load": "differ by more than a constant",
    "neg_grid_stride": "loops",
    "neg_shared": "shared memory",
    "neg_atomic": "atom",
    "neg_mixed_width": "another width",
    "neg_u16_reread": "extension",
}


def test_fixture_has_the_expected_shapes():
    for name, (_block, dtype, k) in POSITIVE.items():
        fn = MODULE.function(name)
        loads = [i for i in fn.instructions if i.opcode == "ld" and i.space == ".global"]
        assert len(loads) == k, (name, loads)
        assert not fn.loops, name
        want = {np.float32: ".f32", np.float64: ".f64", np.uint16: ".u16"}[dtype]
        assert {i.type for i in loads} == {want}, name
    # the select really is a value (no branch after the load), the branch kernel branches
    relu = MODULE.function("ld_transpose_relu").instructions
    k = next(n for n, i in enumerate(relu) if i.opcode == "ld" and i.space == ".global")
    assert not any(i.opcode == "bra" for i in relu[k:])
    neg = MODULE.function("neg_branch_on_load").instructions
    k = next(n for n, i in enumerate(neg) if i.opcode == "ld" and i.space == ".global")
    assert any(i.opcode == "bra" for i in neg[k:])
    assert MODULE.function("neg_grid_stride").loops


def rewrite(kernel: str, block=None) -> tuple[str, list]:
    new = MODULE.clone()
    fn = new.function(kernel)
    params = {} if block is None else {"block": block}
    changes = get_pass(PASS)(fn, **params)
    fn.validate()
    text = ptx_ir.emit(new)
    ptx_ir.parse(text).function(kernel)
    return text, changes


def kernel_text(module_text: str, kernel: str) -> str:
    return emit_function(ptx_ir.parse(module_text).function(kernel))


@pytest.mark.parametrize("kernel", list(POSITIVE))
def test_fires(kernel):
    block, _d, _k = POSITIVE[kernel]
    text, changes = rewrite(kernel, block)
    assert changes and all(isinstance(c, Change) and str(c) for c in changes)
    body = kernel_text(text, kernel)
    assert body.count("bar.sync") == 2
    assert "ld.shared" in body and "%ntid" in body
    for fn in ptx_ir.parse(text).kernels:
        if fn.name != kernel:
            assert emit_function(fn) == emit_function(MODULE.function(fn.name)), fn.name
    # without a block: nothing
    text, changes = rewrite(kernel)
    assert changes == [] and text == TEXT


@pytest.mark.parametrize("kernel", list(NEGATIVE))
def test_refuses(kernel):
    for block in [(16, 16, 1), (32, 8, 1)]:
        text, changes = rewrite(kernel, block)
        assert changes == [] and text == TEXT, kernel
        plan, why = plan_load_staging(MODULE.clone().function(kernel), block)
        assert plan is None
        if NEGATIVE[kernel] and block == (16, 16, 1):      # the block the kernels are written for
            assert NEGATIVE[kernel] in why, (kernel, why)


def test_a_second_application_does_nothing():
    text, changes = rewrite("ld_transpose_32x8", (32, 8, 1))
    fn = ptx_ir.parse(text).function("ld_transpose_32x8")
    assert changes and get_pass(PASS)(fn, block=(32, 8, 1)) == []


def test_forwarding_is_planned_where_a_store_precedes_a_load():
    """Without __restrict__ nvcc keeps load, store, load, store: load j follows j stores."""
    plan, _ = plan_load_staging(MODULE.clone().function("ld_transpose_32x8"), (32, 8, 1))
    assert sorted(len(v) for v in plan.forwards.values()) == [1, 2, 3]
    plan, _ = plan_load_staging(MODULE.clone().function("ld_transpose_u16"), (16, 16, 1))
    assert plan.forwards == {}


@needs_ptxas
def test_rewrites_assemble():
    new = MODULE.clone()
    for kernel, (block, _d, _k) in POSITIVE.items():
        assert get_pass(PASS)(new.function(kernel), block=block), kernel
    asm = assemble(ptx_ir.emit(new), "sm_90")
    assert asm.ok, asm.log
    for kernel, block in (("ld_transpose_32x8", (16, 16, 1)), ("ld_transpose_f64", (24, 5, 1)),
                          ("ld_transpose_16x16", (8, 32, 1))):
        text, changes = rewrite(kernel, block)
        if changes:
            asm = assemble(text, "sm_90")
            assert asm.ok, asm.log


# --------------------------------------------------------------------------- emulator cases

SIZES = [(37, 41), (64, 33), (1, 5), (100, 3)]
# ld_reread's stores are 1024 elements apart: beyond w*h = 1024 one thread's second store and
# another's first hit the same element (a race in nvcc's code itself)
REREAD_SIZES = [(37, 27), (31, 33), (1, 5), (100, 3)]


def case(kernel: str, w: int, h: int, rng):
    """(grid, args, expected output or None). ``in`` is w rows of h, ``out`` its transpose."""
    tile_block, dtype, _k = POSITIVE[kernel]
    tile = tile_block[0]
    grid = (cdiv(w, tile), cdiv(h, tile), 1)
    n = w * h
    if np.issubdtype(dtype, np.integer):
        data = rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True)
    else:
        data = rng.standard_normal(n).astype(dtype)
    item = np.dtype(dtype).itemsize
    ref = data.reshape(w, h).T.reshape(-1)
    args = [Buf(poison(n * item, rng)), Buf(data), np.int32(w), np.int32(h)]
    if kernel == "ld_transpose_scale":
        args += [np.float32(1.5), np.float32(-0.25)]
        ref = np.float32(1.5) * ref + np.float32(-0.25)
    if kernel == "ld_transpose_relu":
        ref = np.maximum(ref, np.float32(0))
    if kernel == "ld_reread":
        data = rng.standard_normal(n + 1024).astype(np.float32)
        args = [Buf(poison((n + 1024) * 4, rng)), Buf(data), np.int32(w), np.int32(h)]
        ref = None
    return grid, args, ref


def _other(block):
    return (32, 8, 1) if block != (32, 8, 1) else (16, 16, 1)


@pytest.mark.parametrize("kernel", [k for k in POSITIVE if k != "nhwc_to_nchw"])
def test_rewritten_is_bit_identical(kernel):
    _need_emulator()
    block, _d, _k = POSITIVE[kernel]
    text, changes = rewrite(kernel, block)
    assert changes
    rng = np.random.default_rng(sum(map(ord, kernel)))
    failures = []
    sizes = REREAD_SIZES if kernel == "ld_reread" else SIZES
    runs = [((w, h), block) for w, h in sizes] + [(sizes[0], _other(block))]
    for (w, h), launch in runs:
        grid, args, ref = case(kernel, w, h, rng)
        if ref is not None and launch == block and (w, h) == SIZES[0]:   # harness: the reference
            out = emulate(TEXT, kernel, grid, launch, args)[0][GUARD:-GUARD].view(ref.dtype)
            if kernel == "ld_transpose_scale":                 # nvcc fuses alpha*v + beta (fma)
                assert np.allclose(out, ref, rtol=1e-6, atol=1e-6), kernel
            else:
                assert np.array_equal(out, ref), kernel
        why = differ(TEXT, text, kernel, grid, launch, args)
        if why:
            failures.append(f"{w}x{h} launched {launch}: {why}")
    assert not failures, "\n".join(failures)


def _nhwc_case(n, c, hw, rng):
    data = rng.standard_normal(n * hw * c).astype(np.float32)
    args = [Buf(poison(n * c * hw * 4, rng)), Buf(data), np.int32(c), np.int32(hw)]
    return (cdiv(hw, 32), cdiv(c, 8), n), args, data.reshape(n, hw, c).transpose(0, 2, 1).reshape(-1)


def test_nhwc_to_nchw_on_a_3d_grid():
    _need_emulator()
    k = "nhwc_to_nchw"
    text, changes = rewrite(k, (32, 8, 1))
    assert changes
    rng = np.random.default_rng(5)
    grid, args, ref = _nhwc_case(2, 5, 37, rng)
    out = emulate(TEXT, k, grid, (32, 8, 1), args)[0]
    assert np.array_equal(out[GUARD:-GUARD].view(np.float32), ref)
    failures = []
    for (n, c, hw), launch in [((2, 5, 37), (32, 8, 1)), ((3, 9, 33), (32, 8, 1)), ((1, 1, 1), (32, 8, 1)),
                               ((2, 5, 37), (16, 16, 1))]:
        grid, args, _ = _nhwc_case(n, c, hw, rng)
        why = differ(TEXT, text, k, grid, launch, args)
        if why:
            failures.append(f"n={n} c={c} hw={hw} launched {launch}: {why}")
    assert not failures, "\n".join(failures)


def test_forwarding_through_an_aliased_output():
    """ld_reread with out == in + 1024: the second load reads the element the thread stored
    just before; the exchange read it before the store, so phase B must forward it."""
    _need_emulator()
    k = "ld_reread"
    text, changes = rewrite(k, (16, 16, 1))
    assert changes
    rng = np.random.default_rng(7)
    failures = []
    for w, h in [(37, 27), (1, 5), (20, 3)]:
        n = w * h
        assert n <= 1024
        for launch in [(16, 16, 1), (32, 8, 1)]:
            arena = np.concatenate([rng.standard_normal(1024).astype(np.float32).view(np.uint8),
                                    poison((1024 + n) * 4, rng)])
            args = [Alias(1, 4 * 1024), Buf(arena), np.int32(w), np.int32(h)]
            grid = (cdiv(w, 16), cdiv(h, 16), 1)
            if launch == (16, 16, 1):          # harness: the reread saw the store
                f = emulate(TEXT, k, grid, launch, args)[0][GUARD:-GUARD].view(np.float32)
                assert np.array_equal(f[2048:2048 + n], f[:n] * np.float32(2) + np.float32(1))
            why = differ(TEXT, text, k, grid, launch, args)
            if why:
                failures.append(f"{w}x{h} launched {launch}: {why}")
    assert not failures, "\n".join(failures)


def test_specialised_for_other_blocks():
    """The pass given blocks the kernel was not written for (whole warps and not: 24x5 is 120
    threads): what it rewrites assembles and matches nvcc's code launched with that block and
    with the kernel's own."""
    _need_emulator()
    k = "ld_transpose_32x8"
    rng = np.random.default_rng(12)
    failures, fired = [], 0
    for given in [(16, 16, 1), (8, 32, 1), (24, 5, 1)]:
        text, changes = rewrite(k, given)
        if not changes:
            continue
        fired += 1
        if ptxas_path():
            asm = assemble(text, "sm_90")
            assert asm.ok, asm.log
        for launch in [given, (32, 8, 1)]:
            grid, args, _ = case(k, 37, 41, rng)
            why = differ(TEXT, text, k, grid, launch, args)
            if why:
                failures.append(f"given {given}, launched {launch}: {why}")
    assert fired >= 2
    assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------- broken rewrites

def _barriers(fn):
    bars = [i for i in fn.instructions if i.opcode == "bar"]
    assert len(bars) == 2
    return bars


def _exchange(fn):
    """The instructions between the two barriers."""
    insts = fn.instructions
    a, b = (next(n for n, i in enumerate(insts) if i is bar) for bar in _barriers(fn))
    return insts[a + 1:b]


def _mutated(kernel, edit) -> str:
    text, changes = rewrite(kernel, POSITIVE[kernel][0])
    assert changes
    module = ptx_ir.parse(text)
    fn = module.function(kernel)
    edit(fn)
    fn.validate()
    bad = ptx_ir.emit(module)
    assert bad != text
    return bad


def _caught(bad, kernel, sizes=((37, 41),)) -> list:
    rng = np.random.default_rng(10)
    block = POSITIVE[kernel][0]
    seen = []
    for w, h in sizes:
        grid, args, _ = case(kernel, w, h, rng)
        why = differ(TEXT, bad, kernel, grid, block, args)
        if why:
            seen.append(why)
    return seen


@pytest.mark.parametrize("which", [0, 1])
def test_a_dropped_barrier_is_caught(which):
    """Without the first barrier a warp gathers addresses other warps have not written yet;
    without the second, phase B reads values other warps have not gathered yet. Both show
    under a one-warp-at-a-time schedule."""
    _need_emulator()
    k = "ld_transpose_32x8"
    bad = _mutated(k, lambda fn: fn.remove(_barriers(fn)[which]))
    assert _caught(bad, k), f"barrier {which} dropped was not caught"


def test_a_non_bijective_exchange_is_caught():
    """The exchange's first digit stride set to 0: two writers gather one slot, another slot
    is never gathered (any bijection would be correct; this one is not a bijection)."""
    _need_emulator()
    k = "ld_transpose_32x8"

    def edit(fn):
        mad = next(i for i in _exchange(fn) if i.opcode == "mad" and isinstance(i.operands[2], Imm))
        fn.replace(mad, mad.with_(operands=(mad.operands[0], mad.operands[1], Imm("0"), mad.operands[3])))

    assert _caught(_mutated(k, edit), k), "a non-bijective exchange was not caught"


def test_a_flipped_flag_test_is_caught():
    _need_emulator()
    k = "ld_transpose_16x16"

    def edit(fn):
        setp = next(i for i in _exchange(fn) if i.opcode == "setp" and ".ne" in i.modifiers)
        fn.replace(setp, setp.with_(modifiers=tuple(".eq" if m == ".ne" else m for m in setp.modifiers)))

    assert _caught(_mutated(k, edit), k), "a flipped flag test was not caught"


def test_a_missing_forward_is_caught():
    """The aliased reread with phase B's forwarding moves removed: the second load returns
    the value from before the store."""
    _need_emulator()
    k = "ld_reread"

    def edit(fn):
        insts = fn.instructions
        b = max(n for n, i in enumerate(insts) if i.opcode == "bar")
        fwd = [i for i in insts[b:] if i.opcode == "mov" and i.guard is not None]
        assert fwd
        for i in fwd:
            fn.remove(i)

    bad = _mutated(k, edit)
    rng = np.random.default_rng(11)
    n, w, h = 37 * 27, 37, 27
    arena = np.concatenate([rng.standard_normal(1024).astype(np.float32).view(np.uint8),
                            poison((1024 + n) * 4, rng)])
    args = [Alias(1, 4 * 1024), Buf(arena), np.int32(w), np.int32(h)]
    assert differ(TEXT, bad, k, (3, 2, 1), (16, 16, 1), args) is not None


# --------------------------------------------------------------------------- the judge

SPEC = {"kernel": "ld_transpose_32x8", "grid": ["cdiv(w, 32)", "cdiv(h, 32)", 1], "block": [32, 8, 1],
        "params": [
            {"name": "out", "kind": "buffer", "type": "f32", "length": "w*h", "direction": "out"},
            {"name": "in", "kind": "buffer", "type": "f32", "length": "w*h", "direction": "in"},
            {"name": "w", "kind": "scalar", "type": "s32", "value": 45},
            {"name": "h", "kind": "scalar", "type": "s32", "value": 38}]}


def test_judge_accepts_and_rejects_without_a_barrier():
    _need_emulator()
    from superopt.judge.check import check
    from superopt.specs.launch_spec import LaunchSpec
    text, changes = rewrite("ld_transpose_32x8", (32, 8, 1))
    assert changes
    v = check(TEXT, text, LaunchSpec.from_dict(SPEC), backend="emulator", sets=2, seed=11)
    if v.status == "could_not_judge":
        pytest.skip(v.reason)
    assert v.status == "accepted", v.summary()
    for which in (0, 1):
        broken = _mutated("ld_transpose_32x8", lambda fn: fn.remove(_barriers(fn)[which]))
        v = check(TEXT, broken, LaunchSpec.from_dict(SPEC), backend="emulator", sets=2, seed=11)
        assert v.status == "rejected", (which, v.summary())


# --------------------------------------------------------------------------- the corpus

@needs_ptxas
def test_stage_loads_on_the_corpus():
    """Over the committed corpus sample at four blocks every rewrite validates, prints, parses
    again and assembles. It fires on an array-of-structures reader (four floats per thread, 16
    bytes apart per lane) and not on the corpus's naive transpose (its loads are coalesced)."""
    from tests.passes.data.unroll_tools import run_on_corpus
    grid = [{"block": b} for b in ((32, 8, 1), (256, 1, 1), (16, 16, 1), (32, 32, 1))]
    result = run_on_corpus(PASS, grid=grid)
    assert not result.failures, result.failures[:5]
    fired = {name for per in result.fired.values() for name in per}
    assert any("scale_unroll4_contiguous" in n for n in fired)
    assert "_Z15transpose_naivePKfPfii" not in fired


def test_an_array_of_structures_reader_is_judged_equal():
    """Staged, each warp loads 128 contiguous bytes per load."""
    judge_staged_scale_unroll4_contiguous(PASS)


def test_the_limits_refuse(monkeypatch):
    """The shared-memory budget (4 floats per thread for 1024 threads do not fit) and the
    load count cap."""
    from superopt.passes import stage_loads as mod
    fn = MODULE.function("ld_transpose_32x8")
    assert mod.plan_load_staging(fn, (32, 16, 1))[0] is not None
    plan, why = mod.plan_load_staging(fn, (32, 32, 1))
    assert plan is None and "shared-memory budget" in why
    monkeypatch.setattr(mod, "MAX_LOADS", 3)
    plan, why = mod.plan_load_staging(fn, (32, 8, 1))
    assert plan is None and why == "too many loads"
