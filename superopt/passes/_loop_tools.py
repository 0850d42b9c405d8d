"""Helpers shared by the warp-shuffle, unroll and address-arithmetic passes (not a pass).

* :func:`int_eval` — concrete semantics of the integer/predicate instructions that make up
  loop control and index math (``mov add sub mul shl shr and or xor not setp selp min max
  cvt neg``), used to *prove* facts by exhaustive evaluation over small finite domains
  (e.g. every legal ``%ntid.x``) instead of trusting a syntactic shape.
* :func:`eval_register` — the value of a register at a program point as a function of the
  launch (special registers) and constants, by walking unique reaching definitions.
* CFG utilities: reachable blocks, labels of blocks, live-out registers of a region.
* Small instruction builders.
"""
from __future__ import annotations

from ptx_ir import isa
from ptx_ir import types as ptx_types
from ptx_ir.dataflow import ENTRY
from ptx_ir.nodes import Addr, Guard, Imm, Instruction, Label, Neg, Reg, Sym, type_size
from ptx_ir.semantics import integer


class Unknown(Exception):
    """The value cannot be computed (unsupported instruction, unknown operand)."""


# --------------------------------------------------------------------------- semantics

# the integer types int_eval models: those of ptx_ir.types that fit a 64-bit register
INT_TYPES = frozenset(t for t in ptx_types.INT_TYPES if ptx_types.TYPES[t].size <= 8)
COMPARES = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"}


def _width(type_name: str) -> int:
    return type_size(type_name) * 8


def _operand_value(op, env: dict, bits: int):
    if isinstance(op, Imm):
        if op.is_float:
            raise Unknown(f"float literal {op}")
        return integer.py_wrap(int(op.value), bits)
    if isinstance(op, Neg):
        return not _operand_value(op.operand, env, 1)
    if isinstance(op, Reg):
        if op.name not in env:
            raise Unknown(op.name)
        value = env[op.name]
        return value if isinstance(value, bool) else integer.py_wrap(value, bits)
    raise Unknown(f"operand {op}")


def int_eval(inst: Instruction, env: dict) -> dict:
    """Execute one integer/predicate instruction on ``env`` (reg name -> int/bool).

    Returns the updates ``{reg: value}``. Raises :class:`Unknown` for anything it does not
    model exactly. Integers are kept as unsigned bit patterns of their width. The arithmetic
    is ptx_ir's (``ptx_ir.semantics.integer.py_*``, the emulator's semantics on Python
    ints), except that a zero divisor is :class:`Unknown`: PTX leaves that result
    machine-specific, and a fact proved here must hold on every GPU.
    """
    if inst.guard is not None:
        g = env.get(inst.guard.reg.name)
        if g is None:
            raise Unknown(f"guard {inst.guard}")
        if bool(g) == inst.guard.negated:
            return {}
    op = inst.opcode
    ops = inst.operands
    types = inst.types
    if not ops or not isinstance(ops[0], Reg):
        raise Unknown(f"{inst!r}")
    dst = ops[0].name
    if op == "setp":
        cmp = next((m[1:] for m in inst.modifiers if m[1:] in COMPARES), None)
        t = types[-1] if types else None
        if cmp is None or t not in INT_TYPES:
            raise Unknown(f"{inst!r}")
        bits = _width(t)
        result = integer.py_compare(cmp, _operand_value(ops[1], env, bits),
                                    _operand_value(ops[2], env, bits), bits, ptx_types.is_signed(t))
        combine = next((m for m in inst.modifiers if m in (".and", ".or", ".xor")), None)
        if combine:
            c = bool(_operand_value(ops[3], env, 1))
            result = {".and": result and c, ".or": result or c, ".xor": result != c}[combine]
        return {dst: result}
    if types and types[-1] == ".pred":
        vals = [bool(_operand_value(o, env, 1)) for o in ops[1:]]
        if op == "mov" and len(vals) == 1:
            return {dst: vals[0]}
        if op == "not" and len(vals) == 1:
            return {dst: not vals[0]}
        if op in ("and", "or", "xor") and len(vals) == 2:
            a, b = vals
            return {dst: {"and": a and b, "or": a or b, "xor": a != b}[op]}
        raise Unknown(f"{inst!r}")
    if op == "selp" and types:
        bits = _width(types[-1])
        p = _operand_value(ops[3], env, 1)
        return {dst: _operand_value(ops[1] if p else ops[2], env, bits)}
    if op == "cvt" and len(types) == 2 and all(t in INT_TYPES for t in types) \
            and not any(m in (".sat",) for m in inst.modifiers):
        dbits, sbits = _width(types[0]), _width(types[1])
        v = _operand_value(ops[1], env, sbits)
        return {dst: integer.py_cvt_int(v, dbits, sbits, ptx_types.is_signed(types[1]))}
    if not types or types[-1] not in INT_TYPES:
        raise Unknown(f"{inst!r}")
    t = types[-1]
    bits = _width(t)
    signed = ptx_types.is_signed(t)
    if op == "mov" and len(ops) == 2:
        return {dst: _operand_value(ops[1], env, bits)}
    if op in ("not", "neg") and len(ops) == 2:
        v = _operand_value(ops[1], env, bits)
        return {dst: integer.py_wrap(~v, bits) if op == "not" else integer.py_neg(v, bits)}
    if op == "abs" and len(ops) == 2 and signed:
        return {dst: integer.py_abs(_operand_value(ops[1], env, bits), bits)}
    if op == "clz" and len(ops) == 2:
        return {dst: integer.py_clz(_operand_value(ops[1], env, bits), bits)}
    if op == "popc" and len(ops) == 2:
        return {dst: integer.py_popc(_operand_value(ops[1], env, bits), bits)}
    if len(ops) == 3:
        a = _operand_value(ops[1], env, bits)
        if op == "mul" and ".wide" in inst.modifiers:
            return {dst: integer.py_mul_wide(a, _operand_value(ops[2], env, bits), bits, signed)}
        if op == "mul" and ".hi" in inst.modifiers:
            return {dst: integer.py_mul_hi(a, _operand_value(ops[2], env, bits), bits, signed)}
        if op == "mul" and ".lo" not in inst.modifiers:
            raise Unknown(f"{inst!r}")
        f = integer.PY_BINOPS.get(op)
        if f is not None:
            # shift amounts are unsigned 32-bit whatever the type
            b = _operand_value(ops[2], env, 32 if op in ("shl", "shr") else bits)
            if op in ("div", "rem") and b == 0:
                raise Unknown("division by zero")
            return {dst: f(a, b, bits, signed)}
    if op == "mad" and len(ops) == 4 and ".lo" in inst.modifiers:
        a, b, c = (_operand_value(o, env, bits) for o in ops[1:])
        return {dst: integer.py_wrap(a * b + c, bits)}
    raise Unknown(f"{inst!r}")


def run_straight(insts, env: dict, *, strict: bool = False) -> dict:
    """Execute instructions in order; those it cannot model make their results unknown
    (or raise when ``strict``)."""
    env = dict(env)
    for inst in insts:
        try:
            env.update(int_eval(inst, env))
        except Unknown:
            if strict:
                raise
            for r in isa.defs(inst):
                env.pop(r.name, None)
    return env


class Slicer:
    """Backward slices over unique reaching definitions, for concrete evaluation.

    ``slice_at(block, idx, reg)`` gives the instructions (in dependency order) that compute
    ``reg`` as read just before ``block.instructions[idx]``, down to special registers and
    literals; :class:`Unknown` when a value on the way has several reaching definitions,
    a guarded one, or none.
    """

    def __init__(self, fn):
        self.fn = fn
        self._pos = {}
        for block in fn.blocks:
            for k, inst in enumerate(block.instructions):
                self._pos[id(inst)] = (block, k)
        self._cache: dict = {}

    def position(self, inst: Instruction):
        return self._pos[id(inst)]

    def reaching(self, block, idx: int, reg: str) -> list:
        key = (id(block), idx, reg)
        if key in self._cache:
            return self._cache[key]
        result: list = []
        fn = self.fn

        def scan(b, upto) -> bool:
            for inst in reversed(b.instructions[:upto]):
                if any(r.name == reg for r in isa.defs(inst)):
                    result.append(inst)
                    if inst.guard is None:
                        return True
            return False

        if not scan(block, idx):
            seen = set()
            stack = list(fn.cfg.predecessors(block))
            if block is fn.entry_block:
                result.append(ENTRY)
            while stack:
                b = stack.pop()
                if b in seen:
                    continue
                seen.add(b)
                if not scan(b, len(b.instructions)):
                    if b is fn.entry_block:
                        result.append(ENTRY)
                    stack.extend(fn.cfg.predecessors(b))
        out = []
        for r in result:
            if not any(r is o for o in out):
                out.append(r)
        self._cache[key] = out
        return out

    def slice_at(self, block, idx: int, reg: str, env_keys=()) -> list[Instruction]:
        order: list[Instruction] = []
        defined: dict[str, int] = {}
        visiting: set = set()

        def visit(b, k, name, depth):
            if name in env_keys or Reg(name).is_special:
                return
            if depth > 60:
                raise Unknown("slice too deep")
            defs = self.reaching(b, k, name)
            if len(defs) != 1 or defs[0] == ENTRY or defs[0].guard is not None:
                raise Unknown(f"{name}: {len(defs)} reaching definitions")
            d = defs[0]
            if id(d) in visiting:
                raise Unknown("cycle")
            if any(o is d for o in order):
                return
            if defined.get(name, id(d)) != id(d):
                raise Unknown(f"{name} defined twice in the slice")
            visiting.add(id(d))
            db, dk = self._pos[id(d)]
            for use in isa.uses(d):
                visit(db, dk, use.name, depth + 1)
            visiting.discard(id(d))
            defined[name] = id(d)
            order.append(d)

        visit(block, idx, reg, 0)
        return order

    def slice_before(self, inst: Instruction, reg: str, env_keys=()) -> list[Instruction]:
        b, k = self._pos[id(inst)]
        return self.slice_at(b, k, reg, env_keys)


def evaluate_slice(order: list[Instruction], reg: str, env: dict):
    env = run_straight(order, env, strict=True)
    if reg not in env:
        raise Unknown(reg)
    return env[reg]


def eval_register(fn, at: Instruction, reg: str, env: dict, slicer: Slicer | None = None):
    """The value of ``reg`` read just before ``at``; special registers come from ``env``
    (e.g. ``{"%ntid.x": 256}``), other registers through unique reaching definitions."""
    if reg in env:
        return env[reg]
    slicer = slicer or Slicer(fn)
    order = slicer.slice_before(at, reg, tuple(env))
    return evaluate_slice(order, reg, env)


def special_source(fn, at: Instruction, reg: str) -> str | None:
    """The special register (``%tid.x``) that ``reg`` holds a plain copy of at ``at``."""
    if Reg(reg).is_special:
        return reg
    defs = fn.def_use.definitions(at, reg)
    if len(defs) != 1 or defs[0] == ENTRY:
        return None
    d = defs[0]
    if d.opcode == "mov" and d.guard is None and len(d.operands) == 2 \
            and isinstance(d.operands[1], Reg):
        src = d.operands[1].name
        if Reg(src).is_special:
            return src
        return special_source(fn, d, src)
    if d.opcode == "cvt" and d.guard is None and len(d.types) == 2 \
            and _width(d.types[0]) >= _width(d.types[1]) and d.types[1] in (".u32", ".s32") \
            and isinstance(d.operands[1], Reg):
        # tid.x < 1024: widening either way keeps the value
        return special_source(fn, d, d.operands[1].name)
    return None


# --------------------------------------------------------------------------- CFG utilities

def reachable_blocks(fn, starts) -> set:
    seen = set()
    stack = list(starts)
    while stack:
        b = stack.pop()
        if b in seen:
            continue
        seen.add(b)
        stack.extend(fn.cfg.successors(b))
    return seen


def can_reach(fn, target_blocks) -> set:
    """Blocks from which some block of ``target_blocks`` is reachable (targets included)."""
    seen = set()
    stack = list(target_blocks)
    while stack:
        b = stack.pop()
        if b in seen:
            continue
        seen.add(b)
        stack.extend(fn.cfg.predecessors(b))
    return seen


def label_of_block(fn, block) -> str:
    """A label naming ``block`` (inserting a fresh one before its first instruction)."""
    if block.labels:
        return block.labels[0]
    name = fn.new_label("B")
    fn.insert_before(block.instructions[0], Label(name))
    return name


def live_out(fn, region: set) -> set[str]:
    """Registers defined by an instruction of ``region`` (a set of ids) that an
    instruction outside it may read."""
    out = set()
    for inst in fn.instructions:
        if id(inst) in region:
            continue
        for r in isa.uses(inst):
            if r.is_special:
                continue
            for d in fn.def_use.definitions(inst, r.name):
                if d != ENTRY and id(d) in region:
                    out.add(r.name)
    return out


def scoped_instructions(fn) -> set[int]:
    """ids of the instructions inside a nested ``{ }`` scope (inline-asm and call scopes,
    which may declare their own registers): passes must not move them out."""
    from ptx_ir.nodes import ScopeClose, ScopeOpen
    out = set()
    depth = 0
    for s in fn.body or ():
        if isinstance(s, ScopeOpen):
            depth += 1
        elif isinstance(s, ScopeClose):
            depth -= 1
        elif depth > 0 and isinstance(s, Instruction):
            out.add(id(s))
    return out


def register_type(fn, name: str) -> str | None:
    for d in fn.reg_decls:
        if d.range is None:
            if d.name == name:
                return d.type
        elif name.startswith(d.name) and name[len(d.name):].isdigit() \
                and int(name[len(d.name):]) < d.range:
            return d.type
    return None


def has_side_effects(inst: Instruction) -> bool:
    return isa.touches_memory(inst) or isa.is_fence(inst) or inst.opcode in (
        "bar", "barrier", "call", "ret", "exit", "trap", "shfl", "vote", "match", "redux",
        "activemask", "elect", "nanosleep", "pmevent", "brkpt", "mbarrier", "griddepcontrol",
        "setmaxnreg", "prefetch", "prefetchu", "wgmma", "mma", "wmma", "tcgen05")


# --------------------------------------------------------------------------- builders

def I(opcode: str, mods: str, *operands, guard: Guard | None = None) -> Instruction:
    """``I("add", ".s32", d, a, b)`` — modifiers as one dotted string."""
    modifiers = tuple("." + m for m in mods.split(".") if m) if mods else ()
    return Instruction(opcode, modifiers, tuple(_op(o) for o in operands), guard)


def _op(o):
    if isinstance(o, int):
        return Imm(str(o))
    if isinstance(o, str):
        return Reg(o) if o.startswith("%") else Sym(o)
    return o


def bra(label: str, guard: Guard | None = None, uni: bool = False) -> Instruction:
    return Instruction("bra", (".uni",) if uni and guard is None else (), (Sym(label),), guard)


def addr(base, offset: int | None = None) -> Addr:
    return Addr(_op(base), offset if offset else None)
