"""stage-row-loads: a loop in which each thread walks its own row (``for j: acc += A[row*n + j]
* x[j]``, per-row sum/max/mean/variance loops) loads, chunk by chunk, the tile its block reads
through shared memory with coalesced loads.

**Status (2026-12-02): not in the search's default set** (``default=False``; run it by naming it in
``NVCC_PLUS_PASSES``). On the H200 the judge rejected every staged kernel of
tests/passes/test_stage_row_loads_gpu.py (one wrong row in a block whose other threads return
before the loop) and the staged kernels ran 3-6x slower than nvcc's (two barriers and a round
trip of addresses through shared memory per chunk of 32 elements cost more than the coalescing
gains). The CPU emulator ran them bit-identical to nvcc's; since 2026-12-02 (evening) the judge
rejects them on the CPU too: lanes of one warp wait at different barrier instructions (the drain
path's and the chunk loop's) where rows run out inside a warp, which is what the H200 got wrong
(superopt.judge.check, "barriers at one instruction"). A fix would keep a warp's lanes at one
barrier instruction: drain inside the chunk loop itself (a thread with no rows left runs the
loop's own barriers with nothing to load) instead of on a path of its own.

One thread per row: at every iteration the 32 lanes of a warp load from 32 different rows, 32
sectors for 32 useful words. This pass restructures one loop of the kernel, for the block
shape the program launches (``block``, from the launch spec), into a *chunk loop* that every
thread of the block runs together. Per chunk of ``C`` iterations of the PTX loop (``E = K*C``
elements per thread for ``K`` staged loads per iteration):

* ZERO: each thread sets its ``E`` address slots (a padded row of a shared address array) to 0
  ("not loaded").
* PHASE A (addresses; active threads only): a copy of the loop's *control slice* (every
  instruction of the loop that a branch, a staged load's address or a staged load's guard
  depends on, transitively through the def-use graph inside the loop) on renamed registers,
  copied from the real ones at the chunk's start, runs up to ``C`` iterations; staged load
  ``k`` of iteration ``i`` becomes ``[g] st.shared.u64 [slot i*K + k], a + 1``. Nothing else of
  the loop runs (no load, no arithmetic on values).
* ``barrier.red.or.pred any, 0, active``: when no thread of the block has iterations left, the
  chunk loop ends here, for every thread at once.
* EXCHANGE: writer slot ``W = u*T + lin`` (u < E) reads the address slot of owner thread
  ``W / E``, element ``W % E`` (the owner's slots are a row: the 32 lanes of a warp read 32
  consecutive elements of one or a few rows, so the global loads are coalesced), and when it is
  not 0 loads it (``ld.global`` with the original type and modifiers) into the owner's value
  slot; ``barrier.sync 1``.
* PHASE B (the loop itself; active threads only): the original loop code on the original
  registers runs up to ``C`` iterations; each staged load becomes ``[g] ld.shared`` of its own
  value slot; every other instruction runs as written. A thread whose loop exits becomes
  inactive; one that completed ``C`` iterations resumes at the header in the next chunk.

The decision is ``barrier.red`` on barrier 0, the exchange's end ``barrier.sync`` on barrier 1:
a thread at one while another of its block waits at the other is then a mismatch a checker
can see (the emulator refuses to run it) instead of two different barriers completing each
other. Two barriers a chunk suffice: the next chunk's ZERO/PHASE A write address slots the exchange
read before the ``barrier.sync`` that every thread passed first; its exchange writes value slots
that phase B read before the next ``barrier.red`` that every thread passes first.

The arrays are padded (one slot per thread row: ``E + 1`` slots a thread) so that the lanes of a
warp reading their own slot ``e`` in phase B hit distinct banks. A block-uniform test
``%ntid == block`` at entry runs nvcc's original code, kept as a copy, for any other block.

Every thread of the block takes part in every chunk (the barriers need all of them): a thread
entering the loop's header enters the chunk loop active; every ``ret``/``exit`` of the
rewritten body becomes a jump to a stub that, for a thread that has not been through the chunk
loop (it returned before the loop, e.g. ``if (row >= m) return;``, or skipped it: ``n < 4`` for
an unrolled loop, a per-thread trip count of 0), runs an *inactive copy* of the chunk loop (per
chunk: zero its slots, ``barrier.red.or.pred`` with false, its share of the exchange,
``barrier.sync``) before it returns. The copy reads none of the kernel's
registers, so no path of the rewritten kernel reads a register nvcc's code leaves unwritten (the
judge's static def-use check sees every path, not the flags that rule them out). The barriers are the
non-``.aligned`` ``barrier.sync``/``barrier.red`` (sm_70+): the threads of a warp reach them
from diverged paths. Since the loop is in no other cycle, a thread runs the chunk loop exactly
once, and ``barrier.red`` gives every thread the same answer, so all of them run the same number
of chunks and barriers.

Design: inspector/executor (like stage-loads), not affine. The loads are performed at the
addresses each thread itself computes (phase A records them), so correctness does not rest on
the affine model of the address (an overflowing index, a ``min``-clamped trip count, rows past
the end, tails, per-thread trip counts are all what the thread computes); the affine analysis
only decides *where* the pass applies (a load whose first address is strided across the
block's fastest thread dimension and whose address steps by the bytes its group of loads reads
per iteration). The affine design would save the address array (a third of the shared
memory), at the price of trusting the analysis for soundness.

Why results stay the same:
* Phase A computes, for one thread, exactly the branch decisions, guards and addresses of the
  loop's next ``C`` iterations: the slice is closed under reaching definitions inside the loop
  and contains no memory access (checked), so it is a function of the registers at the chunk's
  start (copied) and of registers the loop does not write (read as they are). So slot
  ``i*K + k`` is non-zero exactly when iteration ``i`` of the chunk executes staged load ``k``,
  and holds its address. (Each instruction of an innermost loop runs at most once per
  iteration.)
* The exchange performs each of those loads once (``W -> (W / E, W % E)`` is a bijection onto
  the slots), at the owner's address with the owner's type and modifiers, and no other load:
  only elements nvcc's code loads are read (no tail or out-of-row reads). Phase B hands each
  load its own value, and otherwise runs nvcc's instructions in nvcc's order on nvcc's
  registers: the same arithmetic in the same order, bit for bit.
* Moving the loads: the loop has no store, atomic or other side effect (checked; a loop that
  stores, e.g. an accumulator in global memory, is refused: it could alias the rows), so within
  a thread the loads only move earlier past instructions that touch no memory. The owner's
  earlier stores (before the loop) precede the barrier, which orders them before the exchange
  for every thread of the block. Another thread's store to an element was not ordered before
  the original load (no barrier in nvcc's kernel): a data race whose outcome the original does
  not define; the value from before or after it is one allowed outcome.
* Registers: phase A writes only its renamed copies and its counters; phase B's registers are
  nvcc's own, as if the loop had run without interruption.

What the pass proves from the IR (else it returns [] and leaves the kernel alone): the kernel
conditions of the staging passes (:func:`~superopt.passes._staging.kernel_eligibility` with
loops allowed: no shared memory, barrier, fence, atomic, call, trap, warp collective, generic
or ordered access; ``.reqntid``/``.maxntid`` consistent); reducible control flow; the loop is
innermost and in no other loop, its blocks are contiguous in the layout with the header first,
it contains no ``ret``/``exit``, store or atomic, every exit goes to one block (fall-through
only from its last block); the control slice contains no memory access; the staged loads are
scalar ``ld.global`` of one 1-, 2-, 4- or 8-byte type and one modifier set, through a 64-bit
register; the block's thread count is a multiple of ``E``, each row segment of a chunk is at
least a 32-byte sector, and the arrays (``T*(E+1)*(width + 8)`` bytes) fit ``MAX_STAGE_BYTES``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import networkx as nx

from ptx_ir import isa
from ptx_ir.affine import Affine
from ptx_ir.dataflow import ENTRY
from ptx_ir.nodes import Addr, Guard, Imm, Instruction, Label, Reg, Sym, VarDecl, type_size
from superopt.passes import Change, register
from superopt.passes._loop_tools import I, bra, register_type
from superopt.passes._staging import (MAX_STAGE_BYTES, TID, Emitter, allowed_atoms, block_test,
                                      kernel_eligibility, linear_index, renamer, retarget,
                                      split_tid, u64_address, value_reg_type)
from superopt.passes._versioning import _map_instruction

__all__ = ["stage_row_loads", "plan_row_staging", "RowPlan", "CHUNKS"]

CHUNKS = (32, 16, 8, 4)          # elements per thread and chunk, largest that fits first
MAX_STAGED = 16                  # staged loads per iteration
LOAD_MODIFIERS_OK = frozenset({".nc", ".ca", ".cg", ".cs", ".lu",
                               ".L1::evict_normal", ".L1::evict_unchanged", ".L1::evict_first",
                               ".L1::evict_last", ".L1::no_allocate",
                               ".L2::64B", ".L2::128B", ".L2::256B"})


@dataclass(eq=False)
class RowPlan:
    block: tuple
    loop: object
    loads: list                  # staged loads, in layout order (k = index)
    width: int
    type: str
    modifiers: tuple
    elements: int                # E: elements per thread and chunk
    exit_block: object
    start: int                   # the loop's statements: code[start:end]
    end: int
    slice_ids: set = field(default_factory=set)
    renamed: list = field(default_factory=list)        # registers phase A renames
    groups: list = field(default_factory=list)         # (iv, bytes per iteration, lane stride)
    live_in: list = field(default_factory=list)        # renamed registers copied at a chunk's start

    @property
    def threads(self) -> int:
        return math.prod(self.block)

    @property
    def k(self) -> int:
        return len(self.loads)

    @property
    def iterations(self) -> int:
        return self.elements // self.k

    @property
    def shared_bytes(self) -> int:
        return self.threads * (self.elements + 1) * (self.width + 8)


# --------------------------------------------------------------------------- analysis

def _reducible(fn) -> bool:
    g = fn.cfg.copy()
    for loop in fn.loops:
        for latch in loop.latches:
            if g.has_edge(latch, loop.header):
                g.remove_edge(latch, loop.header)
    return nx.is_directed_acyclic_graph(g)


def _row_walk(m, block, width):
    """(group key, first offset, bytes per iteration, lane stride) of a load whose address is
    ``first + iteration * step`` with ``first`` affine in the launch and parameters; else None."""
    aff = m.affine
    if aff is None:
        return None
    ivs = [a for a in aff.atoms() if a.startswith("iv:")]
    if len(ivs) != 1 or ivs[0] not in m.recurrences:
        return None
    iv = ivs[0]
    c, rest = None, Affine()
    for mono, coef in aff.terms:
        if iv in mono:
            if mono != (iv,):
                return None
            c = coef
        else:
            rest = rest + Affine(((mono, coef),))
    init, step = m.recurrences[iv]
    if c is None or not step.is_constant:
        return None
    first = rest + init.scale(c)
    if not allowed_atoms(first):
        return None
    per_iter = c * step.constant
    split = split_tid(first, block)
    if split is None:
        return None
    coeff, _ = split
    lane = next((coeff[t] for t, n in zip(TID, block) if n > 1), Affine())
    key = (iv, first - Affine.const(first.constant))
    return key, first.constant, per_iter, lane


def _is_strided(lane: Affine, width: int) -> bool:
    """Whether neighbouring lanes are a sector or more apart (or a parameter apart)."""
    if not lane.is_constant:
        return True
    return abs(lane.constant) >= 32 and abs(lane.constant) != width


def _loop_range(code, loop) -> tuple[int, int] | None:
    blocks = sorted(loop.blocks, key=lambda b: b.index)
    idx = [b.index for b in blocks]
    if idx != list(range(idx[0], idx[0] + len(idx))) or blocks[0] is not loop.header:
        return None
    labels = set(loop.header.labels)
    last = blocks[-1].instructions[-1] if blocks[-1].instructions else None
    start = next((n for n, s in enumerate(code) if isinstance(s, Label) and s.name in labels), None)
    end = next((n for n, s in enumerate(code) if s is last), None)
    if start is None or end is None or end < start:
        return None
    # every instruction in the range belongs to the loop, and every loop instruction is in it
    inside = {id(i) for b in blocks for i in b.instructions}
    in_range = [s for s in code[start:end + 1] if isinstance(s, Instruction)]
    if len(in_range) != len(inside) or any(id(s) not in inside for s in in_range):
        return None
    return start, end + 1


def _slice(fn, loop, staged) -> tuple[set | None, str]:
    """ids of the loop's instructions that branches, staged addresses and guards depend on."""
    du = fn.def_use
    in_loop = {id(i): i for b in loop.blocks for i in b.instructions}
    staged_ids = {id(s) for s in staged}
    work = []
    for inst in in_loop.values():
        if inst.opcode == "bra":
            if inst.guard is not None:
                work.append((inst, inst.guard.reg.name))
        elif id(inst) in staged_ids:
            if inst.guard is not None:
                work.append((inst, inst.guard.reg.name))
            a = isa.address_operand(inst)
            work.append((inst, a.base.name))
    out: set = set()
    while work:
        inst, name = work.pop()
        if Reg(name).is_special:
            continue
        for d in du.definitions(inst, name):
            if d == ENTRY or id(d) not in in_loop or id(d) in out:
                continue
            if isa.touches_memory(d) or d.opcode in ("bar", "barrier", "call"):
                return None, (f"{d.name}: a branch, guard or staged address in the loop depends on a "
                              f"value loaded in the loop")
            out.add(id(d))
            for r in isa.uses(d):
                work.append((d, r.name))
    return out, ""


def _analyse_loop(fn, loop, block, code, chunk) -> tuple[RowPlan | None, str]:
    if loop.children:
        return None, "not an innermost loop"
    if loop.parent is not None:
        return None, "the loop is inside another loop"
    rng = _loop_range(code, loop)
    if rng is None:
        return None, "the loop's blocks are not contiguous from its header"
    insts = [i for b in sorted(loop.blocks, key=lambda b: b.index) for i in b.instructions]
    for i in insts:
        if i.opcode in ("ret", "exit", "trap", "brx"):
            return None, f"{i.name} inside the loop"
        if isa.is_store(i) or i.opcode in ("atom", "red") or (isa.touches_memory(i) and not isa.is_load(i)):
            return None, (f"{i.name} in the loop: a store could alias the staged rows (not versioned "
                          f"behind a no-alias check)")
    exits = {s for _, s in loop.exits}
    if len(exits) != 1:
        return None, "the loop has no exit or exits to several blocks"
    (exit_block,) = exits
    last = max(loop.blocks, key=lambda b: b.index)
    for b, s in loop.exits:
        kind = fn.cfg.edges[b, s].get("kind")
        if kind == "fallthrough" and b is not last:
            return None, "the loop falls through out of a middle block"
    # staged loads: row walks
    accesses = {id(m.inst): m for m in fn.memory_accesses}
    groups: dict = {}
    for i in insts:
        if not (isa.is_load(i) and i.opcode == "ld" and i.space == ".global"):
            continue
        m = accesses.get(id(i))
        width = type_size(i.type) if i.type else 0
        if m is None or i.vector_width != 1 or width not in (1, 2, 4, 8):
            continue
        walk = _row_walk(m, block, width)
        if walk is None:
            continue
        key, off, per_iter, lane = walk
        if not _is_strided(lane, width):
            continue
        groups.setdefault(key, []).append((i, off, per_iter, lane))
    staged, desc = [], []
    for key, members in groups.items():
        width = type_size(members[0][0].type)
        offs = sorted(o for _, o, _, _ in members)
        per_iter = members[0][2]
        if len({p for _, _, p, _ in members}) != 1 or per_iter != len(offs) * width \
                or offs != [offs[0] + n * width for n in range(len(offs))]:
            continue                    # not contiguous along the loop: not a row walk
        staged += [i for i, _, _, _ in members]
        desc.append((key[0], per_iter, members[0][3]))
    if not staged:
        return None, "no global load walks a row (strided across the threads, contiguous along the loop)"
    staged.sort(key=lambda i: insts.index(i))
    first = staged[0]
    width = type_size(first.type)
    if len(staged) > MAX_STAGED:
        return None, "too many staged loads per iteration"
    for ld in staged:
        if ld.type != first.type or ld.modifiers != first.modifiers:
            return None, "the staged loads differ in type or modifiers"
        if set(ld.modifiers) - {".global", first.type} - LOAD_MODIFIERS_OK:
            return None, f"{ld.name}: unexpected modifier"
        if not u64_address(fn, ld) or not isinstance(ld.operands[0], Reg) \
                or register_type(fn, ld.operands[0].name) in (None, ".pred"):
            return None, "a staged load's address or destination is not a plain register"
    sl, why = _slice(fn, loop, staged)
    if sl is None:
        return None, why
    renamed = []
    for i in insts:
        if id(i) in sl:
            for r in isa.defs(i):
                t = register_type(fn, r.name)
                if t is None:
                    return None, f"{i.name}: a register of the loop's control is not declared plainly"
                if r.name not in renamed:
                    renamed.append(r.name)
    # the renamed registers phase A must copy at a chunk's start: those a slice instruction
    # can read with a value from before the loop (or from a previous iteration, which then
    # also has one from before the loop); the others it writes before it reads them
    du = fn.def_use
    in_loop = {id(i) for i in insts}
    live_in = []
    for i in insts:
        if id(i) not in sl and id(i) not in {id(s) for s in staged} and i.opcode != "bra":
            continue
        for r in isa.uses(i):
            if r.name in renamed and r.name not in live_in and any(
                    d == ENTRY or id(d) not in in_loop for d in du.definitions(i, r.name)):
                live_in.append(r.name)
    t = math.prod(block)
    k = len(staged)
    why = "no chunk fits (block size a multiple of the chunk, a 32-byte sector per row, the shared-memory budget)"
    for e in ([chunk] if chunk else CHUNKS):
        if e % k or t % e:
            continue
        c = e // k
        if any(c * per_iter < 32 for _, per_iter, _ in desc):
            continue
        plan = RowPlan(block, loop, staged, width, first.type, first.modifiers, e, exit_block,
                       rng[0], rng[1], sl, renamed, desc, live_in)
        if plan.shared_bytes > MAX_STAGE_BYTES:
            why = "the staging arrays would exceed the shared-memory budget"
            continue
        return plan, ""
    return None, why


def plan_row_staging(fn, block, chunk=None) -> tuple[RowPlan | None, str]:
    """The plan for ``fn`` launched with ``block`` (the loop with the most staged loads), or
    (None, why not)."""
    block, _order, why = kernel_eligibility(fn, block, loops_ok=True)
    if block is None:
        return None, why
    if not fn.loops:
        return None, "the kernel has no loop"
    if not _reducible(fn):
        return None, "irreducible control flow"
    code = [s for s in fn.body if not isinstance(s, VarDecl)]
    best, whys = None, []
    for loop in sorted(fn.loops, key=lambda l: l.header.index):
        plan, why = _analyse_loop(fn, loop, block, code, chunk)
        if plan is None:
            whys.append(f"loop at {loop.header.name}: {why}")
        elif best is None or plan.k > best.k:
            best = plan
    if best is None:
        return None, "; ".join(whys)
    return best, ""


# --------------------------------------------------------------------------- the rewrite

def _true(em, p, lin):
    em(I("setp", ".eq.u32", p, lin, lin))


def _false(em, p, lin):
    em(I("setp", ".ne.u32", p, lin, lin))


def stage_row_loads_rewrite(fn, plan: RowPlan) -> list[Change]:
    code = [s for s in fn.body if not isinstance(s, VarDecl)]
    loop = plan.loop
    header_labels = set(loop.header.labels)
    loop_labels = {l for b in loop.blocks for l in b.labels}
    exit_labels = list(plan.exit_block.labels)
    exit_first = plan.exit_block.instructions[0] if plan.exit_block.instructions else None
    load_index = {id(s): n for n, s in enumerate(plan.loads)}
    reg_types = {r: register_type(fn, r) for r in plan.renamed}
    # (analysis above; new registers invalidate the function's blocks from here)
    e, k, w, t = plan.elements, plan.k, plan.width, plan.threads
    c = plan.iterations
    row = e + 1                                   # slots per thread, one of padding
    vals = "__np_" + fn.new_label("rowstage_vals").lstrip("$").replace("Lnp_", "")
    adrs = "__np_" + fn.new_label("rowstage_addrs").lstrip("$").replace("Lnp_", "")
    lab = {n: fn.new_label(f"rowstage_{n}") for n in
           ("orig", "coll", "chunk", "done", "a_latch", "a_end", "b_latch", "b_exit", "b_end", "ret_stub",
            "real_ret", "exit")}
    taken = {s.name for s in code if isinstance(s, Label)} | set(lab.values())
    ren_s = renamer(code, taken, "rowstage_s")
    loop_code = code[plan.start:plan.end]
    ren_a = renamer(loop_code, taken, "rowstage_a")
    ren_b = renamer(loop_code, taken, "rowstage_b")
    head_a = ren_a[sorted(header_labels)[0]]
    head_b = ren_b[sorted(header_labels)[0]]
    exit_label = ren_s[exit_labels[0]] if exit_labels else lab["exit"]

    # --- prologue: block test, the thread's slot bases, flags
    pro = Emitter(fn)
    block_test(pro, plan.block, lab["orig"])
    lin = linear_index(pro, plan.block)

    def base_of(em, array, scale_slots, size):
        b, r = em.reg(".u32"), em.reg(".u32")
        em(I("mov", ".u32", b, Sym(array)), I("mad", ".lo.s32", r, scale_slots, size, b))
        return r

    base_a = base_of(pro, adrs, lin, row * 8)
    base_v = base_of(pro, vals, lin, row * w)
    q, s0 = pro.reg(".u32"), pro.reg(".u32")
    pro(I("shr", ".b32", q, lin, e.bit_length() - 1), I("add", ".s32", s0, lin, q))   # W + W/E at u = 0
    xa = base_of(pro, adrs, s0, 8)
    xv = base_of(pro, vals, s0, w)
    done, active, anyp = (pro.reg(".pred") for _ in range(3))
    _false(pro, done, lin)
    zero = pro.reg(".u64")
    pro(I("mov", ".u64", zero, 0))

    vtype = value_reg_type(w)
    step = t + t // e

    def exchange(em):
        """Writer slot u*T + lin: the owner's address slot, then its value slot (a run of a row)."""
        for u in range(e):
            a, v, pf = em.reg(".b64"), em.reg(vtype), em.reg(".pred")
            em(I("ld", ".shared.u64", a, Addr(xa, u * step * 8 or None)),
               I("setp", ".ne.b64", pf, a, 0),
               I("add", ".s64", a, a, -1),
               Instruction("ld", plan.modifiers, (v, Addr(a)), Guard(pf)),
               I("st", f".shared{plan.type}", Addr(xv, u * step * w or None), v, guard=Guard(pf)))

    def zero_slots(em):
        for n in range(e):
            em(I("st", ".shared.u64", Addr(base_a, n * 8 or None), zero))

    # --- the chunk loop, placed where the loop was
    co = Emitter(fn)
    for name in sorted(header_labels):
        co(Label(ren_s[name]))
    _true(co, active, lin)
    co(Label(lab["chunk"]))
    zero_slots(co)
    co(bra(lab["a_end"], Guard(active, negated=True)))
    # phase A
    rmap = {r: co.reg(reg_types[r]).name for r in plan.renamed}
    for r in plan.live_in:
        co(I("mov", reg_types[r], Reg(rmap[r]), Reg(r)))
    ia, pa = co.reg(".u32"), co.reg(".u32")
    co(I("mov", ".u32", ia, 0), I("mov", ".u32", pa, base_a))

    def target(inst, header_to, exit_to, ren):
        name = inst.operands[0].name
        new = header_to if name in header_labels else ren[name] if name in loop_labels else exit_to
        mods = tuple(m for m in inst.modifiers if m != ".uni" or inst.guard is None)
        return inst.with_(operands=(Sym(new),) + tuple(inst.operands[1:]), modifiers=mods)

    for s in loop_code:
        if isinstance(s, Label):
            co(Label(ren_a[s.name]))
            continue
        if not isinstance(s, Instruction):
            continue
        if s.opcode == "bra":
            co(_map_instruction(target(s, lab["a_latch"], lab["a_end"], ren_a), rmap, {}))
            continue
        n = load_index.get(id(s))
        if n is not None:
            g = s.guard
            if g is not None and g.reg.name in rmap:
                g = Guard(Reg(rmap[g.reg.name]), g.negated)
            a = isa.address_operand(s)
            base = Reg(rmap.get(a.base.name, a.base.name))
            ea = co.reg(".b64")
            co(I("add", ".s64", ea, base, (a.offset or 0) + 1, guard=g),
               I("st", ".shared.u64", Addr(pa, n * 8 or None), ea, guard=g))
            continue
        if id(s) in plan.slice_ids:
            co(_map_instruction(s, rmap, {}))
    co(bra(lab["a_end"]))
    pq = co.reg(".pred")
    co(Label(lab["a_latch"]),
       I("add", ".s32", ia, ia, 1), I("add", ".s32", pa, pa, 8 * k),
       I("setp", ".lt.u32", pq, ia, c), bra(head_a, Guard(pq)))
    co(Label(lab["a_end"]),
       Instruction("barrier", (".red", ".or", ".pred"), (anyp, Imm("0"), active)),
       bra(lab["done"], Guard(anyp, negated=True)))
    exchange(co)
    co(Instruction("barrier", (".sync",), (Imm("1"),)))
    # phase B
    co(bra(lab["b_end"], Guard(active, negated=True)))
    ib, pb = co.reg(".u32"), co.reg(".u32")
    co(I("mov", ".u32", ib, 0), I("mov", ".u32", pb, base_v))
    for s in loop_code:
        if isinstance(s, Label):
            co(Label(ren_b[s.name]))
            continue
        if not isinstance(s, Instruction):
            co(s)
            continue
        if s.opcode == "bra":
            co(target(s, lab["b_latch"], lab["b_exit"], ren_b))
            continue
        n = load_index.get(id(s))
        if n is not None:
            co(I("ld", f".shared{plan.type}", s.operands[0], Addr(pb, n * w or None), guard=s.guard))
            continue
        co(s.copy())
    co(bra(lab["b_exit"]))
    pq = co.reg(".pred")
    co(Label(lab["b_latch"]),
       I("add", ".s32", ib, ib, 1), I("add", ".s32", pb, pb, w * k),
       I("setp", ".lt.u32", pq, ib, c), bra(head_b, Guard(pq)), bra(lab["b_end"]))
    co(Label(lab["b_exit"]))
    _false(co, active, lin)
    co(Label(lab["b_end"]), bra(lab["chunk"]), Label(lab["done"]))
    _true(co, done, lin)
    co(bra(exit_label))

    # --- the rest of the body, labels renamed, every return through the stub
    staged: list = []
    for n, s in enumerate(code):
        if n == plan.start:
            staged += co.out
        if plan.start <= n < plan.end:
            continue
        if not exit_labels and s is exit_first:
            staged.append(Label(lab["exit"]))
        if isinstance(s, Label):
            staged.append(Label(ren_s[s.name]))
        elif isinstance(s, Instruction) and s.opcode == "bra":
            staged.append(retarget(s.copy(), ren_s))
        elif isinstance(s, Instruction) and s.opcode in ("ret", "exit"):
            staged.append(bra(lab["ret_stub"], s.guard))
        elif isinstance(s, Instruction):
            staged.append(s.copy())
        else:
            staged.append(s)
    # a thread on its way out that has not been through the chunk loop: its own copy of the
    # chunk loop, inactive (it zeroes its slots and performs its share of the exchange; it
    # reads none of the kernel's registers), then the return
    stub = Emitter(fn)
    stub(Label(lab["ret_stub"]), bra(lab["real_ret"], Guard(done)))
    no, more = stub.reg(".pred"), stub.reg(".pred")
    _false(stub, no, lin)
    stub(Label(lab["coll"]))
    zero_slots(stub)
    stub(Instruction("barrier", (".red", ".or", ".pred"), (more, Imm("0"), no)),
         bra(lab["real_ret"], Guard(more, negated=True)))
    exchange(stub)
    stub(Instruction("barrier", (".sync",), (Imm("1"),)), bra(lab["coll"]),
         Label(lab["real_ret"]), Instruction("ret", (), ()))

    decls = [s for s in fn.body if isinstance(s, VarDecl)]
    arrays = [VarDecl(space=".shared", type=".b8", name=vals, align=8, dims=(t * row * w,)),
              VarDecl(space=".shared", type=".b8", name=adrs, align=8, dims=(t * row * 8,))]
    fn.body = decls + arrays + pro.out + staged + stub.out + [Label(lab["orig"])] + code
    fn.invalidate()
    fn.validate()
    per_sm = (228 * 1024) // (plan.shared_bytes + 1024)       # sm_90: 228 KB a SM, 1 KB reserved a block
    walks = ", ".join(f"{per} bytes an iteration from {iv[3:]}" for iv, per, _ in plan.groups)
    return [Change(f"stage-row-loads: {k} row-walking ld.global{plan.type} per iteration of the loop at "
                   f"{loop.header.name} ({walks}) staged in chunks of {c} iterations ({e} elements per "
                   f"thread) through {plan.shared_bytes} bytes of shared memory for block "
                   f"{plan.block[0]}x{plan.block[1]}x{plan.block[2]} (on sm_90 at most {per_sm} blocks, "
                   f"{per_sm * t} threads, a SM by shared memory); 2 barriers per chunk, every thread "
                   f"of the block takes part; other block shapes run nvcc's code", plan.loads[0])]


@register(
    name="stage-row-loads",
    order=14,
    # Not in the default set: on the H200 (2026-12-02, tests/passes/test_stage_row_loads_gpu.py)
    # the judge rejected every staged kernel (one wrong row in a block where one thread has a row
    # and the others return first), and the staged kernels ran 3-6x slower than nvcc's.
    default=False,
    launch_params={"block": "timed_block"},
    summary="coalesce one-thread-per-row loop walks (row matvec, per-row sum/max/mean/variance) by "
            "loading each chunk of the block's rows through shared memory with coalesced loads",
    assumes=("block (from the launch spec) is the block the rewrite is specialised for; a runtime "
             "%ntid test runs the original code for any other. Proves from the IR: no shared memory, "
             "barrier, atomic, fence, call or generic access in the kernel; reducible control flow; "
             "an innermost top-level loop without stores or returns, one exit block; no branch, "
             "guard or staged address depends on a value loaded in the loop (def-use slice); staged "
             "loads scalar ld.global of one type; every thread of the block runs the chunk loop "
             "(returns go through it); sm_70+ (non-aligned barriers)"),
    params={},
)
def stage_row_loads(fn, *, block=None, chunk=None) -> list[Change]:
    plan, _why = plan_row_staging(fn, block, chunk)
    if plan is None:
        return []
    return stage_row_loads_rewrite(fn, plan)
