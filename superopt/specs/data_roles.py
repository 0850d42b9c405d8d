"""What a kernel does with the memory its parameters reach, for building input sets.

* :func:`field_origins` / :func:`struct_field_types`: pointer fields of a struct passed by
  value (``ld.param.u64 %rd, [param+8]``) and the element type the kernel loads or stores
  through each.
* :func:`index_buffers`: buffers whose *contents* decide where the kernel reads or writes
  (CSR row pointers and column indices, a permutation, histogram bins, a gather list). Random
  contents in those make a kernel read far outside its buffers or loop for billions of
  iterations, so the check keeps the program's own data in them (from a capture's snapshot)
  and varies the rest.
"""
from __future__ import annotations

from ptx_ir import isa
from ptx_ir.nodes import Addr, Reg, Sym

__all__ = ["field_origins", "struct_field_types", "index_buffers"]

_BITS_AS_UINT = {"b8": "u8", "b16": "u16", "b32": "u32", "b64": "u64"}


def field_origins(fn) -> dict[str, tuple[str, int]]:
    """Register -> (param name, byte offset) for registers holding an 8-byte field loaded from
    a by-value param (``ld.param.u64``), followed through ``mov`` and ``cvta``."""
    params = {p.name for p in fn.params}
    origin: dict[str, tuple[str, int]] = {}
    for inst in fn.instructions:
        ops = list(inst.operands or ())
        if len(ops) != 2 or not isinstance(ops[0], Reg):
            continue
        if inst.opcode == "ld" and ".param" in inst.modifiers and isinstance(ops[1], Addr) \
                and isinstance(ops[1].base, Sym) and ops[1].base.name in params:
            origin[ops[0].name] = (ops[1].base.name, int(ops[1].offset or 0))
        elif inst.opcode in ("cvta", "mov") and isinstance(ops[1], Reg) and ops[1].name in origin:
            origin[ops[0].name] = origin[ops[1].name]
    return origin


def _access_base(a, origin: dict) -> tuple[str, int | None] | None:
    """The buffer an access goes through: (param name, None) for a pointer param, (param name,
    offset) for a struct's pointer field; None when it cannot be told."""
    if a.affine is None:
        return None
    if a.base and a.base.startswith("param:"):
        return (a.base[6:], None)
    terms = list(a.affine.terms)
    # a pointer stepped through a loop is an iv:<reg> atom; its value before the loop holds the base
    for m, c in list(terms):
        if c == 1 and len(m) == 1 and str(m[0]).startswith("iv:") and m[0] in (a.recurrences or {}):
            init = a.recurrences[m[0]][0]
            if init is not None:
                terms.extend(init.terms)
    found = {origin[m[0][4:]] for m, c in terms
             if c == 1 and len(m) == 1 and str(m[0]).startswith("reg:") and m[0][4:] in origin}
    return found.pop() if len(found) == 1 else None


def struct_field_types(fn) -> dict[tuple[str, int], str]:
    """(param name, byte offset) -> element type of the global/generic accesses through that
    pointer field of a by-value struct (the first one seen)."""
    origin = field_origins(fn)
    out: dict[tuple[str, int], str] = {}
    for a in fn.memory_accesses:
        if a.space not in (".global", "generic") or not a.type:
            continue
        where = _access_base(a, origin)
        if where is not None and where[1] is not None and where not in out:
            t = a.type.lstrip(".")
            out[where] = _BITS_AS_UINT.get(t, t)
    return out


def index_buffers(fn) -> set[tuple[str, int | None]]:
    """Buffers (as :func:`_access_base` names them) some loaded value of which flows, through
    registers, into the address of a memory access or into the predicate of a backward branch
    (a loop bound such as ``row_ptr[i+1]``). Walks the def-use graph backwards from every address and
    every guarded branch; a load ends the walk and names its buffer."""
    origin = field_origins(fn)
    du = fn.def_use
    base_of = {id(a.inst): _access_base(a, origin) for a in fn.memory_accesses
               if a.space in (".global", "generic", ".const") and a.kind == "load"}
    starts: list[tuple] = []
    label_block = {lab: b.index for b in fn.blocks for lab in b.labels}
    for block in fn.blocks:
        for inst in block.instructions:
            mem = isa.address_operand(inst) if isa.touches_memory(inst) else None
            if isinstance(mem, Addr):
                regs = [r.name for r in _regs_of(mem)]
                if regs:
                    starts.append((inst, regs))
            if inst.opcode == "bra" and inst.guard is not None and inst.operands \
                    and isinstance(inst.operands[-1], Sym) \
                    and label_block.get(inst.operands[-1].name, 1 << 30) <= block.index:
                # a backward branch: a loop's trip count (forward branches, e.g. a value
                # test, keep varying data: a rewrite wrong for some values must meet them)
                starts.append((inst, [inst.guard.reg.name]))
    found: set = set()
    seen: set[int] = set()
    work = list(starts)
    while work:
        inst, regs = work.pop()
        for reg in regs:
            for d in du.definitions(inst, reg):
                if d == "entry" or id(d) in seen:
                    continue
                seen.add(id(d))
                if isa.is_load(d):
                    b = base_of.get(id(d))
                    if b is not None:
                        found.add(b)
                    continue          # the loaded value's own address is not followed
                work.append((d, [r.name for r in isa.uses(d)]))
    return found


def _regs_of(addr: Addr) -> list[Reg]:
    from ptx_ir.nodes import walk_operand
    return [o for o in walk_operand(addr) if isinstance(o, Reg) and not o.is_special]
