"""The no-alias check's ranges as formulas over the kernel's parameters and launch, for people.

The footprint analysis (:mod:`superopt.passes._alias_footprint`) leaves each range end in a
register of the check's code (``%npacs64_10+4``), which says nothing to a reader of a record.
:func:`formulas` reads the check's straight-line code back into expressions
(``param_2 + 4*min(%ntid.x*%nctaid.x - 1, param_3 - 1) + 4``); an instruction it does not know
how to write keeps its register's name, and a formula longer than ``MAX_CHARS`` is cut with an
ellipsis, so the text is always shown, never wrong.
"""
from __future__ import annotations

import re

from ptx_ir.nodes import Addr, Imm, Instruction, Reg, Sym

MAX_CHARS = 240
_PARAM = re.compile(r".*_(param_\d+)$")
_INFIX = {"add": "+", "sub": "-", "mul": "*", "shl": "<<", "shr": ">>", "and": "&", "or": "|"}


def param_label(name: str) -> str:
    """``_Z3fooPfi_param_2`` -> ``param_2`` (nvcc's names carry the mangled kernel name)."""
    m = _PARAM.match(name)
    return m.group(1) if m else name


def _atom(text: str) -> str:
    """``text`` as an operand of a product or shift: bracketed unless it is a name, a number,
    one call (``min(a, b)``) or bracketed already."""
    if re.fullmatch(r"[\w%.$\[\]]+|-?\d+", text):
        return text
    m = re.match(r"\w*\(", text)
    if m:
        depth = 0
        for i, ch in enumerate(text[m.end() - 1:], m.end() - 1):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                if i == len(text) - 1:
                    return text
                break
    return f"({text})"


def formulas(instructions: list[Instruction]) -> dict[str, str]:
    """register name -> the expression the check's code computes into it."""
    out: dict[str, str] = {}

    def show(op) -> str:
        if isinstance(op, Reg):
            return out.get(op.name, op.name)
        if isinstance(op, Imm):
            return str(op.value) if not op.is_float else op.text
        return str(op)

    for inst in instructions:
        if not inst.operands or not isinstance(inst.operands[0], Reg) or inst.guard is not None:
            continue
        dst, args = inst.operands[0].name, inst.operands[1:]
        op = inst.opcode
        text = None
        if op == "ld" and inst.space == ".param" and args and isinstance(args[0], Addr) \
                and isinstance(args[0].base, Sym):
            text = param_label(args[0].base.name) + (f"[{args[0].offset}]" if args[0].offset else "")
        elif op in ("mov", "cvt") and len(args) == 1:
            text = show(args[0])
        elif op in ("min", "max") and len(args) == 2:
            text = f"{op}({show(args[0])}, {show(args[1])})"
        elif op in _INFIX and len(args) == 2 and inst.types and inst.types[-1] != ".pred" \
                and not (op == "mul" and ".lo" not in inst.modifiers):
            a, b = show(args[0]), show(args[1])
            if op == "add" and b.startswith("-") and b[1:].isdigit():
                text = f"{a} - {b[1:]}"
            elif op == "add":
                text = f"{a} + {b}"
            elif op == "mul":
                text = f"{_atom(b)}*{_atom(a)}" if isinstance(args[1], Imm) else f"{_atom(a)}*{_atom(b)}"
            elif op == "sub":
                text = f"{a} - {_atom(b)}"
            else:                  # bracketed: PTX applies it before the sum it may be part of
                text = f"({_atom(a)} {_INFIX[op]} {_atom(b)})"
        if text is not None:
            out[dst] = text
    return out


def bound_text(bound: tuple, known: dict[str, str]) -> str:
    """One range end, ``(register or None, constant)``, as a formula."""
    reg, k = bound
    if reg is None:
        return str(k)
    base = known.get(reg, reg)
    text = base if not k else f"{base} {'+' if k > 0 else '-'} {abs(k)}"
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 1] + "…"
