"""Natural loops, their induction variables and trip counts.

A loop is found from each back edge ``latch -> header`` where the header dominates the
latch. The induction variable is a register with one definition outside the loop and one
inside of the form ``add r, r, step`` (step constant); the trip count is derived when the
exit test compares it (or its incremented value) against a constant or a loop-invariant
register.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ptx_ir import isa
from ptx_ir.nodes import Imm, Instruction, Reg


@dataclass(eq=False)
class InductionVariable:
    register: str
    init: int | str | None         # constant, or the register/param it starts from
    step: int
    update: Instruction


@dataclass(eq=False)
class Loop:
    header: object
    latches: list
    blocks: set
    exits: list                      # (block inside, block outside) edges
    parent: "Loop | None" = None
    children: list = field(default_factory=list)
    induction: InductionVariable | None = None
    bound: int | str | None = None   # what the exit test compares against
    compare: str | None = None       # the setp comparison (lt, ne, ...)
    trip_count: int | None = None

    @property
    def depth(self) -> int:
        d, node = 1, self.parent
        while node is not None:
            d, node = d + 1, node.parent
        return d

    def __contains__(self, block) -> bool:
        return block in self.blocks

    def instructions(self) -> list[Instruction]:
        return [i for b in sorted(self.blocks, key=lambda b: b.index) for i in b.instructions]

    def __repr__(self) -> str:
        return f"<Loop header={self.header.name} blocks={len(self.blocks)} trip={self.trip_count}>"


def find_loops(fn) -> list[Loop]:
    graph = fn.cfg
    dom = fn.dominance
    by_header: dict = {}
    for latch, header in graph.edges:
        if dom.dominates(header, latch):
            by_header.setdefault(header, []).append(latch)
    loops = []
    for header, latches in by_header.items():
        body = {header}
        stack = [l for l in latches if l is not header]
        body.update(stack)
        while stack:
            node = stack.pop()
            for pred in graph.predecessors(node):
                if pred not in body:
                    body.add(pred)
                    stack.append(pred)
        exits = [(b, s) for b in body for s in graph.successors(b) if s not in body]
        exits.sort(key=lambda e: (e[0].index, e[1].index))
        loops.append(Loop(header, sorted(latches, key=lambda b: b.index), body, exits))
    _nest(loops)
    all_defs = _defs_in(fn.blocks)
    for loop in loops:
        _find_induction(fn, loop, all_defs)
    loops.sort(key=lambda l: l.header.index)
    return loops


def _nest(loops: list[Loop]) -> None:
    """Parent and children of each loop: the parent is the smallest other loop holding its
    header (natural loops with distinct headers are nested or disjoint). Outer loops first,
    each claiming its blocks, so a loop's parent is the last claimant of its header: time in
    the sum of the loops' sizes, not the square of their number."""
    owner: dict = {}
    for loop in sorted(loops, key=lambda l: (-len(l.blocks), l.header.index)):
        outer = owner.get(loop.header)
        if outer is not None:
            loop.parent = outer
            outer.children.append(loop)
        for block in loop.blocks:
            owner[block] = loop
    for loop in loops:
        loop.children.sort(key=lambda l: (len(l.blocks), l.header.index))


def _defs_in(blocks) -> dict[str, list[Instruction]]:
    out: dict[str, list[Instruction]] = {}
    for block in blocks:
        for inst in block.instructions:
            for reg in isa.defs(inst):
                out.setdefault(reg.name, []).append(inst)
    return out


def _outside_defs(name: str, inside: dict, all_defs: dict) -> list[Instruction]:
    """The definitions of ``name`` outside the loop, when there is exactly one (else a list
    of another length, not necessarily complete): the function's definitions minus the loop's,
    without scanning the rest of the function for every loop."""
    mine = inside.get(name, [])
    total = all_defs.get(name, [])
    if len(total) - len(mine) != 1:
        return [None] * abs(len(total) - len(mine))     # only the count matters then
    ids = {id(i) for i in mine}
    return [i for i in total if id(i) not in ids]


def _find_induction(fn, loop: Loop, all_defs: dict | None = None) -> None:
    inside = _defs_in(loop.blocks)
    if all_defs is None:
        all_defs = _defs_in(fn.blocks)
    loop_labels = None
    candidates = {}
    for name, insts in inside.items():
        if len(insts) != 1:
            continue
        inst = insts[0]
        if inst.opcode not in ("add", "sub") or inst.guard is not None or len(inst.operands) != 3:
            continue
        dst, a, b = inst.operands
        if isinstance(a, Reg) and a.name == name and isinstance(b, Imm) and not b.is_float:
            step = b.value if inst.opcode == "add" else -b.value
            candidates[name] = (inst, step)
        elif inst.opcode == "add" and isinstance(b, Reg) and b.name == name and isinstance(a, Imm):
            candidates[name] = (inst, a.value)
    # The exit test: a conditional branch in an exiting block on a setp of a candidate.
    for block, _outside in loop.exits:
        term = block.terminator
        if term is None or term.guard is None:
            continue
        pred = term.guard.reg.name
        setp = next((i for i in reversed(block.instructions)
                     if i.opcode == "setp" and isa.defs(i) and isa.defs(i)[0].name == pred), None)
        if setp is None or len(setp.operands) < 3:
            continue
        a, b = setp.operands[1], setp.operands[2]
        for var, bound in ((a, b), (b, a)):
            if not isinstance(var, Reg):
                continue
            name = var.name
            via_update = None
            if name not in candidates:
                # Compared value may be the incremented copy: add %r2, %r1, 1; setp %r2 ...
                update = inside.get(name, [None])[0]
                if update is not None and update.opcode == "add" and isinstance(update.operands[1], Reg) \
                        and update.operands[1].name in candidates and isinstance(update.operands[2], Imm):
                    via_update = update.operands[1].name
                else:
                    continue
            iv_name = via_update or name
            inst, step = candidates[iv_name]
            init_defs = _outside_defs(iv_name, inside, all_defs)
            init = None
            if len(init_defs) == 1 and init_defs[0].opcode == "mov":
                src = init_defs[0].operands[1]
                init = src.value if isinstance(src, Imm) and not src.is_float else str(src)
            loop.induction = InductionVariable(iv_name, init, step, inst)
            cmp = next((m[1:] for m in setp.modifiers if m[1:] in _COMPARES), None)
            loop.compare = cmp
            loop.bound = bound.value if isinstance(bound, Imm) and not bound.is_float else str(bound)
            if loop_labels is None:
                loop_labels = {l for bl in loop.blocks for l in bl.labels}
            branch_exits = term.operands[0].name not in loop_labels
            loop.trip_count = _trip_count(init, step, loop.bound, cmp, term.guard.negated,
                                          branch_exits, compared_after_update=(via_update is not None or _updated_before(block, inst, setp)),
                                          swapped=var is b)
            return


_COMPARES = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"}


def _updated_before(block, update: Instruction, setp: Instruction) -> bool:
    insts = block.instructions
    if update in insts and setp in insts:
        return insts.index(update) < insts.index(setp)
    return False


def _trip_count(init, step, bound, cmp, negated, branch_exits, compared_after_update, swapped):
    """Iterations of a bottom-tested loop ``do { ...; iv += step } while (iv CMP bound)``."""
    if not (isinstance(init, int) and isinstance(bound, int) and isinstance(step, int)) or step == 0:
        return None
    if cmp is None:
        return None
    flip = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "lo": "hi", "hi": "lo", "ls": "hs",
            "hs": "ls", "eq": "eq", "ne": "ne"}
    if swapped:
        cmp = flip[cmp]
    stays = not branch_exits          # branch taken keeps looping
    if negated:
        stays = not stays
    if not stays:                      # the predicate is the exit condition: invert it
        cmp = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "lo": "hs", "hs": "lo", "ls": "hi",
               "hi": "ls", "eq": "ne", "ne": "eq"}[cmp]
    ops = {"lt": lambda a, b: a < b, "lo": lambda a, b: a < b, "le": lambda a, b: a <= b,
           "ls": lambda a, b: a <= b, "gt": lambda a, b: a > b, "hi": lambda a, b: a > b,
           "ge": lambda a, b: a >= b, "hs": lambda a, b: a >= b, "ne": lambda a, b: a != b,
           "eq": lambda a, b: a == b}
    test = ops[cmp]
    value, count = init, 0
    while count < 1_000_000:
        count += 1
        nxt = value + step
        if not test(nxt if compared_after_update else value, bound):
            return count
        value = nxt
    return None
