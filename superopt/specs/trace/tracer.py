"""The bounds tracer: which bytes of which buffer can a kernel touch under one launch?

Launch-spec inference (:mod:`superopt.specs.inference`) needs a *proof* that a buffer of a
given length covers every address the kernel can access for a chosen launch (grid, block,
shared memory, scalar values). This module gives it by abstract execution of the kernel's
integer and address arithmetic for **every thread of the launch**:

* Each thread runs as a *lane* holding, for every integer register, an interval
  ``[lo, hi]`` (int64 arrays across lanes). Values that depend only on the launch and the
  scalar parameters are exact (``lo == hi``), so addresses are exact per thread, however
  nvcc strength-reduced, unrolled or rotated the loops.
* Values that come from memory (buffer contents, shared memory, atomics, shuffles) or from
  floating point are unknown: the whole range of their type, or the range of the input
  distribution the spec will use (``index:0..L``). Floating-point registers hold no
  intervals; only values that are facts of the launch (float parameters, immediates,
  exact integers converted, and ``+ - * /`` of those) are kept exactly, so that a loop
  ``for (float t = 0; t < steps * dt; t += dt)`` has a known trip count.
* A branch on an unknown predicate forks the lane (both paths are explored); the compared
  registers are narrowed on each side (``if (v >= 0 && v < nbins) bins[v]++`` is bounded
  by ``nbins``). Lanes of one thread that meet at a block are merged (interval join).
* A predicated instruction whose guard is unknown counts as executed (its accesses are
  recorded) and its result is joined with the old value.
* Pointer parameters get distinct fake base addresses far apart (module variables, the
  shared window and the local window too), and every value carries the set of pointer
  parameters it was derived from, so an access decodes to *(buffer, byte offset)* only when
  both agree. Anything else (a pointer loaded from memory, a data-dependent index without
  a bound) is reported as an unbounded access, with where the unknown part came from.

Threads are independent here: barriers are no-ops and values that other threads produce
(shared memory, shuffles) are unknown, which is sound for addresses. The result for each
pointer parameter is the lowest and highest byte offset accessed, by loads, stores and
atomics; for shared memory, out-of-bounds accesses and reads of bytes no thread of the
block writes (a launch shape the kernel was not written for) are reported.

The package is split by job: :mod:`.intervals` (the interval arithmetic of canonical w-bit
values), :mod:`.domain` (the lanes' abstract registers: fork, merge, refine),
:mod:`.lanes` (what each instruction does to them), :mod:`.accesses` (the address map and the
bookkeeping of buffer and shared accesses, the results) and this module, the scheduler that
walks the CFG with all lanes and ties them together.

Anything the tracer cannot model soundly (calls, textures, bulk copies, a loop whose exit
depends on data and does not settle within the step budget) ends the trace with a
``problem``; callers then say "not verifiable" with that reason.
"""
from __future__ import annotations

import time

import networkx as nx
import numpy as np

from ptx_ir.nodes import Imm, Reg
from superopt.specs.trace.accesses import (AccessRecorder, BufferAccess, MemoryMap, TraceError,
                                           TraceResult, TraceTimeout)
from superopt.specs.trace.domain import LaneDomain
from superopt.specs.trace.intervals import FLOAT_TYPES, I64, PARAM_STRIDE, _width_of_type
from superopt.specs.trace.lanes import LaneSemantics

__all__ = ["TraceResult", "BufferAccess", "trace", "TraceError", "TraceTimeout", "PARAM_STRIDE", "Tracer"]


class Tracer:
    """Schedules the lanes of every thread of a launch over the CFG (lowest RPO block
    first, so that the lanes of a thread meet where paths join), chunk of CTAs by chunk.
    Holds a :class:`LaneDomain` per chunk (``dom``), the :class:`LaneSemantics` that runs
    instructions on it (``sem``) and one :class:`AccessRecorder` for the launch (``rec``)."""
    MAX_STEPS = 20_000
    MAX_EXIT_FORKS = 1000           # per thread, at one loop-exit branch
    WATCH_LIMIT = 1 << 23           # threads x registers kept per watched loop header
    MAX_LANE_STEPS = 50_000_000
    CHUNK_THREADS = 1 << 16

    def __init__(self, module, fn, grid, block, shared_bytes: int, params: dict,
                 load_ranges: dict | None = None, deadline: float | None = None,
                 hard_deadline: float | None = None):
        """``params``: param index -> ("ptr",) | ("int", value) | ("float",) | ("struct",) |
        ("bytes", value) (a small by-value struct given as the little-endian integer ``value``)
        | ("bytes", value, {offset: j}) (its 8-byte fields at those offsets are pointers: an
        ld.param of one gives the base of *virtual* pointer param j, an index past the kernel's
        params with kind ("ptr", name), recorded like any pointer param).
        ``load_ranges``: param index -> (lo, hi) for values loaded from that buffer.
        ``deadline``: a ``time.monotonic()`` value after which the trace ends with a problem
        (a budget, like the step limits); ``hard_deadline``: one after which it raises
        :class:`TraceTimeout` (checked at every scheduling step)."""
        self.module = module
        self.fn = fn
        self.grid = tuple(int(g) for g in grid)
        self.block = tuple(int(b) for b in block)
        self.shared_bytes = int(shared_bytes)
        self.params = params
        self.deadline = deadline
        self.hard_deadline = hard_deadline
        self.param_index = {p.name: i for i, p in enumerate(fn.params)}
        self.memory = MemoryMap(module, fn, self.shared_bytes)
        self.rec = AccessRecorder(fn, params, dict(load_ranges or {}), self.memory)
        self.lane_steps = 0
        self.steps = 0
        self._reach_cache: dict = {}
        self._setup_registers()
        self._setup_cfg()

    # -- static setup
    def _setup_registers(self):
        widths: dict[str, int] = {}
        tracked: set[str] = set()
        for d in self.fn.reg_decls:
            t = d.type
            for n in d.register_names():
                if t in FLOAT_TYPES:
                    continue
                widths[n] = 1 if t == ".pred" else _width_of_type(t)
                tracked.add(n)
        for p in self.fn.params:
            if p.space == ".reg":
                widths[p.name] = _width_of_type(p.type)
        self.widths = widths
        self.tracked = tracked

    def _setup_cfg(self):
        fn = self.fn
        self.blocks = fn.blocks
        graph = fn.cfg
        order = list(reversed(list(nx.dfs_postorder_nodes(graph, fn.entry_block))))
        self.rpo = {b: i for i, b in enumerate(order)}
        for b in self.blocks:
            self.rpo.setdefault(b, len(self.rpo))
        self.block_by_rpo = {i: b for b, i in self.rpo.items()}
        self.label_block = {name: b for b in self.blocks for name in b.labels}
        self.next_block = {b: (self.blocks[i + 1] if i + 1 < len(self.blocks) else None)
                           for i, b in enumerate(self.blocks)}
        from ptx_ir.cfg import branch_targets
        self.tables = branch_targets(fn.body)
        # Blocks whose branch can leave a loop (a fork there may mean a data-dependent trip count).
        self.exit_blocks: dict = {}
        for loop in fn.loops:
            for inside, _outside in loop.exits:
                self.exit_blocks.setdefault(inside, set()).add(loop.header)
        self.exit_forks: dict = {}


    # -- running
    def run(self) -> TraceResult:
        gx, gy, gz = self.grid
        bx, by, bz = self.block
        bt = bx * by * bz
        nctas = gx * gy * gz
        per_chunk = max(1, self.CHUNK_THREADS // bt)
        if self.memory.shared_total:               # shared-memory bitmaps: 2 bytes per byte per CTA
            per_chunk = max(1, min(per_chunk, (1 << 25) // self.memory.shared_total))
        try:
            for c0 in range(0, nctas, per_chunk):
                c1 = min(nctas, c0 + per_chunk)
                self._run_chunk(c0, c1)
                if self.rec.problems:
                    break
        except TraceError as e:
            self.rec.problems.append(str(e))
        return self.rec.result(lane_steps=self.lane_steps, steps=self.steps, threads=nctas * bt)

    def _run_chunk(self, c0: int, c1: int):
        gx, gy, gz = self.grid
        bx, by, bz = self.block
        bt = bx * by * bz
        n = (c1 - c0) * bt
        t = np.arange(n, dtype=I64)
        cta = c0 + t // bt
        loc = t % bt
        th = {
            "%tid.x": loc % bx, "%tid.y": (loc // bx) % by, "%tid.z": loc // (bx * by),
            "%ctaid.x": cta % gx, "%ctaid.y": (cta // gx) % gy, "%ctaid.z": cta // (gx * gy),
            "lin": loc, "cta": cta - c0,
        }
        self.dom = dom = LaneDomain(widths=self.widths, tracked=self.tracked, th=th, nthreads=n,
                                    entry_pc=self.rpo[self.fn.entry_block], block=self.block,
                                    grid=self.grid, shared_bytes=self.shared_bytes,
                                    sym_value=self.memory.sym_value)
        self.sem = LaneSemantics(dom, self.rec, params=self.params, param_index=self.param_index,
                                 warp_check=self.full_warp_check)
        self.rec.start_chunk(c1 - c0)
        steps = 0
        self.exit_forks = {}
        self.watch = set()
        while True:
            live = np.flatnonzero(dom.alive)
            if live.size == 0:
                break
            b_rpo = int(dom.pc[live].min())
            sel = live[dom.pc[live] == b_rpo]
            if dom.forked:
                sel = dom.merge(sel)
            block = self.block_by_rpo[b_rpo]
            if block in self.watch:
                sel = dom.watch_filter(block, sel)
                if sel.size == 0:
                    continue
            dom.n_alive = int(dom.alive.sum())
            self._exec_block(block, sel)
            steps += 1
            self.steps += 1
            if self.hard_deadline is not None and time.monotonic() > self.hard_deadline:
                raise TraceTimeout(f"the trace passed its deadline (block {block.name})")
            if self.deadline is not None and steps % 64 == 0 and time.monotonic() > self.deadline:
                raise TraceError(f"the analysis ran out of time (block {block.name}); a loop's trip "
                                 "count may depend on data")
            if steps > self.MAX_STEPS or self.lane_steps > self.MAX_LANE_STEPS:
                raise TraceError(
                    f"a loop does not settle within the analysis budget (block {block.name}); "
                    "its trip count may depend on data")
            if dom.forked and int(dom.alive.sum()) > 1.5 * dom.last_merge_count:
                dom.merge_all()
        self.rec.end_chunk()

    # -- block execution
    def _exec_block(self, block, sel: np.ndarray):
        dom, sem = self.dom, self.sem
        insts = block.instructions
        self.lane_steps += sel.size * max(1, len(insts))
        term = block.terminator
        body = insts[:-1] if term is not None else insts
        for inst in body:
            sem.extra = None
            sem.exec(inst, sel)
            if sem.extra is not None:
                sel = np.concatenate([sel, sem.extra])
        sel = sel[dom.alive[sel]]
        if sel.size == 0:
            return
        nxt = self.next_block[block]
        if term is None:
            self._goto(sel, nxt)
            return
        op = term.opcode
        g = term.guard
        if g is None:
            if op == "bra":
                self._goto(sel, self.label_block[term.operands[0].name])
            elif op in ("ret", "exit", "trap"):
                if op == "trap":
                    self._trapped(block)
                dom.alive[sel] = False
            elif op == "brx":
                self._brx(term, sel)
            return
        plo, phi = dom.pred(g.reg.name, sel)
        if g.negated:
            plo, phi = 1 - phi, 1 - plo
        taken = (plo == 1)
        not_taken = (phi == 0)
        unknown = ~(taken | not_taken)
        if unknown.any():
            u = sel[unknown]
            if block in self.exit_blocks:
                cnt = self.exit_forks.get(block)
                if cnt is None:
                    cnt = self.exit_forks[block] = np.zeros(dom.nthreads, np.int32)
                np.add.at(cnt, dom.lane_thread[u], 1)
                if cnt.max() > self.MAX_EXIT_FORKS:
                    raise TraceError(f"a loop exit depends on data (block {block.name}): its trip count has no bound")
                if dom.nthreads * max(1, len(dom.regs.lo)) <= self.WATCH_LIMIT:
                    self.watch |= self.exit_blocks[block]
            new = dom.fork(u)
            # u: branch taken (predicate true); new: not taken
            dom.refine(g.reg.name, u, not g.negated)
            dom.refine(g.reg.name, new, g.negated)
            taken_lanes = np.concatenate([sel[taken], u])
            not_lanes = np.concatenate([sel[not_taken], new])
        else:
            taken_lanes, not_lanes = sel[taken], sel[not_taken]
        if op == "bra":
            target = self.label_block[term.operands[0].name]
        else:
            target = None
        if op == "brx":
            self._brx(term, taken_lanes)
        elif target is not None:
            self._goto(taken_lanes, target)
        else:                                  # @p ret / exit / trap
            if op == "trap" and taken_lanes.size:
                self._trapped(block)
            dom.alive[taken_lanes] = False
        self._goto(not_lanes, nxt)

    def full_warp_check(self, inst, sel, mask_op):
        """A full-mask warp collective: every lane of the warp must be able to reach it."""
        if not isinstance(mask_op, (Imm, Reg)) or (isinstance(mask_op, Imm) and mask_op.is_float):
            return
        dom = self.dom
        mlo, mhi, _ = dom.get(mask_op, sel, 32)
        if not ((mlo == mhi) & ((mlo & 0xFFFFFFFF) == 0xFFFFFFFF)).all():
            return
        block = self.fn.block_of(inst)
        reach = self._reach_cache.get(block)
        if reach is None:
            anc = nx.ancestors(self.fn.cfg, block) | {block}
            reach = self._reach_cache[block] = np.array(sorted(self.rpo[b] for b in anc), I64)
        live = np.flatnonzero(dom.alive)
        ok_thread = np.zeros(dom.nthreads, bool)
        ok_thread[dom.lane_thread[live[np.isin(dom.pc[live], reach)]]] = True
        ok_thread[dom.lane_thread[sel]] = True
        bt = self.block[0] * self.block[1] * self.block[2]
        th = dom.lane_thread[sel]
        warp_first = (th // bt) * bt + (dom.th["lin"][th] // 32) * 32
        for w0 in np.unique(warp_first):
            lanes = np.arange(w0, min(w0 + 32, (w0 // bt + 1) * bt))
            if not ok_thread[lanes].all() or lanes.size < 32:
                self.rec.need_multiple(32, f"{inst.name} with a full warp mask runs after some lanes of "
                                        "the warp have left (sizes that are not multiples of 32)")
                return

    def _trapped(self, block):
        msg = f"reaches trap (an assert or __trap) in block {block.name} for this launch"
        if msg not in self.rec.shape_problems:
            self.rec.shape_problems.append(msg)

    def _goto(self, lanes, block):
        if lanes.size == 0:
            return
        if block is None:
            self.dom.alive[lanes] = False
            return
        self.dom.pc[lanes] = self.rpo[block]

    def _brx(self, term, sel):
        table = str(term.operands[1]) if len(term.operands) > 1 else None
        targets = [self.label_block[t] for t in self.tables.get(table, [])]
        lo, hi, _ = self.dom.get(term.operands[0], sel, 32)
        exact = lo == hi
        for i, b in enumerate(targets):
            m = exact & (lo == i)
            self._goto(sel[m], b)
        inex = sel[~exact]
        if inex.size:
            raise TraceError("an indirect branch (brx.idx) on a data-dependent index")



def trace(module, fn, grid, block, shared_bytes, params, load_ranges=None, *,
          deadline: float | None = None, max_lane_steps: int | None = None,
          hard_deadline: float | None = None) -> TraceResult:
    """Trace one launch of ``fn`` (see the module docstring). ``deadline``: a
    ``time.monotonic()`` value after which the trace gives up with a problem;
    ``max_lane_steps``: the work after which it gives up (both say "budget");
    ``hard_deadline``: a ``time.monotonic()`` value after which it raises TraceTimeout."""
    t = Tracer(module, fn, grid, block, shared_bytes, params, load_ranges, deadline, hard_deadline)
    if max_lane_steps is not None:
        t.MAX_LANE_STEPS = max_lane_steps
    return t.run()
