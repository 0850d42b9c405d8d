"""A worked example of a user pass (docs/adding-a-pass.md).

mul.lo by a power of two is a left shift: identical modulo 2^n for signed and unsigned
integers alike, so the rewrite needs no precondition beyond the constant itself.
"""
from ptx_ir import Imm, Instruction
from superopt.passes import Change, register


@register(
    name="example-mul-to-shl",
    summary="mul.lo.{s,u}N x, y, 2^k  ->  shl.bN x, y, k",
    assumes="none: x*2^k == x<<k modulo 2^N for every integer x",
)
def mul_to_shl(fn):
    changes = []
    for inst in list(fn.instructions):
        if inst.opcode != "mul" or ".lo" not in inst.modifiers or inst.guard is not None:
            continue
        dst, a, b = inst.operands
        if not isinstance(b, Imm) or b.is_float or b.value <= 0 or b.value & (b.value - 1):
            continue
        bits = inst.type[2:]                     # ".s32" -> "32"
        shift = Instruction("shl", (f".b{bits}",), (dst, a, Imm(str(b.value.bit_length() - 1))))
        fn.replace(inst, shift)
        changes.append(Change(f"{inst!r} -> shl by {b.value.bit_length() - 1}", inst))
    return changes
