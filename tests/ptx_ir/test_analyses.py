"""CFG, dominance, loops, def-use, memory accesses and parameter roles, checked by hand.

data/analyses.ptx is nvcc 13.0 -O3 -arch=sm_90 output of data/analyses.cu
(regenerate: nvcc -arch=sm_90 -O3 -ptx data/analyses.cu -o data/analyses.ptx).
"""
from pathlib import Path

import networkx as nx
import pytest

import ptx_ir
from ptx_ir import Instruction, IRError, Imm, Reg

DATA = Path(__file__).parent / "data"
HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"

DIAMOND = HEADER + """
.visible .entry d(.param .u64 d_param_0, .param .u32 d_param_1)
{
	.reg .pred %p<3>;
	.reg .b32 %r<9>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [d_param_0];
	ld.param.u32 %r1, [d_param_1];
	setp.gt.s32 %p1, %r1, 0;
	@%p1 bra THEN;
	neg.s32 %r2, %r1;
	bra.uni JOIN;
THEN:
	mul.lo.s32 %r2, %r1, 3;
JOIN:
	cvta.to.global.u64 %rd2, %rd1;
	st.global.u32 [%rd2], %r2;
	ret;
}
"""


@pytest.fixture(scope="module")
def corpus():
    return ptx_ir.parse((DATA / "analyses.ptx").read_text())


def test_diamond_cfg_dominators_and_def_use():
    fn = ptx_ir.parse(DIAMOND).function("d")
    names = [b.name for b in fn.blocks]
    assert names == ["bb0", "bb1", "THEN", "JOIN"]
    b = {blk.name: blk for blk in fn.blocks}
    assert set(fn.cfg.successors(b["bb0"])) == {b["THEN"], b["bb1"]}
    assert list(fn.cfg.successors(b["bb1"])) == [b["JOIN"]]
    assert list(fn.cfg.successors(b["JOIN"])) == []
    assert fn.dominators[b["JOIN"]] is b["bb0"]
    assert fn.post_dominators[b["bb0"]] is b["JOIN"]
    assert fn.post_dominators[b["JOIN"]] is None
    assert fn.dominance.dominates(b["bb0"], b["THEN"]) and not fn.dominance.dominates(b["THEN"], b["JOIN"])
    store = b["JOIN"].instructions[-2]
    defs = fn.def_use.definitions(store, "%r2")
    assert {d.opcode for d in defs} == {"neg", "mul"}
    assert fn.dataflow.has_edge(b["bb1"].instructions[0], store)
    assert fn.loops == []


def test_guarded_definition_does_not_kill():
    fn = ptx_ir.parse(HEADER + """
.visible .entry g(.param .u32 g_param_0)
{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	ld.param.u32 %r1, [g_param_0];
	mov.u32 %r2, 1;
	setp.eq.s32 %p1, %r1, 0;
	@%p1 mov.u32 %r2, 2;
	add.s32 %r3, %r2, %r1;
	ret;
}
""").function("g")
    add = [i for i in fn.instructions if i.opcode == "add"][0]
    assert len(fn.def_use.definitions(add, "%r2")) == 2


def test_counted_loop_induction_and_trip_count(corpus):
    fn = corpus.function("_Z10saxpy_loopPfPKffi")
    (loop,) = fn.loops
    assert loop.trip_count == 10
    assert loop.induction.step == 1 and loop.induction.init == 0
    assert loop.compare == "ne" and loop.bound == 10
    loads = [a for a in fn.memory_accesses if a.kind == "load" and a.space == ".global"]
    (load,) = loads
    (atom,) = load.affine.atoms()
    start, step = load.recurrences[atom]
    assert str(start) == "4*%ctaid.x*%ntid.x + 4*%tid.x + _Z10saxpy_loopPfPKffi_param_1"
    assert str(step) == "4*_Z10saxpy_loopPfPKffi_param_3"


def test_runtime_bound_loop_has_no_constant_trip_count(corpus):
    fn = corpus.function("_Z6rowsumPfPKfii")
    assert fn.loops and all(l.trip_count is None for l in fn.loops)
    assert all(l.induction is not None for l in fn.loops)
    loads = [a for a in fn.memory_accesses if a.kind == "load" and a.space == ".global"]
    by_pointer = {}
    for a in loads:
        by_pointer.setdefault(frozenset(a.affine.atoms()), []).append(a.affine.constant)
    # The 4x unrolled body reads 4 consecutive floats from one pointer recurrence.
    assert sorted(by_pointer.values(), key=len)[-1] == [0, 4, 8, 12]


def test_affine_addresses_of_a_2d_stencil(corpus):
    fn = corpus.function("_Z9stencil2dPfPKfii")
    store = [a for a in fn.memory_accesses if a.kind == "store"][0]
    aff = store.affine
    assert aff.over_launch_and_params
    assert aff.coefficient("%tid.x") == 4
    assert aff.coefficient("%tid.y", "param:_Z9stencil2dPfPKfii_param_2") == 4
    assert aff.coefficient("param:_Z9stencil2dPfPKfii_param_0") == 1
    assert store.base == "param:_Z9stencil2dPfPKfii_param_0"
    assert store.alignment == 4
    loads = [a for a in fn.memory_accesses if a.kind == "load" and a.space == ".global"]
    assert len(loads) == 4
    neighbours = sorted((a.affine - aff).coefficient("param:_Z9stencil2dPfPKfii_param_2") for a in loads)
    assert neighbours == [-4, 0, 0, 4]


def test_param_roles_and_signature(corpus):
    fn = corpus.function("_Z9histogramPjPKhi")
    assert fn.signature == "histogram(unsigned int*, unsigned char const*, int)"
    roles = {r.index: r for r in fn.param_roles}
    assert roles[0].role == "inout" and roles[0].atomic and roles[0].cxx_type == "unsigned int*"
    assert roles[1].role == "in" and roles[1].element_types == {".u8"}
    assert roles[2].role == "scalar" and roles[2].cxx_type == "int"
    saxpy = {r.index: r.role for r in corpus.function("_Z10saxpy_loopPfPKffi").param_roles}
    assert saxpy == {0: "out", 1: "in", 2: "scalar", 3: "scalar"}


def test_mutation_keeps_ir_valid_and_reanalysable():
    module = ptx_ir.parse(DIAMOND)
    fn = module.function("d")
    before = len(fn.blocks)
    reg = fn.new_register(".b32")
    reg2 = fn.new_register(".b32")
    assert reg != reg2 and {reg.name, reg2.name} <= fn.declared_registers()
    neg = next(i for i in fn.instructions if i.opcode == "neg")
    fn.insert_after(neg, Instruction("add", (".s32",), (reg, Reg("%r2"), Imm("1"))))
    fn.replace(neg, Instruction("sub", (".s32",), (Reg("%r2"), Imm("0"), Reg("%r1"))))
    fn.validate()
    assert len(fn.blocks) == before
    text = ptx_ir.emit(module)
    assert "sub.s32 \t%r2, 0, %r1;" in text and f"add.s32 \t{reg}, %r2, 1;" in text
    reparsed = ptx_ir.parse(text).function("d")
    reparsed.validate()
    fn.remove(next(i for i in fn.instructions if i.opcode == "sub"))
    fn.validate()
    bad = Instruction("add", (".s32",), (Reg("%nope1"), Reg("%r1"), Imm("1")))
    fn.insert_before(fn.instructions[0], bad)
    with pytest.raises(IRError, match="undeclared register %nope1"):
        fn.validate()


def test_clone_is_independent():
    module = ptx_ir.parse(DIAMOND)
    fn = module.function("d")
    copy = fn.clone("d2")
    copy.remove(copy.instructions[0])
    assert len(copy.instructions) == len(fn.instructions) - 1
    assert copy.name == "d2" and fn.name == "d"
    m2 = module.clone()
    m2.function("d").remove(m2.function("d").instructions[0])
    assert len(module.function("d").instructions) == len(fn.instructions)


def test_every_analysis_runs_on_every_function(corpus):
    for fn in corpus.functions:
        if fn.is_declaration:
            continue
        assert nx.is_directed_acyclic_graph(fn.cfg) == (not fn.loops)
        assert fn.dominators[fn.entry_block] is fn.entry_block
        fn.memory_accesses
        fn.param_roles
        fn.validate()
