"""warp-shuffle-reduction: the last steps of a shared-memory tree reduction through shfl.sync.

Recognised shapes (what nvcc 13 -O3 emits for the textbook CUDA reductions):

* **barrier steps, unrolled** — ``if (tid < s) sdata[tid] = sdata[tid] OP sdata[tid + s];
  __syncthreads();`` for the constants s = 16, 8, 4, 2, 1 (a template block size, or a
  constant start ``#pragma unroll``-ed): per step a guard block ``@p bra SKIP``, a body
  ``ld.shared a,[A]; ld.shared b,[B]; OP d,..; st.shared [A],d`` and ``bar.sync 0``.
* **barrier loop** — ``for (s = blockDim.x/2; s > 0; s >>= 1)`` with the same body: a
  three-block loop (guard, body, barrier + update).
* **warp-synchronous tail** — ``if (tid < 32) { volatile T* s = sdata; s[tid] OP= s[tid+32];
  ... s[tid] OP= s[tid+1]; }``: one block of ``ld.volatile.shared``/``st.volatile.shared``
  steps.

What is proven before a rewrite (otherwise the pass does nothing):

* Each step's addresses, from the affine address analysis: the store and the first load
  are ``base + e*%tid.x`` (``base`` uniform over the block: symbols, parameters,
  ``%ntid``/``%ctaid``), the partner load is exactly ``e*s`` bytes further, ``e`` the
  element size (4 or 8).
* Each step's guard, by evaluating its predicate for every ``%tid.x`` in 0..1023: the body
  runs exactly for ``tid < s`` (``tid < 32`` for the volatile tail).
* For the loop: its control, by executing the loop's integer/predicate instructions for
  every power-of-two ``%ntid.x`` from 64 to 1024: the body runs for s = ntid/2, ..., 2, 1.
* Every other instruction in the replaced region is free of side effects, and every
  register it defines that is read later is recomputed identically on the new path.

The rewrite keeps the order of operations: lane t computes ``OP`` on the same two values,
in the same operand positions, as thread t did in shared memory (for t < s; see below for
the other lanes), so ``sdata[0]`` is bit-identical — for floats too.

It is exact only for a one-dimensional block with at least 32 threads (warp 0 is then
threads 0..31 with lane = tid; loop: ``%ntid.x`` a power of two >= 64). Unless
``.reqntid`` proves that statically, the new code is guarded by a uniform runtime test of
``%ntid`` and the original steps stay as the other path (versioning).

``partials``:

* ``keep`` (default): the whole of ``sdata[0..31]`` ends as in the original. Barrier
  steps: lane t applies step s only when t < s (predicated), then all 32 lanes store.
  Volatile tail (where every lane applies every step and lanes with t+s >= 32 read
  ``sdata[t+s]`` beyond the warp): those lanes read that element from shared memory (which
  the tail never writes), selected by ``shfl.sync``'s in-range predicate.
* ``drop``: no predicates and no extra loads; only lane 0 stores ``sdata[0]``. Fires only
  when no instruction reachable after the tail can read any other element of the buffer
  (shared loads at proven addresses only; no generic loads, no calls; all ``extern``
  shared arrays count as one buffer).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ptx_ir import isa
from ptx_ir.affine import Affine
from ptx_ir.dataflow import ENTRY
from ptx_ir.nodes import Addr, Guard, Imm, Instruction, Label, Neg, Pair, Reg, Sym, Vec, type_size, walk_operand

from superopt.passes import Change, register
from superopt.passes._loop_tools import (
    I, Slicer, Unknown, bra, evaluate_slice, has_side_effects, int_eval, label_of_block,
    live_out, reachable_blocks, special_source,
)

OPS = frozenset({"add", "sub", "mul", "min", "max", "and", "or", "xor"})
TAIL_STEPS = (16, 8, 4, 2, 1)
MAX_TID = 1024
UNIFORM_ATOM_PREFIXES = ("sym:", "param:", "%ntid", "%ctaid", "%nctaid")


# --------------------------------------------------------------------------- matching


@dataclass(eq=False)
class TreeLevel:
    load_own: Instruction
    load_other: Instruction
    op: Instruction
    store: Instruction
    size: int              # element bytes
    s: int | str           # constant distance (elements), or the register holding it
    block: object = None

    @property
    def insts(self):
        return [self.load_own, self.load_other, self.op, self.store]

    def own_first(self) -> bool:
        """True when the op reads the own value as its first source."""
        a = self.op.operands[1]
        return isinstance(a, Reg) and a == self.load_own.operands[0]


def _is_barrier(inst: Instruction) -> bool:
    if inst.guard is not None or len(inst.operands) != 1:
        return False
    op = inst.operands[0]
    if not (isinstance(op, Imm) and not op.is_float and op.value == 0):
        return False
    return (inst.opcode == "bar" and inst.modifiers == (".sync",)) or \
        (inst.opcode == "barrier" and inst.modifiers in ((".sync",), (".sync", ".aligned")))


def _barrier_of(block) -> Instruction | None:
    """The one ``bar.sync 0`` of a block whose other instructions (but its terminator) are
    free of side effects."""
    insts = block.instructions
    body = insts[:-1] if block.terminator is not None else insts
    bars = [i for i in body if _is_barrier(i)]
    if len(bars) != 1 or any(has_side_effects(i) for i in body if i is not bars[0]):
        return None
    return bars[0]


def _plain_shared(inst: Instruction, kind: str, volatile: bool) -> bool:
    if inst.opcode != kind or inst.guard is not None or inst.vector_width != 1:
        return False
    allowed = {".shared", ".shared::cta"} | ({".volatile"} if volatile else set())
    others = [m for m in inst.modifiers if m not in allowed and m not in (inst.type,)]
    return not others and inst.space in (".shared", ".shared::cta") \
        and (".volatile" in inst.modifiers) == volatile


def _tid_form(aff: Affine | None, size: int) -> Affine | None:
    """``base`` when ``aff == base + size*%tid.x`` with a block-uniform base."""
    if aff is None or aff.coefficient("%tid.x") != size:
        return None
    base = aff.without(("%tid.x",))
    for atom in base.atoms():
        if not atom.startswith(UNIFORM_ATOM_PREFIXES):
            return None
    return base


def _without_tid(aff: Affine) -> Affine:
    d = {m: c for m, c in aff.terms if "%tid.x" not in m}
    return Affine._from(d)


def _find_steps(fn, insts, volatile: bool, accesses: dict) -> list[TreeLevel]:
    """Steps whose store is in ``insts`` (one block, in order)."""
    du = fn.def_use
    pos = {id(i): k for k, i in enumerate(insts)}
    steps = []
    for st in insts:
        if not _plain_shared(st, "st", volatile) or len(st.operands) != 2:
            continue
        value = st.operands[1]
        if not isinstance(value, Reg):
            continue
        defs = du.definitions(st, value.name)
        if len(defs) != 1 or defs[0] == ENTRY or id(defs[0]) not in pos:
            continue
        op = defs[0]
        if op.opcode not in OPS or op.guard is not None or len(op.operands) != 3 \
                or not all(isinstance(o, Reg) for o in op.operands[1:]) \
                or op.operands[1] == op.operands[2]:
            continue
        loads = []
        for src in op.operands[1:]:
            d = du.definitions(op, src.name)
            if len(d) != 1 or d[0] == ENTRY or id(d[0]) not in pos \
                    or not _plain_shared(d[0], "ld", volatile) or pos[id(d[0])] > pos[id(op)]:
                break
            loads.append(d[0])
        if len(loads) != 2:
            continue
        size = type_size(st.type) if st.type else 0
        if size not in (4, 8) or any(type_size(l.type or ".b8") != size for l in loads):
            continue
        if not (pos[id(op)] < pos[id(st)]):
            continue
        a_st = accesses.get(id(st))
        if a_st is None or a_st.affine is None or _tid_form(a_st.affine, size) is None:
            continue
        own = [l for l in loads if accesses.get(id(l)) and accesses[id(l)].affine == a_st.affine]
        if len(own) != 1:
            continue
        own = own[0]
        other = loads[1] if loads[0] is own else loads[0]
        a_other = accesses.get(id(other))
        if a_other is None or a_other.affine is None:
            continue
        diff = a_other.affine - a_st.affine
        s: int | str | None = None
        if diff.is_constant:
            if diff.constant > 0 and diff.constant % size == 0:
                s = diff.constant // size
        elif diff.terms and len(diff.terms) == 1:
            (mono, coeff), = diff.terms
            if coeff == size and len(mono) == 1 and mono[0].startswith("reg:"):
                s = mono[0][4:]
        if s is None:
            # The partner read at a fixed address (``sdata[1]``): valid when only tid 0
            # executes the step, checked later; record the distance at tid = 0.
            d0 = _without_tid(a_other.affine) - _without_tid(a_st.affine)
            if d0.is_constant and d0.constant > 0 and d0.constant % size == 0:
                s = -(d0.constant // size)      # negative: "only when tid == 0"
        if s is None:
            continue
        steps.append(TreeLevel(own, other, op, st, size, s))
    return steps


def _skip_predicate(fn, block, target_block) -> tuple[Instruction, str, bool] | None:
    """The guard of a step body: ``block`` ends with ``@[!]p bra`` to ``target_block``."""
    term = block.terminator
    if term is None or term.opcode != "bra" or term.guard is None:
        return None
    succ = [s for s in fn.cfg.successors(block)]
    if target_block not in succ or len(succ) != 2:
        return None
    label = term.operands[0].name
    if label not in target_block.labels:
        return None
    return term, term.guard.reg.name, term.guard.negated


def _runs_exactly_below(fn, term: Instruction, pred: str, negated: bool, bound: int) -> bool:
    """For every %tid.x in 0..1023 the branch ``term`` is NOT taken iff tid < bound (the
    predicate may depend on %tid.x and literals only)."""
    try:
        order = Slicer(fn).slice_before(term, pred)
        for tid in range(MAX_TID):
            p = bool(evaluate_slice(order, pred, {"%tid.x": tid}))
            if (p != negated) == (tid < bound):
                return False
    except Unknown:
        return False
    return True


def _pure_between(insts) -> bool:
    return all(not has_side_effects(i) and not isa.is_terminator(i) for i in insts)


def _region_ids(fn, first: Instruction, last: Instruction) -> list[Instruction]:
    body = fn.body
    i = next(k for k, s in enumerate(body) if s is first)
    j = next(k for k, s in enumerate(body) if s is last)
    return [s for s in body[i:j + 1] if isinstance(s, Instruction)]


def _recomputable(fn, region: list[Instruction]) -> list[Instruction] | None:
    """Copies of the region's instructions whose results are read after it (to re-run on
    the new path), or None when a live-out value cannot be recomputed there."""
    ids = {id(i) for i in region}
    outs = live_out(fn, ids)
    if not outs:
        return []
    copies = []
    for inst in region:
        defs = {r.name for r in isa.defs(inst)}
        if not defs & outs:
            continue
        if has_side_effects(inst) or inst.guard is not None:
            return None
        for use in isa.uses(inst):
            if use.is_special:
                continue
            if any(d == ENTRY or id(d) in ids for d in fn.def_use.definitions(inst, use.name)):
                return None
        copies.append(inst.copy())
    # Every live-out register must come from exactly one (unguarded) definition in the region.
    for name in outs:
        n = sum(1 for i in region for r in isa.defs(i) if r.name == name)
        if n != 1:
            return None
    return copies


def _addr_base_outside(fn, at: Instruction, addr: Addr, region_ids: set) -> bool:
    base = addr.base
    if not isinstance(base, Reg):
        return True
    defs = fn.def_use.definitions(at, base.name)
    return bool(defs) and all(d != ENTRY and id(d) not in region_ids for d in defs)


def _static_fast(fn, pow2_64: bool) -> bool:
    d = fn.directive(".reqntid")
    if d is None:
        return False
    try:
        dims = [int(str(a)) for a in d.args if str(a) != ","]
    except ValueError:
        return False
    dims += [1] * (3 - len(dims))
    x, y, z = dims[:3]
    if y != 1 or z != 1:
        return False
    if pow2_64:
        return x >= 64 and x & (x - 1) == 0
    return x >= 32


# -- "drop" mode: nobody reads sdata[1..] after the tail


def _buffer_symbols(fn, module_shared_extern: set, base: Affine) -> set[str] | None:
    syms = {a[4:] for a in base.atoms() if a.startswith("sym:")}
    if len(syms) != 1:
        return None
    (sym,) = syms
    if sym in module_shared_extern:
        return set(module_shared_extern)
    return {sym}


def _extern_shared(fn) -> set[str]:
    # Module-level extern shared arrays are not visible from the function; every shared
    # symbol that is not declared in the function body with a size is treated as one.
    local = {s.name for s in fn.body or () if getattr(s, "space", None) in (".shared",)
             and getattr(s, "size", None) is not None}
    names = set()
    for inst in fn.instructions:
        for op in inst.operands:
            for sub in walk_operand(op):
                if isinstance(sub, Sym) and sub.name not in local:
                    names.add(sub.name)
    return names


# --------------------------------------------------------------------------- emission


class _Emitter:
    def __init__(self, fn, size: int, value_type: str):
        self.fn = fn
        self.size = size
        self.value_type = value_type
        self.out: list = []

    def reg(self, t: str) -> Reg:
        return self.fn.new_register(t)

    def emit(self, *insts):
        self.out.extend(insts)

    def fast_predicate(self, pow2_64: bool) -> Reg:
        nx, ny, nz = self.reg(".b32"), self.reg(".b32"), self.reg(".b32")
        f = self.reg(".pred")
        self.emit(I("mov", "u32", nx, Reg("%ntid.x")), I("mov", "u32", ny, Reg("%ntid.y")),
                  I("mov", "u32", nz, Reg("%ntid.z")))
        if pow2_64:
            t = self.reg(".b32")
            self.emit(I("add", "s32", t, nx, -1), I("and", "b32", t, t, nx),
                      I("setp", "eq.u32", f, t, 0), I("setp", "ge.and.u32", f, nx, 64, f))
        else:
            self.emit(I("setp", "ge.u32", f, nx, 32))
        self.emit(I("setp", "eq.and.u32", f, ny, 1, f), I("setp", "eq.and.u32", f, nz, 1, f))
        return f

    def shuffle(self, v: Reg, offset: int, want_pred: bool) -> tuple[Reg, Reg | None]:
        p = self.reg(".pred") if want_pred else None
        if self.size == 4:
            w = self.reg(self.value_type)
            dst = Pair(w, p) if p is not None else w
            self.emit(I("shfl", "sync.down.b32", dst, v, offset, 31, -1))
            return w, p
        lo, hi, lo2, hi2 = (self.reg(".b32") for _ in range(4))
        w = self.reg(self.value_type)
        self.emit(Instruction("mov", (".b64",), (Vec((lo, hi)), v)))
        self.emit(I("shfl", "sync.down.b32", Pair(lo2, p) if p is not None else lo2, lo, offset, 31, -1))
        self.emit(I("shfl", "sync.down.b32", hi2, hi, offset, 31, -1))
        self.emit(Instruction("mov", (".b64",), (w, Vec((lo2, hi2)))))
        return w, p

    def apply_op(self, step: TreeLevel, v: Reg, w: Reg, guard: Guard | None = None):
        srcs = (v, w) if step.own_first() else (w, v)
        self.emit(step.op.with_(operands=(v, *srcs), guard=guard))


def _value_reg_type(ld: Instruction) -> str:
    t = ld.type
    if t in (".f32", ".f64"):
        return t
    return ".b32" if type_size(t) == 4 else ".b64"


def _barrier_tail(fn, steps: list[TreeLevel], addr: Addr, partials: str, barrier: Instruction,
                  em: _Emitter, end_label: str) -> None:
    """Lanes 0..31 of warp 0 do steps 16..1 in registers; then the one barrier."""
    first = steps[0]
    t = em.reg(".b32")
    q = em.reg(".pred")
    v = em.reg(em.value_type)
    em.emit(I("mov", "u32", t, Reg("%tid.x")), I("setp", "gt.u32", q, t, 31),
            bra(end_label, Guard(q)))
    em.emit(first.load_own.with_(operands=(v, addr)))
    for step, k in zip(steps, TAIL_STEPS):
        w, _ = em.shuffle(v, k, False)
        if partials == "keep":
            g = em.reg(".pred")
            em.emit(I("setp", "lt.u32", g, t, k))
            em.apply_op(step, v, w, Guard(g))
        else:
            em.apply_op(step, v, w)
    last_store = steps[-1].store
    if partials == "keep":
        em.emit(last_store.with_(operands=(addr, v)))
    else:
        z = em.reg(".pred")
        em.emit(I("setp", "eq.u32", z, t, 0), last_store.with_(operands=(addr, v), guard=Guard(z)))
    em.emit(Label(end_label), barrier.copy())


# --------------------------------------------------------------------------- the shapes


@dataclass
class _Match:
    kind: str
    description: str
    apply: object
    original: list = field(default_factory=list)


def _match_unrolled(fn, partials: str, accesses: dict, skip: set) -> _Match | None:
    blocks = fn.blocks
    steps_by_guard = {}
    for block in blocks:
        preds = list(fn.cfg.predecessors(block))
        succs = list(fn.cfg.successors(block))
        if len(preds) != 1 or len(succs) != 1 or block.terminator is not None:
            continue
        found = _find_steps(fn, block.instructions, False, accesses)
        if len(found) != 1:
            continue
        step = found[0]
        if any(id(i) in skip for i in step.insts) or not isinstance(step.s, int):
            continue
        others = [i for i in block.instructions if i not in step.insts]
        if not _pure_between(others):
            continue
        guard_block, nxt = preds[0], succs[0]
        g = _skip_predicate(fn, guard_block, nxt)
        if g is None or block not in fn.cfg.successors(guard_block):
            continue
        if blocks.index(block) != blocks.index(guard_block) + 1:
            continue
        if _barrier_of(nxt) is None:
            continue
        s = step.s if step.s > 0 else -step.s
        bound = step.s if step.s > 0 else 1
        if step.s < 0 and s != 1:
            continue
        if s not in TAIL_STEPS or not _runs_exactly_below(fn, g[0], g[1], g[2], bound):
            continue
        step.s = s
        step.block = block
        steps_by_guard[guard_block] = (step, nxt)
    for guard_block, (step, nxt) in steps_by_guard.items():
        if step.s != 16:
            continue
        chain = [(guard_block, step, nxt)]
        while chain[-1][1].s > 1:
            follow = steps_by_guard.get(chain[-1][2])
            if follow is None or follow[0].s != chain[-1][1].s // 2:
                break
            chain.append((chain[-1][2], *follow))
        if len(chain) != 5:
            continue
        if len({(c[1].size, c[1].load_own.type) for c in chain}) != 1:
            continue
        # Same own address for every step.
        a0 = accesses[id(chain[0][1].store)].affine
        if any(accesses[id(c[1].store)].affine != a0 for c in chain):
            continue
        # Region: from after the last side effect of the first guard block to the last
        # barrier (inclusive).
        g0 = chain[0][0].instructions
        k = len(g0) - 1
        while k > 0 and not has_side_effects(g0[k - 1]):
            k -= 1
        first_inst = g0[k]
        last_barrier = _barrier_of(chain[-1][2])
        region = _region_ids(fn, first_inst, last_barrier)
        if _after_versioning_label(fn, region[0]):
            continue
        region_ids = {id(i) for i in region}
        step_ids = {id(i) for c in chain for i in c[1].insts}
        barrier_ids = {id(_barrier_of(c[2])) for c in chain}
        if any(not (id(i) in step_ids or id(i) in barrier_ids or not has_side_effects(i))
               for i in region):
            continue
        if len([i for i in region if id(i) in barrier_ids or _is_barrier(i)]) != 5:
            continue
        # No entry into the middle of the region.
        region_blocks = {fn.block_of(i) for i in region}
        if any(p not in region_blocks for b in region_blocks if b is not chain[0][0]
               for p in fn.cfg.predecessors(b)):
            continue
        copies = _recomputable(fn, region)
        if copies is None:
            continue
        store = chain[0][1].store
        addr = store.operands[0]
        if not _addr_base_outside(fn, store, addr, region_ids):
            continue
        if partials == "drop":
            if _uses_cluster_shared(fn):
                continue
            base = _tid_form(a0, step.size)
            syms = _buffer_symbols(fn, _extern_shared(fn), base)
            end_block = chain[-1][2]
            if syms is None or not _no_partial_readers_after(fn, end_block, last_barrier, syms,
                                                              base, step.size):
                continue
        steps = [c[1] for c in chain]
        static = _static_fast(fn, pow2_64=False)
        value_type = _value_reg_type(steps[0].load_own)

        def apply(fn=fn, steps=steps, region=region, copies=copies, addr=addr,
                  barrier=last_barrier, static=static, value_type=value_type):
            em = _Emitter(fn, steps[0].size, value_type)
            orig = _version_entry(fn, em, static)
            after = fn.new_label("ws_after")
            end = fn.new_label("ws_bar")
            _barrier_tail(fn, steps, addr, partials, barrier, em, end)
            _place(fn, em, region, copies, static, orig, after, label_after=True)

        name = "barrier steps 16..1"
        return _Match("unrolled", f"{name}: {len(steps)} shared-memory steps and barriers "
                      f"replaced by shfl.sync.down ({partials} partials"
                      f"{'' if static else ', versioned on a 1-D block of >= 32 threads'})",
                      apply, region)
    return None


def _after_versioning_label(fn, inst: Instruction) -> bool:
    """True when ``inst`` starts the original path this pass kept (do not rewrite twice)."""
    body = fn.body
    k = next(n for n, s in enumerate(body) if s is inst)
    while k > 0 and not isinstance(body[k - 1], Instruction):
        k -= 1
        if isinstance(body[k], Label) and body[k].name.startswith("$Lnp_ws_orig"):
            return True
    return False


def _no_partial_readers_after(fn, block, after_inst, syms, base, size) -> bool:
    """No read of the buffer other than element 0 in ``block`` after ``after_inst`` or in
    any block reachable from it."""
    insts = block.instructions
    k = next(n for n, i in enumerate(insts) if i is after_inst)
    reach = reachable_blocks(fn, list(fn.cfg.successors(block)))
    scan_blocks = [b for b in reach if b is not block]
    rest = insts[k + 1:] if block not in reach else insts
    return _reads_ok(fn, rest, syms, base, size) and all(
        _reads_ok(fn, b.instructions, syms, base, size) for b in scan_blocks)


def _uses_cluster_shared(fn) -> bool:
    """Distributed shared memory: another CTA of the cluster could read the buffer."""
    return any(i.opcode == "mapa" or (i.space or "").startswith(".shared::cluster")
               for i in fn.instructions)


def _reads_ok(fn, insts, syms, base, size) -> bool:
    accesses = {id(a.inst): a for a in fn.memory_accesses}
    for inst in insts:
        if inst.opcode == "call":
            return False
        if not isa.touches_memory(inst):
            continue
        space = inst.space
        if space is None:
            return False
        if not space.startswith(".shared"):
            continue
        if isa.is_store(inst) and not isa.is_load(inst) and inst.opcode not in ("atom", "red"):
            continue
        acc = accesses.get(id(inst))
        if acc is None or acc.affine is None:
            return False
        found = {a[4:] for a in acc.affine.atoms() if a.startswith("sym:")}
        if not found:
            return False
        if not found & syms:
            continue
        if acc.affine != base or acc.bytes > size:
            return False
    return True


def _match_volatile(fn, partials: str, accesses: dict, skip: set) -> _Match | None:
    for block in fn.blocks:
        preds = list(fn.cfg.predecessors(block))
        succs = list(fn.cfg.successors(block))
        if len(preds) != 1 or len(succs) != 1 or block.terminator is not None:
            continue
        steps = _find_steps(fn, block.instructions, True, accesses)
        if len(steps) < 5 or any(id(i) in skip for s in steps for i in s.insts):
            continue
        insts = block.instructions
        pos = {id(i): n for n, i in enumerate(insts)}
        steps.sort(key=lambda s: pos[id(s.store)])
        # The side effects of the block are exactly the steps, in order ld ld st.
        effects = [i for i in insts if has_side_effects(i)]
        expected = []
        for s in steps:
            loads = sorted([s.load_own, s.load_other], key=lambda i: pos[id(i)])
            expected += [*loads, s.store]
        if effects != expected:
            continue
        if any(not isinstance(s.s, int) or s.s <= 0 for s in steps):
            continue
        a0 = accesses[id(steps[0].store)].affine
        if any(accesses[id(s.store)].affine != a0 for s in steps):
            continue
        if len({(s.size, s.load_own.type) for s in steps}) != 1:
            continue
        tail = steps[-5:]
        if tuple(s.s for s in tail) != TAIL_STEPS:
            continue
        if any(s.s < 32 for s in steps[:-5]):
            continue
        g = _skip_predicate(fn, preds[0], succs[0])
        if g is None or not _runs_exactly_below(fn, g[0], g[1], g[2], 32):
            continue
        first_inst = min(tail[0].insts, key=lambda i: pos[id(i)])
        # include pure address arithmetic just before the first step instruction
        region = insts[pos[id(first_inst)]:]
        if _after_versioning_label(fn, region[0]):
            continue
        region_ids = {id(i) for i in region}
        copies = _recomputable(fn, region)
        if copies is None:
            continue
        store = tail[0].store
        addr = store.operands[0]
        if not isinstance(addr, Addr) or not _addr_base_outside(fn, store, addr, region_ids):
            continue
        size = tail[0].size
        if partials == "drop":
            if _uses_cluster_shared(fn):
                continue
            base = _tid_form(a0, size)
            syms = _buffer_symbols(fn, _extern_shared(fn), base)
            if syms is None or not _no_partial_readers_after(fn, block, insts[-1], syms, base, size):
                continue
        prev = steps[-6] if len(steps) > 5 else None
        start_value = None
        if prev is not None and pos[id(prev.store)] < pos[id(first_inst)]:
            start_value = prev.store.operands[1]
        static = _static_fast(fn, pow2_64=False)
        value_type = _value_reg_type(tail[0].load_own)
        exit_block = succs[0]

        def apply(fn=fn, tail=tail, region=region, copies=copies, addr=addr, static=static,
                  value_type=value_type, start_value=start_value, exit_block=exit_block,
                  size=size):
            em = _Emitter(fn, size, value_type)
            orig = _version_entry(fn, em, static)
            after = label_of_block(fn, exit_block)
            v = em.reg(value_type)
            if start_value is not None:
                em.emit(Instruction("mov", (".b64" if size == 8 else ".b32",), (v, start_value)))
            else:
                em.emit(tail[0].load_own.with_(operands=(v, addr)))
            for step in tail:
                w, p = em.shuffle(v, step.s, partials == "keep")
                if partials == "keep":
                    far = Addr(addr.base, (addr.offset or 0) + size * step.s)
                    em.emit(step.load_other.with_(operands=(w, far), guard=Guard(p, negated=True)))
                em.apply_op(step, v, w)
            if partials == "keep":
                em.emit(tail[-1].store.with_(operands=(addr, v)))
            else:
                t, z = em.reg(".b32"), em.reg(".pred")
                em.emit(I("mov", "u32", t, Reg("%tid.x")), I("setp", "eq.u32", z, t, 0),
                        tail[-1].store.with_(operands=(addr, v), guard=Guard(z)))
            _place(fn, em, region, copies, static, orig, after, label_after=False)

        return _Match("volatile", f"warp-synchronous volatile tail: 5 shared-memory steps "
                      f"replaced by shfl.sync.down ({partials} partials"
                      f"{'' if static else ', versioned on a 1-D block of >= 32 threads'})",
                      apply, region)
    return None


def _match_loop(fn, partials: str, accesses: dict, skip: set) -> _Match | None:
    for loop in fn.loops:
        if loop.children or len(loop.blocks) != 3 or len(loop.latches) != 1 \
                or len(loop.exits) != 1:
            continue
        header, latch = loop.header, loop.latches[0]
        body = next(b for b in loop.blocks if b is not header and b is not latch)
        blocks = fn.blocks
        if not (blocks.index(header) + 1 == blocks.index(body)
                and blocks.index(body) + 1 == blocks.index(latch)):
            continue
        exit_from, exit_block = loop.exits[0]
        if exit_from is not latch or blocks.index(exit_block) != blocks.index(latch) + 1:
            continue
        found = _find_steps(fn, body.instructions, False, accesses)
        if len(found) != 1 or not isinstance(found[0].s, str):
            continue
        step = found[0]
        if any(id(i) in skip for i in step.insts):
            continue
        if not _pure_between([i for i in body.instructions if i not in step.insts]):
            continue
        if body.terminator is not None or list(fn.cfg.predecessors(body)) != [header]:
            continue
        g = _skip_predicate(fn, header, latch)
        if g is None:
            continue
        term_h, pred_h, neg_h = g
        if not _pure_between(header.instructions[:-1]):
            continue
        lt = latch.instructions
        if not lt or not _is_barrier(lt[0]) or not _pure_between(lt[1:-1]):
            continue
        term_l = latch.terminator
        if term_l is None or term_l.opcode != "bra" or term_l.guard is None \
                or term_l.operands[0].name not in header.labels:
            continue
        s_reg = step.s
        # The guard: skip iff tid >= s, for every tid and every power-of-two s.
        setp = _unique_def(fn, term_h, pred_h)
        if setp is None or setp.opcode != "setp" or fn.block_of(setp) is not header:
            continue
        tid_regs = [o.name for o in setp.operands[1:3] if isinstance(o, Reg)
                    and special_source(fn, setp, o.name) == "%tid.x"]
        if len(tid_regs) != 1 or s_reg not in [o.name for o in setp.operands[1:3]
                                                if isinstance(o, Reg)]:
            continue
        if not _guard_is_tid_below_s(setp, pred_h, neg_h, tid_regs[0], s_reg):
            continue
        # The s register the body uses is the one the guard compares with.
        slicer = Slicer(fn)
        s_at_body = slicer.reaching(*slicer.position(step.load_other), s_reg)
        s_at_guard = slicer.reaching(*slicer.position(setp), s_reg)
        if {id(d) for d in s_at_body} != {id(d) for d in s_at_guard}:
            continue
        control = _simulate_control(fn, loop, header, body, latch, setp, s_reg, term_l)
        if control is None:
            continue
        loop_ids = {id(i) for b in loop.blocks for i in b.instructions}
        if live_out(fn, loop_ids):
            continue
        store = step.store
        addr = store.operands[0]
        if not _addr_base_outside(fn, store, addr, loop_ids):
            continue
        if partials == "drop":
            if _uses_cluster_shared(fn):
                continue
            base = _tid_form(accesses[id(store)].affine, step.size)
            syms = _buffer_symbols(fn, _extern_shared(fn), base)
            if syms is None or not _reads_ok_from(fn, exit_block, syms, base, step.size):
                continue
        preheader = control
        static = _static_fast(fn, pow2_64=True)
        value_type = _value_reg_type(step.load_own)

        def apply(fn=fn, step=step, header=header, latch=latch, exit_block=exit_block,
                  setp=setp, s_reg=s_reg, term_l=term_l, preheader=preheader, static=static,
                  addr=addr, value_type=value_type):
            em = _Emitter(fn, step.size, value_type)
            exit_label = label_of_block(fn, exit_block)
            if static:
                f = None
            else:
                f = em.fast_predicate(pow2_64=True)
                anchor = preheader.terminator
                if anchor is not None:
                    fn.insert_before(anchor, em.out)
                else:
                    fn.insert_after(preheader.instructions[-1], em.out)
                em.out = []
            # s of the current iteration, taken where the guard reads it
            wide = type_size(setp.type) == 8
            scur = em.reg(".b64" if wide else ".b32")
            fn.insert_after(setp, I("mov", "b64" if wide else "b32", scur, Reg(s_reg)))
            cmp_mods = (".ne", ".u64" if wide else ".u32")
            # leave the loop after the s = 32 step on the fast path
            k = em.reg(".pred")
            cont = em.reg(".pred")
            seq = [Instruction("setp", cmp_mods, (k, scur, Imm("32"))) if f is None else
                   Instruction("setp", (cmp_mods[0], ".or", cmp_mods[1]),
                               (k, scur, Imm("32"), Neg(f)))]
            g = term_l.guard
            if g.negated:
                seq += [I("not", "pred", cont, g.reg), I("and", "pred", cont, cont, k)]
            else:
                seq.append(I("and", "pred", cont, g.reg, k))
            fn.insert_before(term_l, seq)
            new_term = term_l.with_(guard=Guard(cont))
            fn.replace(term_l, new_term)
            em2 = _Emitter(fn, step.size, value_type)
            if f is not None:
                em2.emit(bra(exit_label, Guard(f, negated=True)))
            end = fn.new_label("ws_bar")
            _barrier_tail(fn, [_as_const(step, s) for s in TAIL_STEPS], addr, partials,
                          latch.instructions[0], em2, end)
            fn.insert_after(new_term, em2.out)

        return _Match("loop", "barrier loop: steps s = 16..1 (with their 5 barriers) moved "
                      f"out of the loop into shfl.sync.down ({partials} partials"
                      f"{'' if static else ', versioned on a 1-D power-of-two block of >= 64 threads'})",
                      apply, [i for b in loop.blocks for i in b.instructions])
    return None


def _version_entry(fn, em: "_Emitter", static: bool) -> str:
    """Start a rewrite: a fresh label for the original code and, unless the fast path is
    proven for every launch (``static``), a branch there when the fast predicate fails."""
    orig = fn.new_label("ws_orig")
    if not static:
        f = em.fast_predicate(pow2_64=False)
        em.emit(bra(orig, Guard(f, negated=True)))
    return orig


def _place(fn, em: "_Emitter", region: list, copies: list, static: bool, orig: str, after: str,
           *, label_after: bool) -> None:
    """End a rewrite of ``region`` (the unrolled and volatile matchers): emit the copies of
    values the region leaves behind, then either replace the region (``static``) or put the
    fast path before it, jumping to ``after`` (a new label placed after the region when
    ``label_after``, else an existing one) while the original code stays at ``orig``."""
    em.emit(*copies)
    if static:
        fn.insert_before(region[0], em.out)
        for inst in region:
            fn.remove(inst)
        return
    em.emit(bra(after, uni=True), Label(orig))
    fn.insert_before(region[0], em.out)
    if label_after:
        fn.insert_after(region[-1], Label(after))


def _as_const(step: TreeLevel, s: int) -> TreeLevel:
    return TreeLevel(step.load_own, step.load_other, step.op, step.store, step.size, s)


def _reads_ok_from(fn, block, syms, base, size) -> bool:
    return all(_reads_ok(fn, b.instructions, syms, base, size)
               for b in reachable_blocks(fn, [block]))


def _unique_def(fn, at: Instruction, reg: str) -> Instruction | None:
    defs = fn.def_use.definitions(at, reg)
    if len(defs) != 1 or defs[0] == ENTRY or defs[0].guard is not None:
        return None
    return defs[0]


def _guard_is_tid_below_s(setp: Instruction, pred: str, negated: bool, tid_reg: str,
                          s_reg: str) -> bool:
    """The branch on ``pred`` (defined by ``setp``) is taken exactly when tid >= s."""
    if len(setp.operands) != 3:
        return False
    for tid in range(MAX_TID):
        for k in range(11):
            s = 1 << k
            try:
                p = int_eval(setp, {tid_reg: tid, s_reg: s})[pred]
            except (Unknown, KeyError):
                return False
            if (p != negated) != (tid >= s):
                return False
    return True


def _simulate_control(fn, loop, header, body, latch, setp, s_reg, term_l):
    """Run the loop's control for every power-of-two %ntid.x in 64..1024 (1-D block) and
    check that the guard sees s = ntid/2, ..., 2, 1 and then the loop exits. Returns the
    preheader, or None."""
    outside_preds = [p for p in fn.cfg.predecessors(header) if p not in loop.blocks]
    if len(outside_preds) != 1:
        return None
    pre = outside_preds[0]
    body_defs = {r.name for i in body.instructions for r in isa.defs(i)}
    control_uses = {r.name for b in (header, latch) for i in b.instructions for r in isa.uses(i)
                    if not r.is_special}
    if body_defs & control_uses:
        return None
    slicer = Slicer(fn)
    blocks = fn.blocks
    for k in range(6, 11):
        n = 1 << k
        env0 = {"%ntid.x": n, "%ntid.y": 1, "%ntid.z": 1}
        term = pre.terminator
        try:
            if term is not None and term.guard is not None:
                p = bool(evaluate_slice(slicer.slice_before(term, term.guard.reg.name, tuple(env0)),
                                        term.guard.reg.name, env0))
                taken = p != term.guard.negated
                goes = (term.operands[0].name in header.labels) if taken else \
                    (blocks.index(header) == blocks.index(pre) + 1)
                if not goes:
                    return None
            elif term is not None and (term.opcode != "bra" or term.operands[0].name not in header.labels):
                return None
            elif term is None and blocks.index(header) != blocks.index(pre) + 1:
                return None
        except Unknown:
            return None
        env = dict(env0)
        for name in control_uses:
            try:
                order = slicer.slice_at(pre, len(pre.instructions), name, tuple(env0))
                env[name] = evaluate_slice(order, name, env0)
            except Unknown:
                pass
        seen = []
        for _ in range(64):
            env = _run_block(header, env, upto=setp)
            if s_reg not in env:
                return None
            seen.append(env[s_reg])
            env = _run_block(header, env, start=setp)
            env = _run_block(latch, env)
            g = term_l.guard
            if g.reg.name not in env:
                return None
            if bool(env[g.reg.name]) == g.negated:
                break
        else:
            return None
        if seen != [n >> j for j in range(1, k + 1)]:
            return None
    return pre


def _run_block(block, env, upto=None, start=None):
    env = dict(env)
    insts = block.instructions
    if start is not None:
        insts = insts[insts.index(start):]
    for inst in insts:
        if upto is not None and inst is upto:
            break
        if inst.opcode in ("bra", "bar", "barrier"):
            continue
        try:
            env.update(int_eval(inst, env))
        except Unknown:
            for r in isa.defs(inst):
                env.pop(r.name, None)
    return env


# --------------------------------------------------------------------------- the pass


def _may_have_steps(fn) -> bool:
    """Cheap syntactic filter before any analysis: some ``st.shared [A], v`` whose ``v`` an
    ``OP`` of two ``ld.shared`` results computed shortly before (same straight stretch)."""
    window: list[Instruction] = []
    for s in fn.body:
        if isinstance(s, Label):
            window = []
            continue
        if not isinstance(s, Instruction):
            continue
        if s.opcode == "st" and s.space in (".shared", ".shared::cta") and len(s.operands) == 2 \
                and isinstance(s.operands[1], Reg):
            v = s.operands[1]
            for op in window:
                if op.opcode in OPS and op.operands and op.operands[0] == v and len(op.operands) == 3:
                    srcs = set(op.operands[1:])
                    loaded = {w.operands[0] for w in window if w.opcode == "ld"
                              and w.space in (".shared", ".shared::cta") and w.operands}
                    if srcs <= loaded:
                        return True
        window.append(s)
        if len(window) > 24:
            window.pop(0)
    return False




@register(
    name="warp-shuffle-reduction",
    order=30,
    summary="last steps (s = 16..1) of shared-memory tree reductions through shfl.sync.down, "
            "same operation order (bit-identical)",
    assumes="step addresses sdata[tid] / sdata[tid+s] proven by affine analysis; guards "
            "'tid < s' and loop control proven by evaluation over every tid and power-of-two "
            "block size; a 1-D block of >= 32 threads (>= 64, power of two, for the loop form) "
            "checked at run time unless .reqntid proves it, the original steps kept as the "
            "other path; partials=drop only where nothing after the tail reads sdata[1..]",
    params={"partials": ["keep", "drop"]},
)
def warp_shuffle_reduction(fn, *, partials: str = "keep") -> list[Change]:
    if partials not in ("keep", "drop"):
        raise ValueError(f"partials must be 'keep' or 'drop', not {partials!r}")
    if fn.is_declaration or not _may_have_steps(fn):
        return []
    changes: list[Change] = []
    skip: set = set()
    keep_alive: list = []
    for _ in range(16):
        accesses = {id(a.inst): a for a in fn.memory_accesses}
        match = None
        for matcher in (_match_unrolled, _match_volatile, _match_loop):
            match = matcher(fn, partials, accesses, skip)
            if match is not None:
                break
        if match is None:
            break
        keep_alive.extend(match.original)
        skip.update(id(i) for i in match.original)
        match.apply()
        changes.append(Change(match.description, match.original[0] if match.original else None))
    return changes
