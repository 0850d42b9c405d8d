"""The abstract state of the traced lanes: the interval domain over registers.

A :class:`LaneDomain` holds, for every lane (one path of one thread; a thread has several
lanes after a branch on unknown data forks it), an interval per integer register with the
set of sources it derives from (its *taint*: ``ptr:k`` for pointer parameter k, ``data:...``
for memory contents, ...), the comparison formula behind each predicate register (so that a
branch narrows the compared registers), and where the lane is (``pc``, an RPO block index)
and whether it is alive. It forks lanes, merges the lanes of one thread that meet (interval
join) and refines registers from branch outcomes. It knows nothing of instructions
(:mod:`.lanes`), of memory (:mod:`.accesses`) or of the order blocks run in (:mod:`.tracer`).
"""
from __future__ import annotations

import numpy as np

from ptx_ir.nodes import Imm, Reg, Sym
from superopt.specs.trace.intervals import (I64, PARAM_STRIDE, SYM_BASE, _const, _full,
                                            _unsigned_view, _wrap)


class _Regs:
    """Register file over lanes: name -> [lo, hi, taint]."""

    def __init__(self, cap: int):
        self.cap = cap
        self.lo: dict[str, np.ndarray] = {}
        self.hi: dict[str, np.ndarray] = {}
        self.taint: dict[str, frozenset] = {}

    def grow(self, cap: int, widths: dict):
        for name in list(self.lo):
            w = widths.get(name, 32)
            flo, fhi = _full(w, cap - self.cap)
            self.lo[name] = np.concatenate([self.lo[name], flo])
            self.hi[name] = np.concatenate([self.hi[name], fhi])
        self.cap = cap


class LaneDomain:
    """Registers of all lanes of one chunk of threads (see the module docstring)."""

    def __init__(self, *, widths: dict, tracked: set, th: dict, nthreads: int, entry_pc: int,
                 block: tuple, grid: tuple, shared_bytes: int, sym_value: dict):
        self.widths = widths
        self.tracked = tracked
        self.th = th                                # special registers per thread
        self.nthreads = nthreads
        self.block = block
        self.grid = grid
        self.shared_bytes = shared_bytes
        self.sym_value = sym_value
        cap = nthreads
        self.regs = _Regs(cap)
        self.pfid: dict[str, np.ndarray] = {}      # predicate register -> formula id per lane
        self.formulas: list = []
        self.formula_ids: dict = {}
        self.formula_regs: dict[int, frozenset] = {}
        self.reg_formulas: dict[str, set] = {}
        self.lane_thread = np.arange(nthreads, dtype=I64)
        self.alive = np.ones(cap, bool)
        self.pc = np.full(cap, entry_pc, I64)
        self.forked = False
        self.last_merge_count = nthreads
        self.n_alive = nthreads
        self.snap: dict = {}                        # watched loop header -> states seen
        # Floating-point registers whose value is an exact fact of the launch (float
        # parameters, immediates, exact integers converted, and +-* of those): value per
        # lane (float64 holding the f32/f64 value) and where it is known. Everything else
        # about floats is unknown, as before.
        self.fval: dict[str, np.ndarray] = {}
        self.fknown: dict[str, np.ndarray] = {}

    # -- lanes
    def watch_filter(self, block, sel: np.ndarray) -> np.ndarray:
        """At a loop header whose exit depends on data: a lane arriving in exactly the state
        its thread had here before repeats what it already did (spin and CAS loops): drop it."""
        snap = self.snap.get(block)
        if snap is None:
            snap = self.snap[block] = {"valid": np.zeros(self.nthreads, bool), "lo": {}, "hi": {}}
        th = self.lane_thread[sel]
        same = snap["valid"][th].copy()
        r = self.regs
        for name in r.lo:
            if not same.any():
                break
            slo = snap["lo"].get(name)
            if slo is None:
                same[:] = False
                break
            same &= (slo[th] == r.lo[name][sel]) & (snap["hi"][name][th] == r.hi[name][sel])
        fsnap = snap.setdefault("f", {})
        for name, known in self.fknown.items():     # exact floats are state too
            if not same.any():
                break
            if name not in fsnap:
                same &= ~known[sel]
                continue
            sv, sk = fsnap[name]
            v = self.fval[name][sel]
            k = known[sel]
            same &= (sk[th] == k) & (~k | (sv[th] == v) | (np.isnan(sv[th]) & np.isnan(v)))
        if same.any():
            self.alive[sel[same]] = False
            sel = sel[~same]
            th = th[~same]
        for name in r.lo:
            if name not in snap["lo"]:
                snap["lo"][name] = np.zeros(self.nthreads, I64)
                snap["hi"][name] = np.zeros(self.nthreads, I64)
            snap["lo"][name][th] = r.lo[name][sel]
            snap["hi"][name][th] = r.hi[name][sel]
        for name, known in self.fknown.items():
            if name not in fsnap:
                fsnap[name] = (np.zeros(self.nthreads), np.zeros(self.nthreads, bool))
            fsnap[name][0][th] = self.fval[name][sel]
            fsnap[name][1][th] = known[sel]
        snap["valid"][th] = True
        return sel

    def merge(self, sel: np.ndarray) -> np.ndarray:
        threads = self.lane_thread[sel]
        uniq, first, inverse = np.unique(threads, return_index=True, return_inverse=True)
        if uniq.size == sel.size:
            return sel
        keep = sel[first]
        target = keep[inverse]                 # for every lane in sel, the lane it merges into
        dup = sel != target
        src, dst = sel[dup], target[dup]
        r = self.regs
        # lanes holding pointers into different buffers stay apart (a join would span both)
        compat = np.ones(src.size, bool)
        if int(self.alive.sum()) < 8 * self.nthreads:
            for name, taint in r.taint.items():
                if not any(t.startswith("ptr:") for t in taint):
                    continue
                a_lo, a_hi = r.lo[name][src], r.hi[name][src]
                b_lo, b_hi = r.lo[name][dst], r.hi[name][dst]
                both_ptr = (a_lo == a_hi) & (b_lo == b_hi) & (a_lo >= PARAM_STRIDE // 2) & (a_lo < SYM_BASE) \
                    & (b_lo >= PARAM_STRIDE // 2) & (b_lo < SYM_BASE)
                compat &= ~(both_ptr & (np.abs(a_lo - b_lo) >= (1 << 40)))
        if not compat.all():
            apart = src[~compat]
            src, dst = src[compat], dst[compat]
            keep = np.concatenate([keep, apart])
        for name in list(r.lo):
            lo, hi = r.lo[name], r.hi[name]
            np.minimum.at(lo, dst, lo[src])
            np.maximum.at(hi, dst, hi[src])
        for name, f in self.pfid.items():
            differ = f[src] != f[dst]
            f[dst[differ]] = -1
        for name, known in self.fknown.items():
            v = self.fval[name]
            same = known[src] & known[dst] & ((v[src] == v[dst]) | (np.isnan(v[src]) & np.isnan(v[dst])))
            known[dst[~same]] = False
        self.alive[src] = False
        return np.sort(keep)

    def merge_all(self):
        live = np.flatnonzero(self.alive)
        key = self.pc[live] * (self.nthreads + 1) + self.lane_thread[live]
        del key
        for pcv in np.unique(self.pc[live]):
            part = live[self.pc[live] == pcv]
            self.merge(part)
        self.last_merge_count = max(self.nthreads, int(self.alive.sum()))

    def fork(self, sel: np.ndarray) -> np.ndarray:
        """Copies of lanes ``sel``; returns the new lane ids."""
        k = sel.size
        free = np.flatnonzero(~self.alive)
        if free.size < k:
            cap = self.regs.cap
            new_cap = max(cap * 2, cap + k)
            self.regs.grow(new_cap, self.widths)
            extra = new_cap - cap
            self.alive = np.concatenate([self.alive, np.zeros(extra, bool)])
            self.pc = np.concatenate([self.pc, np.zeros(extra, I64)])
            self.lane_thread = np.concatenate([self.lane_thread, np.zeros(extra, I64)])
            for name in self.pfid:
                self.pfid[name] = np.concatenate([self.pfid[name], np.full(extra, -1, I64)])
            for name in self.fknown:
                self.fval[name] = np.concatenate([self.fval[name], np.zeros(extra)])
                self.fknown[name] = np.concatenate([self.fknown[name], np.zeros(extra, bool)])
            free = np.flatnonzero(~self.alive)
        new = free[:k]
        r = self.regs
        for name in r.lo:
            r.lo[name][new] = r.lo[name][sel]
            r.hi[name][new] = r.hi[name][sel]
        for name, f in self.pfid.items():
            f[new] = f[sel]
        for name, known in self.fknown.items():
            known[new] = known[sel]
            self.fval[name][new] = self.fval[name][sel]
        self.alive[new] = True
        self.pc[new] = self.pc[sel]
        self.lane_thread[new] = self.lane_thread[sel]
        self.forked = True
        return new


    # -- register access
    def ensure(self, name: str):
        r = self.regs
        if name not in r.lo:
            w = self.widths.get(name, 32)
            r.lo[name], r.hi[name] = _full(w, r.cap)
            r.taint[name] = frozenset({"uninitialised"})

    def get(self, op, sel, w_hint: int = 32):
        """(lo, hi, taint) of an operand for lanes sel."""
        n = sel.size
        if isinstance(op, Reg):
            name = op.name
            base = name.split(".")[0]
            if base in ("%tid", "%ctaid"):
                v = self.th[name][self.lane_thread[sel]]
                return v, v, frozenset()
            if base == "%ntid":
                v = np.full(n, self.block["xyz".index(name[-1])], I64)
                return v, v, frozenset()
            if base == "%nctaid":
                v = np.full(n, self.grid["xyz".index(name[-1])], I64)
                return v, v, frozenset()
            if name == "%laneid":
                v = self.th["lin"][self.lane_thread[sel]] % 32
                return v, v, frozenset()
            if name in ("%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt", "%lanemask_ge"):
                lane = self.th["lin"][self.lane_thread[sel]] % 32
                one = np.ones(n, I64)
                eq = one << lane
                v = {"%lanemask_eq": eq, "%lanemask_lt": eq - 1, "%lanemask_le": (eq << 1) - 1,
                     "%lanemask_gt": _wrap(~((eq << 1) - 1), 32), "%lanemask_ge": _wrap(~(eq - 1), 32)}[name]
                v = _wrap(v, 32)
                return v, v, frozenset()
            if name == "%dynamic_smem_size":
                v = np.full(n, self.shared_bytes, I64)
                return v, v, frozenset()
            if op.is_special:
                lo, hi = _full(64 if name.startswith(("%clock64", "%globaltimer", "%gridid")) else 32, n)
                return lo, hi, frozenset({"special"})
            if name not in self.tracked and name not in self.regs.lo:
                lo, hi = _full(self.widths.get(name, 32), n)
                return lo, hi, frozenset({"float"})
            self.ensure(name)
            return self.regs.lo[name][sel], self.regs.hi[name][sel], self.regs.taint[name]
        if isinstance(op, Imm):
            if op.is_float:
                lo, hi = _full(w_hint, n)
                return lo, hi, frozenset({"float"})
            v = np.full(n, _const(int(op.value), w_hint), I64)
            return v, v, frozenset()
        if isinstance(op, Sym):
            if op.name in self.sym_value:
                v = np.full(n, self.sym_value[op.name], I64)
                return v, v, frozenset({f"sym:{op.name}"})
            lo, hi = _full(64, n)
            return lo, hi, frozenset({f"symbol {op.name}"})
        lo, hi = _full(w_hint, n)
        return lo, hi, frozenset({"operand"})

    def put(self, name: str, sel, lo, hi, taint: frozenset, maybe=None):
        """Write lanes sel (``maybe``: lanes where the write may not happen: join)."""
        if name not in self.tracked:
            self.fforget(name, sel)
            return
        self.ensure(name)
        r = self.regs
        lo = np.asarray(lo, I64)
        hi = np.asarray(hi, I64)
        if maybe is not None:
            olo = r.lo[name][sel]
            ohi = r.hi[name][sel]
            lo = np.where(maybe, np.minimum(lo, olo), lo)
            hi = np.where(maybe, np.maximum(hi, ohi), hi)
            taint = taint | r.taint[name]
        r.lo[name][sel] = lo
        r.hi[name][sel] = hi
        if np.array_equal(lo, hi):
            taint = frozenset(t for t in taint if t.startswith(("ptr:", "sym:", "struct:")))
        old = r.taint[name] - {"uninitialised"}
        r.taint[name] = taint if sel.size >= self.n_alive else (taint | old)
        # Formulas that read this register no longer hold for these lanes.
        fids = self.reg_formulas.get(name)
        if fids:
            arr = np.fromiter(fids, I64)
            for f in self.pfid.values():
                fs = f[sel]
                hit = np.isin(fs, arr)
                if hit.any():
                    fs[hit] = -1
                    f[sel] = fs

    # -- exact floats
    def fget(self, name: str, sel):
        """(value, known) of float register ``name`` for lanes sel."""
        known = self.fknown.get(name)
        if known is None:
            return np.zeros(sel.size), np.zeros(sel.size, bool)
        return self.fval[name][sel], known[sel]

    def fput(self, name: str, sel, value, known, maybe=None):
        if name not in self.fknown:
            self.fval[name] = np.zeros(self.regs.cap)
            self.fknown[name] = np.zeros(self.regs.cap, bool)
        known = np.asarray(known, bool)
        if maybe is not None:                       # a guarded write that may not happen
            old_v, old_k = self.fget(name, sel)
            known = known & (~maybe | (old_k & (old_v == value)))
        self.fval[name][sel] = value
        self.fknown[name][sel] = known

    def fforget(self, name: str, sel):
        known = self.fknown.get(name)
        if known is not None:
            known[sel] = False

    def put_top(self, name, sel, w, taint, maybe=None):
        lo, hi = _full(w, sel.size)
        self.put(name, sel, lo, hi, taint, maybe)


    # -- predicates and refinement
    def pred(self, name, sel):
        self.ensure(name)
        return self.regs.lo[name][sel], self.regs.hi[name][sel]

    def formula_id(self, f) -> int:
        fid = self.formula_ids.get(f)
        if fid is None:
            fid = len(self.formulas)
            self.formulas.append(f)
            self.formula_ids[f] = fid
            regs = set()
            if f[0] == "cmp":
                for x in f[4:6]:
                    if isinstance(x, str):
                        regs.add(x)
            else:
                for sub in f[1:]:
                    regs |= self.formula_regs.get(sub, frozenset())
            self.formula_regs[fid] = frozenset(regs)
            for r in regs:
                self.reg_formulas.setdefault(r, set()).add(fid)
        return fid

    def set_pfid(self, pred: str, sel, fids):
        if pred not in self.pfid:
            self.pfid[pred] = np.full(self.regs.cap, -1, I64)
        self.pfid[pred][sel] = fids

    def refine(self, pred: str, lanes: np.ndarray, outcome: bool):
        if lanes.size == 0 or pred not in self.pfid:
            return
        fids = self.pfid[pred][lanes]
        if (fids == fids[0]).all():
            if fids[0] >= 0:
                self.apply(int(fids[0]), lanes, outcome)
            return
        for fid in np.unique(fids):
            if fid < 0:
                continue
            part = lanes[fids == fid]
            self.apply(int(fid), part, outcome)

    def apply(self, fid: int, lanes, outcome: bool):
        f = self.formulas[fid]
        kind = f[0]
        if kind == "not":
            if f[1] >= 0:
                self.apply(f[1], lanes, not outcome)
            return
        if kind in ("and", "or"):
            if outcome == (kind == "and"):
                for sub in f[1:]:
                    if sub >= 0:
                        self.apply(sub, lanes, outcome)
            return
        # ("cmp", cmp, unsigned, width, a, b) -- a, b: register name or int
        _, cmp, unsigned, w, a, b = f
        if not outcome:
            cmp = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "eq": "ne", "ne": "eq"}[cmp]
        alo, ahi = self.operand_interval(a, lanes, w)
        blo, bhi = self.operand_interval(b, lanes, w)
        if unsigned:
            if w >= 64:
                return
            alo, ahi = _unsigned_view(alo, ahi, w)
            blo, bhi = _unsigned_view(blo, bhi, w)
        else:
            alo, ahi, blo, bhi = (x.astype(np.float64) for x in (alo, ahi, blo, bhi))
        # New bounds for a (from b) and for b (from a).
        nalo, nahi, nblo, nbhi = alo.copy(), ahi.copy(), blo.copy(), bhi.copy()
        if cmp == "lt":
            nahi = np.minimum(ahi, bhi - 1); nblo = np.maximum(blo, alo + 1)
        elif cmp == "le":
            nahi = np.minimum(ahi, bhi); nblo = np.maximum(blo, alo)
        elif cmp == "gt":
            nalo = np.maximum(alo, blo + 1); nbhi = np.minimum(bhi, ahi - 1)
        elif cmp == "ge":
            nalo = np.maximum(alo, blo); nbhi = np.minimum(bhi, ahi)
        elif cmp == "eq":
            nalo = np.maximum(alo, blo); nahi = np.minimum(ahi, bhi)
            nblo, nbhi = nalo, nahi
        elif cmp == "ne":
            bex = blo == bhi
            nalo = np.where(bex & (alo == blo), alo + 1, alo)
            nahi = np.where(bex & (ahi == blo), ahi - 1, ahi)
            aex = alo == ahi
            nblo = np.where(aex & (blo == alo), blo + 1, blo)
            nbhi = np.where(aex & (bhi == alo), bhi - 1, bhi)
        dead = (nalo > nahi) | (nblo > nbhi)
        if dead.any():
            self.alive[lanes[dead]] = False
        for x, lo, hi in ((a, nalo, nahi), (b, nblo, nbhi)):
            if not isinstance(x, str):
                continue
            keep = ~dead
            if not keep.any():
                continue
            ln = lanes[keep]
            lo, hi = lo[keep], hi[keep]
            if unsigned:
                half = float(1 << (w - 1))
                full = float(1 << w)
                # back to canonical signed: only when the unsigned range stays on one side
                low_side = hi <= half - 1
                high_side = lo >= half
                lo = np.where(low_side, lo, np.where(high_side, lo - full, np.nan))
                hi = np.where(low_side, hi, np.where(high_side, hi - full, np.nan))
                ok = ~np.isnan(lo)
                ln, lo, hi = ln[ok], lo[ok], hi[ok]
            if ln.size == 0:
                continue
            self.ensure(x)
            olo = self.regs.lo[x][ln]
            ohi = self.regs.hi[x][ln]
            self.regs.lo[x][ln] = np.maximum(olo, lo.astype(I64))
            self.regs.hi[x][ln] = np.minimum(ohi, hi.astype(I64))

    def operand_interval(self, x, lanes, w):
        if isinstance(x, str):
            self.ensure(x)
            return self.regs.lo[x][lanes], self.regs.hi[x][lanes]
        v = np.full(lanes.size, x, I64)
        return v, v



def map_formulas(tracer, kind, fa, fb):
    out = np.full(fa.size, -1, I64)
    if kind == "not":
        for v in np.unique(fa):
            if v >= 0:
                out[fa == v] = tracer.formula_id(("not", int(v)))
        return out
    if fa.size and (fa == fa[0]).all() and (fb == fb[0]).all():
        if fa[0] >= 0 or fb[0] >= 0:
            out[:] = tracer.formula_id((kind, int(fa[0]), int(fb[0])))
        return out
    key = (fa + 1) * (1 << 31) + (fb + 1)
    uniq, inv = np.unique(key, return_inverse=True)
    for i, kv in enumerate(uniq):
        x, y = int(kv >> 31) - 1, int(kv & ((1 << 31) - 1)) - 1
        if x < 0 and y < 0:
            continue
        out[inv == i] = tracer.formula_id((kind, x, y))
    return out
