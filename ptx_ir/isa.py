"""What each instruction reads, writes and does to control flow.

These facts are what the analyses (CFG, def-use, memory order) need; the numeric meaning
of instructions lives in :mod:`ptx_ir.semantics`.
"""
from __future__ import annotations

from ptx_ir.nodes import Addr, Instruction, Pair, Reg, Sink, Vec, operand_registers

# Instructions whose first operand is never a destination.
NO_DESTINATION = frozenset({
    "st", "red", "bar", "barrier", "bra", "brx", "call", "ret", "exit", "trap", "brkpt", "membar",
    "fence", "prefetch", "prefetchu", "cp", "sust", "sured", "stmatrix", "nanosleep", "pmevent",
    "discard", "applypriority", "griddepcontrol", "setmaxnreg", "st.async", "red.async",
    "stackrestore", "tensormap",
})
# Instructions whose destination is also read (accumulators).
READS_DESTINATION = frozenset({"wgmma"})
TERMINATORS = frozenset({"bra", "brx", "ret", "exit", "trap"})
LOADS = frozenset({"ld", "ldu", "ldmatrix", "tex", "tld4", "suld"})
STORES = frozenset({"st", "stmatrix", "sust", "st.async"})
ATOMICS = frozenset({"atom", "red", "sured", "red.async"})
# Instructions that order memory for other threads (the dataflow graph orders every memory
# access against them).
FENCES = frozenset({"bar", "barrier", "membar", "fence", "mbarrier", "cp", "call"})


def _dest_registers(op) -> list[Reg]:
    if isinstance(op, Reg):
        return [op]
    if isinstance(op, Pair):
        return _dest_registers(op.first) + _dest_registers(op.second)
    if isinstance(op, Vec):
        out: list[Reg] = []
        for item in op.items:
            out.extend(_dest_registers(item))
        return out
    return []


def has_destination(inst: Instruction) -> bool:
    if inst.opcode in NO_DESTINATION or not inst.operands:
        return False
    if inst.opcode == "wmma" and ".store" in inst.modifiers:
        return False
    if inst.opcode == "mbarrier" and isinstance(inst.operands[0], Addr):
        return False
    first = inst.operands[0]
    return isinstance(first, (Reg, Pair, Vec, Sink))


def defs(inst: Instruction) -> list[Reg]:
    """Registers written by ``inst`` (special registers are never written)."""
    if not has_destination(inst):
        return []
    return [r for r in _dest_registers(inst.operands[0]) if not r.is_special]


def uses(inst: Instruction) -> list[Reg]:
    """Registers read by ``inst``, the guard predicate included."""
    out: list[Reg] = []
    if inst.guard is not None:
        out.append(inst.guard.reg)
    ops = inst.operands
    start = 1 if has_destination(inst) and inst.opcode not in READS_DESTINATION else 0
    for op in ops[start:]:
        out.extend(operand_registers(op))
    return out


def is_terminator(inst: Instruction) -> bool:
    return inst.opcode in TERMINATORS


def is_unconditional(inst: Instruction) -> bool:
    return inst.guard is None


def is_load(inst: Instruction) -> bool:
    return inst.opcode in LOADS or inst.opcode == "atom" or (inst.opcode == "cp" and ".async" in inst.modifiers)


def is_store(inst: Instruction) -> bool:
    return inst.opcode in STORES or inst.opcode in ATOMICS or inst.opcode == "atom" \
        or (inst.opcode == "cp" and ".async" in inst.modifiers) \
        or (inst.opcode == "wmma" and ".store" in inst.modifiers)


def touches_memory(inst: Instruction) -> bool:
    return is_load(inst) or is_store(inst) or (inst.opcode == "wmma" and ".load" in inst.modifiers)


def is_fence(inst: Instruction) -> bool:
    return inst.opcode in FENCES


def address_operand(inst: Instruction) -> Addr | None:
    """The memory operand of a load/store/atomic, if any."""
    for op in inst.operands:
        if isinstance(op, Addr):
            return op
    return None
