"""Parser and printer on hand-written PTX: every construct nvcc emits, and bad input."""
import pytest

import ptx_ir
from ptx_ir import ParseError

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"

EVERYTHING = HEADER + r'''
.extern .func (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.global .align 4 .b8 g[16] = {1, 0, 0, 0, 2};
.const .align 4 .f32 c[2] = {0f3FC00000, 0f40200000};
.global .align 8 .u64 p = generic(g)+8;
.global .attribute(.managed) .align 4 .u32 counter;
.extern .shared .align 16 .b8 dyn_smem[];
.global .texref tex0;
.weak .global .align 8 .f64 d = 0d3FF0000000000000;
.func (.param .b32 func_retval0) f(.param .b32 f_param_0)
.noreturn
{
	.reg .b32 %r<3>;
	ld.param.b32 %r1, [f_param_0];
	trap;
}
.visible .entry k(
	.param .u64 .ptr .global .align 16 k_param_0,
	.param .align 8 .b8 k_param_1[16],
	.param .u32 k_param_2
)
.maxntid 256, 1, 1
.minnctapersm 2
.maxnreg 64
{
	.local .align 16 .b8 __local_depot0[64];
	.shared .align 4 .b8 tile[1024];
	.reg .pred %p<3>;
	.reg .b32 %r<20>;
	.reg .f32 %f<9>;
	.reg .b64 %rd<9>;
	.loc 1 10 3
	ld.param.u64 %rd1, [k_param_0];
	mov.u32 %r1, %tid.x;
	setp.lt.s32 %p1, %r1, -4;
	@!%p1 bra $L__BB0_2;
	ld.global.nc.L1::no_allocate.v4.f32 {%f1, %f2, %f3, _}, [%rd1+-16];
	st.shared.v2.f32 [tile+8], {%f1, %f2};
	shfl.sync.bfly.b32 %r2|%p2, %r1, 1, 31, -1;
	setp.lt.and.s32 %p2, %r1, %r2, !%p1;
	mov.b64 %rd2, {%r1, %r2};
	{ // callseq 0, 0
	.param .b64 param0;
	st.param.b64 [param0+0], %rd1;
	.param .b32 retval0;
	call.uni (retval0), vprintf, (param0, param0);
	ld.param.b32 %r3, [retval0+0];
	} // callseq 0
	{ .reg .pred p; setp.ne.b32 p, %r1, 0; selp.b32 %r4, 1, 0, p; }
	.pragma "nounroll";
	.loc 1 12 5, function_name $L__info_string0, inlined_at 1 20 3
	mov.u64 %rd3, $str+4;
	brx.idx %r1, $L_brx_0;
$L_brx_0: .branchtargets $L__BB0_2, $L__BB0_3;
prototype_0 : .callprototype (.param .b32 _) _ (.param .b64 _);
	call (retval0), %rd2, (param0), prototype_0;
$L__BB0_2:
	tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [tex0, {%r1}];
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};
	cp.async.ca.shared.global [tile], [%rd1], 16;
$L__BB0_3:
	ret;
}
	.file	1 "/tmp/a.cu"
	.section	.debug_str
	{
$L__info_string0:
.b8 95,90,0
.b32 .debug_loc+62
.b64 $L__BB0_2
	}
'''


def test_everything_parses_and_round_trips():
    module = ptx_ir.parse(EVERYTHING)
    text = ptx_ir.emit(module)
    assert ptx_ir.emit(ptx_ir.parse(text)) == text
    assert module.version == "9.0" and module.target == ["sm_90"] and module.address_size == 64
    names = [f.name for f in module.functions]
    assert names == ["vprintf", "f", "k"]
    assert module.function("vprintf").is_declaration
    k = module.function("k")
    assert k.is_entry and not k.is_declaration
    assert [d.name for d in k.directives] == [".maxntid", ".minnctapersm", ".maxnreg"]
    assert k.params[0].ptr and k.params[0].ptr_space == ".global" and k.params[0].ptr_align == 16
    assert k.params[1].dims == (16,) and k.params[1].align == 8
    assert "p" in {str(r) for i in k.instructions for op in i.operands for r in ptx_ir.nodes.operand_registers(op)}
    g = {v.name: v for v in module.globals}
    assert str(g["p"].init) == "generic(g)+8"
    assert g["counter"].attributes == (".attribute(.managed)",)
    assert g["dyn_smem"].dims == (None,) and g["dyn_smem"].linkage == (".extern",)
    assert ".noreturn" in [d.name for d in module.function("f").directives]


def test_printed_text_keeps_instructions():
    text = ptx_ir.emit(ptx_ir.parse(EVERYTHING))
    for needle in ["@!%p1 bra \t$L__BB0_2;", "ld.global.nc.L1::no_allocate.v4.f32 \t{%f1, %f2, %f3, _}, [%rd1+-16];",
                   "shfl.sync.bfly.b32 \t%r2|%p2, %r1, 1, 31, -1;", "call.uni \t(retval0), vprintf, (param0, param0);",
                   ".loc\t1 12 5, function_name $L__info_string0, inlined_at 1 20 3",
                   "$L_brx_0:\n\t.branchtargets $L__BB0_2, $L__BB0_3;",
                   ".callprototype (.param .b32 _) _ (.param .b64 _);",
                   ".b32 .debug_loc+62", "[tex0, {%r1}]", ".param .u64 .ptr .global .align 16 k_param_0"]:
        assert needle in text, needle


def test_whitespace_and_comments_do_not_change_output():
    plain = ptx_ir.emit(ptx_ir.parse(EVERYTHING))
    noisy = EVERYTHING.replace("\t", "   ").replace(", ", " ,\t/* c */ ").replace(";\n", "; // x\n")
    assert ptx_ir.emit(ptx_ir.parse(noisy)) == plain


@pytest.mark.parametrize("text, line, col, token", [
    (HEADER + ".visible .entry k()\n{\n\tfoo.b32 %r1;\n}\n", 6, 2, "foo"),
    (HEADER + ".visible .entry k()\n{\n\tadd.s32 %r1, %r2 %r3;\n}\n", 6, 19, "%r3"),
    (HEADER + ".visible .entry k()\n{\n\tret;\n", 7, 1, "end of input"),
    (HEADER + ".global .align 4 .b8 x[;\n", 4, 24, ";"),
    (HEADER + ".visible .entry k(\n\t.param .u64 a\n{\n}\n", 6, 1, "{"),
    (".target sm_90\n", 1, 1, ".target"),
    (HEADER + ".visible .entry k()\n{\n\t/* open\n}\n", 6, 2, "/*"),
    (HEADER + "@@@\n", 4, 1, "@"),
])
def test_parse_errors_name_line_column_token(text, line, col, token):
    with pytest.raises(ParseError) as info:
        ptx_ir.parse(text)
    err = info.value
    assert (err.line, err.column, err.token) == (line, col, token), str(err)
    assert f"line {line}, column {col}" in str(err)


def test_immediates_keep_their_spelling_and_value():
    m = ptx_ir.parse(HEADER + ".visible .entry k()\n{\n.reg .b32 %r<3>;\n"
                     "mov.b32 %r1, 0f3F800000;\nmov.b32 %r2, -0x10;\nmov.b32 %r1, 017;\n}\n")
    ops = [i.operands[1] for i in m.kernels[0].instructions]
    assert [str(o) for o in ops] == ["0f3F800000", "-0x10", "017"]
    assert [o.value for o in ops] == [0x3F800000, -16, 15]
    assert ops[0].is_float and not ops[1].is_float


def test_keep_lines_puts_statements_back_on_their_lines():
    text = HEADER + "// a comment\n\n/* two\nlines */\n.visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\n\n\tmov.u32 %r1, 1;\n\tret;\n}\n"
    printed = ptx_ir.emit(ptx_ir.parse(text), keep_lines=True)
    lines = printed.split("\n")
    original = text.split("\n")
    for needle in (".visible .entry k()", ".reg .b32", "mov.u32", "ret;"):
        assert next(i for i, l in enumerate(lines) if needle in l) == \
            next(i for i, l in enumerate(original) if needle in l), needle
    assert ptx_ir.emit(ptx_ir.parse(printed), keep_lines=True) == printed


def test_faithful_emit_reproduces_source_and_reprints_only_changed_items():
    from pathlib import Path
    source = (Path(__file__).parent / "data" / "analyses.ptx").read_text()
    module = ptx_ir.parse(source)
    assert ptx_ir.emit(module, faithful=True) == source
    fn = module.function("_Z7diamondPiPKii")
    mul = next(i for i in fn.instructions if i.opcode == "mul" and ".lo" in i.modifiers)
    d, a, b = mul.operands
    fn.replace(mul, mul.with_(operands=(d, b, a)))
    out = ptx_ir.emit(module, faithful=True)
    changed = [(x, y) for x, y in zip(source.split("\n"), out.split("\n")) if x != y]
    assert len(source.split("\n")) == len(out.split("\n"))          # later items keep their lines
    assert ("\tmul.lo.s32 \t%r6, %r5, 3;", "\tmul.lo.s32 \t%r6, 3, %r5;") in changed
    assert all(x.strip() in ("", "}") or "mul.lo" in x for x, _ in changed), changed
    # Items of other kernels keep nvcc's comments.
    assert "// .globl\t_Z9stencil2dPfPKfii" in out
    assert ptx_ir.emit(ptx_ir.parse(out)) == ptx_ir.emit(module)
