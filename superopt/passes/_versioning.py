"""No-alias versioning: a fast body behind a launch-time check, nvcc's body as the fallback.

:func:`versioned` rewrites a kernel (``fn``, a clone the search made) into::

    <fn's declarations, the fast body's renamed .local/.shared declarations>
    <check.instructions>                     // block-uniform: parameters and launch only
    @!<check.predicate> bra $Lnp_version_orig_N;
    <the fast body>                          // registers, labels and variables renamed
    $Lnp_version_orig_N:
    <fn's own code, unchanged>

The fast body is another :class:`ptx_ir.Function` with the same kernel signature: the same
kernel compiled differently (the restrict-compiled PTX of the same translation unit, parsed
from another module) or a transformed clone of ``fn``. It is merged, not spliced:

* its registers become fresh registers of ``fn`` (``fn.new_register``; its own top-level
  ``.reg`` declarations are dropped). Registers declared inside a nested ``{ }`` scope (inline
  asm, call sequences) stay the scope's own, shadowing included;
* its labels are renamed (``$Lnp_version_N``, :func:`superopt.passes._staging.renamer`);
* its top-level ``.local`` / ``.shared`` variables (a local depot, function-scope shared arrays)
  are renamed and declared beside fn's; a function-scope ``extern .shared`` (dynamic shared
  memory) is shared with fn's when both declare it alike and refused when they differ; the
  static shared memory of both bodies together must stay within 48 KiB;
* ``.loc`` directives are dropped from it (they name the other module's file table).

It is refused (:class:`VersioningRefused`, nothing changed) when the two differ in name,
parameters (names, types, alignment, ``.ptr`` attributes) or entry directives
(``.maxntid``, ``.reqntid``, ``.minnctapersm``, ``.maxnreg``, cluster directives...), when the
fast body calls a function or names a module-scope symbol that is not identical in the baseline
module (checked when both modules are given: ``fast_module``, ``base_module``; without them a
fast body with a ``call`` is refused), or when it is not a kernel with a body.

:func:`refusal` runs every check without changing anything (callers ask it before building an
:class:`~superopt.passes._alias_check.AliasCheck` on ``fn``); :func:`same_code` tells whether two
bodies are the same code up to register and label numbering (then versioning gains nothing).
"""
from __future__ import annotations

import dataclasses

from ptx_ir.nodes import (Directive, Function, Guard, Instruction, Label, Module, Reg, ScopeClose,
                          ScopeOpen, Sym, VarDecl)
from ptx_ir.printer import emit_decl, emit_directive, emit_function, emit_statement
from superopt.passes import Change
from superopt.passes._alias_check import AliasCheck, FastPath
from superopt.passes._loop_tools import bra
from superopt.passes._staging import renamer

__all__ = ["VersioningRefused", "versioned", "refusal", "same_code", "normalised_code",
           "foreign_references", "MAX_STATIC_SHARED"]

MAX_STATIC_SHARED = 48 * 1024       # static shared memory a kernel may declare


class VersioningRefused(ValueError):
    """The fast body cannot be placed behind the check (the reason, in words)."""


# --------------------------------------------------------------------------- operand rewriting

def _map_operand(op, regs: dict, syms: dict):
    """``op`` with registers renamed by ``regs`` and names by ``syms`` (both name -> name)."""
    if isinstance(op, Reg):
        new = regs.get(op.name)
        return Reg(new) if new is not None else op
    if isinstance(op, Sym):
        new = syms.get(op.name)
        return Sym(new) if new is not None else op
    if dataclasses.is_dataclass(op) and not isinstance(op, type):
        changes = {}
        for f in dataclasses.fields(op):
            value = getattr(op, f.name)
            if isinstance(value, tuple):
                new = tuple(_map_operand(v, regs, syms) for v in value)
                if any(a is not b for a, b in zip(new, value)):
                    changes[f.name] = new
            elif dataclasses.is_dataclass(value) and not isinstance(value, type):
                new = _map_operand(value, regs, syms)
                if new is not value:
                    changes[f.name] = new
        return dataclasses.replace(op, **changes) if changes else op
    return op


def _map_instruction(inst: Instruction, regs: dict, syms: dict) -> Instruction:
    guard = inst.guard
    if guard is not None and guard.reg.name in regs:
        guard = Guard(Reg(regs[guard.reg.name]), guard.negated)
    new = inst.copy()
    new.operands = tuple(_map_operand(o, regs, syms) for o in inst.operands)
    new.guard = guard
    return new


def _map_directive(d: Directive, regs: dict, syms: dict) -> Directive:
    new = dataclasses.replace(d)
    new.args = [_map_operand(a, regs, syms) for a in d.args]
    return new


# --------------------------------------------------------------------------- what a body holds

def _top_level(fn: Function):
    """(statement, depth) for every statement of the body (depth 0: the function's scope)."""
    depth = 0
    for s in fn.body or ():
        if isinstance(s, ScopeClose):
            depth -= 1
        yield s, depth
        if isinstance(s, ScopeOpen):
            depth += 1


def _entry_directives(fn: Function) -> list[str]:
    return sorted(emit_directive(d) for d in fn.directives if d.name not in (".pragma",))


def _is_extern_shared(d: VarDecl) -> bool:
    return d.space.startswith(".shared") and ".extern" in d.linkage


def _names_used(fn: Function) -> set[str]:
    """Every name an instruction or directive of ``fn`` mentions (registers excluded)."""
    from ptx_ir.nodes import walk_operand
    out: set[str] = set()
    for s in fn.body or ():
        ops = s.operands if isinstance(s, Instruction) else (s.args if isinstance(s, Directive) else ())
        for op in ops:
            out.update(o.name for o in walk_operand(op) if isinstance(o, Sym))
    return out


def _local_names(fn: Function) -> set[str]:
    """Labels, parameters and variables the function itself declares (any scope)."""
    names = {p.name for p in fn.params + (fn.returns or [])}
    for s in fn.body or ():
        if isinstance(s, Label):
            names.add(s.name)
        elif isinstance(s, VarDecl):
            names.update(s.register_names() if s.space == ".reg" else [s.name])
    return names


def foreign_references(fast: Function, fast_module: Module, base_module: Module) -> str | None:
    """Why ``fast`` (a function of ``fast_module``) cannot run inside ``base_module``, or None:
    every module-scope name it uses (a ``.func`` it calls, a global variable, a string
    constant) must be declared identically in both modules."""
    def table(module: Module) -> dict:
        out: dict = {}
        for item in module.items:
            if isinstance(item, Function):
                text = emit_function(item)
                out.setdefault(item.name, []).append(text)
            elif isinstance(item, VarDecl):
                out.setdefault(item.name, []).append(emit_decl(item))
        return {k: sorted(v) for k, v in out.items()}
    mine, theirs = table(fast_module), table(base_module)
    for name in sorted(_names_used(fast) - _local_names(fast)):
        if name not in mine:
            continue                           # not a module-scope name (a bare word argument)
        if name not in theirs:
            return f"the fast body uses {name}, which the baseline module does not declare"
        if mine[name] != theirs[name]:
            return f"the fast body uses {name}, which differs between the two modules"
    return None


def refusal(fn: Function, fast: Function, *, fast_module: Module | None = None,
            base_module: Module | None = None) -> str | None:
    """Why ``fast`` cannot be versioned into ``fn`` (see the module docstring), or None."""
    if not fn.is_entry or fn.body is None:
        return "not a kernel with a body"
    if not fast.is_entry or fast.body is None:
        return "the fast body is not a kernel with a body"
    if fast.name != fn.name:
        return f"the fast body is another kernel ({fast.name}, not {fn.name})"
    if [emit_decl(p) for p in fast.params] != [emit_decl(p) for p in fn.params]:
        return "the fast body's parameters differ from the kernel's"
    if tuple(fast.linkage) != tuple(fn.linkage):
        return "the fast body's linkage differs from the kernel's"
    if _entry_directives(fast) != _entry_directives(fn):
        return (f"the fast body's entry directives ({'; '.join(_entry_directives(fast)) or 'none'}) "
                f"differ from the kernel's ({'; '.join(_entry_directives(fn)) or 'none'})")
    for s, depth in _top_level(fast):
        if isinstance(s, VarDecl) and depth == 0 and s.space == ".reg" and s.vector:
            return f"vector register declaration {emit_decl(s)} is not handled"
        if isinstance(s, VarDecl) and depth == 0 and s.space not in (".reg", ".local") \
                and not s.space.startswith(".shared"):
            return f"function-scope {s.space} variable {s.name} is not handled"
    if fast_module is not None and base_module is not None:
        why = foreign_references(fast, fast_module, base_module)
        if why:
            return why
    elif any(i.opcode == "call" for i in fast.instructions):
        return "the fast body calls a function (its identity with the baseline's cannot be checked here)"
    why = _shared_problem(fn, fast)
    if why:
        return why
    return None


def _shared_problem(fn: Function, fast: Function) -> str | None:
    mine = [s for s, d in _top_level(fn) if d == 0 and isinstance(s, VarDecl) and _is_extern_shared(s)]
    theirs = [s for s, d in _top_level(fast) if d == 0 and isinstance(s, VarDecl) and _is_extern_shared(s)]
    if mine and theirs:
        a = {(s.type, s.align, s.space) for s in mine}
        b = {(s.type, s.align, s.space) for s in theirs}
        if a != b or len(mine) != len(theirs):
            return "both bodies declare dynamic extern .shared memory, differently"
    total = 0
    for f in (fn, fast):
        for s, d in _top_level(f):
            if d == 0 and isinstance(s, VarDecl) and s.space.startswith(".shared") and not _is_extern_shared(s):
                if s.size is None:
                    return f"shared variable {s.name} has no size"
                total += s.size
    if total > MAX_STATIC_SHARED:
        return f"both bodies' static shared memory together ({total} bytes) exceeds {MAX_STATIC_SHARED}"
    return None


# --------------------------------------------------------------------------- comparing bodies

def normalised_code(fn: Function) -> list[str]:
    """The body's instructions and labels as text, registers numbered by first appearance per
    type and labels by first appearance; declarations and ``.loc`` directives left out."""
    types: dict[str, str] = {}
    for d in fn.reg_decls:
        for n in d.register_names():
            types[n] = d.type
    regs: dict[str, str] = {}
    labels: dict[str, str] = {}
    counts: dict[str, int] = {}

    def reg(name: str) -> str:
        if name not in regs:
            t = types.get(name, "?")
            counts[t] = counts.get(t, 0) + 1
            regs[name] = f"%{t.strip('.')}_{counts[t]}"
        return regs[name]

    label_names = {s.name for s in fn.body or () if isinstance(s, Label)}
    for s in fn.body or ():
        if isinstance(s, Label):
            labels.setdefault(s.name, f"L{len(labels)}")
    smap = {n: labels[n] for n in label_names}
    out = []
    for s in fn.body or ():
        if isinstance(s, Label):
            out.append(labels[s.name] + ":")
        elif isinstance(s, Instruction):
            names = {r.name for op in s.operands for r in _regs_in(op)}
            if s.guard:
                names.add(s.guard.reg.name)
            rmap = {n: reg(n) for n in sorted(names, key=lambda n: _first_pos(s, n))
                    if not Reg(n).is_special}
            out.append(emit_statement(_map_instruction(s, rmap, smap)))
        elif isinstance(s, (ScopeOpen, ScopeClose)):
            out.append("{" if isinstance(s, ScopeOpen) else "}")
    return out


def _regs_in(op):
    from ptx_ir.nodes import operand_registers
    return operand_registers(op)


def _first_pos(inst: Instruction, name: str) -> int:
    """Where ``name`` first appears in ``inst`` (the guard first, then operands in order)."""
    if inst.guard is not None and inst.guard.reg.name == name:
        return -1
    for i, op in enumerate(inst.operands):
        if any(r.name == name for r in _regs_in(op)):
            return i
    return len(inst.operands)


def same_code(a: Function, b: Function) -> bool:
    """Whether the two bodies are the same code up to register and label numbering."""
    return normalised_code(a) == normalised_code(b)


# --------------------------------------------------------------------------- the rewrite

def _fresh_name(base: str, taken: set[str]) -> str:
    n = 0
    while f"{base}_np_fast{n}" in taken:
        n += 1
    name = f"{base}_np_fast{n}"
    taken.add(name)
    return name


def _merged_fast_code(fn: Function, fast: Function, taken_labels: set[str]) -> tuple[list, list]:
    """(declarations to add to fn, the fast body's code) with everything renamed into ``fn``."""
    regs: dict[str, str] = {}
    for s, depth in _top_level(fast):
        if isinstance(s, VarDecl) and depth == 0 and s.space == ".reg":
            for name in s.register_names():
                regs[name] = fn.new_register(s.type).name
    syms = renamer([s for s in fast.body if isinstance(s, Label)], taken_labels, "version")
    taken_vars = _local_names(fn) | _names_used(fn) | _names_used(fast) | _local_names(fast)
    fn_extern = {(s.type, s.align, s.space): s.name for s, d in _top_level(fn)
                 if d == 0 and isinstance(s, VarDecl) and _is_extern_shared(s)}
    decls: list = []
    for s, depth in _top_level(fast):
        if isinstance(s, VarDecl) and depth == 0 and s.space != ".reg":
            key = (s.type, s.align, s.space)
            if _is_extern_shared(s) and key in fn_extern:
                syms[s.name] = fn_extern[key]          # the same dynamic shared memory, declared once
                continue
            new = dataclasses.replace(s, name=_fresh_name(s.name.lstrip("$%"), taken_vars))
            syms[s.name] = new.name
            decls.append(new)
    code: list = []
    shadow: list[set[str]] = []          # registers declared in the enclosing nested scopes

    def visible() -> dict:
        hidden = set().union(*shadow) if shadow else set()
        return {k: v for k, v in regs.items() if k not in hidden} if hidden else regs

    current = regs
    for s, depth in _top_level(fast):
        if isinstance(s, ScopeOpen):
            shadow.append(set())
            code.append(ScopeOpen())
        elif isinstance(s, ScopeClose):
            shadow.pop()
            current = visible()
            code.append(ScopeClose())
        elif isinstance(s, VarDecl):
            if depth == 0:
                continue                                  # registers renamed; variables merged above
            if s.space == ".reg":
                shadow[-1].update(s.register_names())
                current = visible()
            code.append(dataclasses.replace(s))
        elif isinstance(s, Label):
            code.append(Label(syms[s.name]))
        elif isinstance(s, Instruction):
            code.append(_map_instruction(s, current, syms))
        elif isinstance(s, Directive):
            if s.name == ".loc":
                continue                                  # the other module's file table
            code.append(_map_directive(s, current, syms))
        else:
            code.append(s)
    last = next((s for s in reversed(code) if isinstance(s, Instruction)), None)
    if last is None or last.guard is not None or last.opcode not in ("ret", "exit", "bra", "trap"):
        code.append(Instruction("ret", (), ()))         # never fall into nvcc's body
    return decls, code


def versioned(fn: Function, fast: Function, check: AliasCheck, *, origin: str = "a fast body",
              fast_module: Module | None = None, base_module: Module | None = None) -> list[Change]:
    """Rewrite ``fn`` into ``check`` at entry, the fast body when it holds, else ``fn``'s own
    code. ``fast`` is not changed. ``origin`` says where the fast body came from, for the
    change's description and for the record (the change's ``fast_path``). Raises
    :class:`VersioningRefused` (``fn`` unchanged) when :func:`refusal` has a reason; returns one
    :class:`~superopt.passes.Change`."""
    why = refusal(fn, fast, fast_module=fast_module, base_module=base_module)
    if why:
        raise VersioningRefused(why)
    declared = fn.declared_registers()
    written = {r.name for i in check.instructions for op in i.operands[:1] for r in _regs_in(op)}
    missing = sorted(r for r in written | {check.predicate} if r not in declared)
    if missing:
        raise VersioningRefused(f"the check writes registers {fn.name} does not declare: {', '.join(missing)}")
    saved = list(fn.body)
    try:
        orig = fn.new_label("version_orig")
        taken = {s.name for s in fn.body if isinstance(s, Label)} | {orig}
        decls, fast_code = _merged_fast_code(fn, fast, taken)
        body = fn.body
        head = 0
        while head < len(body) and isinstance(body[head], VarDecl):
            head += 1
        guard = Guard(Reg(check.predicate), negated=True)
        fn.body = (body[:head] + decls + [i.copy() for i in check.instructions] + [bra(orig, guard)]
                   + fast_code + [Label(orig)] + body[head:])
        fn.invalidate()
        fn.validate()
    except Exception:
        fn.body = saved
        fn.invalidate()
        raise
    return [Change(f"{origin} behind {check.describe()}; nvcc's own code runs when the check fails",
                   fast_path=FastPath(check, origin, [p.name for p in fn.params]))]
