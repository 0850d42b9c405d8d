"""promote-accumulators: a global accumulator kept in a register, behind a launch-time no-alias check.

``tmp[i] += A[i*n + j] * x[j]`` in a loop: nvcc must store ``tmp[i]`` on every iteration (a
later load of ``A`` or ``x`` might read it) and cannot move the next iteration's loads above
that store. When no written buffer overlaps another (what the footprint check proves at
launch, :mod:`superopt.passes._alias_footprint`), the location is only reached through its own
address in the loop, so it can live in a register: loaded once before the loop, every store
becomes a ``mov`` into the register, every load a ``mov`` out of it, and the register is stored
on every way out of the loop (an exit edge, an early ``ret``). The same operations run in the
same order on the same values, so the results are nvcc's bit for bit.

This is the fast body for PTX the driver cannot recompile with ``__restrict__`` parameters
(``superopt optimize FILE.ptx``, a unit without a restrict variant; see
:mod:`superopt.passes.restrict_body`). It is placed behind the check with nvcc's code as the
fallback (:func:`superopt.passes._versioning.versioned`).

A location ``[R+k]`` of a loop is promoted when, proven from the IR:

* ``R`` is not defined in the loop, and every access to ``[R+k]`` in the loop is a plain
  (not volatile, not vector) ``ld.global``/``st.global`` of one type;
* the loop has at least one store to it, unguarded, in a block that runs on every iteration
  (it dominates every latch): the location is written whenever the loop runs, so loading it
  before the loop reads nothing the loop would not write, and storing it at the exits writes
  nothing it would not;
* no other access in the loop reaches the same buffer (the check only separates buffers), and
  the loop has no barrier, fence, atomic, call or generic access (another thread or a callee
  could see the location);
* the loop header has one way in from outside, a block that falls or branches straight into it
  (the load is placed at its end).
"""
from __future__ import annotations

from ptx_ir import isa
from ptx_ir.nodes import Addr, Instruction, Label, Reg, Sym
from superopt.passes import Change, register
from superopt.passes._alias_footprint import FootprintAnalysis, Refused, build_alias_check
from superopt.passes._loop_tools import bra, register_type
from superopt.passes._versioning import VersioningRefused, versioned

ORIGIN = "global accumulators kept in registers"
_ORDERING = frozenset({".volatile", ".relaxed", ".acquire", ".release", ".mmio", ".sc", ".acq_rel"})
_BLOCKING = frozenset({"bar", "barrier", "membar", "fence", "atom", "red", "call", "shfl", "vote",
                       "match", "redux", "mbarrier", "cp", "griddepcontrol", "wgmma", "tcgen05"})


def _location(inst: Instruction):
    """``(register name, offset, type)`` of a plain scalar global load or store through a
    register, else None."""
    if inst.opcode not in ("ld", "st") or inst.space != ".global" or inst.guard is not None \
            and inst.opcode == "ld":
        return None
    if any(m in _ORDERING for m in inst.modifiers) or inst.vector_width != 1:
        return None
    if any(m.startswith((".L1::", ".L2::")) for m in inst.modifiers):
        return None
    a = isa.address_operand(inst)
    if a is None or not isinstance(a.base, Reg) or a.extra:
        return None
    return a.base.name, a.offset or 0, inst.type


def _candidates(fn, loop, analysis: FootprintAnalysis) -> list[tuple]:
    """The promotable locations of ``loop``: ``[(reg, offset, type, [accesses])]``."""
    blocks = loop.blocks
    insts = [i for b in blocks for i in b.instructions]
    if any(i.opcode in _BLOCKING or i.opcode.startswith(("bar", "fence")) for i in insts):
        return []
    defined = {r.name for i in insts for r in isa.defs(i)}
    by_location: dict = {}
    buffers: dict = {}
    for i in insts:
        if not isa.touches_memory(i) or i.space in (".shared", ".local", ".param", ".const"):
            continue
        if i.space != ".global":
            return []                        # generic: could be anything
        a = isa.address_operand(i)
        try:
            root = analysis.root(a.base.name) if a is not None and isinstance(a.base, Reg) else None
        except Refused:
            return []
        loc = _location(i)
        key = loc[:2] if loc is not None else None
        buffers.setdefault(root, set()).add(key if key is not None else ("other", id(i)))
        if loc is not None:
            by_location.setdefault(key, []).append((i, loc[2]))
    dom = fn.dominance
    out = []
    for (reg, off), accesses in by_location.items():
        if reg in defined:
            continue
        root = analysis.root(reg)
        if root is None or buffers.get(root) != {(reg, off)}:
            continue                         # another access reaches the same buffer
        types = {t for _, t in accesses}
        if len(types) != 1:
            continue
        stores = [i for i, _ in accesses if i.opcode == "st"]
        if not any(i.guard is None and all(dom.dominates(fn.block_of(i), latch) for latch in loop.latches)
                   for i in stores):
            continue
        if any(i.guard is not None for i, _ in accesses if i.opcode == "ld"):
            continue
        out.append((reg, off, types.pop(), [i for i, _ in accesses]))
    return out


def _preheader(fn, loop):
    graph = fn.cfg
    outside = [p for p in graph.predecessors(loop.header) if p not in loop.blocks]
    if len(outside) != 1:
        return None
    pre = outside[0]
    term = pre.terminator
    if term is not None and (term.guard is not None or term.opcode != "bra"):
        return None
    return pre


def _value_type(fn, inst: Instruction, t: str) -> str:
    """The register type the accumulator takes: the stored or loaded register's own type."""
    op = inst.operands[1] if inst.opcode == "st" else inst.operands[0]
    if isinstance(op, Reg):
        rt = register_type(fn, op.name)
        if rt is not None:
            return rt
    return t


def promote(fn) -> list[str]:
    """Promote every promotable location of every loop of ``fn`` in place (innermost loops
    first); returns one description per location."""
    done = []
    while True:
        analysis = FootprintAnalysis(fn)
        found = None
        for loop in sorted(fn.loops, key=lambda l: len(l.blocks)):
            pre = _preheader(fn, loop)
            if pre is None:
                continue
            cands = _candidates(fn, loop, analysis)
            if cands:
                found = (loop, pre, cands[0])
                break
        if found is None:
            return done
        loop, pre, (reg, off, t, accesses) = found
        _rewrite(fn, loop, pre, reg, off, t, accesses)
        done.append(f"[{reg}{f'+{off}' if off else ''}] ({t}) in the loop at {loop.header.name}")


def _rewrite(fn, loop, pre, reg: str, off: int, t: str, accesses: list) -> None:
    ids = {id(i) for i in accesses}
    labels = {l for b in loop.blocks for l in b.labels}
    loop_insts = {id(i) for b in loop.blocks for i in b.instructions}
    pre_term = pre.terminator
    pre_last = pre.instructions[-1] if pre.instructions else None
    graph = fn.cfg
    # exits by fall-through: the block inside whose next block (in layout) is outside
    fall_exits = set()
    for b, s in loop.exits:
        if graph.edges[b, s].get("kind") == "fallthrough":
            fall_exits.add(id(b.instructions[-1]) if b.instructions else None)
    # (the loop's blocks are read above: a new register invalidates them)
    vtype = _value_type(fn, accesses[0], t)
    acc = fn.new_register(vtype)
    mov_t = vtype if vtype.startswith((".f", ".b", ".u", ".s")) else t
    addr = Addr(Reg(reg), off or None)
    load = Instruction("ld", (".global", t), (acc, addr))
    store = lambda g=None: Instruction("st", (".global", t), (addr, acc), g)   # noqa: E731
    exit_labels = {}
    trampolines = []
    new_body = []
    taken = {x.name for x in fn.body if isinstance(x, Label)}
    for s in fn.body:
        orig = id(s)
        if isinstance(s, Instruction) and id(s) in ids:
            if s.opcode == "st":
                new_body.append(Instruction("mov", (mov_t,), (acc, s.operands[1]), s.guard))
            else:
                new_body.append(Instruction("mov", (mov_t,), (s.operands[0], acc)))
            if id(s) in fall_exits:
                new_body.append(store())
            continue
        if isinstance(s, Instruction) and id(s) in loop_insts:
            if s.opcode in ("ret", "exit"):
                new_body.append(store(s.guard))
            elif s.opcode == "bra" and isinstance(s.operands[0], Sym) and s.operands[0].name not in labels:
                target = s.operands[0].name
                if target not in exit_labels:
                    n = len(exit_labels)
                    while f"$Lnp_promote_exit_{n}" in taken:
                        n += 1
                    exit_labels[target] = f"$Lnp_promote_exit_{n}"
                    taken.add(exit_labels[target])
                    trampolines += [Label(exit_labels[target]), store(), bra(target)]
                tramp = exit_labels[target]
                s = s.with_(operands=(Sym(tramp),) + tuple(s.operands[1:]))
        new_body.append(s)
        if isinstance(s, Instruction) and orig in fall_exits and s.opcode not in ("ret", "exit"):
            new_body.append(store())
        if pre_last is not None and s is pre_last and pre_term is None:
            new_body.append(load)
        elif pre_term is not None and s is pre_term:
            new_body.insert(len(new_body) - 1, load)
    if pre_last is None:
        raise Refused("the loop's way in has no instructions to follow")
    fn.body = new_body + trampolines
    fn.invalidate()
    fn.validate()


@register(
    name="promote-accumulators",
    order=13,
    summary="keep a global accumulator of a loop in a register (loaded before the loop, stored on "
            "every exit) when a launch-time check shows the buffers disjoint; nvcc's code otherwise",
    assumes=("no written buffer overlaps another: proven at launch by the footprint check "
             "(superopt.passes._alias_footprint) in front of the promoted body, nvcc's code runs when it "
             "fails. From the IR: a loop-invariant scalar global address, written unconditionally on "
             "every iteration, no other access to its buffer, no barrier, fence, atomic, call or "
             "generic access in the loop, one way into the loop"),
    params={},
)
def promote_accumulators(fn) -> list[Change]:
    fast = fn.clone()
    try:
        promoted = promote(fast)
    except Refused:
        return []
    if not promoted:
        return []
    check, _why = build_alias_check(fn)
    if check is None:
        return []
    try:
        changes = versioned(fn, fast, check, origin=f"{ORIGIN}: {'; '.join(promoted)}")
    except VersioningRefused:
        return []
    return changes
