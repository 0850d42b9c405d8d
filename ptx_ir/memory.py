"""Memory accesses of a function with symbolic addresses.

For every load, store and atomic: its state space, type, vector width, bytes, the
register-level address, and where derivable an :class:`~ptx_ir.affine.Affine` form over
``%tid``/``%ctaid``/``%ntid``/``%nctaid`` and the parameters, plus the alignment that the
form proves.
"""
from __future__ import annotations

from dataclasses import dataclass

from ptx_ir import isa
from ptx_ir.affine import Affine
from ptx_ir.dataflow import ENTRY
from ptx_ir.nodes import Addr, Imm, Instruction, Reg, Sym, type_size

LAUNCH_ATOMS = ("%tid", "%ntid", "%ctaid", "%nctaid")


@dataclass(eq=False)
class MemoryAccess:
    inst: Instruction
    kind: str                    # load | store | atomic
    space: str                   # .global .shared .local .param .const generic
    type: str | None
    vector_width: int
    bytes: int
    address: Addr
    affine: Affine | None        # the full byte address, when derivable
    # For each iv:<reg> atom in ``affine``: (value before the loop, step per iteration).
    recurrences: dict
    base: str | None             # the pointer the address is relative to (param:x, symbol)
    alignment: int               # proven alignment of the address in bytes (>= 1)

    @property
    def offset(self) -> Affine | None:
        """The address minus its base pointer."""
        if self.affine is None or self.base is None:
            return None
        return self.affine.without((self.base,))

    def __repr__(self) -> str:
        return f"<{self.kind} {self.space} {self.type}x{self.vector_width} @ {self.affine}>"


class AddressEvaluator:
    """Turns registers into :class:`Affine` values by walking def-use chains."""

    def __init__(self, fn):
        self.fn = fn
        self.du = fn.def_use
        self.param_names = {p.name for p in fn.params}
        self.memo: dict = {}
        # iv:<reg> atoms: register -> (initial value, step per iteration)
        self.recurrences: dict[str, tuple[Affine, Affine]] = {}

    def value(self, reg: str, at: Instruction) -> Affine | None:
        if reg.startswith("%") and reg.split(".")[0] in LAUNCH_ATOMS:
            return Affine.atom(reg)
        sources = self.du.definitions(at, reg)
        if len(sources) == 2 and ENTRY not in sources:
            rec = self.recurrence(reg, sources)
            if rec is not None:
                return Affine.atom(f"iv:{reg}")
        if len(sources) != 1 or sources[0] == ENTRY:
            return Affine.atom(f"reg:{reg}") if sources else None
        return self.of_instruction(sources[0], reg)

    def recurrence(self, reg: str, sources: list) -> tuple[Affine, Affine] | None:
        """``(init, step)`` when ``reg`` is a loop recurrence ``reg = init; reg += step``."""
        key = ("iv", reg, tuple(id(s) for s in sources))
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = None
        result = None
        for update, init in (sources, sources[::-1]):
            ops = update.operands
            if update.opcode != "add" or update.guard is not None or len(ops) != 3:
                continue
            if isinstance(ops[1], Reg) and ops[1].name == reg:
                step_op = ops[2]
            elif isinstance(ops[2], Reg) and ops[2].name == reg:
                step_op = ops[1]
            else:
                continue
            step = self.operand(step_op, update)
            start = self.of_instruction(init, reg)
            if step is not None and start is not None and f"iv:{reg}" not in step.atoms():
                result = (start, step)
                self.recurrences[reg] = result
                break
        self.memo[key] = result
        return result

    def operand(self, op, at: Instruction) -> Affine | None:
        if isinstance(op, Imm):
            return None if op.is_float else Affine.const(op.value)
        if isinstance(op, Reg):
            return self.value(op.name, at)
        if isinstance(op, Sym):
            return Affine.atom(f"sym:{op.name}")
        return None

    def of_instruction(self, inst: Instruction, reg: str) -> Affine | None:
        key = (id(inst), reg)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = Affine.atom(f"reg:{reg}")   # cycles (loops) stay opaque
        result = self._evaluate(inst, reg)
        if result is None:
            result = Affine.atom(f"reg:{reg}")
        self.memo[key] = result
        return result

    def _evaluate(self, inst: Instruction, reg: str) -> Affine | None:
        op = inst.opcode
        ops = inst.operands
        if inst.guard is not None:
            return None
        if op == "ld" and inst.space == ".param" and isinstance(ops[1], Addr) \
                and isinstance(ops[1].base, Sym) and ops[1].base.name in self.param_names \
                and not ops[1].offset:
            return Affine.atom(f"param:{ops[1].base.name}")
        if op in ("mov", "cvta") and len(ops) == 2:
            return self.operand(ops[1], inst)
        if op == "cvt" and len(ops) == 2:
            types = inst.types
            # Widening or same-width integer conversions keep the value (see module doc).
            if len(types) == 2 and types[0][1] in "us" and types[1][1] in "us" \
                    and type_size(types[0]) >= type_size(types[1]):
                return self.operand(ops[1], inst)
            return None
        if len(ops) == 3:
            a = self.operand(ops[1], inst)
            b = self.operand(ops[2], inst)
            if a is None or b is None:
                return None
            if op == "add":
                return a + b
            if op == "sub":
                return a - b
            if op == "mul" and (".lo" in inst.modifiers or ".wide" in inst.modifiers):
                return a * b
            if op == "shl" and b.is_constant and 0 <= b.constant < 64:
                return a.scale(1 << b.constant)
            return None
        if op == "mad" and len(ops) == 4 and (".lo" in inst.modifiers or ".wide" in inst.modifiers):
            a, b, c = (self.operand(x, inst) for x in ops[1:])
            if a is None or b is None or c is None:
                return None
            return a * b + c
        return None


def collect_memory_accesses(fn) -> list[MemoryAccess]:
    evaluator = AddressEvaluator(fn)
    ptr_align = {f"param:{p.name}": p.ptr_align for p in fn.params if p.ptr and p.ptr_align}
    out = []
    for inst in fn.instructions:
        if not isa.touches_memory(inst):
            continue
        addr = isa.address_operand(inst)
        if addr is None:
            continue
        if inst.opcode in ("atom", "red"):
            kind = "atomic"
        elif isa.is_store(inst):
            kind = "store"
        else:
            kind = "load"
        base_value = evaluator.operand(addr.base, inst)
        affine = None if base_value is None else base_value + Affine.const(addr.offset or 0)
        base = None
        if affine is not None:
            pointers = [m[0] for m, c in affine.terms
                        if len(m) == 1 and c == 1 and m[0].startswith(("param:", "sym:"))]
            base = pointers[0] if len(pointers) == 1 else None
        width = inst.vector_width
        type_ = inst.type
        size = type_size(type_) * width if type_ else 0
        # The baseline executes this access, so its address is naturally aligned too.
        natural = size if size and size & (size - 1) == 0 else 1
        recurrences = {}
        if affine is not None:
            for atom in affine.atoms():
                if atom.startswith("iv:"):
                    recurrences[atom] = evaluator.recurrences[atom[3:]]
        atom_align = dict(ptr_align)
        for atom, (start, step) in recurrences.items():
            atom_align[atom] = min(start.alignment(ptr_align), step.alignment(ptr_align))
        proven = affine.alignment(atom_align) if affine is not None else 1
        out.append(MemoryAccess(inst=inst, kind=kind, space=inst.space or "generic", type=type_,
                                vector_width=width, bytes=size, address=addr, affine=affine,
                                recurrences=recurrences, base=base, alignment=max(proven, natural)))
    return out
