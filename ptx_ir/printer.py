"""Canonical PTX text from :mod:`ptx_ir.nodes`.

The layout follows nvcc's own (tabs, one statement per line) so that a diff against
nvcc's output shows only real changes. Comments are not kept; everything else is, so
ptxas builds the same cubin from the printed text as from the original.
"""
from __future__ import annotations

from ptx_ir.nodes import (
    DataLine, Directive, Function, Instruction, Label, Module, ScopeClose, ScopeOpen, Section,
    VarDecl,
)
from ptx_ir.parser import join_tokens


def emit(module: Module) -> str:
    out: list[str] = []
    for word in module.header or [".version", ".target", ".address_size"]:
        if word == ".version" and module.version:
            out.append(f".version {module.version}")
        elif word == ".target" and module.target:
            out.append(f".target {', '.join(module.target)}")
        elif word == ".address_size" and module.address_size is not None:
            out.append(f".address_size {module.address_size}")
    out.append("")
    for item in module.items:
        if isinstance(item, Function):
            out.append(emit_function(item))
        elif isinstance(item, VarDecl):
            out.append(emit_decl(item) + ";")
        elif isinstance(item, Directive):
            out.append("\t" + emit_directive(item))
        elif isinstance(item, Section):
            out.append(emit_section(item))
        else:  # pragma: no cover - the parser makes nothing else
            raise TypeError(f"cannot print module item {item!r}")
    return "\n".join(out) + "\n"


def emit_directive(d: Directive) -> str:
    text = d.name
    if d.args:
        args = [str(a) for a in d.args]
        sep = "\t" if d.name in (".loc", ".file") else " "
        if d.name in (".maxntid", ".reqntid", ".reqnctapercluster"):
            text += " " + ", ".join(args)
        else:
            text += sep + join_tokens(args)
    return text + (";" if d.terminated else "")


def emit_decl(d: VarDecl) -> str:
    parts = list(d.linkage)
    parts.append(d.space)
    parts.extend(d.attributes)
    if d.align is not None:
        parts.append(f".align {d.align}")
    if d.vector:
        parts.append(d.vector)
    parts.append(d.type)
    if d.ptr:
        parts.append(".ptr")
        if d.ptr_space:
            parts.append(d.ptr_space)
        if d.ptr_align is not None:
            parts.append(f".align {d.ptr_align}")
    name = d.name + "".join("[]" if n is None else f"[{n}]" for n in d.dims)
    if d.range is not None:
        name += f"<{d.range}>"
    text = " ".join(parts) + " " + name
    if d.init is not None:
        text += f" = {d.init}"
    return text


def emit_instruction(inst: Instruction) -> str:
    text = f"{inst.guard} " if inst.guard else ""
    text += inst.opcode + "".join(inst.modifiers)
    if inst.operands:
        text += " \t" + ", ".join(map(str, inst.operands))
    return text + ";"


def emit_statement(s) -> str:
    if isinstance(s, Instruction):
        return "\t" + emit_instruction(s)
    if isinstance(s, Label):
        return f"{s.name}:"
    if isinstance(s, VarDecl):
        head, _, name = emit_decl(s).rpartition(" ")
        return f"\t{head} \t{name};"
    if isinstance(s, Directive):
        return "\t" + emit_directive(s)
    if isinstance(s, ScopeOpen):
        return "\t{"
    if isinstance(s, ScopeClose):
        return "\t}"
    raise TypeError(f"cannot print statement {s!r}")


def _param_block(params: list[VarDecl]) -> str:
    if not params:
        return "()"
    return "(\n" + ",\n".join("\t" + emit_decl(p) for p in params) + "\n)"


def emit_function(fn: Function) -> str:
    head = " ".join([*fn.linkage, fn.kind])
    if fn.returns is not None:
        head += " (" + ", ".join(emit_decl(p) for p in fn.returns) + ")"
    head += " " + fn.name
    if fn.has_param_list:
        head += _param_block(fn.params)
    lines = [head]
    for d in fn.directives:
        lines.append(emit_directive(d))
    if fn.body is None:
        lines.append(";")
        return "\n".join(lines)
    lines.append("{")
    lines.extend(emit_statement(s) for s in fn.body)
    lines.append("}")
    return "\n".join(lines) + "\n"


def emit_section(section: Section) -> str:
    lines = [f"\t.section\t{section.name}", "\t{"]
    for entry in section.entries:
        if isinstance(entry, Label):
            lines.append(f"{entry.name}:")
        elif isinstance(entry, DataLine):
            lines.append(f"{entry.type} " + ",".join(map(str, entry.values)))
    lines.append("\t}")
    return "\n".join(lines)
