"""vectorize-memory: merge per-thread contiguous scalar loads/stores into ``.v2``/``.v4``.

Four ``ld.global.f32`` at ``[a]``, ``[a+4]``, ``[a+8]``, ``[a+12]`` become one
``ld.global.v4.f32 {..}, [a]`` when ``a`` is 16-byte aligned; the same for stores, for
``.shared`` and for element sizes 1, 2, 4 and 8 bytes (at most 16 bytes per access).

What the pass proves before it merges a group (all members in one basic block, same
opcode, state space, type, cache modifiers, guard and base operand, offsets contiguous):

* **Alignment.** The group's first address is a multiple of the vector size. Proven
  statically from the IR (:attr:`MemoryAccess.alignment`: the affine address form with
  ``.ptr .align N`` parameters, aligned local ``.shared`` declarations and loop-pointer
  recurrences ``p = p0 + k*step``), or, with ``versioning=True``, *guarded*: the pass
  states what must hold (a pointer parameter, a symbol or a live-in base register is
  a multiple of N; a scalar parameter inside an index product is a multiple of N/c),
  emits a runtime test of exactly that and duplicates the block: the vector version
  runs when the test passes, the original scalar code otherwise. Tests of parameters and
  symbols hold for the whole launch, so they are computed once in the entry block; a
  one-block loop (nvcc's unrolled bodies) guarded only by such a test is versioned whole
  (test on entry, then a vector loop or the original loop), so no iteration pays for it. Alignment reasoning is done modulo a power of two <= 16, so it stays
  exact even when 32-bit index arithmetic wraps (residues survive wrap-around and
  sign extension); it relies on ptx_ir's model that ``cvta`` keeps an address's low bits.
* **Order.** A load group is placed where its first member was, a store group where its
  last member was. Nothing is moved across a barrier, fence, call, atomic, volatile or
  scoped access, or any memory instruction that is not a plain ``ld``/``st``. A load is
  moved above a store (a store below a load or store) only when their bytes are provably
  disjoint: different non-generic state spaces, the same base register with constant
  offsets, a constant difference of their affine addresses, or different residues modulo
  the vector size (proven, or part of the same runtime test).
* **Registers.** The vector load writes the members' own destination registers; no
  instruction between the new and the old position reads or writes them, or redefines
  the base address or guard register. A vector store reads the members' own value
  registers, none of which is redefined before the new position.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from ptx_ir import isa
from ptx_ir.affine import Affine
from ptx_ir.nodes import (
    Addr, Guard, Imm, Instruction, Label, Reg, ScopeClose, ScopeOpen, Sym, VarDecl, Vec,
    type_size,
)
from superopt.passes import Change, register

__all__ = ["vectorize_memory"]

MERGE_SPACES = frozenset({".global", ".shared", ".shared::cta"})
# Modifiers a member may carry besides its space and type (cache operators and L1
# eviction hints exist for vector accesses too; members of a group must agree on them).
MERGE_MODIFIERS = frozenset({
    ".nc", ".ca", ".cg", ".cs", ".lu", ".wb", ".wt", ".weak",
    ".L1::evict_normal", ".L1::evict_unchanged", ".L1::evict_first", ".L1::evict_last",
    ".L1::no_allocate",
})
ORDERING_MODIFIERS = frozenset({".volatile", ".relaxed", ".acquire", ".release", ".mmio",
                                ".sc", ".acq_rel"})
# Instructions that are never moved across (besides isa.is_fence and atomics).
BARRIER_OPCODES = frozenset({
    "atom", "red", "griddepcontrol", "trap", "brkpt", "pmevent", "discard", "applypriority",
    "tensormap", "setmaxnreg", "multimem", "st.async", "red.async", "cp", "mbarrier", "bar",
    "barrier", "membar", "fence", "call", "exit", "ret", "bra", "brx", "nanosleep", "elect",
    "wgmma", "tcgen05", "cp.async", "clusterlaunchcontrol",
})
MAX_MERGES = 256


# --------------------------------------------------------------------------- members

@dataclass(eq=False)
class Member:
    inst: Instruction
    kind: str              # load | store
    key: tuple             # what members of one group share
    base: object           # Reg | Sym
    offset: int
    elem: int              # bytes per element
    value: object          # load: destination Reg; store: source Reg | Imm


def plain_access(inst: Instruction) -> bool:
    """A plain ld/st (no ordering semantics): the only memory operations moved across."""
    return inst.opcode in ("ld", "st") and not (set(inst.modifiers) & ORDERING_MODIFIERS)


def is_barrier(inst: Instruction) -> bool:
    """Never move a memory access across this instruction."""
    if isa.is_fence(inst) or inst.opcode in BARRIER_OPCODES:
        return True
    if isa.touches_memory(inst):
        return not plain_access(inst)
    return False


def _member(inst: Instruction, reg_types: dict) -> Member | None:
    if inst.opcode not in ("ld", "st") or inst.vector_width != 1:
        return None
    space = inst.space
    if space not in MERGE_SPACES:
        return None
    type_ = inst.type
    if type_ is None or len(inst.types) != 1 or type_ in (".pred", ".b128"):
        return None
    elem = type_size(type_)
    if elem not in (1, 2, 4, 8):
        return None
    extra = [m for m in inst.modifiers if m != space and m != type_]
    if any(m not in MERGE_MODIFIERS for m in extra):
        return None
    if len(inst.operands) != 2:
        return None
    if inst.opcode == "ld":
        value, addr = inst.operands
        if not isinstance(value, Reg) or value.is_special:
            return None
        kind = "load"
    else:
        addr, value = inst.operands
        if isinstance(value, Reg):
            if value.is_special:
                return None
        elif not (isinstance(value, Imm)):
            return None
        kind = "store"
    if not isinstance(addr, Addr) or addr.extra or not isinstance(addr.base, (Reg, Sym)):
        return None
    if isinstance(addr.base, Reg) and addr.base.is_special:
        return None
    vtype = reg_types.get(value.name) if isinstance(value, Reg) else "imm"
    if vtype is None:
        return None
    key = (inst.opcode, inst.modifiers, inst.guard, addr.base, vtype)
    return Member(inst, kind, key, addr.base, addr.offset or 0, elem, value)


def register_types(fn) -> dict:
    types = {}
    for decl in fn.reg_decls:
        for name in decl.register_names():
            types[name] = decl.type
    for p in fn.params + (fn.returns or []):
        if p.space == ".reg":
            types[p.name] = p.type
    return types


def _runs(members: list[Member]) -> list[list[Member]]:
    """Maximal runs of members with offsets off, off+e, off+2e, ... (one member per offset)."""
    by_offset: dict[int, list[Member]] = {}
    for m in members:
        by_offset.setdefault(m.offset, []).append(m)
    offsets = sorted(o for o, ms in by_offset.items() if len(ms) == 1)
    runs, cur = [], []
    for o in offsets:
        m = by_offset[o][0]
        if cur and o == cur[-1].offset + m.elem:
            cur.append(m)
        else:
            if len(cur) >= 2:
                runs.append(cur)
            cur = [m]
    if len(cur) >= 2:
        runs.append(cur)
    return runs


# --------------------------------------------------------------------------- alignment

def _pow2(c: int, cap: int = 1 << 30) -> int:
    if c == 0:
        return cap
    return min(cap, abs(c) & -abs(c))


class Facts:
    """Per-state facts: memory accesses, declared alignments, checkable atoms."""

    def __init__(self, fn):
        self.fn = fn
        self.by_inst = {id(a.inst): a for a in fn.memory_accesses}
        self.params = {p.name: p for p in fn.params}
        self.param_align = {f"param:{p.name}": p.ptr_align for p in fn.params
                            if p.ptr and p.ptr_align}
        self.sym_align = {}
        for s in fn.body or ():
            if isinstance(s, VarDecl) and s.space != ".reg":
                self.sym_align[f"sym:{s.name}"] = s.align or type_size(s.type)
        names = set(self.params)
        self.params_written = any(
            i.opcode == "st" and i.space and i.space.startswith(".param")
            and isinstance(getattr(isa.address_operand(i), "base", None), Sym)
            and isa.address_operand(i).base.name in names for i in fn.instructions)
        self.reg_types = register_types(fn)

    def access(self, inst):
        return self.by_inst.get(id(inst))

    def static_align(self, atom: str, recurrences: dict) -> int:
        if atom.startswith("param:"):
            return self.param_align.get(atom, 1)
        if atom.startswith("sym:"):
            return self.sym_align.get(atom, 1)
        if atom.startswith("iv:") and atom in recurrences:
            start, step = recurrences[atom]
            return min(self._affine_align(start), self._affine_align(step))
        return 1

    def _affine_align(self, aff: Affine) -> int:
        atoms = {}
        for a in aff.atoms():
            atoms[a] = self.static_align(a, {}) if not a.startswith("iv:") else 1
        return aff.alignment(atoms)

    def checkable(self, atom: str) -> bool:
        if atom.startswith("param:"):
            p = self.params.get(atom[6:])
            return (p is not None and not self.params_written and p.space.startswith(".param")
                    and not p.dims and p.type in (".u64", ".s64", ".b64", ".u32", ".s32", ".b32"))
        return atom.startswith("sym:")


def _affine_residue(facts: Facts, aff: Affine, recurrences: dict, G: int, assume: bool,
                    need: dict) -> int | None:
    """``aff mod G`` when every non-constant term is a multiple of G (statically, or under
    obligations added to ``need``: ("atom", name) -> required alignment)."""
    const = 0
    for mono, c in aff.terms:
        if not mono:
            const = c
            continue
        aligns = [facts.static_align(a, recurrences) for a in mono]
        total = _pow2(c)
        for a in aligns:
            total *= a
        if total >= G:
            continue
        if not assume:
            return None
        done = False
        for i, atom in enumerate(mono):
            rest = total // aligns[i]
            required = G // rest if rest < G else 1
            if facts.checkable(atom):
                key = ("atom", atom)
                old = need.get(key, (1, 0))[0]
                need[key] = (max(old, required), 0)
                done = True
                break
            if atom.startswith("iv:") and atom in recurrences:
                start, step = recurrences[atom]
                trial = dict(need)
                if _affine_residue(facts, start, {}, required, True, trial) == 0 and \
                        _affine_residue(facts, step, {}, required, True, trial) == 0:
                    need.clear()
                    need.update(trial)
                    done = True
                    break
        if not done:
            return None
    return const % G


def merge_obligations(base: dict, extra: dict) -> dict | None:
    """Combine two obligation sets; None when they contradict each other."""
    out = dict(base)
    for key, (g, rho) in extra.items():
        if key in out:
            g0, rho0 = out[key]
            m = min(g, g0)
            if rho % m != rho0 % m:
                return None
            out[key] = (g, rho) if g >= g0 else (g0, rho0)
        else:
            out[key] = (g, rho)
    return out


class Prover:
    """Answers alignment and disjointness questions about one block, accumulating the
    runtime obligations (when ``assume``) that the answers rely on."""

    def __init__(self, fn, block, assume: bool, obligations: dict | None = None,
                 facts: Facts | None = None):
        self.fn = fn
        # Facts may be from before earlier merges: they stay valid for every instruction
        # still present (merges move no address arithmetic), and an instruction they do
        # not know (a merged vector access) only makes the answers more conservative.
        self.facts = facts or Facts(fn)
        self.block = block
        self.insts = block.instructions
        self.pos = {id(i): k for k, i in enumerate(self.insts)}
        self.assume = assume
        self.obl = dict(obligations or {})

    def _defined_before(self, reg: Reg, inst) -> bool:
        for i in self.insts[:self.pos[id(inst)]]:
            if any(r.name == reg.name for r in isa.defs(i)):
                return True
        return False

    def residue(self, inst, G: int, want: int | None = None) -> tuple[int, dict] | None:
        """(address of ``inst`` mod G, obligations it needs) or None."""
        acc = self.facts.access(inst)
        addr = isa.address_operand(inst)
        if acc is not None:
            if acc.alignment >= G:
                return 0, {}
            if acc.affine is not None:
                need: dict = {}
                r = _affine_residue(self.facts, acc.affine, acc.recurrences, G, self.assume, need)
                if r is not None:
                    return r, need
        if self.assume and addr is not None and isinstance(addr.base, Reg) \
                and self.facts.reg_types.get(addr.base.name) in _INT_REG_TYPES \
                and not self._defined_before(addr.base, inst):
            off = addr.offset or 0
            key = ("reg", addr.base.name)
            if key in self.obl and self.obl[key][0] >= G:
                return (self.obl[key][1] + off) % G, {}
            rho = (want - off) % G if want is not None else 0
            if key in self.obl:
                g0, rho0 = self.obl[key]
                if rho % g0 != rho0 % g0:        # keep what earlier merges assumed
                    rho = rho0 % g0
            return (rho + off) % G, {key: (G, rho)}
        return None

    def commit(self, need: dict) -> bool:
        merged = merge_obligations(self.obl, need)
        if merged is None:
            return False
        self.obl = merged
        return True

    def disjoint(self, a: Instruction, b: Instruction, G: int) -> bool:
        """The bytes ``a`` and ``b`` access never overlap (records obligations used)."""
        sa, sb = a.space, b.space
        if sa and sb and sa.split("::")[0] != sb.split("::")[0]:
            return True
        addr_a, addr_b = isa.address_operand(a), isa.address_operand(b)
        if addr_a is None or addr_b is None:
            return False
        wa = _width(a)
        wb = _width(b)
        if wa is None or wb is None:
            return False
        if addr_a.base == addr_b.base and not addr_a.extra and not addr_b.extra:
            lo, hi = sorted((a, b), key=lambda i: self.pos[id(i)])
            between = self.insts[self.pos[id(lo)]:self.pos[id(hi)]]
            if isinstance(addr_a.base, Sym) or not any(
                    r.name == addr_a.base.name for i in between for r in isa.defs(i)):
                oa, ob = addr_a.offset or 0, addr_b.offset or 0
                return oa + wa <= ob or ob + wb <= oa
        acc_a, acc_b = self.facts.access(a), self.facts.access(b)
        if acc_a is not None and acc_b is not None and acc_a.affine is not None \
                and acc_b.affine is not None:
            diff = acc_b.affine - acc_a.affine
            if diff.is_constant and all(
                    x.startswith(("param:", "sym:", "%")) for x in
                    acc_a.affine.atoms() | acc_b.affine.atoms()):
                d = diff.constant
                return d >= wa or -d >= wb
        M = max(G, _ceil_pow2(wa), _ceil_pow2(wb))
        if M > 16:
            return False
        ra = self.residue(a, M)
        if ra is None:
            return False
        trial = merge_obligations(self.obl, ra[1])
        if trial is None:
            return False
        saved, self.obl = self.obl, trial
        rb = self.residue(b, M)
        self.obl = saved
        if rb is None:
            return False
        trial = merge_obligations(trial, rb[1])
        if trial is None:
            return False
        bytes_a = {(ra[0] + k) % M for k in range(wa)}
        bytes_b = {(rb[0] + k) % M for k in range(wb)}
        if bytes_a & bytes_b:
            return False
        self.obl = trial
        return True


_INT_REG_TYPES = frozenset({".b64", ".u64", ".s64", ".b32", ".u32", ".s32"})


def _width(inst: Instruction) -> int | None:
    t = inst.type
    if t is None:
        return None
    return type_size(t) * inst.vector_width


def _ceil_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


# --------------------------------------------------------------------------- legality

def _legal(prover: Prover, chunk: list[Member]) -> bool:
    """Can ``chunk`` be merged at its place (first member for loads, last for stores)?"""
    pos = prover.pos
    order = sorted(chunk, key=lambda m: pos[id(m.inst)])
    ids = {id(m.inst) for m in chunk}
    base = chunk[0].base
    guard = chunk[0].inst.guard
    protected = set()
    if isinstance(base, Reg):
        protected.add(base.name)
    if guard is not None:
        protected.add(guard.reg.name)
    G = chunk[0].elem * len(chunk)
    if chunk[0].kind == "load":
        dests = [m.value.name for m in chunk]
        if len(set(dests)) != len(dests) or set(dests) & protected:
            return False
        anchor = order[0]
        for m in order[1:]:
            for w in prover.insts[pos[id(anchor.inst)] + 1:pos[id(m.inst)]]:
                if id(w) in ids:
                    continue
                if is_barrier(w):
                    return False
                if any(r.name in protected or r.name == m.value.name for r in isa.defs(w)):
                    return False
                if any(r.name == m.value.name for r in isa.uses(w)):
                    return False
                if isa.is_store(w) and not prover.disjoint(m.inst, w, G):
                    return False
        return True
    anchor = order[-1]
    for m in order[:-1]:
        watch = set(protected)
        if isinstance(m.value, Reg):
            watch.add(m.value.name)
        for w in prover.insts[pos[id(m.inst)] + 1:pos[id(anchor.inst)]]:
            if id(w) in ids:
                continue
            if is_barrier(w):
                return False
            if any(r.name in watch for r in isa.defs(w)):
                return False
            if isa.touches_memory(w) and not prover.disjoint(m.inst, w, G):
                return False
    return True


def _merged(chunk: list[Member]) -> Instruction:
    first = chunk[0].inst
    n = len(chunk)
    type_ = first.type
    mods = []
    for m in first.modifiers:
        if m == type_:
            mods.append(f".v{n}")
        mods.append(m)
    addr = isa.address_operand(first)
    vec = Vec(tuple(m.value for m in chunk))
    operands = (vec, addr) if chunk[0].kind == "load" else (addr, vec)
    return Instruction(first.opcode, mods, operands, first.guard)


def _describe(chunk: list[Member], new: Instruction, how: str) -> str:
    first = chunk[0]
    name = chunk[0].inst.name
    return (f"merged {len(chunk)} x {name} at [{first.base}+{first.offset}..{chunk[-1].offset}] "
            f"into {new.name} ({how})")


def _plan(prover: Prover, run: list[Member], max_bytes: int) -> list[tuple[list[Member], int]]:
    """Split a run into aligned chunks (largest first) given what is known of its residue."""
    first = run[0]
    info = None
    for M in (16, 8, 4, 2):
        if M > max_bytes or M <= first.elem:
            continue
        info = prover.residue(first.inst, M, want=0)
        if info is not None:
            break
    if info is None:
        return []
    r0, _ = info
    chunks = []
    i = 0
    while i < len(run):
        took = False
        for n in (4, 2):
            size = n * first.elem
            if size > max_bytes or size > M or size > 16 or i + n > len(run):
                continue
            if (r0 + run[i].offset - first.offset) % size:
                continue
            chunks.append((run[i:i + n], size))
            i += n
            took = True
            break
        if not took:
            i += 1
    return chunks


def _candidates(fn, block, reg_types) -> list[list[Member]]:
    groups: dict = {}
    for inst in block.instructions:
        m = _member(inst, reg_types)
        if m is not None:
            groups.setdefault(m.key, []).append(m)
    runs = []
    for members in groups.values():
        if len(members) >= 2:
            runs.extend(_runs(members))
    return runs


def _try_block(fn, block, *, assume: bool, max_bytes: int, obligations: dict, failed: set,
               changes: list, facts: Facts) -> tuple[bool, dict]:
    """Apply the first legal chunk in ``block``; (applied?, obligations after)."""
    prover = Prover(fn, block, assume, obligations, facts)
    for run in _candidates(fn, block, prover.facts.reg_types):
        for chunk, size in _plan(prover, run, max_bytes):
            if _try_chunk(fn, prover, chunk, size, failed, changes):
                return True, prover.obl
            # The v4 did not work: try its halves as v2.
            if len(chunk) == 4 and 2 * chunk[0].elem <= max_bytes:
                for half in (chunk[:2], chunk[2:]):
                    if _try_chunk(fn, prover, half, 2 * chunk[0].elem, failed, changes):
                        return True, prover.obl
    return False, prover.obl


def _try_chunk(fn, prover: Prover, chunk, size, failed, changes) -> bool:
    sig = (tuple(id(m.inst) for m in chunk), prover.assume)
    if sig in failed:
        return False
    saved = dict(prover.obl)
    start = prover.residue(chunk[0].inst, size, want=0)
    ok = start is not None and start[0] == 0 and prover.commit(start[1]) and _legal(prover, chunk)
    if not ok:
        prover.obl = saved
        failed.add(sig)
        return False
    new = _merged(chunk)
    how = "alignment and order proven" if prover.obl == saved or not prover.assume \
        else "runtime-checked alignment"
    if chunk[0].kind == "load":
        anchor = min(chunk, key=lambda m: prover.pos[id(m.inst)])
    else:
        anchor = max(chunk, key=lambda m: prover.pos[id(m.inst)])
    fn.replace(anchor.inst, new)
    for m in chunk:
        if m is not anchor:
            fn.remove(m.inst)
    failed.clear()              # the code changed: earlier failures may succeed now
    changes.append(Change(_describe(chunk, new, how), anchor.inst))
    return True


# --------------------------------------------------------------------------- versioning

def _span(fn, block):
    """(statement before, statement after) around the block's straight-line body, or None."""
    body = fn.body
    insts = block.instructions
    term = block.terminator
    if not insts or (term is not None and len(insts) == 1):
        return None
    idx = {id(s): k for k, s in enumerate(body)}
    start = idx[id(insts[0])]
    end = idx[id(term)] if term is not None else idx[id(insts[-1])] + 1
    if start == 0 or end >= len(body):
        return None
    for s in body[start:end]:
        if isinstance(s, (Label, ScopeOpen, ScopeClose, VarDecl)):
            return None
    return body[start - 1], body[end]


def _between(fn, before, after) -> list:
    body = fn.body
    i = next(k for k, s in enumerate(body) if s is before)
    j = next(k for k, s in enumerate(body) if s is after)
    return body[i + 1:j]


def _check_code(fn, obligations: dict) -> tuple[list[Instruction], Reg] | None:
    """Instructions that set a predicate true when some obligation does NOT hold."""
    code: list[Instruction] = []
    acc = None
    facts = Facts(fn)
    for (kind, name), (G, rho) in sorted(obligations.items()):
        if G <= 1:
            continue
        if kind == "atom" and name.startswith("param:"):
            decl = facts.params[name[6:]]
            wide = type_size(decl.type) == 8
            val = fn.new_register(".b64" if wide else ".b32")
            code.append(Instruction("ld", (".param", decl.type), (val, Addr(Sym(decl.name), None))))
        elif kind == "atom" and name.startswith("sym:"):
            wide = True
            val = fn.new_register(".b64")
            code.append(Instruction("mov", (".u64",), (val, Sym(name[4:]))))
        elif kind == "reg":
            rtype = facts.reg_types.get(name)
            if rtype not in _INT_REG_TYPES:
                return None
            wide = type_size(rtype) == 8
            val = Reg(name)
        else:
            return None
        bits = ".b64" if wide else ".b32"
        if rho % G:
            shifted = fn.new_register(bits)
            code.append(Instruction("sub", (".s64" if wide else ".s32",), (shifted, val, Imm(str(rho % G)))))
            val = shifted
        masked = fn.new_register(bits)
        code.append(Instruction("and", (bits,), (masked, val, Imm(str(G - 1)))))
        if not wide:
            widened = fn.new_register(".b64")
            code.append(Instruction("cvt", (".u64", ".u32"), (widened, masked)))
            masked = widened
        if acc is None:
            acc = masked
        else:
            both = fn.new_register(".b64")
            code.append(Instruction("or", (".b64",), (both, acc, masked)))
            acc = both
    if acc is None:
        return None
    pred = fn.new_register(".pred")
    code.append(Instruction("setp", (".ne", ".b64"), (pred, acc, Imm("0"))))
    return code, pred


def _version_block(fn, first_inst, *, max_bytes: int, failed: set, changes: list,
                   facts: Facts, entry_preds: dict) -> None:
    block = fn.block_of(first_inst)
    reg_types = register_types(fn)
    if not _candidates(fn, block, reg_types):
        return
    span = _span(fn, block)
    if span is None:
        return
    before, after = span
    snapshot = _between(fn, before, after)
    scalar = [s.copy() if isinstance(s, Instruction) else copy.copy(s) for s in snapshot]
    obligations: dict = {}
    local: list[Change] = []
    for _ in range(MAX_MERGES):
        current = next(s for s in _between(fn, before, after) if isinstance(s, Instruction))
        applied, obligations = _try_block(fn, fn.block_of(current), assume=True,
                                          max_bytes=max_bytes, obligations=obligations,
                                          failed=failed, changes=local, facts=facts)
        if not applied:
            break
    if not local:
        return
    checks = _guard_code(fn, obligations, entry_preds, _between(fn, before, after)[0]) \
        if obligations else None
    if obligations and checks is None:
        # Cannot test what the merges assumed: put the original statements back.
        for s in _between(fn, before, after):
            fn.remove(s)
        fn.insert_after(before, snapshot)
        return
    if checks is not None:
        code, pred = checks
        scalar_label = fn.new_label("scalar")
        join_label = fn.new_label("join")
        if _is_self_loop(before, after) and not code and all(k[0] == "atom" for k in obligations):
            # A one-block loop whose test is launch-invariant: version the whole loop (test
            # once on entry, two loops) instead of branching in every iteration.
            vec_label = fn.new_label("vloop")
            fn.insert_after(before, [Instruction("bra", (), (Sym(scalar_label),), Guard(pred)),
                                     Label(vec_label)])
            fn.replace(after, [after.with_(operands=(Sym(vec_label),)),
                               Instruction("bra", (".uni",), (Sym(join_label),)),
                               Label(scalar_label), *scalar,
                               after.with_(operands=(Sym(scalar_label),)), Label(join_label)])
        else:
            fn.insert_after(before, code + [Instruction("bra", (), (Sym(scalar_label),), Guard(pred))])
            fn.insert_before(after, [Instruction("bra", (".uni",), (Sym(join_label),)),
                                     Label(scalar_label), *scalar, Label(join_label)])
        for c in local:
            c.description += f"; vector path taken when {_describe_obligations(obligations)}, " \
                             f"else the original scalar code"
    changes.extend(local)


def _guard_code(fn, obligations: dict, entry_preds: dict, span_first):
    """(code for the top of the block, predicate true when the vector path must NOT run).

    Obligations on parameters and symbols hold or fail for the whole launch, so their test
    is computed once at the function's entry (shared by every versioned block that needs
    the same facts; a uniform predicate that ptxas keeps out of loops); tests of live-in
    registers stay in the block.
    """
    atoms = {k: v for k, v in obligations.items() if k[0] == "atom"}
    regs = {k: v for k, v in obligations.items() if k[0] != "atom"}
    entry_pred = None
    prefix: list[Instruction] = []
    if atoms:
        key = frozenset(atoms.items())
        entry_pred = entry_preds.get(key)
        if entry_pred is None:
            first = next((s for s in fn.body if isinstance(s, (Instruction, Label))), None)
            if isinstance(first, Instruction):
                made = _check_code(fn, atoms)
                if made is None:
                    return None
                code, entry_pred = made
                if first is span_first:
                    prefix = code               # this is the entry block: test at its top
                else:
                    fn.insert_before(first, code)
                entry_preds[key] = entry_pred
            else:
                regs = obligations              # no straight entry: test everything here
    if not regs:
        return prefix, entry_pred
    made = _check_code(fn, regs)
    if made is None:
        return None
    code, pred = made
    code = prefix + code
    if entry_pred is not None:
        both = fn.new_register(".pred")
        code.append(Instruction("or", (".pred",), (both, pred, entry_pred)))
        pred = both
    return code, pred


def _is_self_loop(before, after) -> bool:
    """The block is ``L: ...; @%p bra L;`` entered through the label ``before``."""
    return (isinstance(before, Label) and isinstance(after, Instruction) and after.opcode == "bra"
            and after.guard is not None and len(after.operands) == 1
            and isinstance(after.operands[0], Sym) and after.operands[0].name == before.name)


def _describe_obligations(obligations: dict) -> str:
    parts = []
    for (kind, name), (G, rho) in sorted(obligations.items()):
        name = name.split(":", 1)[-1]
        parts.append(f"{name} % {G} == {rho}" if rho else f"{name} % {G} == 0")
    return " and ".join(parts)


# --------------------------------------------------------------------------- the pass

@register(
    name="vectorize-memory",
    order=20,
    summary="merge per-thread contiguous scalar global/shared loads and stores into .v2/.v4",
    assumes=("Alignment of each merged group is proven from the IR (affine addresses, "
             ".ptr .align, aligned .shared declarations, loop-pointer recurrences) or, with "
             "versioning, tested at run time with the original scalar block kept as the "
             "fallback; accesses are only moved within a basic block, never across barriers, "
             "fences, calls, atomics or volatile/scoped accesses, and across other plain "
             "loads/stores only when their bytes are provably disjoint (or the runtime test "
             "covers it). cvta is taken to keep the low 4 address bits (ptx_ir's model)."),
    params={"max_bytes": [16, 8], "versioning": [True, False]},
)
def vectorize_memory(fn, *, max_bytes: int = 16, versioning: bool = True) -> list[Change]:
    if fn.body is None:
        return []
    changes: list[Change] = []
    failed: set = set()
    # 1. Everything that is proven without a runtime test. Merges keep the block
    #    structure, so block k stays block k; the facts are computed once (see Prover).
    facts = Facts(fn)
    for k in range(len(fn.blocks)):
        for _ in range(MAX_MERGES):
            ok, _obl = _try_block(fn, fn.blocks[k], assume=False, max_bytes=max_bytes,
                                  obligations={}, failed=failed, changes=changes, facts=facts)
            if not ok:
                break
    # 2. Versioned blocks: merge under a runtime-tested assumption, keep the scalar copy.
    if versioning:
        facts = Facts(fn)
        entry_preds: dict = {}
        firsts = [b.instructions[0] for b in fn.blocks if b.instructions]
        for first in firsts:
            _version_block(fn, first, max_bytes=max_bytes, failed=failed, changes=changes,
                           facts=facts, entry_preds=entry_preds)
    if changes:
        fn.validate()
    return changes
