"""The PTX syntax tree.

A :class:`Module` holds top-level items in source order; a :class:`Function` holds its
body as a flat list of statements in which nested ``{ }`` scopes appear as
:class:`ScopeOpen`/:class:`ScopeClose` markers. A flat body keeps the printer faithful
(inline-asm and call scopes survive a round trip) while analyses and passes see one
straight sequence of instructions and labels.

Operands and expressions are small immutable values; statements are mutable objects with
identity (analyses key on them), so two equal-looking instructions are still distinct.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Iterator, Union

from ptx_ir.errors import IRError
from ptx_ir.types import SUB_BYTE_TYPES, TYPE_NAMES, ptx_type

# --------------------------------------------------------------------------- operands


@dataclass(frozen=True)
class Reg:
    """A register, a special register (``%tid.x``) or an inline-asm local name."""

    name: str

    @property
    def is_special(self) -> bool:
        base = self.name.split(".")[0]
        return base in SPECIAL_REGISTERS

    def __str__(self) -> str:
        return self.name


SPECIAL_REGISTERS = frozenset({
    "%tid", "%ntid", "%laneid", "%warpid", "%nwarpid", "%ctaid", "%nctaid", "%smid", "%nsmid",
    "%gridid", "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt",
    "%clock", "%clock_hi", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi",
    "%pm0", "%pm1", "%pm2", "%pm3", "%pm4", "%pm5", "%pm6", "%pm7", "%dynamic_smem_size",
    "%total_smem_size", "%aggr_smem_size", "%is_explicit_cluster", "%clusterid", "%nclusterid",
    "%cluster_ctaid", "%cluster_nctaid", "%cluster_ctarank", "%cluster_nctarank",
    "%reserved_smem_offset_begin", "%reserved_smem_offset_end", "%reserved_smem_offset_cap",
    "%reserved_smem_offset_0", "%reserved_smem_offset_1", "%current_graph_exec",
    *(f"%envreg{i}" for i in range(32)),
})


@dataclass(frozen=True)
class Imm:
    """A numeric literal, kept as written (``-1``, ``0x3f``, ``0f3F800000``, ``0d...``)."""

    text: str

    @property
    def is_float(self) -> bool:
        t = self.text.lstrip("-")
        return t[:2] in ("0f", "0F", "0d", "0D") or ("." in t)

    @property
    def value(self) -> int | float:
        """Integers as Python ints; ``0f``/``0d`` literals as their bit patterns (ints)."""
        return parse_number(self.text)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Sym:
    """A name: label, variable, parameter, function, section."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Sink:
    """The ``_`` operand (a discarded result)."""

    def __str__(self) -> str:
        return "_"


@dataclass(frozen=True)
class Neg:
    """A negated predicate source: ``!%p1``."""

    operand: "Operand"

    def __str__(self) -> str:
        return f"!{self.operand}"


@dataclass(frozen=True)
class Pair:
    """Two destinations written as ``%r1|%p1`` (setp, shfl.sync)."""

    first: "Operand"
    second: "Operand"

    def __str__(self) -> str:
        return f"{self.first}|{self.second}"


@dataclass(frozen=True)
class Vec:
    """A vector operand ``{%f1, %f2, _, %f4}``."""

    items: tuple["Operand", ...]

    def __str__(self) -> str:
        return "{" + ", ".join(map(str, self.items)) + "}"


@dataclass(frozen=True)
class Addr:
    """A memory operand ``[base+offset]``; ``extra`` holds texture coordinates etc.

    ``offset`` is None when none was written (``[%rd1]``); nvcc writes ``[p+0]`` for
    parameters and that spelling is kept.
    """

    base: "Operand"
    offset: int | None = None
    extra: tuple["Operand", ...] = ()

    def __str__(self) -> str:
        text = str(self.base)
        if self.offset is not None:
            text += f"+{self.offset}"
        for item in self.extra:
            text += f", {item}"
        return f"[{text}]"


@dataclass(frozen=True)
class Paren:
    """A parenthesised list: call arguments and return values."""

    items: tuple["Operand", ...]

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.items)) + ")"


@dataclass(frozen=True)
class BinExpr:
    """``a+b`` / ``a-b`` / ``a*b`` in operands and initializers."""

    op: str
    left: "Operand"
    right: "Operand"

    def __str__(self) -> str:
        return f"{self.left}{self.op}{self.right}"


@dataclass(frozen=True)
class CallExpr:
    """``generic(x)`` and similar in initializers."""

    func: str
    args: tuple["Operand", ...]

    def __str__(self) -> str:
        return f"{self.func}(" + ", ".join(map(str, self.args)) + ")"


@dataclass(frozen=True)
class Brace:
    """An aggregate initializer ``{1, 2, {3}}``."""

    items: tuple["Operand", ...]

    def __str__(self) -> str:
        return "{" + ", ".join(map(str, self.items)) + "}"


Operand = Union[Reg, Imm, Sym, Sink, Neg, Pair, Vec, Addr, Paren, BinExpr, CallExpr, Brace]


def parse_number(text: str) -> int | float:
    t = text
    sign = 1
    if t.startswith("-"):
        sign, t = -1, t[1:]
    if t[:2] in ("0f", "0F", "0d", "0D"):
        return int(t[2:], 16)  # bit pattern; sign never applies to these
    if t.endswith("U"):
        t = t[:-1]
    if t[:2] in ("0x", "0X"):
        return sign * int(t[2:], 16)
    if t[:2] in ("0b", "0B"):
        return sign * int(t[2:], 2)
    if "." in t or "e" in t or "E" in t:
        return sign * float(t)
    if len(t) > 1 and t[0] == "0":
        return sign * int(t, 8)
    return sign * int(t)


def walk_operand(op: Operand) -> Iterator[Operand]:
    """Yield ``op`` and every operand nested in it, depth first, parents before children.

    The one operand walker of the code base (analyses, passes, the emulator, the spec
    tracer): it enters every kind that nests operands — vector, parenthesised and brace
    lists, both halves of a pair, a negated predicate, an address's base *and* its extra
    operands (texture coordinates: registers an instruction reads), and the terms of
    initializer expressions (``a+b``, ``generic(x)``). Filter what it yields rather than
    writing a walker that skips a kind.
    """
    yield op
    if isinstance(op, (Vec, Paren, Brace)):
        for item in op.items:
            yield from walk_operand(item)
    elif isinstance(op, Addr):
        yield from walk_operand(op.base)
        for item in op.extra:
            yield from walk_operand(item)
    elif isinstance(op, Pair):
        yield from walk_operand(op.first)
        yield from walk_operand(op.second)
    elif isinstance(op, Neg):
        yield from walk_operand(op.operand)
    elif isinstance(op, BinExpr):
        yield from walk_operand(op.left)
        yield from walk_operand(op.right)
    elif isinstance(op, CallExpr):
        for item in op.args:
            yield from walk_operand(item)


def operand_registers(op: Operand) -> list[Reg]:
    return [o for o in walk_operand(op) if isinstance(o, Reg)]


# --------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Guard:
    """The ``@%p`` / ``@!%p`` guard predicate of an instruction."""

    reg: Reg
    negated: bool = False

    def __str__(self) -> str:
        return f"@{'!' if self.negated else ''}{self.reg}"


STATE_SPACES = frozenset({".global", ".shared", ".local", ".param", ".const", ".tex", ".reg",
                          ".sreg", ".shared::cta", ".shared::cluster", ".param::entry",
                          ".param::func"})
VECTOR_WIDTHS = {".v2": 2, ".v4": 4, ".v8": 8}


class Instruction:
    """One PTX instruction: ``[guard] opcode.modifiers operands;``."""

    __slots__ = ("opcode", "modifiers", "operands", "guard", "line", "__weakref__")

    def __init__(self, opcode: str, modifiers: tuple[str, ...] | list[str] = (),
                 operands: tuple[Operand, ...] | list[Operand] = (), guard: Guard | None = None):
        self.opcode = opcode
        self.modifiers = tuple(modifiers)
        self.operands = tuple(operands)
        self.guard = guard
        self.line: int | None = None   # source line, when parsed

    @property
    def name(self) -> str:
        """The full opcode with modifiers: ``ld.global.nc.v4.f32``."""
        return self.opcode + "".join(self.modifiers)

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(m for m in self.modifiers if m in TYPE_NAMES)

    @property
    def type(self) -> str | None:
        """The last type modifier (``cvt.f32.s32`` → ``.s32`` is the source; see ``types``)."""
        types = self.types
        return types[-1] if types else None

    @property
    def space(self) -> str | None:
        for m in self.modifiers:
            if m in STATE_SPACES:
                return m
        return None

    @property
    def vector_width(self) -> int:
        for m in self.modifiers:
            if m in VECTOR_WIDTHS:
                return VECTOR_WIDTHS[m]
        return 1

    def has(self, modifier: str) -> bool:
        return modifier in self.modifiers

    def copy(self) -> "Instruction":
        new = Instruction(self.opcode, self.modifiers, self.operands, self.guard)
        new.line = self.line
        return new

    def with_(self, **changes) -> "Instruction":
        """A new instruction with some fields replaced (``operands=..., modifiers=...``)."""
        new = self.copy()
        for key, value in changes.items():
            setattr(new, key, tuple(value) if key in ("operands", "modifiers") else value)
        return new

    def __repr__(self) -> str:
        guard = f"{self.guard} " if self.guard else ""
        ops = ", ".join(map(str, self.operands))
        return f"<{guard}{self.name} {ops}>"


@dataclass(eq=False)
class Label:
    name: str
    line: int | None = field(default=None, compare=False)


@dataclass(eq=False)
class ScopeOpen:
    line: int | None = field(default=None, compare=False)


@dataclass(eq=False)
class ScopeClose:
    line: int | None = field(default=None, compare=False)


@dataclass(eq=False)
class Directive:
    """A directive kept as its name and arguments: ``.loc``, ``.pragma``, ``.file``,
    ``.callprototype``, ``.branchtargets``, performance directives.

    ``args`` are operands/expressions or bare words (``Sym``, dot-words as ``Sym``).
    ``terminated`` says whether it ends with ``;`` (``.loc`` and the performance
    directives do not).
    """

    name: str
    args: list = field(default_factory=list)
    terminated: bool = True
    line: int | None = field(default=None, compare=False)
    span: tuple | None = field(default=None, compare=False, repr=False)   # source offsets


@dataclass(eq=False)
class VarDecl:
    """A variable or parameter declaration in any state space.

    Printed as ``[linkage] space [attributes] [.align N] [.vN] type [.ptr [space] [.align N]]
    name[dims]<range> [= init]``.
    """

    space: str
    type: str
    name: str
    linkage: tuple[str, ...] = ()          # .visible .extern .weak .common
    attributes: tuple[str, ...] = ()       # e.g. ".attribute(.managed)"
    align: int | None = None
    vector: str | None = None               # .v2 / .v4
    ptr: bool = False                       # kernel param .ptr attribute
    ptr_space: str | None = None
    ptr_align: int | None = None
    dims: tuple[int | None, ...] = ()       # x[4][2]; None for []
    range: int | None = None                # %r<10>
    init: Operand | None = None
    line: int | None = field(default=None, compare=False)
    span: tuple | None = field(default=None, compare=False, repr=False)   # source offsets

    @property
    def element_size(self) -> int:
        return type_size(self.type)

    @property
    def size(self) -> int | None:
        """Total bytes, None for an unsized array (``extern .shared x[]``)."""
        count = 1
        for d in self.dims:
            if d is None:
                return None
            count *= d
        width = VECTOR_WIDTHS.get(self.vector or "", 1)
        return count * width * self.element_size

    def register_names(self) -> list[str]:
        if self.range is None:
            return [self.name]
        return [f"{self.name}{i}" for i in range(self.range)]


@dataclass(eq=False)
class Section:
    """A ``.section`` block of a ``-G`` build: labels and data lines (``.b8 1,2``)."""

    name: str
    entries: list = field(default_factory=list)   # Label | DataLine
    line: int | None = field(default=None, compare=False)
    span: tuple | None = field(default=None, compare=False, repr=False)   # source offsets


@dataclass(eq=False)
class DataLine:
    type: str
    values: list


Statement = Union[Instruction, Label, ScopeOpen, ScopeClose, Directive, VarDecl]


def type_size(type_name: str) -> int:
    """Bytes of one value of ``type_name``, from the one table in :mod:`ptx_ir.types`.

    Unlike :func:`ptx_ir.types.type_size` it never raises, as callers across the code base
    have always relied on: a sub-byte type (``.b1``, ``.s4``...) counts as 1 byte and a
    name that is not a sized PTX type (``.texref``, ``.s2f6x2``...) as 4.
    """
    t = ptx_type(type_name)
    if t is not None:
        return t.size
    return 1 if type_name in SUB_BYTE_TYPES else 4


# --------------------------------------------------------------------------- functions


class Function:
    """An ``.entry`` kernel or ``.func`` device function.

    ``body`` is None for declarations (``.extern .func vprintf(...);``). Analyses
    (``cfg``, ``dataflow``, ``dominators``, ``loops``, ``memory_accesses``) are computed on
    first use and dropped by :meth:`invalidate`, which every mutation method calls.
    """

    def __init__(self, name: str, kind: str, *, linkage: tuple[str, ...] = (),
                 params: list[VarDecl] | None = None, returns: list[VarDecl] | None = None,
                 has_param_list: bool = True, directives: list[Directive] | None = None,
                 body: list | None = None):
        self.name = name
        self.kind = kind                      # ".entry" | ".func"
        self.linkage = tuple(linkage)
        self.params = params or []
        self.returns = returns                # None: no return list written
        self.has_param_list = has_param_list
        self.directives = directives or []    # .maxntid, .reqntid, .noreturn, .pragma ...
        self.body = body
        self.line: int | None = None          # source line of the header, when parsed
        self.span: tuple | None = None        # source offsets (start, end), when parsed
        self._cache: dict = {}

    # -- identity
    @property
    def is_entry(self) -> bool:
        return self.kind == ".entry"

    @property
    def is_declaration(self) -> bool:
        return self.body is None

    def __repr__(self) -> str:
        return f"<Function {self.kind} {self.name}>"

    # -- walking
    @property
    def instructions(self) -> list[Instruction]:
        return [s for s in (self.body or ()) if isinstance(s, Instruction)]

    @property
    def reg_decls(self) -> list[VarDecl]:
        return [s for s in (self.body or ()) if isinstance(s, VarDecl) and s.space == ".reg"]

    def directive(self, name: str) -> Directive | None:
        for d in self.directives:
            if d.name == name:
                return d
        return None

    # -- analyses (cached)
    def invalidate(self) -> None:
        self._cache.clear()

    def _cached(self, key: str, build):
        if key not in self._cache:
            self._cache[key] = build(self)
        return self._cache[key]

    @property
    def blocks(self):
        from ptx_ir.cfg import build_cfg
        return self._cached("cfg", build_cfg).blocks

    @property
    def cfg(self):
        """``networkx.DiGraph`` whose nodes are :class:`ptx_ir.cfg.BasicBlock`."""
        from ptx_ir.cfg import build_cfg
        return self._cached("cfg", build_cfg).graph

    @property
    def entry_block(self):
        from ptx_ir.cfg import build_cfg
        return self._cached("cfg", build_cfg).entry

    def block_of(self, inst: Instruction):
        from ptx_ir.cfg import build_cfg
        return self._cached("cfg", build_cfg).block_of[id(inst)]

    @property
    def dominance(self):
        """Dominators and post-dominators (:class:`ptx_ir.dominance.Dominance`)."""
        from ptx_ir.dominance import compute_dominance
        return self._cached("dominance", compute_dominance)

    @property
    def dominators(self) -> dict:
        """Block -> immediate dominator."""
        return self.dominance.idom

    @property
    def post_dominators(self) -> dict:
        """Block -> immediate post-dominator (None for blocks that lead straight out)."""
        return self.dominance.ipdom

    @property
    def loops(self):
        """Natural loops (:class:`ptx_ir.loops.Loop`), outermost and innermost alike."""
        from ptx_ir.loops import find_loops
        return self._cached("loops", find_loops)

    @property
    def dataflow(self):
        """Def-use graph plus memory order (``networkx.MultiDiGraph``)."""
        return self.def_use.graph

    @property
    def def_use(self):
        from ptx_ir.dataflow import build_dataflow
        return self._cached("dataflow", build_dataflow)

    @property
    def memory_accesses(self):
        from ptx_ir.memory import collect_memory_accesses
        return self._cached("memory", collect_memory_accesses)

    @property
    def param_roles(self):
        from ptx_ir.params import param_roles
        return self._cached("params", param_roles)

    @property
    def signature(self) -> str | None:
        """The demangled C++ signature, when the name is mangled."""
        from ptx_ir.params import demangle
        return demangle(self.name)

    # -- mutation (every method keeps the IR valid and drops cached analyses)
    def _index(self, stmt) -> int:
        for i, s in enumerate(self.body or ()):
            if s is stmt:
                return i
        raise IRError(f"{self.name}: statement {stmt!r} is not in this function")

    def replace(self, old, new) -> None:
        """Replace one statement by one or several."""
        i = self._index(old)
        self.body[i:i + 1] = list(new) if isinstance(new, (list, tuple)) else [new]
        self.invalidate()

    def insert_before(self, anchor, new) -> None:
        i = self._index(anchor)
        self.body[i:i] = list(new) if isinstance(new, (list, tuple)) else [new]
        self.invalidate()

    def insert_after(self, anchor, new) -> None:
        i = self._index(anchor) + 1
        self.body[i:i] = list(new) if isinstance(new, (list, tuple)) else [new]
        self.invalidate()

    def remove(self, stmt) -> None:
        del self.body[self._index(stmt)]
        self.invalidate()

    def new_register(self, type_name: str) -> Reg:
        """A fresh register of ``type_name``, declared by extending or adding a ``.reg``."""
        for decl in self.reg_decls:
            if decl.type == type_name and decl.range is not None and decl.name.startswith("%np"):
                reg = Reg(f"{decl.name}{decl.range}")
                decl.range += 1
                self.invalidate()
                return reg
        # ptxas rejects a parameterized name that ends in a digit (%npb32<4>): end in "_"
        prefix = "%np" + type_name.strip(".").replace("x2", "v") + "_"
        taken = {n for d in self.reg_decls for n in ([d.name] if d.range is None else [d.name])}
        while prefix in taken:
            prefix += "_"
        decl = VarDecl(space=".reg", type=type_name, name=prefix, range=1)
        first_reg = next((i for i, s in enumerate(self.body) if isinstance(s, VarDecl) and s.space == ".reg"), 0)
        self.body.insert(first_reg, decl)
        self.invalidate()
        return Reg(f"{prefix}0")

    def new_label(self, hint: str = "L") -> str:
        taken = {s.name for s in self.body or () if isinstance(s, Label)}
        n = 0
        while f"$Lnp_{hint}_{n}" in taken:
            n += 1
        return f"$Lnp_{hint}_{n}"

    def declared_registers(self) -> set[str]:
        names: set[str] = set()
        for d in self.reg_decls:
            names.update(d.register_names())
        for p in self.params + (self.returns or []):
            if p.space == ".reg":
                names.add(p.name)
        return names

    def validate(self) -> None:
        """Raise :class:`IRError` if a register is used undeclared or a label is missing."""
        if self.body is None:
            return
        declared = self.declared_registers()
        labels = {s.name for s in self.body if isinstance(s, Label)}
        for inst in self.instructions:
            regs = [r for op in inst.operands for r in operand_registers(op)]
            if inst.guard:
                regs.append(inst.guard.reg)
            for r in regs:
                if not r.is_special and r.name not in declared:
                    raise IRError(f"{self.name}: {inst!r} uses undeclared register {r.name}")
            if inst.opcode == "bra":
                target = inst.operands[0]
                if isinstance(target, Sym) and target.name not in labels:
                    raise IRError(f"{self.name}: {inst!r} branches to missing label {target.name}")
        depth = 0
        for s in self.body:
            depth += isinstance(s, ScopeOpen) - isinstance(s, ScopeClose)
            if depth < 0:
                raise IRError(f"{self.name}: unbalanced '}}' in body")
        if depth:
            raise IRError(f"{self.name}: unbalanced '{{' in body")

    def clone(self, name: str | None = None) -> "Function":
        """A deep copy (optionally renamed), sharing no statements with this one."""
        new = Function(self.name if name is None else name, self.kind, linkage=self.linkage,
                       params=copy.deepcopy(self.params), returns=copy.deepcopy(self.returns),
                       has_param_list=self.has_param_list,
                       directives=copy.deepcopy(self.directives),
                       body=None if self.body is None else [_copy_statement(s) for s in self.body])
        new.line = self.line
        new.span = self.span
        return new


def _copy_statement(s):
    if isinstance(s, Instruction):
        return s.copy()
    return copy.copy(s)


# --------------------------------------------------------------------------- module


class Module:
    """A PTX module: header directives and top-level items in source order."""

    def __init__(self, version: str = "", target: list[str] | None = None,
                 address_size: int | None = None, items: list | None = None,
                 header: list | None = None):
        self.version = version
        self.target = target or []
        self.address_size = address_size
        # Top-level items in order: Function, VarDecl, Directive (.file, .pragma, ...), Section.
        self.items = items or []
        # Order in which .version/.target/.address_size appeared (nvcc always uses this one).
        self.header = header if header is not None else [".version", ".target", ".address_size"]
        # The text this module was parsed from (for emit(..., faithful=True)).
        self.source_text: str | None = None

    @property
    def functions(self) -> list[Function]:
        return [i for i in self.items if isinstance(i, Function)]

    @property
    def kernels(self) -> list[Function]:
        return [f for f in self.functions if f.is_entry and not f.is_declaration]

    @property
    def globals(self) -> list[VarDecl]:
        return [i for i in self.items if isinstance(i, VarDecl)]

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name and not f.is_declaration:
                return f
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"no function named {name!r} in this module "
                       f"(has: {', '.join(f.name for f in self.functions) or 'none'})")

    def clone(self) -> "Module":
        items = [i.clone() if isinstance(i, Function) else copy.deepcopy(i) for i in self.items]
        new = Module(self.version, list(self.target), self.address_size, items, list(self.header))
        new.source_text = self.source_text
        return new

    def __repr__(self) -> str:
        return f"<Module .version {self.version} .target {','.join(self.target)} " \
               f"{len(self.functions)} functions>"
