"""Static def-use check: registers a kernel may read before anything wrote them.

Before anything runs, the judge asks of baseline and candidate: which register uses may
be reached from the kernel's entry without a write on some path (a *may-be-unwritten*
use), and does such a value feed something that matters — a branch predicate, a store
or atomic (address, value or guard), a load's address or guard, a return or a call? A
guard predicate counts like any operand (``isa.uses`` includes it), so ``@%p add`` with an
unwritten ``%p`` taints what the add writes, and ``@%p st`` is a store sink itself. A
candidate with such a use where nvcc's code has none is rejected (:func:`compare`), with
``static`` evidence.

The analysis is a forward "may be unwritten" data flow over the CFG (``ptx_ir`` blocks and
CFG; the ``entry`` pseudo-definition of ``ptx_ir.dataflow`` is the same idea, but it only
marks uses that *no* definition reaches, while a path that skips a guarded write also
leaves a register unwritten). An unguarded write makes a register written; a guarded one
does not, except that ``@%p`` and ``@!%p`` writes of the same register with ``%p``
unchanged in between (if-conversion) together count as one write, and a use guarded like
an earlier write in its block (``@!%p mul.hi %t, ...; @!%p sub %u, %x, %t``) reads that write. Taint then follows the
def-use edges of ``fn.dataflow`` from every may-be-unwritten use to the sinks. Values
stored to memory and loaded back are not followed (the emulator's poison catches those
dynamically). Path-insensitive, so it can over-report; that is why a candidate is only
rejected where the baseline has no such use at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["UnwrittenUse", "Unwritten", "analyze", "analyze_ptx", "compare"]

_SINK_CONTROL = {"bra", "brx", "ret", "exit", "call"}


@dataclass(frozen=True)
class UnwrittenUse:
    reg: str                 # the register that may be unwritten where it is read
    line: int | None         # PTX line of the instruction reading it
    text: str                # that instruction
    sink: str                # what it feeds: branch | store | load | return | call
    sink_line: int | None
    sink_text: str

    def describe(self) -> str:
        at = f" (line {self.line})" if self.line else ""
        if self.text == self.sink_text:
            return f"{self.reg} may be read before any write by the {self.sink} `{self.sink_text}`{at}"
        sl = f" (line {self.sink_line})" if self.sink_line else ""
        return (f"{self.reg} may be read before any write by `{self.text}`{at}, which feeds the "
                f"{self.sink} `{self.sink_text}`{sl}")


@dataclass
class Unwritten:
    kernel: str
    may_be_unwritten: list[str] = field(default_factory=list)   # registers with such a use
    sinks: list[UnwrittenUse] = field(default_factory=list)     # ... that feed a sink

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "may_be_unwritten": self.may_be_unwritten,
                "feeding": [u.describe() for u in self.sinks[:10]], "count": len(self.sinks)}


def _sink_kind(inst, isa) -> str | None:
    if isa.is_store(inst):
        return "store"
    op = inst.opcode
    if op in ("ld", "ldu"):
        return "load"             # reached through its address or its guard
    if op in ("bra", "brx"):
        return "branch"
    if op in ("ret", "exit"):
        return "return"
    if op == "call":
        return "call"
    return None


def _defs(inst, isa) -> list:
    """Registers ``inst`` writes: ptx_ir's list, plus the destination of ``bar.red`` /
    ``barrier.red`` (ptx_ir counts barriers as having no destination)."""
    out = list(isa.defs(inst))
    if inst.opcode in ("bar", "barrier") and ".red" in inst.modifiers and inst.operands:
        from ptx_ir.nodes import Reg
        d = inst.operands[0]
        if isinstance(d, Reg) and not d.is_special and all(r.name != d.name for r in out):
            out.append(d)
    return out


def analyze(module, kernel: str) -> Unwritten:
    from ptx_ir import isa
    fn = module.function(kernel)
    blocks = list(fn.blocks)
    cfg = fn.cfg
    regs: dict[str, int] = {}

    def bit(name):
        b = regs.get(name)
        if b is None:
            b = regs[name] = 1 << len(regs)
        return b

    for blk in blocks:
        for inst in blk.instructions:
            for r in _defs(inst, isa) + list(isa.uses(inst)):
                if not r.is_special:
                    bit(r.name)

    def transfer(blk, unw: int, visit=None) -> int:
        guarded: dict = {}        # reg -> {(pred, negated)} of guarded writes since pred last changed
        for inst in blk.instructions:
            if visit is not None:
                visit(inst, unw, guarded)
            g = inst.guard
            for r in _defs(inst, isa):
                if r.is_special:
                    continue
                if g is None:
                    unw &= ~regs[r.name]
                else:
                    seen = guarded.setdefault(r.name, set())
                    seen.add((g.reg.name, g.negated))
                    if (g.reg.name, not g.negated) in seen:
                        unw &= ~regs[r.name]
                # a redefined predicate ends the pairing of writes guarded by it
                for k in list(guarded):
                    guarded[k] = {(p, n) for p, n in guarded[k] if p != r.name}
        return unw

    all_bits = (1 << len(regs)) - 1
    entry = fn.entry_block
    inn = {b: 0 for b in blocks}
    out = {b: 0 for b in blocks}
    inn[entry] = all_bits
    changed = True
    while changed:
        changed = False
        for blk in blocks:
            new_in = all_bits if blk is entry else 0
            for p in cfg.predecessors(blk):
                new_in |= out[p]
            inn[blk] = new_in
            new_out = transfer(blk, new_in)
            if new_out != out[blk]:
                out[blk] = new_out
                changed = True

    # uses that may read an unwritten register
    start: dict = {}               # id(inst) -> (inst, [reg names])
    def visit(inst, unw, guarded):
        if inst.opcode in ("bar", "barrier") and ".red" in inst.modifiers:
            dst = {r.name for r in _defs(inst, isa)}
            used = [r for r in isa.uses(inst) if r.name not in dst]
        else:
            used = isa.uses(inst)
        g = inst.guard
        key = (g.reg.name, g.negated) if g is not None else None
        # a use under the same guard as an earlier write (predicate unchanged) reads that write
        bad = [r.name for r in used if not r.is_special and unw & regs.get(r.name, 0)
               and (key is None or key not in guarded.get(r.name, ()))]
        if bad:
            start[id(inst)] = (inst, sorted(set(bad)))
    for blk in blocks:
        transfer(blk, inn[blk], visit)

    res = Unwritten(kernel=kernel,
                    may_be_unwritten=sorted({r for _, rs in start.values() for r in rs}))
    if not start:
        return res
    graph = fn.def_use.graph
    seen_sinks = set()
    for inst0, rs in start.values():
        # forward along data edges: everything computed from the unwritten value
        stack, seen = [inst0], {id(inst0)}
        while stack:
            x = stack.pop()
            kind = _sink_kind(x, isa)
            if kind is not None and (id(inst0), id(x)) not in seen_sinks:
                seen_sinks.add((id(inst0), id(x)))
                res.sinks.append(UnwrittenUse(rs[0], inst0.line, _text(inst0), kind, x.line, _text(x)))
            for _, v, d in graph.out_edges(x, data=True):
                if d.get("kind") == "data" and id(v) not in seen and not isinstance(v, str):
                    seen.add(id(v))
                    stack.append(v)
    res.sinks.sort(key=lambda u: (u.sink_line or 0, u.line or 0))
    return res


def _text(inst) -> str:
    try:
        from ptx_ir.printer import emit_instruction
        return " ".join(emit_instruction(inst).split()).rstrip(";")
    except Exception:  # noqa: BLE001
        pass
    ops = ", ".join(str(o) for o in inst.operands)
    g = f"{inst.guard} " if inst.guard is not None else ""
    return f"{g}{inst.name} {ops}".strip()


def analyze_ptx(ptx: str, kernel: str) -> Unwritten | None:
    """:func:`analyze` on PTX text; None when it does not parse or has no such kernel
    (the run then says what is wrong)."""
    import ptx_ir
    try:
        mod = ptx_ir.parse(ptx)
        return analyze(mod, kernel)
    except Exception:  # noqa: BLE001 - the static check never decides on a parse problem
        return None


def compare(base: Unwritten | None, cand: Unwritten | None) -> str | None:
    """The reason to reject ``cand`` (a may-be-unwritten register feeding a branch, store,
    return or call where the baseline has none), or None."""
    if base is None or cand is None or not cand.sinks or base.sinks:
        return None
    u = cand.sinks[0]
    more = f" (and {len(cand.sinks) - 1} more)" if len(cand.sinks) > 1 else ""
    return (f"static def-use check: the candidate's {u.sink} depends on a register nothing wrote: "
            f"{u.describe()}{more}; nvcc's code has no such use")
