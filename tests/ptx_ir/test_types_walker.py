"""The one PTX type table (ptx_ir.types) and the one operand walker (walk_operand)."""
import pytest

import ptx_ir
from ptx_ir import types as T
from ptx_ir.nodes import Addr, Imm, Reg, Sym, Vec, type_size as node_type_size, walk_operand
from ptx_ir.semantics import Unsupported
from ptx_ir.semantics import types as S


def test_sizes_including_packed_types():
    assert [T.type_size(t) for t in (".pred", ".b8", ".s16", ".f32", ".tf32", ".f64", ".b128")] \
        == [1, 1, 2, 4, 4, 8, 16]
    assert [T.type_size(t) for t in (".f16x2", ".bf16x2", ".e4m3x2", ".e2m1x2", ".u8x4", ".s16x2")] \
        == [4, 4, 2, 1, 4, 4]
    assert T.ptx_type("e4m3x2").lanes == 2 and T.ptx_type(".u8x4").lanes == 4
    with pytest.raises(KeyError):
        T.type_size(".texref")
    # ptx_ir.nodes.type_size: the same table, never raising (its callers' contract)
    assert node_type_size(".e4m3x2") == 2 and node_type_size(".u8x4") == 4
    assert node_type_size(".s4") == 1 and node_type_size(".texref") == 4


def test_kinds():
    assert T.is_float(".tf32") and T.is_float(".e4m3") and T.is_float(".bf16x2")
    assert not T.is_float(".b32") and not T.is_float(".pred")
    assert T.is_signed(".s32") and not T.is_signed(".s16x2") and not T.is_signed(".u32")
    assert ".b64" in T.INT_TYPES and ".f16x2" not in T.INT_TYPES and ".e5m2" in T.FLOAT_TYPES
    assert T.TYPE_NAMES >= set(T.TYPES) | {".b1", ".s4"}


def test_semantics_reads_the_table():
    for t in (".u8", ".s64", ".f16", ".bf16x2", ".pred"):
        assert S.type_size(t) == T.type_size(t) and S.is_float(t) == T.is_float(t)
    assert S.type_bits(".pred") == 1 and S.type_bits(".s16") == 16
    for t in (".tf32", ".b128", ".e4m3"):       # sized types the emulator holds no value of
        with pytest.raises(Unsupported):
            S.type_size(t)


def test_walker_memory_operand_with_vector():
    # st.global.v2.f32 [%rd1+8], {%f1, %f2}: what every old walker visited
    k = ptx_ir.parse(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n"
                     "{\n.reg .f32 %f<3>;\n.reg .b64 %rd<2>;\n.shared .align 4 .b8 s[64];\n"
                     "st.global.v2.f32 [%rd1+8], {%f1, %f2};\nld.shared.v2.f32 {%f1, %f2}, [s+16];\nret;\n}\n"
                     ).function("k")
    st, ld = k.instructions[:2]
    seen = [[str(x) for op in i.operands for x in walk_operand(op)] for i in (st, ld)]
    assert seen[0] == ["[%rd1+8]", "%rd1", "{%f1, %f2}", "%f1", "%f2"]
    assert seen[1] == ["{%f1, %f2}", "%f1", "%f2", "[s+16]", "s"]
    # an address's extra operands (texture coordinates) are visited too
    tex = Addr(Sym("t"), None, (Vec((Reg("%f1"), Imm("0f3F800000"))),))
    assert [str(x) for x in walk_operand(tex)] == [str(tex), "t", "{%f1, 0f3F800000}", "%f1", "0f3F800000"]
