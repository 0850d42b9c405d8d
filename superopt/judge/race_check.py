"""Static race check: reads of data that other threads of the same launch write.

A GPU runs a launch's blocks in any order, a block's warps in any order between barriers,
and since Volta a warp's lanes need not stay in step. A rewrite that reads what another
thread writes, where nvcc's code computes it or reads it only after a barrier, can give
nvcc's results on the emulator's schedules (or on one GPU, on one day) and other results
elsewhere. The emulator's schedules (``superopt.judge.backends.emulator``: warps one at a
time, quarter warps, interleaved at every store, blocks in reverse and random order) make
many such races show; this check finds them before anything runs, on every backend, from the
PTX alone (``ptx_ir.memory``: every access's address as a polynomial over ``%tid``, ``%ctaid``
and the parameters):

* **global memory, non-coherent reads** (``nc``): an ``ld.global.nc`` (or ``ldu``) of a buffer
  the kernel writes, after something that may make a write of the launch visible to the
  thread (a global store or atomic, a barrier, a fence, a call, an ordered access, on some path
  before it). The read-only path need not see such writes; a load ahead of all of them reads
  memory as it was at launch, which is what that path holds (the ``cache-hints`` pass makes
  exactly those ``.nc``), and is judged like a plain load.
* **global memory, other threads' data** (``cross``): a load from a buffer the kernel writes
  (plainly or atomically) at an address that is not the loading thread's own element of one of
  the stores to it. "Own element": the same address polynomial, depending on ``%tid`` and
  ``%ctaid`` (so one thread's element in the whole grid), or with the same opaque register in
  both. No barrier orders one block's writes before another block's reads.
* **shared memory without a barrier** (``shared``): a load of a shared variable that a store to
  it reaches along a path with no ``bar.sync``/``barrier.sync``/``bar.red``/``bar.warp.sync`` on
  it (loops included), unless both address the thread's own element (same polynomial, with
  ``%tid`` in it).

Every finding is a :class:`Hazard`; nvcc's code has its own (a block that reads its
neighbours' elements after a ``bar.sync`` is a ``cross`` read of global memory, and correct). A
candidate is rejected (:func:`compare`) for a hazard whose (kind, buffer or variable) nvcc's
code does not have: a candidate that reads a buffer through the non-coherent path, or reads
another block's output, or reads shared memory without the barrier, where nvcc's code never
does. The check is path-insensitive and compares buffers, not elements: it can miss a race in
a buffer nvcc's code already reads that way (the schedules remain), and it does not look at
write-after-read order (a warp overwriting what another still reads: the ``down`` and
``interleave`` schedules).

The per-buffer summary (:attr:`Races.accesses`) also serves the atomic judge
(:func:`superopt.judge.atomic_judge.plain_access_problem`): a buffer nvcc's code touches only
with atomics must not be read or written plainly by a candidate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["Hazard", "Races", "analyze", "analyze_ptx", "compare", "BARRIERS"]

# instructions that order shared-memory accesses between the threads they synchronise
BARRIERS = ("bar", "barrier")
KINDS = ("nc", "cross", "shared")


@dataclass(frozen=True)
class Hazard:
    kind: str                # nc | cross | shared
    base: str                # buffer (kernel parameter) or shared variable; "?" unknown
    line: int | None         # the load
    text: str
    other_line: int | None   # a store it may read
    other_text: str

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.base

    def describe(self, names: dict | None = None) -> str:
        """In words; ``names``: PTX parameter name -> the launch spec's name for it."""
        at = f" (line {self.line})" if self.line else ""
        ot = f" (line {self.other_line})" if self.other_line else ""
        b = (names or {}).get(self.base, self.base)
        what = {"nc": f"reads buffer {b!r} through the non-coherent cache, and the kernel writes it",
                "cross": f"reads buffer {b!r} where other threads of the launch may write it",
                "shared": f"reads shared variable {b!r} that other threads may write with no barrier "
                          f"between"}[self.kind]
        return f"`{self.text}`{at} {what} (`{self.other_text}`{ot})"


@dataclass
class Races:
    kernel: str
    hazards: list[Hazard] = field(default_factory=list)
    # global buffer -> access kinds ("load", "store", "atomic") and the first plain access
    accesses: dict = field(default_factory=dict)
    plain: dict = field(default_factory=dict)

    @property
    def cross_block(self) -> bool:
        """Some global load may read what another thread of the launch writes (the emulator
        then also runs the blocks of this kernel in other orders)."""
        return any(h.kind in ("nc", "cross") for h in self.hazards)

    def atomic_only(self) -> set[str]:
        """Buffers every access of which is an atomic."""
        return {b for b, kinds in self.accesses.items() if kinds == {"atomic"}}

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "hazards": [h.describe() for h in self.hazards[:10]],
                "count": len(self.hazards), "atomic_only": sorted(self.atomic_only())}


def _text(inst) -> str:
    from superopt.judge.static_check import _text as text
    return text(inst)


def _is_barrier(inst) -> bool:
    return inst.opcode in BARRIERS and ".arrive" not in inst.modifiers


def _var_spaces(module, fn) -> dict[str, str]:
    """Name -> state space of every module and function variable."""
    from ptx_ir.nodes import VarDecl
    out = {g.name: g.space for g in getattr(module, "globals", [])}
    for st in fn.body:
        if isinstance(st, VarDecl):
            out[st.name] = st.space
    return out


def pointer_provenance(fn) -> dict[str, frozenset]:
    """Register -> the kernel parameters and variables its value may be derived from by
    arithmetic (``"?"``: a pointer loaded from global memory, or another opaque source),
    flow-insensitive: the base of a pointer the kernel advances in a loop, where the address
    polynomial has only an opaque register. Pointers stored to shared or local memory and
    loaded back (threads exchanging addresses, as the staging passes do; spills) keep what
    was stored there, per space."""
    from ptx_ir import isa
    from ptx_ir.nodes import Addr, Reg, Sym
    from ptx_ir.nodes import walk_operand
    params = {p.name for p in fn.params}
    prov: dict[str, set] = {}
    pools: dict[str, set] = {".shared": set(), ".local": set()}
    insts = list(fn.instructions)
    wide = (".u64", ".b64", ".s64")

    def of(ops) -> set:
        src: set = set()
        for o in ops:
            for x in walk_operand(o):
                if isinstance(x, Reg) and not x.is_special:
                    src |= prov.get(x.name, set())
                elif isinstance(x, Sym):
                    src.add(x.name)
        return src

    def pool_of(space):
        sp = (space or "")
        for k in pools:
            if sp.startswith(k):
                return k
        return None
    changed = True
    while changed:
        changed = False
        for inst in insts:
            op = inst.opcode
            if op == "st" and len(inst.operands) == 2:
                k = pool_of(inst.space)
                if k is not None:
                    add = of(inst.operands[1:])
                    if not add <= pools[k]:
                        pools[k] |= add
                        changed = True
                continue
            defs = [r for r in isa.defs(inst) if not r.is_special]
            if not defs:
                continue
            if op in ("ld", "ldu", "atom"):
                addr = isa.address_operand(inst)
                k = pool_of(inst.space)
                if op == "ld" and inst.space == ".param" and isinstance(addr, Addr) \
                        and isinstance(addr.base, Sym) and addr.base.name in params:
                    src = {addr.base.name}
                elif not any(t in wide for t in inst.types):
                    src = set()          # narrower values are no pointers
                elif op == "ld" and k is not None and pools[k]:
                    src = set(pools[k])  # a pointer some thread stored there
                else:
                    src = {"?"}          # a pointer loaded from global memory comes from anywhere
            elif op in ("mov", "cvta", "add", "sub", "selp", "cvt", "mad"):
                # pointer arithmetic: a base plus offsets (of mad, the addend), or a choice of bases
                src = of(inst.operands[3:4] if op == "mad" else inst.operands[1:])
            else:
                continue
            for d in defs:
                cur = prov.setdefault(d.name, set())
                if not src <= cur:
                    cur |= src
                    changed = True
    return {k: frozenset(v) for k, v in prov.items()}


class _Bases:
    """Which buffer or variable an access addresses, and in which space."""

    def __init__(self, module, fn):
        self.spaces = _var_spaces(module, fn)
        self.params = {p.name for p in fn.params}
        self.prov = pointer_provenance(fn)

    def base(self, acc) -> str:
        if acc.base is not None:
            return acc.base.split(":", 1)[1]
        from ptx_ir.nodes import Reg, Sym
        b = acc.address.base
        if isinstance(b, Sym):
            return b.name
        if isinstance(b, Reg) and not b.is_special:
            src = self.prov.get(b.name, frozenset())
            if len(src) == 1 and "?" not in src:
                return next(iter(src))
        return "?"

    def space(self, acc, base: str) -> str | None:
        """global | shared | None (local, param, const: no other thread writes them)."""
        sp = acc.space
        if sp.startswith(".shared"):
            return "shared"
        if sp == ".global":
            return "global"
        if sp == "generic":
            vs = self.spaces.get(base)
            if vs is not None and base not in self.params:
                if vs.startswith(".shared"):
                    return "shared"
                if vs in (".local", ".const", ".param"):
                    return None
            return "global"
        return None


def _atoms(offset) -> set[str]:
    return {a.split(".")[0] for a in offset.atoms()}


def _own(a, b, need_block: bool) -> bool:
    """Both accesses address the thread's own element: equal offsets, with ``%tid`` in them
    and, for global memory, ``%ctaid`` too (directly or in a loop counter's start: a
    grid-stride loop); an offset with an opaque register in it (the same register at both,
    a remainder loop's counter) counts as the thread's own."""
    oa, ob = a.offset, b.offset
    if oa is None or ob is None or oa != ob:
        return False
    atoms = oa.atoms()
    if any(x.startswith("reg:") for x in atoms):
        return True
    names = _atoms(oa)
    for x in atoms:
        if x.startswith("iv:"):
            for rec in (a.recurrences.get(x), b.recurrences.get(x)):
                if rec is not None:
                    names |= _atoms(rec[0])
    return "%tid" in names and ("%ctaid" in names or not need_block)


_ORDERING = frozenset({".volatile", ".relaxed", ".acquire", ".release", ".mmio", ".sc", ".acq_rel"})
_LOCAL = (".shared", ".local", ".param")


def _may_show_writes(inst) -> bool:
    """After ``inst`` a load may observe a write made during the launch: a global (or
    generic) store or atomic, a barrier, a fence, a call, an async copy or an ordered access."""
    from ptx_ir import isa
    op = inst.opcode
    if op in ("atom", "red", "bar", "barrier", "membar", "fence", "call", "mbarrier", "cp", "griddepcontrol",
              "sust", "sured", "multimem", "tensormap"):
        return True
    if isa.is_store(inst) and not (inst.space or "").startswith(_LOCAL):
        return True
    return isa.touches_memory(inst) and bool(set(inst.modifiers) & _ORDERING)


def _after_writes_may_show(fn) -> set[int]:
    """ids of the instructions that something of :func:`_may_show_writes` may precede in the
    same thread (loops included)."""
    cfg = fn.cfg
    reached: set = set()
    stack = [s for b in fn.blocks if any(_may_show_writes(i) for i in b.instructions) for s in cfg.successors(b)]
    while stack:
        b = stack.pop()
        if id(b) in reached:
            continue
        reached.add(id(b))
        stack.extend(cfg.successors(b))
    out: set[int] = set()
    for b in fn.blocks:
        seen = id(b) in reached
        for inst in b.instructions:
            if seen:
                out.add(id(inst))
            if _may_show_writes(inst):
                seen = True
    return out


def _reaches_without_barrier(fn, store, loads: set[int]) -> set[int]:
    """ids of the instructions in ``loads`` reachable from just after ``store`` along a path
    that passes no barrier (through loops too)."""
    blocks = list(fn.blocks)
    cfg = fn.cfg
    where = {}
    for blk in blocks:
        for i, inst in enumerate(blk.instructions):
            where[id(inst)] = (blk, i)
    if id(store) not in where:
        return set()
    found: set[int] = set()

    def scan(blk, start) -> bool:
        """Loads of ``blk`` from ``start`` up to its first barrier; True when it has none."""
        for inst in blk.instructions[start:]:
            if _is_barrier(inst):
                return False
            if id(inst) in loads:
                found.add(id(inst))
        return True

    blk0, i0 = where[id(store)]
    todo = list(cfg.successors(blk0)) if scan(blk0, i0 + 1) else []
    seen = set()
    while todo:
        blk = todo.pop()
        if id(blk) in seen:
            continue
        seen.add(id(blk))
        if scan(blk, 0):
            todo.extend(cfg.successors(blk))
    return found


def analyze(module, kernel: str) -> Races:
    from ptx_ir.memory import collect_memory_accesses
    fn = module.function(kernel)
    res = Races(kernel=kernel)
    bases = _Bases(module, fn)
    glob, shar = [], []
    for a in collect_memory_accesses(fn):
        b = bases.base(a)
        sp = bases.space(a, b)
        if sp == "global":
            glob.append((a, b))
        elif sp == "shared":
            shar.append((a, b))
    for a, b in glob:
        res.accesses.setdefault(b, set()).add(a.kind)
        if a.kind != "atomic":
            res.plain.setdefault(b, _text(a.inst))

    # global memory: what the kernel writes, by buffer
    writes: dict[str, list] = {}
    for a, b in glob:
        if a.kind in ("store", "atomic"):
            writes.setdefault(b, []).append(a)
    unknown = writes.get("?", [])
    late = _after_writes_may_show(fn) if writes else set()
    for a, b in glob:
        if a.kind != "load":
            continue
        nc = (a.inst.opcode == "ldu" or ".nc" in a.inst.modifiers) and id(a.inst) in late
        if b == "?":
            stores = [s for lst in writes.values() for s in lst]
        else:
            stores = writes.get(b, []) + unknown
        if not stores:
            continue
        if nc:
            s = stores[0]
            res.hazards.append(Hazard("nc", b, a.inst.line, _text(a.inst), s.inst.line, _text(s.inst)))
            continue
        # the thread's own element of some store (an unrolled loop stores several): not a race
        if not any(_own(a, s, need_block=True) for s in stores):
            other = stores[0]
            res.hazards.append(Hazard("cross", b, a.inst.line, _text(a.inst), other.inst.line, _text(other.inst)))

    # shared memory: loads a store reaches with no barrier between
    sloads: dict[str, list] = {}
    for a, b in shar:
        if a.kind == "load":
            sloads.setdefault(b, []).append(a)
    seen_pairs = set()
    for s, b in shar:
        if s.kind not in ("store", "atomic"):
            continue
        cands = [ld for key in ((b,) if b != "?" else tuple(sloads)) for ld in sloads.get(key, [])]
        cands += sloads.get("?", []) if b != "?" else []
        cands = [ld for ld in cands if not _own(ld, s, need_block=False)]
        if not cands:
            continue
        hit = _reaches_without_barrier(fn, s.inst, {id(ld.inst) for ld in cands})
        for ld in cands:
            if id(ld.inst) in hit and (id(ld.inst), b) not in seen_pairs:
                seen_pairs.add((id(ld.inst), b))
                res.hazards.append(Hazard("shared", bases.base(ld) if b == "?" else b, ld.inst.line,
                                          _text(ld.inst), s.inst.line, _text(s.inst)))
    res.hazards.sort(key=lambda h: (KINDS.index(h.kind), h.line or 0))
    return res


@lru_cache(maxsize=32)
def analyze_ptx(ptx: str, kernel: str) -> Races | None:
    """:func:`analyze` on PTX text; None when it does not parse or has no such kernel (the
    run then says what is wrong). Cached: the check and the emulator backend both ask, a
    search asks about one baseline for every candidate (the result is not to be modified)."""
    import ptx_ir
    try:
        return analyze(ptx_ir.parse(ptx), kernel)
    except Exception:  # noqa: BLE001 - the static check never decides on a parse problem
        return None


def compare(base: Races | None, cand: Races | None, names: dict | None = None) -> str | None:
    """The reason to reject ``cand``: a hazard of a (kind, buffer) nvcc's code does not have;
    None if there is none. ``names``: PTX parameter name -> the spec's name (for the message)."""
    if base is None or cand is None:
        return None
    have = {h.key for h in base.hazards}
    new = [h for h in cand.hazards if h.key not in have]
    if not new:
        return None
    h = new[0]
    more = f" (and {len(new) - 1} more)" if len(new) > 1 else ""
    return (f"static race check: the candidate {h.describe(names)}{more}; nvcc's code has no such access "
            f"(a race: the result depends on the order threads run in)")
