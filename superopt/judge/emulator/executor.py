"""SIMT execution of a compiled kernel over chunks of blocks, all threads as numpy lanes.

Scheduling: the *group* is the set of lanes at the smallest program counter among the
threads that can run ("min-PC"). The group runs until it diverges, reaches the PC of
other threads (then they merge), waits (barrier, warp-synchronous instruction whose
participants are not all there yet) or exits. Structured code therefore reconverges at
its immediate post-dominator, and a warp stays converged for shfl/vote. While every live
thread is in the group (the common case), register instructions run on whole arrays.

Barriers wait for every non-exited thread of the block; warp-synchronous instructions
wait for every non-exited lane of their membermask. A thread that spins waiting for
another (a lock) gets the others scheduled by a fairness turn now and then.
"""
from __future__ import annotations

import time

import numpy as np

from ptx_ir.semantics.errors import Deadlock, KernelFault, UndefinedBehavior, Unsupported
from ptx_ir.semantics import warp as W
from superopt.judge.emulator import memory as M
from superopt.judge.emulator.program import (
    ALU, BAR, BRA, BRX, CALL, EXIT, MEM, NOP, RET, TRAP, WARP, Program,
)

INF = 1 << 60
# serial schedules: name -> (lanes per unit, which unit runs next). A unit of 32 is a warp, of 8
# the same quarter of every warp. "up"/"down": the first/last unit with a runnable thread runs
# until it waits, exits or loops a while; "rr": units take turns, and the running one yields
# after every store to shared or global memory
SERIAL = {"warps-up": (32, "up"), "warps-down": (32, "down"), "quarters-up": (8, "up"),
          "quarters-down": (8, "down"), "interleave": (32, "rr")}
_SHIFT = {1: 0, 2: 1, 4: 2, 8: 3}
_UT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_TAINT_BYTES = {w: _UT[w](int.from_bytes(b"\x01" * w, "little")) for w in (1, 2, 4, 8)}   # every byte 1


class RunTimeout(Exception):
    """The kernel ran past its time or instruction budget (a hang on a GPU)."""


class Chunk:
    """The state of some consecutive blocks of one launch, executed together."""

    # tests set this: after every instruction, check that no two registers share memory
    # (a register array must never be a view of another register or of param storage)
    DEBUG_ALIASING = False

    def __init__(self, prog: Program, launch, first_block: int, nblocks: int, stats,
                 schedule: str = "min-pc", blocks=None):
        self.prog = prog
        # serial schedules (see SCHEDULES in runner.py): one unit of lanes (a warp, or a quarter
        # of one) at a time, the first or last that can run, or round-robin switching units
        # at every shared or global store ("interleave")
        if schedule == "min-pc":
            self.serial = None
        else:
            if schedule not in SERIAL:
                raise ValueError(f"unknown schedule {schedule!r}")
            self.serial = schedule
        self.unit, self.direction = SERIAL.get(schedule, (32, None))
        self.rr_last = -1          # "interleave": the unit whose turn it is
        self._unit_lanes = None    # lanes of each serial unit
        self._has_bar_red = any(ci.kind == BAR and ci.extra and ci.extra[2] is not None for ci in prog.insts)
        self.rr_yield = False      # ... and it has just stored: the next one's turn
        self.launch = launch
        self.heap = launch.heap
        self.stats = stats
        bx, by, bz = launch.block
        self.T = T = bx * by * bz
        self.Tp = Tp = -(-T // 32) * 32
        self.B = nblocks
        self.N = N = nblocks * Tp
        self.all_lanes = np.arange(N, dtype=np.int64)
        self.warp_of_lane = self.all_lanes // 32      # Tp is a multiple of 32: no warp spans blocks
        t = self.all_lanes % Tp
        b = self.all_lanes // Tp
        self.block_of_lane = b
        self.t_of_lane = t
        self.valid = t < T
        self.first_block = first_block
        # the launch's block index of each block of the chunk (consecutive unless the launch
        # runs its blocks in another order or a sample of them serially)
        self.block_ids = (np.arange(first_block, first_block + nblocks, dtype=np.int64) if blocks is None
                          else np.asarray(blocks, np.int64))
        # a serial unit is the same warp of every block of the chunk, or the same quarter (8
        # lanes) of every warp: blocks (and, for quarters, warps) run in step with each other,
        # the units one at a time, so the issues a serial schedule costs do not grow with the
        # blocks it runs, and quarters cost no more than warps
        self.unit_of_lane = self.t_of_lane // 32 if self.unit == 32 else (self.t_of_lane % 32) // self.unit
        # registers start as poison (random bits, different every launch and per register
        # and lane): a kernel whose results depend on a register nothing wrote gives
        # different results from run to run instead of the same zeros every time
        self.R = [launch.poison.register(N, dt, k) for k, dt in enumerate(prog.reg_dtypes)]
        self.P = [np.zeros((N, s), np.uint8) for s in prog.pslot_sizes]
        self.kblob = launch.kblob
        self.kblob_views = {w: launch.kblob.view(_UT[w]) for w in (1, 2, 4, 8)}
        # shared memory
        self.smem_size = prog.loaded.static_smem_aligned() + launch.shared_bytes
        self.S = max(16, -(-self.smem_size // 16) * 16)
        self.poison_rng = rng = launch.poison_rng
        self.launch_poison = launch.poison
        if prog.uses_shared or launch.shared_bytes:
            self.shared = launch.poison(nblocks * self.S)
        else:
            self.shared = np.zeros(nblocks * self.S, np.uint8)     # never read
        self.shared_views = {w: self.shared.view(_UT[w]) for w in (1, 2, 4, 8)}
        # local memory: module .local variables, then the kernel's frame (made on first use)
        self.L = max(16, -(-(prog.local_static + prog.kernel.frame_size) // 16) * 16)
        self._local = None
        self.frame_base = np.full(N, prog.local_static, np.int64)
        # call stack
        self.depth = np.zeros(N, np.int32)
        self.D = 0
        self.stk_pc = self.stk_site = self.stk_fb = None
        self.saved_R: dict = {}
        self.saved_P: dict = {}
        # scheduling state
        self.live = self.valid.copy()
        self.pc = np.full(N, prog.kernel.entry_pc, np.int64)
        self.wait = np.zeros(N, np.int8)          # 0 runnable, 1 barrier, 2 warp-sync
        self.bar_val = np.zeros(N, bool)
        self.bar_id = np.zeros(N, np.int64)
        self._sregs = {}
        self.steps = 0
        self.printf = launch.printf
        # the taint bit: per tracked register slot None (clean in every lane) or a bool per lane
        # (True: derived from something never written); registers start never written. Shared
        # and local memory keep one per byte (they start as poison). See Program._taint_plan.
        self._all_taint = np.ones(N, bool)
        self.RT = [self._all_taint if k in prog.tracked else None for k in range(len(prog.reg_dtypes))]
        self.shared_taint = np.ones(self.shared.size, np.uint8) if prog.mem_taint else None
        self.shared_taint_views = ({w: self.shared_taint.view(_UT[w]) for w in (1, 2, 4, 8)}
                                   if prog.mem_taint else None)
        self._local_taint = self._local_taint_views = None
        self._ld_taint = None          # set by load/atomic for the instruction running
        self._st_taint = None          # set by the scheduler for the store running

    @property
    def local(self):
        if self._local is None:
            self._local = self.launch_poison(self.N * self.L)
            self._local_views = {w: self._local.view(_UT[w]) for w in (1, 2, 4, 8)}
            if self.prog.mem_taint:
                self._local_taint = np.ones(self._local.size, np.uint8)
                self._local_taint_views = {w: self._local_taint.view(_UT[w]) for w in (1, 2, 4, 8)}
        return self._local

    @local.setter
    def local(self, value):
        self._local = value

    @property
    def local_views(self):
        if self._local is None:
            self.local
        return self._local_views

    @local_views.setter
    def local_views(self, value):
        self._local_views = value

    # ------------------------------------------------------------------ special registers
    # special registers whose value depends on the chunk's blocks (not shared between chunks)
    _PER_BLOCK = ("%ctaid", "%clock", "%globaltimer", "%smid", "%warpid")

    def sreg(self, name):
        v = self._sregs.get(name)
        if v is not None:
            return v
        if not name.startswith(self._PER_BLOCK):
            shared = self.launch.sreg_cache.get((self.N, name))
            if shared is not None:
                self._sregs[name] = shared
                return shared
        v = self._sreg(name)
        if not name.startswith(self._PER_BLOCK):
            self.launch.sreg_cache[(self.N, name)] = v
        return v

    def _sreg(self, name):
        L = self.launch
        bx, by, bz = L.block
        gx, gy, gz = L.grid
        t = self.t_of_lane
        gb = self.block_ids[self.block_of_lane]
        base, _, comp = name.partition(".")
        ci = "xyz".index(comp) if comp in ("x", "y", "z") else None
        if base == "%tid" and ci is not None:
            v = [t % bx, (t // bx) % by, t // (bx * by)][ci].astype(np.uint32)
        elif base == "%ntid" and ci is not None:
            v = np.uint32(L.block[ci])
        elif base == "%ctaid" and ci is not None:
            v = [gb % gx, (gb // gx) % gy, gb // (gx * gy)][ci].astype(np.uint32)
        elif base == "%nctaid" and ci is not None:
            v = np.uint32(L.grid[ci])
        elif name == "%laneid":
            v = (t % 32).astype(np.uint32)
        elif name == "%warpid":
            # where the warp runs (PTX: volatile, unique within the CTA): a permutation of the
            # block's warp slots, drawn per launch
            v = L.machine.warpid(gb, t // 32, self.Tp // 32)
        elif name == "%nwarpid":
            v = np.uint32(self.Tp // 32)
        elif name.startswith("%lanemask_"):
            lane = (t % 32).astype(np.uint64)
            one = np.uint64(1)
            kind = name[10:]
            if kind == "eq":
                v = one << lane
            elif kind == "lt":
                v = (one << lane) - one
            elif kind == "le":
                v = (one << (lane + one)) - one
            elif kind == "gt":
                v = np.uint64(0xFFFFFFFF) & ~((one << (lane + one)) - one)
            elif kind == "ge":
                v = np.uint64(0xFFFFFFFF) & ~((one << lane) - one)
            else:
                raise Unsupported(name)
            v = v.astype(np.uint32)
        elif name in ("%clock", "%clock_hi", "%clock64", "%globaltimer", "%globaltimer_lo",
                      "%globaltimer_hi"):
            # counters: a start drawn per launch (and per SM for the clocks), then steps
            c = L.machine.counter(name, gb) + np.uint64(self.steps * 4)
            if name in ("%clock64", "%globaltimer"):
                return c
            if name.endswith("_hi"):
                return (c >> np.uint64(32)).astype(np.uint32)
            return (c & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        elif name == "%smid":
            v = L.machine.smid(gb)
        elif name == "%gridid":
            v = np.uint64(L.machine.gridid)
        elif name == "%nsmid":
            v = np.uint32(L.machine.nsmid)
        elif name == "%dynamic_smem_size":
            v = np.uint32(L.shared_bytes)
        elif name in ("%total_smem_size", "%aggr_smem_size"):
            v = np.uint32(self.smem_size)
        else:
            raise Unsupported(f"special register {name}")
        if not name.startswith(("%clock", "%globaltimer")):
            self._sregs[name] = v
        return v

    # ------------------------------------------------------------------ memory
    def _lanes(self, idx):
        return self.all_lanes if idx is None else idx

    def _check(self, off, limit, total, space, addrs):
        if off.size == 0:
            return
        if limit < total or off.max() > np.uint64(limit - total):
            bad = off > np.uint64(max(limit - total, 0)) if limit >= total else np.ones(off.shape, bool)
            i = int(np.flatnonzero(bad)[0])
            raise KernelFault(f"out-of-range {space} access at 0x{int(addrs[i]):x} ({total} bytes)")
        if total > 1 and (off & np.uint64(total - 1)).any():
            i = int(np.flatnonzero(off & np.uint64(total - 1))[0])
            raise KernelFault(f"misaligned {space} access at 0x{int(addrs[i]):x} ({total} bytes)")

    def _resolve(self, sp, addrs, idx, total, store=False):
        """(views, flat byte offsets, element-order lanes) for one access; splits generic."""
        n = self.N if idx is None else len(idx)
        a = np.asarray(addrs, np.uint64)
        if a.ndim == 0:
            a = np.full(n, a, np.uint64)
        if sp == "generic":
            off = a - np.uint64(M.HEAP_BASE)
            if off.size == 0 or off.max() < np.uint64(self.heap.top):
                sp = ".global"
            else:
                so = a - np.uint64(M.SHARED_BASE)
                lo = a - np.uint64(M.LOCAL_BASE)
                if (so < np.uint64(M.WINDOW)).all():
                    sp, a = ".shared", so
                elif (lo < np.uint64(M.WINDOW)).all():
                    sp, a = ".local", lo
                elif ((a - np.uint64(M.KPARAM_BASE)) < np.uint64(M.WINDOW)).all():
                    sp = ".param"
                else:
                    return None
        if sp == ".param":
            if store:
                raise Unsupported("a store to kernel parameters")
            off = a - np.uint64(M.KPARAM_BASE)
            self._check(off, self.kblob.size, total, "param", a)
            return self.kblob_views, off
        if sp in (".global", ".const"):
            off = a - np.uint64(M.HEAP_BASE)
            self._check(off, self.heap.top, total, "global", a)
            if not store and self.launch.watch is not None:
                self.launch.watch.record(off, total)
            return self.heap.views, off
        if sp == ".shared":
            off = a & np.uint64(0xFFFFFFFF) if a.dtype != np.uint64 else a
            self._check(off, self.smem_size, total, "shared", a)
            blk = self.block_of_lane if idx is None else self.block_of_lane[idx]
            return self.shared_views, blk.astype(np.uint64) * np.uint64(self.S) + off
        if sp == ".local":
            self._check(a, self.L, total, "local", a)
            lanes = self._lanes(idx)
            return self.local_views, lanes.astype(np.uint64) * np.uint64(self.L) + a
        raise Unsupported(f"memory space {sp}")

    def _split_generic(self, addrs, idx):
        n = self.N if idx is None else len(idx)
        a = np.asarray(addrs, np.uint64)
        if a.ndim == 0:
            a = np.full(n, a, np.uint64)
        parts = []
        rest = np.ones(n, bool)
        for sp, base, lim in ((".global", M.HEAP_BASE, self.heap.top), (".shared", M.SHARED_BASE, M.WINDOW),
                              (".local", M.LOCAL_BASE, M.WINDOW), (".param", M.KPARAM_BASE, M.WINDOW)):
            m = (a - np.uint64(base)) < np.uint64(lim)
            if m.any():
                sel = np.flatnonzero(m)
                parts.append((sp, sel, a[sel] - np.uint64(base if sp in (".shared", ".local") else 0)))
                rest &= ~m
        if rest.any():
            i = int(np.flatnonzero(rest)[0])
            raise KernelFault(f"illegal generic address 0x{int(a[i]):x}")
        return a, parts

    # -- the taint of memory bytes (shared and local memory; global memory is not tracked):
    # one uint8 per byte (1: tainted), read and written through width views like the memory
    # itself, so an element's taint is "any of its bytes" in one gather
    def _taint_of(self, views):
        if self.shared_taint is None:
            return None
        if views is self.shared_views:
            return self.shared_taint_views
        if self._local is not None and views is self._local_views:
            return self._local_taint_views
        return None

    def _taint_load(self, views, off, w, k, sel=None, n=None):
        """Per lane (and element, k > 1) taint of the loaded elements, into self._ld_taint."""
        tv = self._taint_of(views)
        if tv is None:
            return
        t = M.gather(tv, off, w, k) != 0
        if sel is None:
            self._ld_taint = t
            return
        if self._ld_taint is None:
            self._ld_taint = np.zeros((n, k) if k > 1 else n, bool)
        self._ld_taint[sel] = t

    def _taint_store(self, views, off, w, k, sel=None):
        """The stored elements take the taint of what is stored (self._st_taint: per lane and
        element, (n, 1) for every element alike; None: clean)."""
        tv = self._taint_of(views)
        if tv is None:
            return
        st = self._st_taint
        if st is None:
            M.scatter(tv, off, w, k, np.zeros(len(off) * k, _UT[w]) if k > 1 else _UT[w](0))
            return
        if sel is not None:
            st = st[sel]
        st = np.broadcast_to(st, (st.shape[0], k))
        marks = np.where(st, _TAINT_BYTES[w], _UT[w](0)).astype(_UT[w])
        M.scatter(tv, off, w, k, marks if k > 1 else marks[:, 0])

    def _taint_atomic(self, views, off, w, sel=None, n=None):
        """Old value: the element's taint; new element: old | what the atomic combines in."""
        tv = self._taint_of(views)
        if tv is None:
            return
        old = M.gather(tv, off, w, 1) != 0
        if sel is None:
            self._ld_taint = old
        else:
            if self._ld_taint is None:
                self._ld_taint = np.zeros(n, bool)
            self._ld_taint[sel] = old
        st = self._st_taint
        if st is not None:
            st = st if sel is None else st[sel]
            M.scatter(tv, off, w, 1, np.where(old | st, _TAINT_BYTES[w], _UT[w](0)).astype(_UT[w]))

    def load(self, sp, addrs, idx, w, k, nc=False):
        """``nc``: a load through the non-coherent path; under the launch's ``nc_stale`` mode it
        reads global memory as it was when the launch began (what that path may hold: PTX leaves
        undefined a ``.nc`` read of data the launch writes)."""
        stale = self.launch.nc_views if nc else None
        r = self._resolve(sp, addrs, idx, w * k)
        if r is not None:
            views, off = r
            if stale is not None and views is self.heap.views:
                views = stale
            if self.shared_taint is not None:
                self._taint_load(views, off, w, k)
            return M.gather(views, off, w, k)
        a, parts = self._split_generic(addrs, idx)
        n = a.size
        out = np.empty((n, k) if k > 1 else n, _UT[w])
        for sp2, sel, aa in parts:
            sub = sel if idx is None else idx[sel]
            views, off = self._resolve(sp2, aa, sub, w * k)
            if stale is not None and views is self.heap.views:
                views = stale
            if self.shared_taint is not None:
                self._taint_load(views, off, w, k, sel, n)
            out[sel] = M.gather(views, off, w, k)
        return out

    def store(self, sp, addrs, idx, w, k, vals):
        r = self._resolve(sp, addrs, idx, w * k, store=True)
        vals = np.asarray(vals)
        if vals.dtype != _UT[w]:
            vals = vals.astype(_UT[w])
        if r is not None:
            views, off = r
            M.scatter(views, off, w, k, vals)
            if self.shared_taint is not None:
                self._taint_store(views, off, w, k)
            return
        a, parts = self._split_generic(addrs, idx)
        vals = np.broadcast_to(vals, (a.size, k) if k > 1 else (a.size,))
        for sp2, sel, aa in parts:
            sub = sel if idx is None else idx[sel]
            views, off = self._resolve(sp2, aa, sub, w * k)
            M.scatter(views, off, w, k, vals[sel])
            if self.shared_taint is not None:
                self._taint_store(views, off, w, k, sel)

    def atomic(self, sp, addrs, idx, w, fn, v, cmp=None, kind=None, need_old=True):
        r = self._resolve(sp, addrs, idx, w, store=True)
        if r is not None:
            views, off = r
            if self.shared_taint is not None:
                self._taint_atomic(views, off, w)
            ix = (off >> np.uint64(_SHIFT[w])).astype(np.int64)
            return M.atomic_apply(views[w], ix, fn, v, cmp, kind, need_old)
        a, parts = self._split_generic(addrs, idx)
        out = np.empty(a.size, _UT[w])
        v = np.broadcast_to(np.asarray(v), a.shape)
        c = np.broadcast_to(np.asarray(cmp), a.shape) if cmp is not None else None
        for sp2, sel, aa in parts:
            if sp2 == ".local":
                raise KernelFault("atomic on a local address")
            sub = sel if idx is None else idx[sel]
            views, off = self._resolve(sp2, aa, sub, w)
            if self.shared_taint is not None:
                self._taint_atomic(views, off, w, sel, a.size)
            ix = (off >> np.uint64(_SHIFT[w])).astype(np.int64)
            o = M.atomic_apply(views[w], ix, fn, v[sel], None if c is None else c[sel], kind, need_old)
            if o is not None:
                out[sel] = o
        return out

    # ------------------------------------------------------------------ the taint bit
    def _t_read(self, slots, lanes):
        """OR of the taint of ``slots`` at ``lanes`` (None: every lane); None when clean."""
        out = None
        RT = self.RT
        for s in slots:
            a = RT[s]
            if a is None:
                continue
            if lanes is not None:
                a = a[lanes]
            out = a if out is None else (out | a)
        return out

    def _t_write(self, slots, lanes, t):
        """``slots`` written at ``lanes`` with taint ``t`` (None: clean)."""
        RT = self.RT
        if t is not None and not t.any():
            t = None
        for d in slots:
            a = RT[d]
            if lanes is None:
                RT[d] = None if t is None else t.copy()
            elif t is None:
                if a is None:
                    continue
                if a is self._all_taint:
                    a = a.copy()
                a[lanes] = False
                RT[d] = a
            else:
                if a is None:
                    a = np.zeros(self.N, bool)
                elif a is self._all_taint:
                    a = a.copy()
                a[lanes] = t
                RT[d] = a

    def _t_event(self, what, t, inst):
        """A sink (``store``, ``branch``) reached with a tainted address, value or predicate."""
        if t is None or not t.any():
            return
        events = self.stats.setdefault("taint", {})
        e = events.get(what)
        if e is None:
            events[what] = {"count": 1, "lanes": int(np.count_nonzero(t)), "first": inst.text}
        else:
            e["count"] += 1
            e["lanes"] += int(np.count_nonzero(t))

    def _t_guard(self, inst, tt, gs, lanes, pv):
        """A guard predicate derived from never-written data decides whether ``inst`` runs in
        these lanes. What it writes then depends on that data wherever the guard is tainted,
        run or not (its destinations get the taint there); a store, atomic or warp-synchronous
        instruction under such a guard is a sink itself (control instructions are the
        ``ctl`` sinks already)."""
        gt = self.RT[gs] if lanes is None else self.RT[gs][lanes]
        if not gt.any():
            return
        k = tt[0]
        if k in ("alu", "warp", "atom", "ld"):
            dsts = [d for e in tt[2] for d in e] if k == "ld" else list(tt[2])
            where = np.flatnonzero(gt) if lanes is None else lanes[gt]
            for d in dsts:
                a = self.RT[d]
                if a is None:
                    a = np.zeros(self.N, bool)
                elif a is self._all_taint:
                    continue
                a[where] = True
                self.RT[d] = a
        if k in ("st", "atom"):
            # lanes that run report through the store itself; these are the ones it skipped
            self._t_event("store", gt & ~pv, inst)
        elif k == "warp" or inst.kind == BAR:
            self._t_event("predicate", gt, inst)

    def _t_mem(self, inst, tt, lanes):
        """Run a memory instruction moving the taint bit (Program._taint_info's ld/st/atom)."""
        k = tt[0]
        if k == "ld":
            self._t_event("address", self._t_read(tt[4], lanes), inst)
            tin = self._t_read(tt[1], lanes)
            self._ld_taint = None
            try:
                inst.run(self, lanes)
                lt = self._ld_taint
            finally:
                self._ld_taint = None
            for j, slots in enumerate(tt[2]):
                t = tin
                if lt is not None:
                    col = lt if lt.ndim == 1 else lt[:, j]
                    t = col if t is None else (t | col)
                self._t_write(slots, lanes, t)
            return
        if k == "st":
            addr = self._t_read(tt[1], lanes)
            vals = [self._t_read(e, lanes) for e in tt[2]] if tt[2] else []
            anyt = addr
            for v in vals:
                if v is not None:
                    anyt = v if anyt is None else (anyt | v)
            # a tainted address is a sink anywhere; a tainted value where memory does not keep
            # the taint (global memory; generic addresses), since no later load would see it
            self._t_event(tt[4], addr if tt[3] else anyt, inst)
            st = None
            if self.shared_taint is not None and anyt is not None and anyt.any():
                n = self.N if lanes is None else len(lanes)
                st = np.zeros((n, max(1, len(vals))), bool)
                if addr is not None:
                    st |= addr.reshape(-1, 1)
                for j, v in enumerate(vals):
                    if v is not None:
                        st[:, j] |= v
            self._st_taint = st
            try:
                inst.run(self, lanes)
            finally:
                self._st_taint = None
            return
        # atom / red
        tin = self._t_read(tt[1], lanes)
        self._t_event("store", tin, inst)
        self._st_taint = tin
        self._ld_taint = None
        try:
            inst.run(self, lanes)
            lt = self._ld_taint
        finally:
            self._st_taint = self._ld_taint = None
        t = tin if lt is None else (lt if tin is None else (tin | lt))
        self._t_write(tt[2], lanes, t)

    def _run_warp(self, inst, E):
        """A warp instruction's run, with the taint bit: a tainted operand in any lane taking
        part taints every result (values move between lanes)."""
        tt = inst.taint
        if tt is None:
            inst.run(self, E, E)
            return
        t = self._t_read(tt[1], E)
        tainted = t is not None and bool(t.any())
        inst.run(self, E, E)
        self._t_write(tt[2], E, np.ones(len(E), bool) if tainted else None)

    # ------------------------------------------------------------------ warp operations
    def _in_set(self, E):
        m = np.zeros(self.N, bool)
        m[E] = True
        return m

    def _pack(self, boolN):
        return np.packbits(boolN.reshape(-1, 32), axis=1, bitorder="little").view("<u4").ravel()

    def active_mask_of(self, E):
        if E is None:
            E = np.flatnonzero(self.live)
        packed = self._pack(self._in_set(E))
        return packed[E >> 5].astype(np.uint32)

    def do_shfl(self, E, mode, ra, rb, rc, wd, wp, text):
        a = ra(self, None)
        if np.ndim(a) == 0:
            a = np.full(self.N, a, np.uint32)
        b, c = rb(self, E), rc(self, E)
        lane = E & 31
        j, pval = W.shfl_source(mode, lane, b, c)
        src = E - lane + j
        inE = self.live if len(E) == self.nlive_now else self._in_set(E)
        okm = inE[src]
        if not okm.all():
            i = int(np.flatnonzero(~okm)[0])
            why = "has exited" if not self.live[src[i]] else "is not executing this shfl"
            raise UndefinedBehavior(f"{text}: lane {int(lane[i])} reads lane {int(j[i])}, which {why}")
        wd(self, E, a[src])
        if wp is not None:
            wp(self, E, pval)

    def do_vote(self, E, mode, rp, rm, wr):
        p = np.broadcast_to(rp(self, E), E.shape)
        pf = np.zeros(self.N, bool)
        pf[E] = p
        ballot_w = self._pack(pf)
        present_w = self._pack(self._in_set(E))
        wi = E >> 5
        m = np.uint32(0xFFFFFFFF) if rm is None else np.asarray(rm(self, E), np.uint32)
        bal = ballot_w[wi] & m
        act = present_w[wi] & m
        if mode == "ballot":
            wr(self, E, bal.astype(np.uint32))
        elif mode == "any":
            wr(self, E, bal != 0)
        elif mode == "all":
            wr(self, E, bal == act)
        elif mode == "uni":
            wr(self, E, (bal == 0) | (bal == act))

    def do_match(self, E, mode, ra, rm, wd, wp):
        a = ra(self, None)
        if np.ndim(a) == 0:
            a = np.full(self.N, a)
        a = np.asarray(a)
        m = np.broadcast_to(np.asarray(rm(self, E), np.uint32), E.shape)
        inE = self._in_set(E)
        vals = a.reshape(-1, 32)
        part = inE.reshape(-1, 32)
        wi = E >> 5
        lane = E & 31
        V = vals[wi]                                   # (n, 32)
        eq = (V == a[E][:, None]) & part[wi]
        mm = W.unpack_bits(m)
        eq &= mm
        same = np.packbits(eq, axis=1, bitorder="little").view("<u4").ravel()
        if mode == "any":
            wd(self, E, same.astype(np.uint32))
            if wp is not None:
                wp(self, E, np.ones(len(E), bool))
            return
        members = np.packbits(part[wi] & mm, axis=1, bitorder="little").view("<u4").ravel()
        allsame = same == members
        wd(self, E, np.where(allsame, members, np.uint32(0)).astype(np.uint32))
        if wp is not None:
            wp(self, E, allsame)

    def do_redux(self, E, opn, ra, rm, wd, nd):
        a = ra(self, None)
        if np.ndim(a) == 0:
            a = np.full(self.N, a, nd)
        m = np.broadcast_to(np.asarray(rm(self, E), np.uint32), E.shape)
        inE = self._in_set(E)
        wi = E >> 5
        V = a.reshape(-1, 32)[wi]
        part = inE.reshape(-1, 32)[wi] & W.unpack_bits(m)
        if opn == "add":
            r = np.where(part, V.astype(np.uint64), 0).sum(axis=1).astype(np.uint32).view(nd)
        elif opn == "min":
            r = np.where(part, V, np.iinfo(nd).max).min(axis=1)
        elif opn == "max":
            r = np.where(part, V, np.iinfo(nd).min).max(axis=1)
        elif opn == "and":
            r = np.bitwise_and.reduce(np.where(part, V, nd.type(-1) if nd.kind == "i" else np.iinfo(nd).max), axis=1)
        elif opn == "or":
            r = np.bitwise_or.reduce(np.where(part, V, 0).astype(nd), axis=1)
        else:
            r = np.bitwise_xor.reduce(np.where(part, V, 0).astype(nd), axis=1)
        wd(self, E, np.asarray(r, nd))

    # ------------------------------------------------------------------ calls
    def _ensure_depth(self, need):
        if need <= self.D:
            return
        D = max(need, 2 * self.D, 4)
        if D > self.launch.max_depth:
            raise KernelFault(f"call stack overflow (depth {need})")

        def grow(a, dt, extra=()):
            n = np.zeros((D, self.N) + extra, dt)
            if a is not None:
                n[: a.shape[0]] = a
            return n
        self.stk_pc = grow(self.stk_pc, np.int64)
        self.stk_site = grow(self.stk_site, np.int64)
        self.stk_fb = grow(self.stk_fb, np.int64)
        for s in list(self.saved_R):
            self.saved_R[s] = grow(self.saved_R[s], self.prog.reg_dtypes[s])
        for s in list(self.saved_P):
            self.saved_P[s] = grow(self.saved_P[s], np.uint8, (self.prog.pslot_sizes[s],))
        self.D = D

    def _ensure_local(self, need):
        if need <= self.L:
            return
        L = max(-(-need // 16) * 16, 2 * self.L)
        if L > self.launch.max_local:
            raise KernelFault(f"local memory overflow ({need} bytes per thread)")
        n = self.launch_poison(self.N * L).reshape(self.N, L)
        n[:, : self.L] = self.local.reshape(self.N, self.L)
        if self._local_taint is not None:
            t = np.ones((self.N, L), np.uint8)
            t[:, : self.L] = self._local_taint.reshape(self.N, self.L)
            self._local_taint = t.reshape(-1)
            self._local_taint_views = {w: self._local_taint.view(_UT[w]) for w in (1, 2, 4, 8)}
        self.local = n.reshape(-1)
        self.L = L
        self.local_views = {w: self.local.view(_UT[w]) for w in (1, 2, 4, 8)}

    def do_call(self, site, E):
        """Enter the callee for lanes E; returns the callee entry pc (or per-lane pcs)."""
        prog = self.prog
        if site.extern is not None:
            return self._extern_call(site, E)
        if site.callee is None:
            tgt = np.asarray(site.indirect(self, E), np.uint64)
            if tgt.ndim == 0:
                tgt = np.full(len(E), tgt)
            pcs = np.empty(len(E), np.int64)
            for t in np.unique(tgt):
                fi = prog.func_by_addr.get(int(t))
                if fi is None:
                    raise KernelFault(f"indirect call to 0x{int(t):x}, which is no function")
                if len(fi.formals) != len(site.args) or len(fi.rets) != len(site.rets):
                    raise UndefinedBehavior(f"indirect call to {fi.name} with a mismatched prototype")
                sel = tgt == t
                pcs[sel] = self._enter(site, fi, E[sel])
            return pcs
        return self._enter(site, site.callee, E)

    def _read_slot(self, kind, E):
        if kind[0] == "lparam":
            return self.P[kind[1]][E].copy()
        return self.R[kind[1]][E].copy()

    def _write_slot(self, kind, E, v):
        if kind[0] == "lparam":
            P = self.P[kind[1]]
            n = min(P.shape[1], v.shape[1])
            P[E, :n] = v[:, :n]
        else:
            self.R[kind[1]][E] = v
            if self.RT[kind[1]] is not None:
                self._t_write((kind[1],), E, None)     # call arguments and results: not followed

    def _arg_taint(self, site, E):
        """Register arguments (``.reg`` formals) derived from never-written data are a sink:
        the callee computes with them (``.param`` arguments are, at the ``st.param``)."""
        for k in site.args:
            if k[0] == "reg" and self.RT[k[1]] is not None:
                self._t_event("call", self.RT[k[1]][E], self.prog.insts[site.return_pc - 1])

    def _enter(self, site, fi, E):
        self._arg_taint(site, E)
        vals = [self._read_slot(k, E) for k in site.args]
        d = self.depth[E]
        self._ensure_depth(int(d.max()) + 1)
        if fi.recursive:
            for s in fi.reg_slots:
                if s not in self.saved_R:
                    self.saved_R[s] = np.zeros((self.D, self.N), self.prog.reg_dtypes[s])
                self.saved_R[s][d, E] = self.R[s][E]
            for s in fi.pslots:
                if s not in self.saved_P:
                    self.saved_P[s] = np.zeros((self.D, self.N, self.prog.pslot_sizes[s]), np.uint8)
                self.saved_P[s][d, E] = self.P[s][E]
        self.stk_pc[d, E] = site.return_pc
        self.stk_site[d, E] = site.id
        self.stk_fb[d, E] = self.frame_base[E]
        self.depth[E] = d + 1
        fb = self.frame_base[E] + site.caller.frame_size
        self.frame_base[E] = fb
        self._ensure_local(int(fb.max()) + fi.frame_size)
        for k, v in zip(fi.formals, vals):
            self._write_slot(k, E, v)
        return fi.entry_pc

    def do_ret(self, fi, E):
        """Return lanes E from function fi; returns their return pcs (array)."""
        vals = [self._read_slot(k, E) for k in fi.rets]
        d = self.depth[E] - 1
        if (d < 0).any():
            raise KernelFault("return without a call")
        if fi.recursive:
            for s in fi.reg_slots:
                self.R[s][E] = self.saved_R[s][d, E]
            for s in fi.pslots:
                self.P[s][E] = self.saved_P[s][d, E]
        sites = self.stk_site[d, E]
        rpc = self.stk_pc[d, E]
        self.frame_base[E] = self.stk_fb[d, E]
        self.depth[E] = d
        if vals:
            for sid in np.unique(sites):
                site = self.prog.sites[int(sid)]
                sel = sites == sid
                for k, v in zip(site.rets, vals):
                    self._write_slot(k, E[sel], v[sel])
        return rpc

    def _extern_call(self, site, E):
        name = site.extern
        self._arg_taint(site, E)
        args = [self._read_slot(k, E) for k in site.args]
        if name == "__assertfail":
            raise KernelFault("device-side assert triggered")
        if name == "vprintf":
            fmt = args[0].view(np.uint64)[:, 0] if args else None
            buf = args[1].view(np.uint64)[:, 0] if len(args) > 1 else None
            for i in range(len(E)):
                lane = int(E[i])
                gtid = int(self.block_ids[self.block_of_lane[lane]]) * self.Tp + int(self.t_of_lane[lane])
                self.printf.append((gtid, int(fmt[i]),
                                    int(buf[i]) if buf is not None else 0))
            return site.return_pc
        raise Unsupported(f"call to {name}")

    # ------------------------------------------------------------------ the scheduler
    def _serial_group(self):
        """The next group under a serial schedule, from its unit's lanes alone (no pass over
        every lane of the chunk): (lanes, pc, smallest pc of the unit's other runnable lanes),
        or None when no unit has a runnable lane (the general regroup then resolves waits)."""
        if self._unit_lanes is None:
            nu = int(self.unit_of_lane.max()) + 1
            self._unit_lanes = [np.flatnonzero(self.unit_of_lane == u) for u in range(nu)]
        nu = len(self._unit_lanes)
        if self.direction == "up":
            order = range(nu)
        elif self.direction == "down":
            order = range(nu - 1, -1, -1)
        else:
            first = (self.rr_last + 1) % nu if (self.rr_yield or self.rr_last < 0) else self.rr_last
            order = [(first + k) % nu for k in range(nu)]
        live, wait, pc = self.live, self.wait, self.pc
        for u in order:
            L = self._unit_lanes[u]
            ok = live[L] & (wait[L] == 0)
            if ok.any():
                break
        else:
            return None
        if self.direction == "rr":
            self.rr_last, self.rr_yield = u, False
        lanes = L[ok]
        lp = pc[lanes]
        p = int(lp.min())
        if self.unit < 32 and self.prog.insts[p].kind == WARP:
            return None            # quarters at a warp-synchronous instruction: the general way
        at = lp == p
        rest = lp[~at]
        return lanes[at], p, (int(rest.min()) if rest.size else INF)

    def _serial_unit(self, cand):
        """The runnable lanes of the unit that runs next under a serial schedule: the first (or
        last) unit with a runnable thread, or for "interleave" the unit whose turn it is; the
        others only when it cannot go on. A unit is the same warp of every block of the chunk,
        or the same quarter of every warp. Quarters at a warp-synchronous instruction take the
        other lanes there along (they execute it together once all of a warp have arrived)."""
        units = self.unit_of_lane[cand]
        if self.direction == "up":
            u = int(units.min())
        elif self.direction == "down":
            u = int(units.max())
        else:
            # the unit whose turn it is keeps it until it stores (or waits or exits); then the
            # next unit in cyclic order, which sees the store before the storing unit goes on
            if self.rr_yield or not (units == self.rr_last).any():
                later = units[units > self.rr_last]
                u = int(later.min()) if later.size else int(units.min())
            else:
                u = self.rr_last
            self.rr_last = u
            self.rr_yield = False
        sel = cand & (self.unit_of_lane == u)
        if self.unit < 32:
            p = int(self.pc[sel].min())
            if self.prog.insts[p].kind == WARP:
                sel |= cand & (self.pc == p)
        return sel

    def run(self):
        prog = self.prog
        insts = prog.insts
        R = self.R
        live = self.live
        pc = self.pc
        wait = self.wait
        stats = self.stats
        deadline = self.launch.deadline
        budget = self.launch.max_steps
        N = self.N
        self.nlive_now = nlive = int(live.sum())
        if nlive == 0:
            return
        gi = np.flatnonzero(live) if self.serial is None else None
        g_pc = prog.kernel.entry_pc
        full = True
        dense = nlive == N
        m_other = INF
        nwait_warp = 0
        steps = 0
        thread_steps = 0
        back_events = 0
        turn = 0
        check_every = 4096
        while True:
            # ---------------------------------------------------------- regroup
            if gi is None or (g_pc >= m_other and turn <= 0):
                if gi is not None and len(gi):
                    pc[gi] = g_pc
                pick = self._serial_group() if (self.serial is not None and back_events < 64
                                                and turn <= 0) else None
                if pick is not None:
                    # a serial schedule's next group, found among its unit's lanes only
                    gi, g_pc, m_other = pick
                    full = len(gi) == nlive
                    dense = full and nlive == N
                    nwait_warp = int(np.count_nonzero(wait == 2))
                else:
                    gi = None              # (its pcs are stored) regroup over every lane
            if gi is None:
                self.nlive_now = nlive = int(np.count_nonzero(live))
                if nlive == 0:
                    break
                while True:
                    cand = live & (wait == 0)
                    if cand.any():
                        break
                    nwait_warp = self._resolve_waits()
                if self.serial is not None and back_events < 64 and turn <= 0:
                    cand = self._serial_unit(cand)
                pcs = np.where(cand, pc, INF)
                if back_events >= 64 and turn <= 0:
                    # fairness: let the most advanced threads run for a while
                    back_events = 0
                    p = int(np.where(cand, pc, -1).max())
                    at = pcs == p
                    turn = 256
                else:
                    p = int(pcs.min())
                    at = pcs == p
                gi = np.flatnonzero(at)
                pcs[at] = INF
                m_other = int(pcs.min())
                g_pc = p
                full = len(gi) == nlive
                dense = full and nlive == N
                nwait_warp = int(np.count_nonzero(wait == 2))
            if turn > 0:
                turn -= 1
                if turn == 0:
                    pc[gi] = g_pc
                    gi = None
                    continue
            inst = insts[g_pc]
            kind = inst.kind
            steps += 1
            thread_steps += len(gi)
            if steps % check_every == 0:
                self.steps = steps
                if time.monotonic() > deadline or steps > budget:
                    raise RunTimeout(f"no completion after {steps} instruction issues")
            ex = gi                       # executing lanes
            sub = False
            tt = inst.taint
            if tt is not None and tt[0] == "ctl":
                self._t_event("branch", self._t_read(tt[1], None if dense else gi), inst)
            if inst.guard is not None:
                gs, neg = inst.guard
                pv = R[gs] if dense else R[gs][gi]
                if neg:
                    pv = ~pv
                cnt = int(np.count_nonzero(pv))
                if tt is not None and self.RT[gs] is not None:
                    self._t_guard(inst, tt, gs, None if dense else gi, pv)
                if kind == BRA:
                    if cnt == len(gi):
                        if inst.target <= g_pc and not full:
                            back_events += 1
                            if back_events >= 64 and turn <= 0:
                                pc[gi] = inst.target      # let the others have a turn
                                gi = None
                                continue
                        g_pc = inst.target
                    elif cnt == 0:
                        g_pc += 1
                    else:
                        pc[gi[pv]] = inst.target
                        pc[gi[~pv]] = g_pc + 1
                        gi = None
                    continue
                if cnt == 0:
                    g_pc += 1
                    continue
                if cnt != len(gi):
                    ex = gi[pv]
                    sub = True
            if kind == ALU:
                if tt is None:
                    inst.run(self, ex if sub or not full else None)
                else:
                    lanes = ex if sub or not full else None
                    tin = self._t_read(tt[1], lanes)
                    inst.run(self, lanes)
                    self._t_write(tt[2], lanes, tin)
                g_pc += 1
            elif kind == MEM:
                if tt is None:
                    inst.run(self, ex if sub or not dense else None)
                else:
                    self._t_mem(inst, tt, ex if sub or not dense else None)
                g_pc += 1
                if inst.writes_mem and self.direction == "rr":
                    pc[gi] = g_pc          # interleave: another unit's turn after every store
                    gi = None
                    self.rr_yield = True
            elif kind == BRA:
                if inst.target <= g_pc and not full:
                    back_events += 1
                    if back_events >= 64 and turn <= 0:
                        pc[gi] = inst.target
                        gi = None
                        continue
                g_pc = inst.target
            elif kind == NOP:
                g_pc += 1
            elif kind == EXIT:
                live[ex] = False
                nlive -= len(ex)
                self.nlive_now = nlive
                if sub:
                    gi = np.setdiff1d(gi, ex, assume_unique=True)
                    dense = False
                    g_pc += 1
                else:
                    gi = None
            elif kind == WARP:
                r = self._warp_step(inst, ex, g_pc, nwait_warp, sub, gi)
                if r is None:
                    gi = None
                else:
                    gi, nwait_warp = r
                    g_pc += 1
                    full = len(gi) == nlive
                    dense = full and nlive == N
            elif kind == BAR:
                if sub:
                    raise Unsupported(f"predicated barrier: {inst.text}")
                bid_r, cnt_r, opn, pr, wr = inst.extra
                if tt is not None:
                    self._t_write(tt[1], gi, None)      # bar.red: computed by the block
                if cnt_r is not None:
                    c = np.asarray(cnt_r(self, gi))
                    if (c != self.T).any() and (c != self.Tp).any():
                        raise Unsupported(f"barrier with a thread count: {inst.text}")
                bid = np.asarray(bid_r(self, gi))
                if full:
                    if opn is not None:
                        self._bar_red(gi, opn, pr(self, gi), wr)
                    g_pc += 1
                else:
                    wait[gi] = 1
                    self.bar_id[gi] = bid
                    if opn is not None:
                        self.bar_val[gi] = pr(self, gi)
                    pc[gi] = g_pc
                    gi = None
            elif kind == CALL:
                site = inst.extra
                r = self.do_call(site, ex)
                if sub:
                    pc[ex] = r
                    pc[np.setdiff1d(gi, ex, assume_unique=True)] = g_pc + 1
                    gi = None
                elif np.ndim(r) == 0:
                    g_pc = int(r)
                else:
                    pc[ex] = r
                    gi = None
            elif kind == RET:
                rpc = self.do_ret(inst.extra, ex)
                if sub:
                    pc[ex] = rpc
                    pc[np.setdiff1d(gi, ex, assume_unique=True)] = g_pc + 1
                    gi = None
                else:
                    first = int(rpc[0])
                    if (rpc == first).all():
                        g_pc = first
                    else:
                        pc[ex] = rpc
                        gi = None
            elif kind == BRX:
                ix = np.asarray(inst.extra(self, ex), np.int64)
                tbl = inst.target
                if ix.ndim == 0:
                    ix = np.full(len(ex), ix)
                if (ix >= len(tbl)).any() or (ix < 0).any():
                    raise UndefinedBehavior(f"{inst.text}: index out of range")
                tg = tbl[ix]
                if sub:
                    pc[ex] = tg
                    pc[np.setdiff1d(gi, ex, assume_unique=True)] = g_pc + 1
                    gi = None
                elif (tg == tg[0]).all():
                    g_pc = int(tg[0])
                else:
                    pc[ex] = tg
                    gi = None
            elif kind == TRAP:
                raise KernelFault(f"trap ({inst.text})")
            else:
                raise Unsupported(inst.text)
            if self.DEBUG_ALIASING:
                self._check_aliasing(inst)
        stats["issues"] = stats.get("issues", 0) + steps
        stats["thread_instructions"] = stats.get("thread_instructions", 0) + thread_steps

    def _check_aliasing(self, inst):
        seen = {}
        for i, a in enumerate(self.R):
            b = a if a.base is None else a.base
            while getattr(b, "base", None) is not None:
                b = b.base
            if id(b) in seen:
                raise AssertionError(f"after {inst.text}: registers {self.prog.reg_names[seen[id(b)]]} "
                                     f"and {self.prog.reg_names[i]} share memory")
            seen[id(b)] = i
        for p in self.P:
            if id(p) in seen:
                raise AssertionError(f"after {inst.text}: a register aliases param storage")

    def _warp_step(self, inst, ex, g_pc, nwait_warp, sub, gi):
        """Run a warp-synchronous instruction; returns (new group, nwait) or None (regroup)."""
        kind, rm = inst.extra
        E = ex
        if nwait_warp:
            extra = np.flatnonzero((self.wait == 2) & (self.pc == g_pc))
            if len(extra):
                E = np.union1d(E, extra)
        if kind == "activemask":
            self._run_warp(inst, E)
            return self._after_warp(E, gi, ex, sub, g_pc, nwait_warp, E)
        if rm is None:                           # non-.sync vote: the lanes that are here
            self._run_warp(inst, E)
            return self._after_warp(E, gi, ex, sub, g_pc, nwait_warp, E)
        masks = np.broadcast_to(np.asarray(rm(self, E), np.uint32), E.shape)
        lane = (E & 31).astype(np.uint32)
        if ((masks >> lane) & 1 == 0).any():
            i = int(np.flatnonzero((masks >> lane) & 1 == 0)[0])
            raise UndefinedBehavior(f"{inst.text}: lane {int(lane[i])} is not in its membermask "
                                    f"0x{int(masks[i]):08x}")
        inE = self._in_set(E)
        present = self._pack(inE)
        gone = self._pack(~self.live)
        wi = E >> 5
        ok = (masks & ~(present[wi] | gone[wi])) == 0
        if ok.all():
            self._run_warp(inst, E)
            return self._after_warp(E, gi, ex, sub, g_pc, nwait_warp, E)
        okE = E[ok]
        bad = E[~ok]
        if len(okE):
            self._run_warp(inst, okE)
        self.wait[bad] = 2
        self.pc[bad] = g_pc
        self.wait[okE] = 0
        if sub:
            rest = np.setdiff1d(gi, ex, assume_unique=True)
            self.pc[rest] = g_pc + 1
            self.pc[okE] = g_pc + 1
            return None
        if len(okE) == 0:
            return None
        return okE, int(np.count_nonzero(self.wait == 2))

    def _after_warp(self, E, gi, ex, sub, g_pc, nwait_warp, done):
        if nwait_warp:
            self.wait[done] = 0
            nwait_warp = int(np.count_nonzero(self.wait == 2))
        if sub:
            # lanes of the group whose guard was false simply continue
            newg = np.union1d(np.setdiff1d(gi, ex, assume_unique=True), E)
            return newg, nwait_warp
        return E, nwait_warp

    def _bar_red(self, lanes, opn, vals, wr):
        blk = self.block_of_lane[lanes]
        vals = np.broadcast_to(vals, lanes.shape)
        cnt = np.bincount(blk, weights=vals.astype(np.float64), minlength=self.B)
        tot = np.bincount(blk, minlength=self.B)
        c = cnt[blk]
        if opn == "popc":
            wr(self, lanes, c.astype(np.uint32))
        elif opn == "and":
            wr(self, lanes, c == tot[blk])
        else:
            wr(self, lanes, c > 0)

    def _note_split_barrier(self, rel, rb) -> None:
        """A barrier that threads reach at different instructions of the same id, where the
        hardware is not known to merge them: the threads of one *warp* at different barrier
        instructions (any barrier: "barrier{.cta} causes the executing thread to wait for all
        non-exited threads from its warp and marks the warp's arrival"; an H200 gave wrong rows
        for a loop-staging rewrite whose lanes reached two ``barrier.sync 1`` at once), or the
        threads of one *block* at different aligned ones (``bar.sync``/``bar.red``, i.e.
        ``barrier.sync.aligned``: "all threads in the CTA will execute the same barrier
        instruction", else undefined). This emulator releases them together, so the outputs may
        agree; the event (``barrier`` in the taint sinks) rejects a candidate that does it where
        nvcc's code does not (superopt.judge.check)."""
        pcs = self.pc[rel]
        if pcs.min() == pcs.max():
            return
        k = np.int64(len(self.prog.insts) + 1)
        pc64 = pcs.astype(np.int64)
        warps = rel.astype(np.int64) >> 5          # lanes are padded per block to whole warps (Tp)
        pairs = np.unique(warps * k + pc64)
        owners, n = np.unique(pairs // k, return_counts=True)
        in_split_warp = np.isin(warps, owners[n > 1])
        pairs = np.unique(rb.astype(np.int64) * k + pc64)
        owners, n = np.unique(pairs // k, return_counts=True)
        in_split_block = np.isin(rb, owners[n > 1])
        aligned = np.zeros(len(rel), bool)
        if in_split_block.any():
            up, inv = np.unique(pcs, return_inverse=True)
            aligned = np.array([_aligned_barrier(self.prog.insts[int(p)].text) for p in up], bool)[inv]
        # a block split at aligned barriers: every thread of such a block at an aligned one counts
        block_aligned = np.isin(rb, np.unique(rb[in_split_block & aligned]))
        bad = in_split_warp | (in_split_block & block_aligned)
        if not bad.any():
            return
        at = np.unique(pcs[bad])
        lanes = int(np.count_nonzero(bad))
        texts = " / ".join(f"`{self.prog.insts[int(p)].text.strip()}`" for p in at[:3])
        events = self.stats.setdefault("taint", {})
        e = events.get("barrier")
        if e is None:
            events["barrier"] = {"count": 1, "lanes": lanes, "first": texts,
                                 "warp": bool(in_split_warp.any())}
        else:
            e["count"] += 1
            e["lanes"] += lanes
            e["warp"] = e.get("warp", False) or bool(in_split_warp.any())

    def _resolve_waits(self):
        """Every live thread waits: complete barriers or warp syncs, else fail."""
        live, wait = self.live, self.wait
        B = self.B
        blk = self.block_of_lane
        w1 = live & (wait == 1)
        released = False
        if w1.any():
            nl = np.bincount(blk[live], minlength=B)
            nw = np.bincount(blk[w1], minlength=B)
            ok_blocks = (nw == nl) & (nl > 0)
            if ok_blocks.any():
                rel = np.flatnonzero(w1 & ok_blocks[blk])
                # every waiting thread of a block must wait on the same barrier id
                ids, rb = self.bar_id[rel], blk[rel]
                ref = np.zeros(B, np.int64)
                ref[rb] = ids
                if (ref[rb] != ids).any():
                    raise Unsupported("threads of a block wait at different named barriers")
                self._note_split_barrier(rel, rb)
                for p in (np.unique(self.pc[rel]) if self._has_bar_red else ()):
                    lanes = rel[self.pc[rel] == p]
                    inst = self.prog.insts[int(p)]
                    opn = inst.extra[2]
                    if opn is not None:
                        self._bar_red_release(lanes, rel, opn, inst.extra[4])
                self.pc[rel] += 1
                wait[rel] = 0
                released = True
        if released:
            return int(np.count_nonzero(wait == 2))
        w2 = live & (wait == 2)
        if w2.any():
            lanes = np.flatnonzero(w2)
            # lanes whose membermask is now complete (the others exited or wait at the same
            # instruction) become runnable again and execute it together
            gone = self._pack(~live)
            freed = []
            for p in np.unique(self.pc[lanes]):
                at = lanes[self.pc[lanes] == p]
                inst = self.prog.insts[int(p)]
                rm = inst.extra[1]
                if rm is None:
                    freed.append(at)
                    continue
                m = np.broadcast_to(np.asarray(rm(self, at), np.uint32), at.shape)
                here = self._pack(self._in_set(at))
                ok = (m & ~(here[at >> 5] | gone[at >> 5])) == 0
                freed.append(at[ok])
            freed = np.concatenate(freed) if freed else np.zeros(0, np.int64)
            if len(freed):
                wait[freed] = 0
                return int(np.count_nonzero(wait == 2))
            kinds = {self.prog.insts[int(p)].extra[0] for p in np.unique(self.pc[lanes])}
            if kinds == {"warpsync"}:
                # __syncwarp at different points: release when every mask lane waits or exited
                masks = np.concatenate([np.broadcast_to(np.asarray(
                    self.prog.insts[int(p)].extra[1](self, lanes[self.pc[lanes] == p]), np.uint32),
                    (int(np.count_nonzero(self.pc[lanes] == p)),)) for p in np.unique(self.pc[lanes])])
                order = np.concatenate([lanes[self.pc[lanes] == p] for p in np.unique(self.pc[lanes])])
                waitw = self._pack(w2)
                gone = self._pack(~live)
                wi = order >> 5
                if ((masks & ~(waitw[wi] | gone[wi])) == 0).all():
                    self.pc[order] += 1
                    wait[order] = 0
                    return 0
            texts = sorted({self.prog.insts[int(p)].text for p in np.unique(self.pc[lanes])})
            missing = []
            raise Unsupported("warp-synchronous instruction whose membermask threads never all "
                              "reach it together: " + "; ".join(texts[:3]) + "".join(missing))
        waiting = np.flatnonzero(live & (wait != 0))
        texts = sorted({self.prog.insts[int(p)].text for p in np.unique(self.pc[waiting])})
        raise Deadlock("threads wait forever at: " + "; ".join(texts[:3]))

    def _bar_red_release(self, lanes, rel, opn, wr):
        blk = self.block_of_lane
        cnt = np.bincount(blk[rel], weights=self.bar_val[rel].astype(np.float64), minlength=self.B)
        tot = np.bincount(blk[rel], minlength=self.B)
        c = cnt[blk[lanes]]
        if opn == "popc":
            wr(self, lanes, c.astype(np.uint32))
        elif opn == "and":
            wr(self, lanes, c == tot[blk[lanes]])
        else:
            wr(self, lanes, c > 0)


class Poison:
    """Random bytes for memory a kernel may read before writing (shared, local): a random
    pattern of a prime length, tiled, so each launch is cheap and differs with the seed."""

    def __init__(self, rng, period: int = 65521, zero_registers: bool = False):
        self.pattern = None if rng is None else rng.integers(0, 256, period, dtype=np.uint8)
        self.zero_registers = zero_registers

    def __call__(self, n: int, start: int = 0) -> np.ndarray:
        if self.pattern is None:
            return np.zeros(n, np.uint8)
        p = self.pattern.size
        start %= p
        if start + n <= p:
            return self.pattern[start:start + n].copy()
        reps = -(-(start + n) // p)
        return np.tile(self.pattern, reps)[start:start + n].copy()

    def register(self, n: int, dt, slot: int) -> np.ndarray:
        """Initial contents of register ``slot`` for ``n`` lanes: random bits (a random
        bool for predicates), at a per-register offset into the pattern so registers differ."""
        dt = np.dtype(dt)
        if self.pattern is None or self.zero_registers:
            return np.zeros(n, dt)
        raw = self(n * dt.itemsize, 7919 * (slot + 1))
        if dt == np.bool_:
            return (raw & 1).astype(bool)
        return raw.view(dt)


class Machine:
    """Where and when a launch runs, as the special registers show it: the SM of each block
    (``%smid``), the warp slot of each warp (``%warpid``: a permutation of the block's slots,
    unique within the CTA as PTX says), ``%nsmid``, ``%gridid`` and where the clocks start.
    Drawn per launch from its seed, so code that depends on them (a fast path taken only on
    SM 0, ``%warpid`` used as ``tid / 32``) gives other results on other launches, as on a GPU;
    ``rng=None`` gives fixed values (SM 0, warp slot = warp index, 132 SMs, clocks from 1000)."""

    NSMIDS = (66, 78, 108, 114, 132, 144)

    def __init__(self, rng, nblocks: int):
        self.rng = rng
        self.nblocks = int(nblocks)
        self.nsmid = 132 if rng is None else int(rng.choice(self.NSMIDS))
        self.gridid = 0 if rng is None else int(rng.integers(1, 1 << 62))
        self._smid = None
        self._slots: dict = {}
        self._counters: dict = {}

    def smid(self, gb):
        if self._smid is None:
            self._smid = (np.zeros(self.nblocks, np.uint32) if self.rng is None
                          else self.rng.integers(0, self.nsmid, self.nblocks).astype(np.uint32))
        return self._smid[gb]

    def warpid(self, gb, w, nwarps: int):
        perm = self._slots.get(nwarps)
        if perm is None:
            if self.rng is None:
                perm = np.broadcast_to(np.arange(nwarps, dtype=np.uint32), (self.nblocks, nwarps))
            else:
                perm = np.argsort(self.rng.random((self.nblocks, nwarps)), axis=1).astype(np.uint32)
            self._slots[nwarps] = perm
        return perm[gb, w]

    def counter(self, name: str, gb):
        """Start of ``%clock*`` (per block: each SM has its own counter) or ``%globaltimer*``
        (one for the launch, in nanoseconds) as uint64 per lane."""
        kind = "clock" if name.startswith("%clock") else "timer"
        base = self._counters.get(kind)
        if base is None:
            if self.rng is None:
                base = np.full(self.nblocks, 1000, np.uint64)
            elif kind == "clock":
                base = self.rng.integers(1 << 20, 1 << 40, self.nblocks).astype(np.uint64)
            else:
                base = np.full(self.nblocks, int(self.rng.integers(1 << 60, 1 << 61)), np.uint64)
            self._counters[kind] = base
        return base[gb]


def _aligned_barrier(text: str) -> bool:
    """``bar.sync``, ``bar.red`` (``bar`` is ``barrier....aligned``) or an explicit ``.aligned``."""
    words = text.strip().split()
    op = next((w for w in words if not w.startswith("@")), "")
    return op == "bar" or op.startswith("bar.") or ".aligned" in op
