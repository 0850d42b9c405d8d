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


def emit(module: Module, *, keep_lines: bool = False, faithful: bool = False) -> str:
    """Canonical PTX text of ``module``.

    ``faithful=True`` reproduces the parsed source text byte for byte wherever the module
    still means what it meant when parsed: each top-level item (function, variable,
    section) that is unchanged is copied from the source with its comments and spacing,
    and only changed items are printed canonically. An unchanged module gives back exactly
    its source — which matters because fatbinary embeds the PTX text (the JIT fallback)
    and ptxas embeds it in ``-G``/``-lineinfo`` cubins.

    ``keep_lines=True`` pads with empty lines so that every parsed statement stays on its
    original source line wherever the text before it did not grow. ptxas names some
    symbols after PTX line numbers (function-scoped ``.shared`` variables in relocatable
    cubins), so this is what makes a ``-rdc`` build byte-identical after a round trip.
    """
    if faithful:
        text = _emit_faithful(module)
        if text is not None:
            return text
        keep_lines = True
    lines: list[tuple[str, int | None]] = []
    for word in module.header or [".version", ".target", ".address_size"]:
        if word == ".version" and module.version:
            lines.append((f".version {module.version}", None))
        elif word == ".target" and module.target:
            lines.append((f".target {', '.join(module.target)}", None))
        elif word == ".address_size" and module.address_size is not None:
            lines.append((f".address_size {module.address_size}", None))
    lines.append(("", None))
    for item in module.items:
        line = getattr(item, "line", None)
        if isinstance(item, Function):
            lines.extend(_function_lines(item))
        elif isinstance(item, VarDecl):
            lines.append((emit_decl(item) + ";", line))
        elif isinstance(item, Directive):
            lines.append(("\t" + emit_directive(item), line))
        elif isinstance(item, Section):
            text = emit_section(item).split("\n")
            lines.extend([(text[0], line)] + [(t, None) for t in text[1:]])
        else:  # pragma: no cover - the parser makes nothing else
            raise TypeError(f"cannot print module item {item!r}")
    if not keep_lines:
        return "\n".join(t for t, _ in lines) + "\n"
    out: list[str] = []
    for text, line in lines:
        if line is not None and line > len(out) + 1:
            out.extend([""] * (line - len(out) - 1))
        out.append(text)
    return "\n".join(out) + "\n"


def _item_text(item) -> str:
    if isinstance(item, Function):
        return emit_function(item)
    if isinstance(item, VarDecl):
        return emit_decl(item)
    if isinstance(item, Directive):
        return emit_directive(item)
    return emit_section(item)


def _padded_item(item, original_newlines: int) -> str:
    """A changed item printed so that its statements keep their source lines where they can,
    and as many lines as it had, so that everything after it keeps its lines too."""
    first = item.line or 1
    if isinstance(item, Function):
        lines = _function_lines(item)
        while lines and lines[-1][0] == "":
            lines.pop()
    else:
        lines = [(t, None) for t in _item_text(item).rstrip("\n").split("\n")]
    out: list[str] = []
    for text, line in lines:
        if line is not None and line - first > len(out):
            out.extend([""] * (line - first - len(out)))
        out.append(text)
    if len(out) - 1 < original_newlines:
        out.extend([""] * (original_newlines - (len(out) - 1)))
    return "\n".join(out)


def _emit_faithful(module: Module) -> str | None:
    """Source text with changed items re-printed, or None when the item structure changed."""
    source = module.source_text
    if source is None or any(getattr(i, "span", None) is None for i in module.items):
        return None
    from ptx_ir.parser import parse
    original = parse(source)
    if (original.version, original.target, original.address_size) != \
            (module.version, module.target, module.address_size):
        return None
    if len(original.items) != len(module.items):
        return None
    pieces: list[str] = []
    cursor = 0
    for old, new in zip(original.items, module.items):
        if old.span != new.span or type(old) is not type(new):
            return None
        start, end = new.span
        if _item_text(old) == _item_text(new):
            pieces.append(source[cursor:end])
        else:
            pieces.append(source[cursor:start])
            pieces.append(_padded_item(new, source[start:end].count("\n")))
        cursor = end
    pieces.append(source[cursor:])
    return "".join(pieces)


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


def _function_lines(fn: Function) -> list[tuple[str, int | None]]:
    head = " ".join([*fn.linkage, fn.kind])
    if fn.returns is not None:
        head += " (" + ", ".join(emit_decl(p) for p in fn.returns) + ")"
    head += " " + fn.name
    if fn.has_param_list:
        head += _param_block(fn.params)
    head_lines = head.split("\n")
    lines = [(head_lines[0], fn.line)] + [(t, None) for t in head_lines[1:]]
    for d in fn.directives:
        lines.append((emit_directive(d), None))
    if fn.body is None:
        lines.append((";", None))
        return lines
    lines.append(("{", None))
    lines.extend((emit_statement(s), s.line) for s in fn.body)
    lines.append(("}", None))
    lines.append(("", None))
    return lines


def emit_function(fn: Function) -> str:
    return "\n".join(t for t, _ in _function_lines(fn)).rstrip("\n") + "\n"


def emit_section(section: Section) -> str:
    lines = [f"\t.section\t{section.name}", "\t{"]
    for entry in section.entries:
        if isinstance(entry, Label):
            lines.append(f"{entry.name}:")
        elif isinstance(entry, DataLine):
            lines.append(f"{entry.type} " + ",".join(map(str, entry.values)))
    lines.append("\t}")
    return "\n".join(lines)
