"""shared-padding: fires on the Blelloch scan and the unpadded [32][32] transpose, grows the
array as computed, remaps every access, assembles, and gives bit-identical results on the CPU
emulator; refuses arrays whose address escapes, dynamic shared memory, widths that break the
no-straddle argument and addresses of unknown origin; a half-done remap is rejected.

data/scan.ptx is nvcc 13.0 output of bench/programs/scan/scan.cu (regenerate from the
repository root: nvcc -ptx -arch=sm_90 -O3 bench/programs/scan/scan.cu -o tests/passes/data/scan.ptx).
data/shared_padding.ptx is nvcc 13.0 output of data/shared_padding.cu (regenerate:
cd tests/passes/data && nvcc -ptx -arch=sm_90 -O3 shared_padding.cu -o shared_padding.ptx).
"""
from __future__ import annotations

import re

import pytest

import ptx_ir
from ptx_ir.nodes import Addr, Reg, Sym, VarDecl
from ptx_ir.printer import emit_function
from superopt.judge.ptxas import run_ptxas
from superopt.passes import get_pass
from superopt.passes.shared_padding import analyse, new_size
from superopt.search.rules import ordered_pass_names
from tests.passes.data.ptx_tools import apply, buffer, emulator_available, load, scalar

PASS = "shared-padding"
SCAN = "_Z11scan_blocksPKiPiS1_i"
SCAN_ARRAY = "_ZZ11scan_blocksPKiPiS1_iE4temp"
TRANSPOSE = "_Z11transpose32PfPKfii"
TILE = "_ZZ11transpose32PfPKfiiE4tile"
HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"


@pytest.fixture(scope="module")
def scan():
    return load("scan.ptx")


@pytest.fixture(scope="module")
def kernels():
    return load("shared_padding.ptx")


def _decl(fn, name) -> VarDecl:
    return next(s for s in fn.body if isinstance(s, VarDecl) and s.name == name)


def _accesses(fn):
    """(instruction, address) of every .shared access of the function."""
    out = []
    for inst in fn.instructions:
        if inst.opcode in ("ld", "st", "atom", "red") and inst.space in (".shared", ".shared::cta"):
            out.append((inst, next(o for o in inst.operands if isinstance(o, Addr))))
    return out


def _assembles(module, kernel):
    text = ptx_ir.emit(module)
    ptx_ir.parse(text).function(kernel)                    # parses back
    result = run_ptxas(text, "sm_90")
    assert result.ok, result.log
    return text, result


def _judge(base: str, cand: str, spec: dict, sets: int = 3, seed: int = 7):
    ok, why = emulator_available()
    if not ok:
        pytest.skip(why)
    from superopt.judge.check import check
    from superopt.specs.launch_spec import LaunchSpec
    return check(base, cand, LaunchSpec.from_dict(spec), backend="emulator", sets=sets, seed=seed)


SCAN_SPEC = {"kernel": SCAN, "grid": ["cdiv(n, 1024)", 1, 1], "block": [512, 1, 1], "params": [
    buffer("in", "s32", "n", "in"), buffer("out", "s32", "n", "out"),
    buffer("block_sums", "s32", "cdiv(n, 1024)", "out"), scalar("n", "s32", 3000)]}
TRANSPOSE_SPEC = {"kernel": TRANSPOSE, "grid": ["cdiv(cols, 32)", "cdiv(rows, 32)", 1],
                  "block": [32, 8, 1], "params": [
    buffer("out", "f32", "rows*cols", "out"), buffer("in", "f32", "rows*cols", "in"),
    scalar("rows", "s32", 70), scalar("cols", "s32", 45)]}


# --------------------------------------------------------------------------- registry

def test_registered_after_vectorize_memory():
    info = get_pass(PASS)
    assert info.params == {"chunk": [128, 256]}
    order = ordered_pass_names()
    assert order.index(PASS) == order.index("vectorize-memory") + 1


# --------------------------------------------------------------------------- fires

@pytest.mark.parametrize("chunk", [128, 256])
def test_scan_blocks_is_padded_and_every_access_remapped(scan, chunk):
    new, fn, changes = apply(scan, PASS, SCAN, chunk=chunk)
    assert len(changes) == 1
    old = _decl(scan.function(SCAN), SCAN_ARRAY).size
    assert old == 4096
    assert _decl(fn, SCAN_ARRAY).size == new_size(old, chunk, 4) == 4096 + 4 * (4096 // chunk)
    _text, result = _assembles(new, SCAN)
    assert result.resources[SCAN].shared_bytes == new_size(old, chunk, 4)
    before = _accesses(scan.function(SCAN))
    after = _accesses(fn)
    assert len(after) == len(before) == 76
    remapped = 0
    for inst, addr in after:
        if isinstance(addr.base, Sym):               # folded: [temp+4092] -> [temp+4092+pad*k]
            assert addr.base.name == SCAN_ARRAY
            assert addr.offset == 4092 + 4 * (4092 // chunk)
        else:                                        # through a register the pass defined
            assert addr.base.name.startswith("%np"), inst
            remapped += 1
    assert remapped == 74
    body = emit_function(fn)
    assert len(re.findall(rf"shr\.u32\s+%np\w+, %np\w+, {chunk.bit_length() - 1};", body)) == 74
    assert "74 accesses" in changes[0].description
    assert "72 of them computed before the branch" in changes[0].description


def test_transpose_tile_is_padded(kernels):
    new, fn, changes = apply(kernels, PASS, TRANSPOSE)
    assert len(changes) == 1
    assert _decl(fn, TILE).size == 4096 + 4 * 32
    _assembles(new, TRANSPOSE)
    after = _accesses(fn)
    assert len(after) == 8
    assert all(isinstance(a.base, Reg) and a.base.name.startswith("%np") for _, a in after)


def test_other_scan_kernels_are_left_alone(scan):
    # scan_block_sums reads buf[threadIdx.x] and buf[threadIdx.x - off]: conflict-free, so the
    # heuristic skips it; without the heuristic it is padded (and still assembles).
    k = "_Z15scan_block_sumsPii"
    assert apply(scan, PASS, k)[2] == []
    new, _fn, changes = apply(scan, PASS, k, heuristic=False)
    assert changes
    _assembles(new, k)
    for k in ("_Z17add_block_offsetsPiPKii", "_Z15scatter_flaggedPKiS0_Pii"):
        assert apply(scan, PASS, k)[2] == []


# --------------------------------------------------------------------------- emulator

def test_scan_is_bit_identical_on_the_emulator(scan):
    for chunk in (128, 256):
        new, _, _ = apply(scan, PASS, SCAN, chunk=chunk)
        v = _judge(ptx_ir.emit(scan), ptx_ir.emit(new), SCAN_SPEC)
        if v.status == "could_not_judge":
            pytest.skip(v.reason)
        assert v.status == "accepted", v.reason


def test_transpose_is_bit_identical_on_the_emulator(kernels):
    new, _, _ = apply(kernels, PASS, TRANSPOSE)
    v = _judge(ptx_ir.emit(kernels), ptx_ir.emit(new), TRANSPOSE_SPEC)
    if v.status == "could_not_judge":
        pytest.skip(v.reason)
    assert v.status == "accepted", v.reason


def _loads_unmapped(fn, chunk: int, pad: int) -> int:
    """Undo the remap of every load (keep the stores'): the deliberately wrong variant."""
    defs = {i.operands[0].name: i for i in fn.instructions
            if i.operands and isinstance(i.operands[0], Reg)}
    undone = 0
    for inst in fn.instructions:
        if inst.opcode != "ld" or inst.space != ".shared":
            continue
        addr = inst.operands[1]
        if isinstance(addr.base, Reg):
            orig = defs[addr.base.name].operands[1]          # add.s32 %np, R, shift
            new_addr = Addr(orig, addr.offset)
        else:
            c = addr.offset
            new_addr = Addr(addr.base, c - pad * (c // (chunk + pad)))
        fn.replace(inst, inst.with_(operands=(inst.operands[0], new_addr)))
        undone += 1
    return undone


def test_remapping_only_the_stores_is_rejected(scan):
    """The check can fail: a variant that pads the array but leaves the loads where they
    were reads the wrong words."""
    new, fn, _ = apply(scan, PASS, SCAN)
    assert _loads_unmapped(fn, 128, 4) == 43
    fn.validate()
    text, _ = _assembles(new, SCAN)
    v = _judge(ptx_ir.emit(scan), text, SCAN_SPEC, sets=2)
    if v.status == "could_not_judge":
        pytest.skip(v.reason)
    assert v.status == "rejected", v.reason


# A hand-written kernel with 64-bit shared addresses, a .f32 declaration (becomes .b8),
# 16-byte vector stores (PAD = 16) and a transposed 4-byte read whose address is masked
# before it is added to the base (not affine: computed at run time).
WIDE = HEADER + """
.visible .entry wide(.param .u64 wide_param_0)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    .reg .f32 %f<6>;
    .shared .align 16 .f32 buf[512];
    ld.param.u64 %rd1, [wide_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    cvt.rn.f32.u32 %f1, %r1;
    add.f32 %f2, %f1, 0f3F000000;
    add.f32 %f3, %f1, 0f3F400000;
    add.f32 %f4, %f1, 0f3F800000;
    mov.u64 %rd3, buf;
    mul.wide.u32 %rd4, %r1, 64;
    add.s64 %rd5, %rd3, %rd4;
    st.shared.v4.f32 [%rd5], {%f1, %f2, %f3, %f4};
    st.shared.v4.f32 [%rd5+16], {%f2, %f3, %f4, %f1};
    st.shared.v4.f32 [%rd5+32], {%f3, %f4, %f1, %f2};
    st.shared.v4.f32 [%rd5+48], {%f4, %f1, %f2, %f3};
    bar.sync 0;
    mul.lo.u32 %r2, %r1, 68;
    and.b32 %r3, %r2, 2047;
    cvt.u64.u32 %rd6, %r3;
    add.s64 %rd7, %rd3, %rd6;
    ld.shared.f32 %f5, [%rd7];
    mul.wide.u32 %rd8, %r1, 4;
    add.s64 %rd9, %rd2, %rd8;
    st.global.f32 [%rd9], %f5;
    ret;
}
"""
WIDE_SPEC = {"kernel": "wide", "grid": [1, 1, 1], "block": [32, 1, 1], "vary_sizes": False,
             "params": [buffer("out", "f32", 32, "out")]}


def test_64_bit_addresses_and_vector_accesses():
    module = ptx_ir.parse(WIDE)
    new, fn, changes = apply(module, PASS, "wide")
    assert changes
    decl = _decl(fn, "buf")
    assert (decl.type, decl.align, decl.size) == (".b8", 16, 2048 + 16 * 16)
    assert "shl.b64" in emit_function(fn) and "shr.u64" in emit_function(fn)
    text, _ = _assembles(new, "wide")
    v = _judge(WIDE, text, WIDE_SPEC)
    if v.status == "could_not_judge":
        pytest.skip(v.reason)
    assert v.status == "accepted", v.reason


# A loop that walks a column of a [32][32] tile with a pointer increment (add %r, %r, 128:
# a derived register redefined from itself), then each lane sums its row.
LOOP = HEADER + """
.visible .entry walk(.param .u64 walk_param_0)
{
    .reg .pred %p<3>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 tile[4096];
    ld.param.u64 %rd1, [walk_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, tile;
    shl.b32 %r3, %r1, 2;
    add.s32 %r4, %r2, %r3;
    mov.u32 %r5, 0;
$Lw:
    add.s32 %r6, %r5, %r1;
    st.shared.u32 [%r4], %r6;
    add.s32 %r4, %r4, 128;
    add.s32 %r5, %r5, 1;
    setp.lt.u32 %p1, %r5, 32;
    @%p1 bra $Lw;
    bar.sync 0;
    shl.b32 %r7, %r1, 7;
    add.s32 %r8, %r2, %r7;
    mov.u32 %r9, 0;
    mov.u32 %r10, 0;
$Lr:
    ld.shared.u32 %r11, [%r8];
    mul.lo.u32 %r12, %r10, 3;
    add.s32 %r12, %r12, 1;
    mul.lo.u32 %r13, %r11, %r12;
    add.s32 %r9, %r9, %r13;
    add.s32 %r8, %r8, 4;
    add.s32 %r10, %r10, 1;
    setp.lt.u32 %p2, %r10, 32;
    @%p2 bra $Lr;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd3, %rd2, %rd3;
    st.global.u32 [%rd3], %r9;
    ret;
}
"""


def test_pointer_increment_loops():
    module = ptx_ir.parse(LOOP)
    new, fn, changes = apply(module, PASS, "walk")
    assert changes and "2 accesses remapped" in changes[0].description
    text, _ = _assembles(new, "walk")
    spec = {"kernel": "walk", "grid": [1, 1, 1], "block": [32, 1, 1], "vary_sizes": False,
            "params": [buffer("out", "u32", 32, "out")]}
    v = _judge(LOOP, text, spec)
    if v.status == "could_not_judge":
        pytest.skip(v.reason)
    assert v.status == "accepted", v.reason


# --------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("kernel, why", [
    ("_Z11escape_cvtaPfPKfi", "cvta"),
    ("_Z13escape_storedPjPf", "data operand of st.global"),
])
def test_escaping_address_is_refused(kernels, kernel, why):
    assert apply(kernels, PASS, kernel, heuristic=False)[2] == []
    _plan, notes = analyse(kernels.function(kernel))
    assert any(why in n for n in notes), notes


def test_dynamic_shared_memory_is_refused(kernels):
    k = "_Z14dynamic_sharedPf"
    assert apply(kernels, PASS, k, heuristic=False)[2] == []


def test_a_static_tile_beside_dynamic_shared_memory_is_refused(kernels):
    k = "_Z18static_and_dynamicPf"
    assert apply(kernels, PASS, k, heuristic=False)[2] == []
    _plan, notes = analyse(kernels.function(k))
    assert any("outside the kernel's own fixed arrays" in n for n in notes), notes


def _kernel(body: str, decl: str = ".shared .align 16 .b8 s[4096];") -> ptx_ir.Module:
    return ptx_ir.parse(HEADER + f"""
.visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<8>;
    {decl}
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 7;
{body}
    ret;
}}
""")


def _refused(module, **params) -> bool:
    return apply(module, PASS, "k", heuristic=False, **params)[2] == []


def test_vector_access_too_wide_for_the_chunk_is_refused():
    body = """    mov.u32 %r3, s;
    add.s32 %r4, %r3, %r2;
    ld.shared.v4.f32 {%f1, %f2, %f3, %f4}, [%r4];
    st.shared.f32 [%r4+4], %f1;"""
    module = _kernel(body)
    assert not _refused(module)                               # 16 bytes in 128-byte chunks
    assert _refused(module, chunk=8)                          # 16 bytes straddle 8-byte chunks
    wide = _kernel(body.replace("ld.shared.v4.f32 {%f1, %f2, %f3, %f4}",
                                "ld.shared.v4.b64 {%rd1, %rd2, %rd3, %rd4}")
                   .replace("st.shared.f32 [%r4+4], %f1", "st.shared.f32 [%r4+4], %f5"))
    assert _refused(wide)                                     # 32 bytes: wider than 16
    _plan, notes = analyse(wide.function("k"))
    assert any("width 32" in n for n in notes), notes


@pytest.mark.parametrize("body", [
    # selp mixes two arrays
    """    mov.u32 %r3, s;
    mov.u32 %r4, t;
    setp.eq.u32 %p1, %r1, 0;
    selp.b32 %r5, %r3, %r4, %p1;
    ld.shared.f32 %f1, [%r5];""",
    # a phi: the register is s on one path and t on the other
    """    mov.u32 %r5, t;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra $L1;
    mov.u32 %r5, s;
$L1:
    add.s32 %r6, %r5, %r2;
    ld.shared.f32 %f1, [%r6];""",
    # compared
    """    mov.u32 %r3, s;
    add.s32 %r4, %r3, %r2;
    setp.lt.u32 %p1, %r4, 64;
    @%p1 ld.shared.f32 %f1, [%r4];""",
    # a shared address from a parameter: might reach s unseen
    """    mov.u32 %r3, s;
    add.s32 %r4, %r3, %r2;
    ld.shared.f32 %f1, [%r4];
    ld.param.u32 %r7, [k_param_1];
    st.shared.f32 [%r7], %f1;""",
    # the address scaled (not an address any more)
    """    mov.u32 %r3, s;
    shl.b32 %r4, %r3, 1;
    ld.shared.f32 %f1, [%r4];""",
    # a value derived from two arrays
    """    mov.u32 %r3, s;
    mov.u32 %r4, t;
    sub.s32 %r5, %r4, %r3;
    add.s32 %r6, %r3, %r2;
    ld.shared.f32 %f1, [%r6];""",
    # a generic access through the shared address
    """    mov.u32 %r3, s;
    add.s32 %r4, %r3, %r2;
    cvt.u64.u32 %rd1, %r4;
    ld.shared.f32 %f2, [%r4];
    ld.f32 %f1, [%rd1];""",
], ids=["selp", "phi", "setp", "unknown-address", "shl", "two-arrays", "generic"])
def test_unprovable_flows_are_refused(body, request):
    module = _kernel(body, ".shared .align 16 .b8 s[4096];\n    .shared .align 16 .b8 t[4096];")
    assert _refused(module)
    why = {"selp": "not derived from a symbol", "phi": "on some paths only",
           "setp": "flows into setp", "unknown-address": "not derived from a symbol",
           "shl": "not derived from a symbol", "two-arrays": "flows into sub",
           "generic": "not the .shared::cta window"}[request.node.callspec.id]
    _plan, notes = analyse(module.function("k"))
    assert any(why in n for n in notes), notes


def test_module_scope_shared_is_refused():
    module = ptx_ir.parse(HEADER + """
.shared .align 4 .b8 g[4096];
.visible .entry k()
{
    .reg .b32 %r<8>;
    .reg .f32 %f<2>;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 7;
    mov.u32 %r3, g;
    add.s32 %r4, %r3, %r2;
    ld.shared.f32 %f1, [%r4];
    st.shared.f32 [%r4+4], %f1;
    ret;
}
""")
    assert _refused(module)


def test_conflict_free_array_is_skipped_by_the_heuristic():
    body = """    mov.u32 %r3, s;
    shl.b32 %r5, %r1, 2;
    add.s32 %r4, %r3, %r5;
    ld.shared.f32 %f1, [%r4];
    st.shared.f32 [%r4+128], %f1;
    ld.shared.f32 %f2, [s+8];"""
    module = _kernel(body)
    assert apply(module, PASS, "k")[2] == []
    new, fn, changes = apply(module, PASS, "k", heuristic=False)
    assert changes and "1 folded" in changes[0].description
    assert "[s+8]" in emit_function(fn)              # 8 < 128: first chunk, unchanged
    _assembles(new, "k")


# --------------------------------------------------------------------------- corpus

CORPUS_FILES = ("transpose_softmax.sm_90.ptx", "gemm.sm_90.ptx", "cub_block.sm_90.ptx",
                "sm90_features.sm_90.ptx", "scan.sm_90.ptx", "stencils.sm_90.ptx")


def test_corpus_rewrites_assemble():
    from pathlib import Path
    from tests.passes.data.ptx_tools import run_pass_on_corpus
    run = run_pass_on_corpus(PASS, [{"chunk": 128}, {"chunk": 256}],
                             entry_filter=lambda e: Path(e["file"]).name in CORPUS_FILES)
    assert not run.failures, run.failures
    assert run.fired_kernels >= 20, run


def test_corpus_rewrites_pass_the_differential_check_on_the_emulator():
    ok, why = emulator_available()
    if not ok:
        pytest.skip(why)
    from tests.passes.data.ptx_tools import judge_corpus_rewrites
    files = [f for f in CORPUS_FILES if not f.startswith("cub_block")]   # cub: 5 s more
    result = judge_corpus_rewrites(PASS, {"chunk": 128}, files)
    assert not result["rejected"], result["rejected"]
    assert len(result["accepted"]) >= 9, result
