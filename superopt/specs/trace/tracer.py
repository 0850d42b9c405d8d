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
  distribution the spec will use (``index:0..L``). Floating-point registers are not
  tracked at all.
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

Anything the tracer cannot model soundly (calls, textures, bulk copies, a loop whose exit
depends on data and does not settle within the step budget) ends the trace with a
``problem``; callers then say "not verifiable" with that reason.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from ptx_ir import isa
from ptx_ir.nodes import Addr, Imm, Instruction, Neg, Pair, Reg, Sym, Vec, VarDecl, type_size

__all__ = ["TraceResult", "BufferAccess", "trace", "TraceError", "PARAM_STRIDE"]

# --------------------------------------------------------------------------- address map
PARAM_STRIDE = 1 << 41          # pointer param k lives at (k+1) * 2**41, offsets |o| < 2**40
SYM_BASE = 1 << 50              # module .global/.const variable j at SYM_BASE + (j+1) * 2**36
SYM_STRIDE = 1 << 36
SHARED_WIN = 1 << 51            # generic address of shared byte a (32-bit) is SHARED_WIN + a
SHARED_STRIDE = 1 << 21         # shared variable j at (j+1) * 2**21 (32-bit shared address)
LOCAL_WIN = (1 << 51) + (1 << 44)
LOCAL_END = (1 << 51) + (1 << 45)
BIG = 1 << 62                   # "unbounded" for 64-bit values
I64 = np.int64

INT_TYPES = {".u8", ".s8", ".b8", ".u16", ".s16", ".b16", ".u32", ".s32", ".b32", ".u64", ".s64", ".b64"}
FLOAT_TYPES = {".f16", ".f16x2", ".bf16", ".bf16x2", ".f32", ".f64", ".tf32", ".e4m3", ".e5m2",
               ".e4m3x2", ".e5m2x2"}


class TraceError(Exception):
    """The kernel does something the tracer cannot bound; the message says what."""


@dataclass
class BufferAccess:
    """What one pointer parameter saw during a trace (byte offsets from its base)."""
    index: int
    name: str
    lo: int | None = None          # lowest byte offset accessed
    end: int | None = None         # one past the highest byte accessed
    read: bool = False
    written: bool = False
    atomic: bool = False
    types: dict = field(default_factory=dict)   # PTX type -> bytes per access (max)

    def add(self, lo: int, end: int, kind: str, ptx_type: str | None, nbytes: int):
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.end = end if self.end is None else max(self.end, end)
        if kind == "load":
            self.read = True
        elif kind == "store":
            self.written = True
        else:
            self.read = self.written = self.atomic = True
        if ptx_type:
            self.types[ptx_type] = max(self.types.get(ptx_type, 0), nbytes)


@dataclass
class TraceResult:
    buffers: dict                    # param index -> BufferAccess (pointer params only)
    problems: list                   # strings: the launch cannot be verified (global side)
    shape_problems: list             # strings: this block shape does not suit the kernel
    # Unbounded accesses whose unknown part comes only from loads of these params
    # (param index -> example description): an index distribution on them may fix it.
    index_sources: dict
    shared_used: int = 0             # highest dynamic shared byte touched + 1
    lane_steps: int = 0              # sum over steps of active lanes x instructions (cost)
    steps: int = 0                   # scheduling steps (blocks executed), the other cost
    # Sizes should be multiples of this (a vector access would be misaligned, or a
    # full-warp collective would run with lanes that already left): 1 when nothing asks.
    needs_multiple: int = 1
    multiple_reason: str = ""
    threads: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems and not self.shape_problems


# --------------------------------------------------------------------------- helpers

def _width_of_type(t: str | None) -> int:
    if t is None:
        return 32
    if t == ".pred":
        return 1
    return type_size(t) * 8


def _signed_type(t: str | None) -> bool:
    return bool(t) and t.startswith(".s")


def _wrap(x: np.ndarray, w: int) -> np.ndarray:
    """Exact values to the canonical (signed) representation of a w-bit register."""
    if w >= 64:
        return x
    half = I64(1 << (w - 1))
    mask = I64((1 << w) - 1)
    return ((x + half) & mask) - half


def _unsigned_exact(x: np.ndarray, w: int) -> np.ndarray:
    """Exact canonical values as unsigned w-bit numbers (w < 64), int64."""
    if w >= 64:
        return x
    return x & I64((1 << w) - 1)


def _norm_interval(lo: np.ndarray, hi: np.ndarray, w: int):
    """Float64 (or int) interval bounds to canonical int64 bounds for a w-bit register."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if w >= 64:
        bad = (lo < -BIG) | (hi > BIG) | np.isnan(lo) | np.isnan(hi)
        lo = np.where(bad, -BIG, np.floor(lo))
        hi = np.where(bad, BIG, np.ceil(hi))
        return lo.astype(I64), hi.astype(I64)
    half = float(1 << (w - 1))
    full = float(1 << w)
    olo = np.floor(lo)
    ohi = np.ceil(hi)
    fits = (olo >= -half) & (ohi <= half - 1)
    upper = (olo >= half) & (ohi <= full - 1)
    lower = (olo >= -full) & (ohi < -half)
    rlo = np.where(fits, olo, np.where(upper, olo - full, np.where(lower, olo + full, -half)))
    rhi = np.where(fits, ohi, np.where(upper, ohi - full, np.where(lower, ohi + full, half - 1)))
    return rlo.astype(I64), rhi.astype(I64)


def _full(w: int, n: int):
    if w >= 64:
        return np.full(n, -BIG, I64), np.full(n, BIG, I64)
    if w == 1:
        return np.zeros(n, I64), np.ones(n, I64)
    return np.full(n, -(1 << (w - 1)), I64), np.full(n, (1 << (w - 1)) - 1, I64)


def _type_range(t: str) -> tuple[int, int]:
    """Value range of a loaded value of PTX type t, canonical in its own width."""
    w = _width_of_type(t)
    if t in (".u8", ".u16", ".u32") or (t.startswith(".b") and w < 32):
        return 0, (1 << w) - 1
    if w >= 64:
        return -BIG, BIG
    return -(1 << (w - 1)), (1 << (w - 1)) - 1


def _unsigned_view(lo, hi, w):
    """Interval (canonical signed) seen as unsigned w-bit numbers (float64 arrays)."""
    lo = lo.astype(np.float64)
    hi = hi.astype(np.float64)
    if w >= 64:
        neg = lo < 0
        return np.where(neg, 0.0, lo), np.where(neg, float(BIG), hi)
    full = float(1 << w)
    # the low w bits of every value in [lo, hi]: one contiguous range unless it wraps
    mlo = np.mod(lo, full)
    mhi = np.mod(hi, full)
    whole = (hi - lo >= full) | (mlo > mhi)
    return np.where(whole, 0.0, mlo), np.where(whole, full - 1, mhi)


# --------------------------------------------------------------------------- the tracer

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


class Tracer:
    MAX_STEPS = 20_000
    MAX_EXIT_FORKS = 1000           # per thread, at one loop-exit branch
    WATCH_LIMIT = 1 << 23           # threads x registers kept per watched loop header
    MAX_LANE_STEPS = 50_000_000
    MAX_SPAN = 1 << 31              # an access range wider than this counts as unbounded
    CHUNK_THREADS = 1 << 16

    def __init__(self, module, fn, grid, block, shared_bytes: int, params: dict,
                 load_ranges: dict | None = None, deadline: float | None = None):
        """``params``: param index -> ("ptr",) | ("int", value) | ("float",) | ("struct",) |
        ("bytes", value) (a small by-value struct given as the little-endian integer ``value``).
        ``load_ranges``: param index -> (lo, hi) for values loaded from that buffer."""
        self.module = module
        self.fn = fn
        self.grid = tuple(int(g) for g in grid)
        self.block = tuple(int(b) for b in block)
        self.shared_bytes = int(shared_bytes)
        self.params = params
        self.load_ranges = dict(load_ranges or {})
        self.deadline = deadline
        self.param_index = {p.name: i for i, p in enumerate(fn.params)}
        self.buffers = {i: BufferAccess(i, p.name) for i, p in enumerate(fn.params)
                        if params.get(i, ("int",))[0] == "ptr"}
        self.problems: list[str] = []
        self.shape_problems: list[str] = []
        self.index_sources: dict = {}
        self.lane_steps = 0
        self.steps = 0
        self.needs_multiple = 1
        self.multiple_reason = ""
        self._reach_cache: dict = {}
        self._setup_registers()
        self._setup_symbols()
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

    def _setup_symbols(self):
        self.sym_value: dict[str, int] = {}
        self.sym_kind: dict[str, str] = {}
        self.shared_size: dict[int, int | None] = {}   # shared slot -> size (None: dynamic)
        self.shared_name: dict[int, str] = {}
        self.global_syms: dict[int, str] = {}
        decls = [d for d in self.module.globals]
        decls += [s for s in (self.fn.body or ()) if isinstance(s, VarDecl) and s.space != ".reg"]
        gslot = 0
        sslot = 0
        dyn_slot = None
        for d in decls:
            space = d.space.split("::")[0]
            if space == ".shared":
                size = d.size
                if size is None:                    # extern dynamic shared: all alias
                    if dyn_slot is None:
                        sslot += 1
                        dyn_slot = sslot
                        self.shared_size[dyn_slot] = None
                        self.shared_name[dyn_slot] = d.name
                    slot = dyn_slot
                else:
                    sslot += 1
                    slot = sslot
                    self.shared_size[slot] = size
                    self.shared_name[slot] = d.name
                self.sym_value[d.name] = slot * SHARED_STRIDE
                self.sym_kind[d.name] = "shared"
            elif space == ".local":
                self.sym_value[d.name] = LOCAL_WIN + (1 << 32)
                self.sym_kind[d.name] = "local"
            elif space in (".global", ".const"):
                gslot += 1
                self.sym_value[d.name] = SYM_BASE + gslot * SYM_STRIDE
                self.sym_kind[d.name] = space[1:]
                self.global_syms[gslot] = d.name
        self.dyn_slot = dyn_slot
        if dyn_slot is not None:
            self.shared_size[dyn_slot] = self.shared_bytes
        # Shared bookkeeping: one flat byte space per CTA, slots laid out back to back.
        self.shared_layout: dict[int, tuple[int, int]] = {}
        off = 0
        for slot, size in sorted(self.shared_size.items()):
            size = int(size or 0)
            self.shared_layout[slot] = (off, size)
            off += size
        self.shared_total = off
        self.dyn_used = 0

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
        if self.shared_total:                      # shared-memory bitmaps: 2 bytes per byte per CTA
            per_chunk = max(1, min(per_chunk, (1 << 25) // self.shared_total))
        try:
            for c0 in range(0, nctas, per_chunk):
                c1 = min(nctas, c0 + per_chunk)
                self._run_chunk(c0, c1)
                if self.problems:
                    break
        except TraceError as e:
            self.problems.append(str(e))
        return TraceResult(buffers=self.buffers, problems=self.problems,
                           shape_problems=self.shape_problems, index_sources=self.index_sources,
                           shared_used=self.dyn_used, lane_steps=self.lane_steps, steps=self.steps,
                           needs_multiple=self.needs_multiple, multiple_reason=self.multiple_reason,
                           threads=nctas * bt)

    def _run_chunk(self, c0: int, c1: int):
        gx, gy, gz = self.grid
        bx, by, bz = self.block
        bt = bx * by * bz
        n = (c1 - c0) * bt
        t = np.arange(n, dtype=I64)
        cta = c0 + t // bt
        loc = t % bt
        self.th = {
            "%tid.x": loc % bx, "%tid.y": (loc // bx) % by, "%tid.z": loc // (bx * by),
            "%ctaid.x": cta % gx, "%ctaid.y": (cta // gx) % gy, "%ctaid.z": cta // (gx * gy),
            "lin": loc, "cta": cta - c0,
        }
        self.nthreads = n
        self.ncta_chunk = c1 - c0
        cap = n
        self.regs = _Regs(cap)
        self.pfid: dict[str, np.ndarray] = {}      # predicate register -> formula id per lane
        self.formulas: list = []
        self.formula_ids: dict = {}
        self.formula_regs: dict[int, frozenset] = {}
        self.reg_formulas: dict[str, set] = {}
        self.lane_thread = t.copy()
        self.alive = np.ones(cap, bool)
        self.pc = np.full(cap, self.rpo[self.fn.entry_block], I64)
        self.forked = False
        self.last_merge_count = n
        if self.shared_total:
            self.sh_written = np.zeros((self.ncta_chunk, self.shared_total), bool)
            self.sh_read = np.zeros((self.ncta_chunk, self.shared_total), bool)
            self.sh_inexact_write = np.zeros(self.ncta_chunk, bool)
        steps = 0
        self.exit_forks = {}
        self.watch = set()
        self.snap = {}
        import time as _time
        while True:
            live = np.flatnonzero(self.alive)
            if live.size == 0:
                break
            b_rpo = int(self.pc[live].min())
            sel = live[self.pc[live] == b_rpo]
            if self.forked:
                sel = self._merge(sel)
            block = self.block_by_rpo[b_rpo]
            if block in self.watch:
                sel = self._watch_filter(block, sel)
                if sel.size == 0:
                    continue
            self.n_alive = int(self.alive.sum())
            self._exec_block(block, sel)
            steps += 1
            self.steps += 1
            if self.deadline is not None and steps % 64 == 0 and _time.monotonic() > self.deadline:
                raise TraceError(f"the analysis ran out of time (block {block.name}); a loop's trip "
                                 "count may depend on data")
            if steps > self.MAX_STEPS or self.lane_steps > self.MAX_LANE_STEPS:
                raise TraceError(
                    f"a loop does not settle within the analysis budget (block {block.name}); "
                    "its trip count may depend on data")
            if self.forked and int(self.alive.sum()) > 1.5 * self.last_merge_count:
                self._merge_all()
        if self.shared_total:
            self._check_shared_init()

    # -- lanes
    def _watch_filter(self, block, sel: np.ndarray) -> np.ndarray:
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
        snap["valid"][th] = True
        return sel

    def _merge(self, sel: np.ndarray) -> np.ndarray:
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
        self.alive[src] = False
        return np.sort(keep)

    def _merge_all(self):
        live = np.flatnonzero(self.alive)
        key = self.pc[live] * (self.nthreads + 1) + self.lane_thread[live]
        del key
        for pcv in np.unique(self.pc[live]):
            part = live[self.pc[live] == pcv]
            self._merge(part)
        self.last_merge_count = max(self.nthreads, int(self.alive.sum()))

    def _fork(self, sel: np.ndarray) -> np.ndarray:
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
            free = np.flatnonzero(~self.alive)
        new = free[:k]
        r = self.regs
        for name in r.lo:
            r.lo[name][new] = r.lo[name][sel]
            r.hi[name][new] = r.hi[name][sel]
        for name, f in self.pfid.items():
            f[new] = f[sel]
        self.alive[new] = True
        self.pc[new] = self.pc[sel]
        self.lane_thread[new] = self.lane_thread[sel]
        self.forked = True
        return new

    # -- register access
    def _ensure(self, name: str):
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
            self._ensure(name)
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
            return
        self._ensure(name)
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

    def put_top(self, name, sel, w, taint, maybe=None):
        lo, hi = _full(w, sel.size)
        self.put(name, sel, lo, hi, taint, maybe)

    # -- block execution
    def _exec_block(self, block, sel: np.ndarray):
        insts = block.instructions
        self.lane_steps += sel.size * max(1, len(insts))
        term = block.terminator
        body = insts[:-1] if term is not None else insts
        for inst in body:
            self._extra = None
            self._exec(inst, sel)
            if self._extra is not None:
                sel = np.concatenate([sel, self._extra])
        sel = sel[self.alive[sel]]
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
                self.alive[sel] = False
            elif op == "brx":
                self._brx(term, sel)
            return
        plo, phi = self._pred(g.reg.name, sel)
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
                    cnt = self.exit_forks[block] = np.zeros(self.nthreads, np.int32)
                np.add.at(cnt, self.lane_thread[u], 1)
                if cnt.max() > self.MAX_EXIT_FORKS:
                    raise TraceError(f"a loop exit depends on data (block {block.name}): its trip count has no bound")
                if self.nthreads * max(1, len(self.regs.lo)) <= self.WATCH_LIMIT:
                    self.watch |= self.exit_blocks[block]
            new = self._fork(u)
            # u: branch taken (predicate true); new: not taken
            self._refine(g.reg.name, u, not g.negated)
            self._refine_lanes(g.reg.name, new, g.negated)
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
            self.alive[taken_lanes] = False
        self._goto(not_lanes, nxt)

    def _need_multiple(self, m: int, why: str):
        if m > self.needs_multiple:
            self.needs_multiple = m
            self.multiple_reason = why

    def _full_warp_check(self, inst, sel, mask_op):
        """A full-mask warp collective: every lane of the warp must be able to reach it."""
        if not isinstance(mask_op, (Imm, Reg)) or (isinstance(mask_op, Imm) and mask_op.is_float):
            return
        mlo, mhi, _ = self.get(mask_op, sel, 32)
        if not ((mlo == mhi) & ((mlo & 0xFFFFFFFF) == 0xFFFFFFFF)).all():
            return
        block = self.fn.block_of(inst)
        reach = self._reach_cache.get(block)
        if reach is None:
            anc = nx.ancestors(self.fn.cfg, block) | {block}
            reach = self._reach_cache[block] = np.array(sorted(self.rpo[b] for b in anc), I64)
        live = np.flatnonzero(self.alive)
        ok_thread = np.zeros(self.nthreads, bool)
        ok_thread[self.lane_thread[live[np.isin(self.pc[live], reach)]]] = True
        ok_thread[self.lane_thread[sel]] = True
        bt = self.block[0] * self.block[1] * self.block[2]
        th = self.lane_thread[sel]
        warp_first = (th // bt) * bt + (self.th["lin"][th] // 32) * 32
        for w0 in np.unique(warp_first):
            lanes = np.arange(w0, min(w0 + 32, (w0 // bt + 1) * bt))
            if not ok_thread[lanes].all() or lanes.size < 32:
                self._need_multiple(32, f"{inst.name} with a full warp mask runs after some lanes of "
                                        "the warp have left (sizes that are not multiples of 32)")
                return

    def _trapped(self, block):
        msg = f"reaches trap (an assert or __trap) in block {block.name} for this launch"
        if msg not in self.shape_problems:
            self.shape_problems.append(msg)

    def _refine_lanes(self, pred, lanes, outcome):
        self._refine(pred, lanes, outcome)

    def _goto(self, lanes, block):
        if lanes.size == 0:
            return
        if block is None:
            self.alive[lanes] = False
            return
        self.pc[lanes] = self.rpo[block]

    def _brx(self, term, sel):
        table = str(term.operands[1]) if len(term.operands) > 1 else None
        targets = [self.label_block[t] for t in self.tables.get(table, [])]
        lo, hi, _ = self.get(term.operands[0], sel, 32)
        exact = lo == hi
        for i, b in enumerate(targets):
            m = exact & (lo == i)
            self._goto(sel[m], b)
        inex = sel[~exact]
        if inex.size:
            raise TraceError("an indirect branch (brx.idx) on a data-dependent index")

    # -- predicates and refinement
    def _pred(self, name, sel):
        self._ensure(name)
        return self.regs.lo[name][sel], self.regs.hi[name][sel]

    def _formula_id(self, f) -> int:
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

    def _set_pfid(self, pred: str, sel, fids):
        if pred not in self.pfid:
            self.pfid[pred] = np.full(self.regs.cap, -1, I64)
        self.pfid[pred][sel] = fids

    def _refine(self, pred: str, lanes: np.ndarray, outcome: bool):
        if lanes.size == 0 or pred not in self.pfid:
            return
        fids = self.pfid[pred][lanes]
        if (fids == fids[0]).all():
            if fids[0] >= 0:
                self._apply(int(fids[0]), lanes, outcome)
            return
        for fid in np.unique(fids):
            if fid < 0:
                continue
            part = lanes[fids == fid]
            self._apply(int(fid), part, outcome)

    def _apply(self, fid: int, lanes, outcome: bool):
        f = self.formulas[fid]
        kind = f[0]
        if kind == "not":
            if f[1] >= 0:
                self._apply(f[1], lanes, not outcome)
            return
        if kind in ("and", "or"):
            if outcome == (kind == "and"):
                for sub in f[1:]:
                    if sub >= 0:
                        self._apply(sub, lanes, outcome)
            return
        # ("cmp", cmp, unsigned, width, a, b) -- a, b: register name or int
        _, cmp, unsigned, w, a, b = f
        if not outcome:
            cmp = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "eq": "ne", "ne": "eq"}[cmp]
        alo, ahi = self._operand_interval(a, lanes, w)
        blo, bhi = self._operand_interval(b, lanes, w)
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
            self._ensure(x)
            olo = self.regs.lo[x][ln]
            ohi = self.regs.hi[x][ln]
            self.regs.lo[x][ln] = np.maximum(olo, lo.astype(I64))
            self.regs.hi[x][ln] = np.minimum(ohi, hi.astype(I64))

    def _operand_interval(self, x, lanes, w):
        if isinstance(x, str):
            self._ensure(x)
            return self.regs.lo[x][lanes], self.regs.hi[x][lanes]
        v = np.full(lanes.size, x, I64)
        return v, v

    # -- one instruction
    def _exec(self, inst: Instruction, sel: np.ndarray) -> None:
        maybe = None
        if inst.guard is not None:
            plo, phi = self._pred(inst.guard.reg.name, sel)
            if inst.guard.negated:
                plo, phi = 1 - phi, 1 - plo
            run = phi == 1
            if not run.all():
                sel = sel[run]
                plo = plo[run]
            if sel.size == 0:
                return
            m = plo == 0
            maybe = m if m.any() else None
        handler = getattr(self, "op_" + inst.opcode.replace(".", "_"), None)
        if handler is None:
            self._unknown(inst, sel, maybe)
        else:
            handler(inst, sel, maybe)

    def _unknown(self, inst, sel, maybe):
        if _touches_global(inst):
            raise TraceError(f"unsupported memory instruction {inst.name}")
        self._defs_top(inst, sel, maybe, inst.opcode)

    def _defs_top(self, inst, sel, maybe, why):
        for r in isa.defs(inst):
            self.put_top(r.name, sel, self.widths.get(r.name, 32), frozenset({why}), maybe)
            if r.name in self.pfid:
                self.pfid[r.name][sel] = -1

    # ---- helpers for ALU ops
    def _dst_w(self, inst, default=None):
        d = inst.operands[0]
        if isinstance(d, Reg):
            return self.widths.get(d.name, default or _width_of_type(inst.type))
        return default or _width_of_type(inst.type)

    def _store(self, inst, sel, maybe, lo, hi, taint, w):
        d = inst.operands[0]
        if isinstance(d, Reg):
            wd = self.widths.get(d.name, w)
            if wd != w and wd != 1:
                lo, hi = _rewidth(lo, hi, w, wd, _signed_type(inst.type))
            self.put(d.name, sel, lo, hi, taint, maybe)
            if d.name in self.pfid:
                self.pfid[d.name][sel] = -1

    def _int_op(self, inst) -> bool:
        t = inst.type
        return t is not None and t in INT_TYPES

    def _binary(self, inst, sel, maybe, exact, interval, w=None, wout=None, unsigned_src=False):
        """Generic two-source integer op: exact(a, b) on int64, interval(alo, ahi, blo, bhi)
        on float64 (or None: full range) for lanes with an unknown source."""
        w = w or _width_of_type(inst.type)
        wout = wout or w
        alo, ahi, ta = self.get(inst.operands[1], sel, w)
        blo, bhi, tb = self.get(inst.operands[2], sel, w)
        with np.errstate(all="ignore"):
            r = exact(alo, blo)
        r = _wrap(np.asarray(r, I64), wout)
        rhi = r.copy()
        inex = (alo != ahi) | (blo != bhi)
        if inex.any():
            if interval is None:
                ilo, ihi = _full(wout, int(inex.sum()))
            else:
                with np.errstate(all="ignore"):
                    fl, fh = interval(alo[inex].astype(np.float64), ahi[inex].astype(np.float64),
                                      blo[inex].astype(np.float64), bhi[inex].astype(np.float64))
                ilo, ihi = _norm_interval(fl, fh, wout)
            r[inex] = ilo
            rhi[inex] = ihi
        self._store(inst, sel, maybe, r, rhi, ta | tb, wout)

    # ---- data movement
    def op_mov(self, inst, sel, maybe):
        d, s = inst.operands[0], inst.operands[1]
        t = inst.type
        if t in FLOAT_TYPES:
            self._defs_top(inst, sel, maybe, "float")
            return
        if t == ".pred":
            lo, hi, ta = self.get(s, sel, 1)
            self.put(d.name, sel, lo, hi, ta, maybe)
            if isinstance(s, Reg) and s.name in self.pfid:
                self._set_pfid(d.name, sel, self.pfid[s.name][sel] if maybe is None
                               else np.where(maybe, -1, self.pfid[s.name][sel]))
            elif d.name in self.pfid:
                self.pfid[d.name][sel] = -1
            return
        w = _width_of_type(t)
        if isinstance(d, Vec):            # unpack
            lo, hi, ta = self.get(s, sel, w)
            parts = len(d.items)
            pw = w // parts
            exact = lo == hi
            for i, item in enumerate(d.items):
                if not isinstance(item, Reg):
                    continue
                v = _wrap(np.right_shift(lo, pw * i), pw) if pw < 64 else lo
                vhi = v.copy()
                flo, fhi = _full(pw, sel.size)
                v = np.where(exact, v, flo)
                vhi = np.where(exact, vhi, fhi)
                self.put(item.name, sel, v, vhi, ta, maybe)
            return
        if isinstance(s, Vec):            # pack
            parts = len(s.items)
            pw = w // parts
            acc = np.zeros(sel.size, I64)
            exact = np.ones(sel.size, bool)
            taint = frozenset()
            for i, item in enumerate(s.items):
                lo, hi, ti = self.get(item, sel, pw)
                exact &= lo == hi
                acc |= np.left_shift(_unsigned_exact(lo, pw), pw * i)
                taint |= ti
            acc = _wrap(acc, w)
            flo, fhi = _full(w, sel.size)
            self._store(inst, sel, maybe, np.where(exact, acc, flo), np.where(exact, acc, fhi), taint, w)
            return
        lo, hi, ta = self.get(s, sel, w)
        lo, hi = _fit(lo, hi, w)
        self._store(inst, sel, maybe, lo, hi, ta, w)

    def op_cvta(self, inst, sel, maybe):
        s = inst.operands[1]
        w = _width_of_type(inst.type)
        lo, hi, ta = self.get(s, sel, w)
        to = ".to" in inst.modifiers
        space = inst.space or ""
        if space.startswith(".shared"):
            if to:
                lo = np.where(lo >= SHARED_WIN, lo - SHARED_WIN, lo)
                hi = np.where(hi >= SHARED_WIN, hi - SHARED_WIN, hi)
            else:
                lo, hi = lo + SHARED_WIN, hi + SHARED_WIN
        elif space == ".param":
            lo, hi = _full(64, sel.size)
            ta = ta | {"param-space"}
        self._store(inst, sel, maybe, lo, hi, ta, w)

    def op_cvt(self, inst, sel, maybe):
        types = inst.types
        if len(types) != 2 or types[0] not in INT_TYPES or types[1] not in INT_TYPES:
            self._defs_top(inst, sel, maybe, "float")
            return
        dt, st = types
        sw, dw = _width_of_type(st), _width_of_type(dt)
        lo, hi, ta = self.get(inst.operands[1], sel, max(sw, 32))
        # the source as its own type
        exact = lo == hi
        if st[1] == "s":
            v = _wrap(lo, sw)
            flo, fhi = _norm_interval(lo, hi, sw)
        else:
            v = _unsigned_exact(lo, sw) if sw < 64 else lo
            if sw < 64:
                flo, fhi = _unsigned_view(lo, hi, sw)
                flo, fhi = flo.astype(I64), fhi.astype(I64)
            else:
                flo, fhi = lo, hi
        vlo = np.where(exact, v, flo)
        vhi = np.where(exact, v, fhi)
        if ".sat" in inst.modifiers:
            rlo, rhi = _type_range(dt)
            vlo, vhi = np.clip(vlo, rlo, rhi), np.clip(vhi, rlo, rhi)
        # to the destination type
        ex2 = vlo == vhi
        r = _wrap(vlo, dw)
        if dt[1] == "u" and dw < 64:
            r = _unsigned_exact(r, dw)
        nlo, nhi = _norm_interval(vlo, vhi, dw)
        if dt[1] == "u" and dw < 64:
            ulo, uhi = _unsigned_view(nlo, nhi, dw)
            nlo, nhi = ulo.astype(I64), uhi.astype(I64)
        self._store_typed(inst, sel, maybe, np.where(ex2, r, nlo), np.where(ex2, r, nhi), ta, dw, dt)

    def _store_typed(self, inst, sel, maybe, lo, hi, taint, w, t):
        """Store a value of type t (w bits, already in t's own numeric range) into the dest."""
        d = inst.operands[0]
        if not isinstance(d, Reg):
            return
        wd = self.widths.get(d.name, w)
        if wd >= 64:
            self.put(d.name, sel, lo, hi, taint, maybe)
            return
        ex = lo == hi
        r = _wrap(lo, wd)
        nlo, nhi = _norm_interval(lo, hi, wd)
        self.put(d.name, sel, np.where(ex, r, nlo), np.where(ex, r, nhi), taint, maybe)

    # ---- integer arithmetic
    def op_add(self, inst, sel, maybe):
        if not self._int_op(inst) or any(m in inst.modifiers for m in (".cc",)):
            return self._defs_top(inst, sel, maybe, "float" if not self._int_op(inst) else "carry")
        self._binary(inst, sel, maybe, lambda a, b: a + b, lambda al, ah, bl, bh: (al + bl, ah + bh))

    def op_sub(self, inst, sel, maybe):
        if not self._int_op(inst) or ".cc" in inst.modifiers:
            return self._defs_top(inst, sel, maybe, "float" if not self._int_op(inst) else "carry")
        self._binary(inst, sel, maybe, lambda a, b: a - b, lambda al, ah, bl, bh: (al - bh, ah - bl))

    def op_addc(self, inst, sel, maybe):
        self._defs_top(inst, sel, maybe, "carry")

    op_subc = op_addc
    op_madc = op_addc

    def op_mul(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)
        mods = inst.modifiers
        if ".wide" in mods:
            def ex(a, b):
                if uns:
                    return (_unsigned_exact(a, w).astype(np.uint64) * _unsigned_exact(b, w).astype(np.uint64)).view(I64)
                return a * b
            self._binary(inst, sel, maybe, ex, _mul_iv(uns, w), w=w, wout=2 * w)
        elif ".hi" in mods:
            self._binary(inst, sel, maybe, lambda a, b: _mulhi(a, b, w, uns), None, w=w)
        else:
            self._binary(inst, sel, maybe, lambda a, b: a * b, _mul_iv(uns, w), w=w)

    def op_mul24(self, inst, sel, maybe):
        self._defs_top(inst, sel, maybe, "mul24")

    op_mad24 = op_mul24

    def op_mad(self, inst, sel, maybe):
        if not self._int_op(inst) or ".cc" in inst.modifiers:
            return self._defs_top(inst, sel, maybe, "float" if not self._int_op(inst) else "carry")
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)
        mods = inst.modifiers
        wout = 2 * w if ".wide" in mods else w
        alo, ahi, ta = self.get(inst.operands[1], sel, w)
        blo, bhi, tb = self.get(inst.operands[2], sel, w)
        clo, chi, tc = self.get(inst.operands[3], sel, wout)
        with np.errstate(all="ignore"):
            if ".hi" in mods:
                r = _mulhi(alo, blo, w, uns) + clo
            elif ".wide" in mods and uns:
                r = (_unsigned_exact(alo, w).astype(np.uint64) * _unsigned_exact(blo, w).astype(np.uint64)).view(I64) + clo
            else:
                r = alo * blo + clo
        r = _wrap(r, wout)
        rhi = r.copy()
        inex = (alo != ahi) | (blo != bhi) | (clo != chi)
        if inex.any():
            if ".hi" in mods:
                ilo, ihi = _full(wout, int(inex.sum()))
            else:
                fl, fh = _mul_iv(uns, w)(*(x[inex].astype(np.float64) for x in (alo, ahi, blo, bhi)))
                ilo, ihi = _norm_interval(fl + clo[inex], fh + chi[inex], wout)
            r[inex] = ilo
            rhi[inex] = ihi
        self._store(inst, sel, maybe, r, rhi, ta | tb | tc, wout)

    def op_div(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)

        def ex(a, b):
            if uns:
                ua, ub = _unsigned_exact(a, w), _unsigned_exact(b, w)
                if w >= 64:
                    ua, ub = a.view(np.uint64), b.view(np.uint64)
                    return np.where(ub == 0, 0, ua // np.where(ub == 0, 1, ub)).astype(np.uint64).view(I64)
                return np.where(ub == 0, 0, ua // np.where(ub == 0, 1, ub))
            q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
            return np.where(b == 0, 0, np.where((a < 0) ^ (b < 0), -q, q))

        def iv(al, ah, bl, bh):
            if uns:
                al, ah = _uv(al, ah, w)
                bl, bh = _uv(bl, bh, w)
            cands = [np.trunc(x / y) for x in (al, ah) for y in (bl, bh)]
            lo = np.minimum.reduce(cands)
            hi = np.maximum.reduce(cands)
            zero = (bl <= 0) & (bh >= 0)
            return np.where(zero, -np.inf, lo), np.where(zero, np.inf, hi)
        self._binary(inst, sel, maybe, ex, iv, w=w)
        self._div_zero(inst, sel)

    def _div_zero(self, inst, sel):
        # Division by zero has no defined result: make it unknown.
        d = inst.operands[0]
        if not isinstance(d, Reg) or d.name not in self.regs.lo:
            return
        blo, bhi, _ = self.get(inst.operands[2], sel, _width_of_type(inst.type))
        z = (blo <= 0) & (bhi >= 0)
        if z.any():
            w = self.widths.get(d.name, 32)
            flo, fhi = _full(w, int(z.sum()))
            self.regs.lo[d.name][sel[z]] = flo
            self.regs.hi[d.name][sel[z]] = fhi
            self.regs.taint[d.name] = self.regs.taint[d.name] | {"division by zero"}

    def op_rem(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)

        def ex(a, b):
            if uns:
                if w >= 64:
                    ua, ub = a.view(np.uint64), b.view(np.uint64)
                    return np.where(ub == 0, 0, ua % np.where(ub == 0, 1, ub)).astype(np.uint64).view(I64)
                ua, ub = _unsigned_exact(a, w), _unsigned_exact(b, w)
                return np.where(ub == 0, 0, ua % np.where(ub == 0, 1, ub))
            m = np.abs(a) % np.where(b == 0, 1, np.abs(b))
            return np.where(b == 0, 0, np.where(a < 0, -m, m))

        def iv(al, ah, bl, bh):
            if uns:
                al, ah = _uv(al, ah, w)
                bl, bh = _uv(bl, bh, w)
                return np.zeros_like(al), np.minimum(ah, np.maximum(bh - 1, 0))
            mb = np.maximum(np.abs(bl), np.abs(bh)) - 1
            lo = np.where(al >= 0, 0, np.maximum(al, -mb))
            hi = np.where(ah <= 0, 0, np.minimum(ah, mb))
            return lo, hi
        self._binary(inst, sel, maybe, ex, iv, w=w)
        self._div_zero(inst, sel)

    def op_and(self, inst, sel, maybe):
        if inst.type == ".pred":
            return self._pred_logic(inst, sel, maybe, "and")
        w = _width_of_type(inst.type)

        def iv(al, ah, bl, bh):
            an = al >= 0
            bn = bl >= 0
            hi = np.where(an & bn, np.minimum(ah, bh), np.where(an, ah, np.where(bn, bh, np.inf)))
            lo = np.where(an | bn, 0, -np.inf)
            return lo, hi
        self._binary(inst, sel, maybe, lambda a, b: a & b, iv, w=w)

    def op_or(self, inst, sel, maybe):
        if inst.type == ".pred":
            return self._pred_logic(inst, sel, maybe, "or")
        w = _width_of_type(inst.type)

        def iv(al, ah, bl, bh):
            nn = (al >= 0) & (bl >= 0)
            top = 2.0 ** np.ceil(np.log2(np.maximum(ah, bh) + 1)) - 1
            return np.where(nn, np.maximum(al, bl), -np.inf), np.where(nn, top, np.inf)
        self._binary(inst, sel, maybe, lambda a, b: a | b, iv, w=w)

    def op_xor(self, inst, sel, maybe):
        if inst.type == ".pred":
            return self._pred_logic(inst, sel, maybe, "xor")
        w = _width_of_type(inst.type)

        def iv(al, ah, bl, bh):
            nn = (al >= 0) & (bl >= 0)
            top = 2.0 ** np.ceil(np.log2(np.maximum(ah, bh) + 1)) - 1
            return np.where(nn, 0, -np.inf), np.where(nn, top, np.inf)
        self._binary(inst, sel, maybe, lambda a, b: a ^ b, iv, w=w)

    def op_not(self, inst, sel, maybe):
        if inst.type == ".pred":
            return self._pred_logic(inst, sel, maybe, "not")
        w = _width_of_type(inst.type)
        lo, hi, ta = self.get(inst.operands[1], sel, w)
        self._store(inst, sel, maybe, _wrap(~hi, w), _wrap(~lo, w), ta, w)

    def op_cnot(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        lo, hi, ta = self.get(inst.operands[1], sel, w)
        ex = lo == hi
        r = (lo == 0).astype(I64)
        self._store(inst, sel, maybe, np.where(ex, r, 0), np.where(ex, r, 1), ta, w)

    def op_neg(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(inst.type)
        lo, hi, ta = self.get(inst.operands[1], sel, w)
        ex = lo == hi
        r = _wrap(-lo, w)
        nlo, nhi = _norm_interval(-hi.astype(np.float64), -lo.astype(np.float64), w)
        self._store(inst, sel, maybe, np.where(ex, r, nlo), np.where(ex, r, nhi), ta, w)

    def op_abs(self, inst, sel, maybe):
        if not self._int_op(inst):
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(inst.type)
        lo, hi, ta = self.get(inst.operands[1], sel, w)
        ex = lo == hi
        r = _wrap(np.abs(lo), w)
        flo = np.where(lo >= 0, lo, np.where(hi <= 0, -hi, 0)).astype(np.float64)
        fhi = np.where(lo >= 0, hi, np.where(hi <= 0, -lo, np.maximum(-lo, hi))).astype(np.float64)
        nlo, nhi = _norm_interval(flo, fhi, w)
        self._store(inst, sel, maybe, np.where(ex, r, nlo), np.where(ex, r, nhi), ta, w)

    def _minmax(self, inst, sel, maybe, fn):
        if not self._int_op(inst):
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)
        if uns and w < 64:
            def ex(a, b):
                return fn(_unsigned_exact(a, w), _unsigned_exact(b, w))

            def iv(al, ah, bl, bh):
                al, ah = _uv(al, ah, w)
                bl, bh = _uv(bl, bh, w)
                return fn(al, bl), fn(ah, bh)
        elif uns:
            def ex(a, b):
                return fn(a.view(np.uint64), b.view(np.uint64)).view(I64)
            iv = None
        else:
            ex = fn

            def iv(al, ah, bl, bh):
                return fn(al, bl), fn(ah, bh)
        self._binary(inst, sel, maybe, ex, iv, w=w)

    def op_min(self, inst, sel, maybe):
        self._minmax(inst, sel, maybe, np.minimum)

    def op_max(self, inst, sel, maybe):
        self._minmax(inst, sel, maybe, np.maximum)

    def op_shl(self, inst, sel, maybe):
        w = _width_of_type(inst.type)

        def ex(a, b):
            ub = np.clip(_unsigned_exact(b, 32), 0, w)
            return np.where(ub >= w, 0, np.left_shift(a, np.minimum(ub, 63)))

        def iv(al, ah, bl, bh):
            ok = (bl == bh) & (bl >= 0) & (bl < w)
            f = 2.0 ** np.where(ok, bl, 0)
            return np.where(ok, al * f, -np.inf), np.where(ok, ah * f, np.inf)
        self._binary(inst, sel, maybe, ex, iv, w=w)

    def op_shr(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)

        def ex(a, b):
            ub = np.clip(_unsigned_exact(b, 32), 0, 63)
            if uns:
                if w >= 64:
                    return np.where(ub >= 64, 0, np.right_shift(a.view(np.uint64), ub.astype(np.uint64))).astype(np.uint64).view(I64)
                return np.where(ub >= w, 0, np.right_shift(_unsigned_exact(a, w), ub))
            return np.right_shift(a, np.minimum(ub, 63))

        def iv(al, ah, bl, bh):
            bl = np.clip(bl, 0, 63)
            bh = np.clip(bh, 0, 63)
            if uns:
                al, ah = _uv(al, ah, w)
                return np.floor(al / 2.0 ** bh), np.floor(ah / 2.0 ** bl)
            c = [np.floor(x / 2.0 ** y) for x in (al, ah) for y in (bl, bh)]
            return np.minimum.reduce(c), np.maximum.reduce(c)
        self._binary(inst, sel, maybe, ex, iv, w=w)

    def op_shf(self, inst, sel, maybe):
        w = 32
        alo, ahi, ta = self.get(inst.operands[1], sel, w)
        blo, bhi, tb = self.get(inst.operands[2], sel, w)
        clo, chi, tc = self.get(inst.operands[3], sel, w)
        ex = (alo == ahi) & (blo == bhi) & (clo == chi)
        n = _unsigned_exact(clo, 32)
        n = n & 31 if ".wrap" in inst.modifiers else np.minimum(n, 32)
        v = (_unsigned_exact(blo, 32).astype(np.uint64) << np.uint64(32)) | _unsigned_exact(alo, 32).astype(np.uint64)
        if ".l" in inst.modifiers:
            r = ((v << n.astype(np.uint64)) >> np.uint64(32)) & np.uint64(0xFFFFFFFF)
        else:
            r = (v >> n.astype(np.uint64)) & np.uint64(0xFFFFFFFF)
        r = _wrap(r.astype(I64), 32)
        flo, fhi = _full(32, sel.size)
        self._store(inst, sel, maybe, np.where(ex, r, flo), np.where(ex, r, fhi), ta | tb | tc, 32)

    def op_bfe(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        uns = not _signed_type(inst.type)
        alo, ahi, ta = self.get(inst.operands[1], sel, w)
        plo, phi, tp = self.get(inst.operands[2], sel, 32)
        llo, lhi, tl = self.get(inst.operands[3], sel, 32)
        pos = np.clip(_unsigned_exact(plo, 32) & 0xFF, 0, w)
        ln = np.clip(_unsigned_exact(llo, 32) & 0xFF, 0, w)
        ua = _unsigned_exact(alo, w) if w < 64 else alo
        with np.errstate(all="ignore"):
            field_ = np.right_shift(ua, np.minimum(pos, 63)) & ((np.left_shift(np.ones_like(ln), np.minimum(ln, 63))) - 1)
            if not uns:
                sign = (ln > 0) & ((np.right_shift(field_, np.maximum(ln - 1, 0)) & 1) == 1)
                field_ = np.where(sign, field_ - np.left_shift(np.ones_like(ln), np.minimum(ln, 63)), field_)
        r = _wrap(np.where(ln == 0, 0, field_), w)
        ex = (alo == ahi) & (plo == phi) & (llo == lhi)
        lenx = (llo == lhi)
        top = np.left_shift(np.ones_like(ln), np.minimum(ln, 62)).astype(np.float64)
        flo = np.where(lenx, 0.0 if uns else -top / 2, -np.inf)
        fhi = np.where(lenx, top - 1 if uns else top / 2 - 1, np.inf)
        nlo, nhi = _norm_interval(flo, fhi, w)
        self._store(inst, sel, maybe, np.where(ex, r, nlo), np.where(ex, r, nhi), ta | tp | tl, w)

    def op_popc(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        lo, hi, ta = self.get(inst.operands[1], sel, w)
        u = (_unsigned_exact(lo, w) if w < 64 else lo).view(np.uint64) if w >= 64 else _unsigned_exact(lo, w).astype(np.uint64)
        r = np.zeros(sel.size, I64)
        for i in range(w):
            r += ((u >> np.uint64(i)) & np.uint64(1)).astype(I64)
        ex = lo == hi
        self._store_typed(inst, sel, maybe, np.where(ex, r, 0), np.where(ex, r, w), ta, 32, ".u32")

    def op_clz(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        lo, hi, ta = self.get(inst.operands[1], sel, w)
        u = _unsigned_exact(lo, w).astype(np.uint64) if w < 64 else lo.view(np.uint64)
        r = np.full(sel.size, w, I64)
        for i in range(w):
            bit = ((u >> np.uint64(i)) & np.uint64(1)) == 1
            r = np.where(bit, w - 1 - i, r)
        ex = lo == hi
        self._store_typed(inst, sel, maybe, np.where(ex, r, 0), np.where(ex, r, w), ta, 32, ".u32")

    def op_bfind(self, inst, sel, maybe):
        w = _width_of_type(inst.type)
        lo, hi, ta = self.get(inst.operands[1], sel, w)
        self._store_typed(inst, sel, maybe, np.full(sel.size, -1, I64), np.full(sel.size, w - 1, I64), ta | {"bfind"}, 32, ".s32")

    def op_brev(self, inst, sel, maybe):
        self._defs_top(inst, sel, maybe, "brev")

    op_bfi = op_brev
    op_prmt = op_brev
    op_lop3 = op_brev
    op_sad = op_brev
    op_dp4a = op_brev
    op_dp2a = op_brev

    def op_selp(self, inst, sel, maybe):
        t = inst.type
        if t in FLOAT_TYPES:
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(t)
        alo, ahi, ta = self.get(inst.operands[1], sel, w)
        blo, bhi, tb = self.get(inst.operands[2], sel, w)
        c = inst.operands[3]
        neg = isinstance(c, Neg)
        creg = c.operand if neg else c
        plo, phi = self._pred(creg.name, sel)
        if neg:
            plo, phi = 1 - phi, 1 - plo
        unknown = (plo != phi)
        if unknown.any() and maybe is None and w == 64 and any(t.startswith("ptr:") for t in ta | tb) \
                and (np.abs(alo[unknown] - blo[unknown]) > (1 << 32)).any():
            # choosing between two pointers on data: follow both (an interval would span both)
            u = sel[unknown]
            new = self._fork(u)
            self._store(inst, u, None, alo[unknown], ahi[unknown], ta | tb, w)
            self._store(inst, new, None, blo[unknown], bhi[unknown], ta | tb, w)
            self._refine(creg.name, u, not neg)
            self._refine(creg.name, new, neg)
            self._extra = new
            known = ~unknown
            sel, plo, phi = sel[known], plo[known], phi[known]
            alo, ahi, blo, bhi = alo[known], ahi[known], blo[known], bhi[known]
            if sel.size == 0:
                return
        lo = np.where(plo == 1, alo, np.where(phi == 0, blo, np.minimum(alo, blo)))
        hi = np.where(plo == 1, ahi, np.where(phi == 0, bhi, np.maximum(ahi, bhi)))
        self._store(inst, sel, maybe, lo, hi, ta | tb, w)

    def op_slct(self, inst, sel, maybe):
        t = inst.types[0] if inst.types else None
        if t in FLOAT_TYPES:
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(t)
        alo, ahi, ta = self.get(inst.operands[1], sel, w)
        blo, bhi, tb = self.get(inst.operands[2], sel, w)
        if inst.types[-1] in FLOAT_TYPES:
            clo, chi = np.full(sel.size, -1, I64), np.ones(sel.size, I64)
        else:
            clo, chi, _ = self.get(inst.operands[3], sel, 32)
        lo = np.where(clo >= 0, alo, np.where(chi < 0, blo, np.minimum(alo, blo)))
        hi = np.where(clo >= 0, ahi, np.where(chi < 0, bhi, np.maximum(ahi, bhi)))
        self._store(inst, sel, maybe, lo, hi, ta | tb, w)

    # ---- comparisons and predicates
    def _compare(self, inst, sel):
        """(definitely true, possibly true, formula or None) for a setp/set comparison."""
        cmp = next((m[1:] for m in inst.modifiers if m[1:] in _CMPS), None)
        t = inst.types[-1] if inst.types else None
        if t is None or t not in INT_TYPES or cmp is None:
            return np.zeros(sel.size, I64), np.ones(sel.size, I64), None
        w = _width_of_type(t)
        unsigned = cmp in ("lo", "ls", "hi", "hs") or t[1] in "ub"
        c = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}.get(cmp, cmp)
        a, b = inst.operands[1], inst.operands[2]
        alo, ahi, _ = self.get(a, sel, w)
        blo, bhi, _ = self.get(b, sel, w)
        if unsigned:
            if w < 64:
                al, ah = _uv(alo.astype(np.float64), ahi.astype(np.float64), w)
                bl, bh = _uv(blo.astype(np.float64), bhi.astype(np.float64), w)
                exa = _unsigned_exact(alo, w)
                exb = _unsigned_exact(blo, w)
            else:
                al, ah, bl, bh = (x.astype(np.float64) for x in (alo, ahi, blo, bhi))
                bad = (al < 0) | (bl < 0)
                al, bl = np.where(bad, 0, al), np.where(bad, 0, bl)
                ah, bh = np.where(bad, 2.0 ** 64, ah), np.where(bad, 2.0 ** 64, bh)
                exa, exb = alo.view(np.uint64), blo.view(np.uint64)
        else:
            al, ah, bl, bh = (x.astype(np.float64) for x in (alo, ahi, blo, bhi))
            exa, exb = alo, blo
        exact = (alo == ahi) & (blo == bhi)
        f = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
             "gt": np.greater, "ge": np.greater_equal}[c]
        r = f(exa, exb).astype(I64)
        if c == "eq":
            dt, pt = (al == ah) & (bl == bh) & (al == bl), (ah >= bl) & (bh >= al)
        elif c == "ne":
            dt, pt = (ah < bl) | (bh < al), ~((al == ah) & (bl == bh) & (al == bl))
        elif c == "lt":
            dt, pt = ah < bl, al < bh
        elif c == "le":
            dt, pt = ah <= bl, al <= bh
        elif c == "gt":
            dt, pt = al > bh, ah > bl
        else:
            dt, pt = al >= bh, ah >= bl
        lo = np.where(exact, r, dt.astype(I64))
        hi = np.where(exact, r, pt.astype(I64))
        formula = None
        ops = []
        for x in (a, b):
            if isinstance(x, Reg) and not x.is_special and x.name in self.tracked:
                ops.append(x.name)
            elif isinstance(x, Imm) and not x.is_float:
                ops.append(int(_wrap(np.array([int(x.value)], I64), w)[0]) if w < 64 else int(x.value))
            else:
                ops.append(None)
        if None not in ops and (isinstance(ops[0], str) or isinstance(ops[1], str)):
            formula = ("cmp", c, unsigned, w, ops[0], ops[1])
        return lo, hi, formula

    def op_setp(self, inst, sel, maybe):
        lo, hi, formula = self._compare(inst, sel)
        d = inst.operands[0]
        p = d.first if isinstance(d, Pair) else d
        q = d.second if isinstance(d, Pair) else None
        fid = self._formula_id(formula) if formula is not None else -1
        bool_op = next((m[1:] for m in inst.modifiers if m in (".and", ".or", ".xor")), None)
        if bool_op is not None and len(inst.operands) > 3:
            c = inst.operands[3]
            neg = isinstance(c, Neg)
            creg = c.operand if neg else c
            clo, chi = self._pred(creg.name, sel)
            if neg:
                clo, chi = 1 - chi, 1 - clo
            nlo, nhi = 1 - hi, 1 - lo
            lo, hi = _pred_combine(bool_op, lo, hi, clo, chi)
            qlo, qhi = _pred_combine(bool_op, nlo, nhi, clo, chi)
            fid = -1
        else:
            qlo, qhi = 1 - hi, 1 - lo
        if isinstance(p, Reg):
            self.put(p.name, sel, lo, hi, frozenset(), maybe)
            self._set_pfid(p.name, sel, np.full(sel.size, fid, I64) if maybe is None else np.where(maybe, -1, fid))
        if isinstance(q, Reg):
            self.put(q.name, sel, qlo, qhi, frozenset(), maybe)
            nf = self._formula_id(("not", fid)) if fid >= 0 else -1
            self._set_pfid(q.name, sel, np.full(sel.size, nf, I64) if maybe is None else np.where(maybe, -1, nf))

    def op_set(self, inst, sel, maybe):
        lo, hi, _ = self._compare(inst, sel)
        dt = inst.types[0] if inst.types else ".u32"
        if dt in FLOAT_TYPES:
            return self._defs_top(inst, sel, maybe, "float")
        w = _width_of_type(dt)
        # true -> 0xffffffff (-1), false -> 0
        self._store(inst, sel, maybe, -hi, -lo, frozenset(), w)

    def _pred_logic(self, inst, sel, maybe, kind):
        d = inst.operands[0]
        srcs = []
        for x in inst.operands[1:]:
            neg = isinstance(x, Neg)
            r = x.operand if neg else x
            lo, hi = self._pred(r.name, sel)
            f = self.pfid[r.name][sel] if r.name in self.pfid else np.full(sel.size, -1, I64)
            if neg:
                lo, hi = 1 - hi, 1 - lo
                f = np.array([self._formula_id(("not", int(v))) if v >= 0 else -1 for v in f], I64) \
                    if (f >= 0).any() else f
            srcs.append((lo, hi, f))
        if kind == "not":
            lo, hi, f = srcs[0]
            rlo, rhi = 1 - hi, 1 - lo
            fids = _map_formulas(self, "not", f, None)
        else:
            (alo, ahi, fa), (blo, bhi, fb) = srcs[0], srcs[1]
            rlo, rhi = _pred_combine(kind, alo, ahi, blo, bhi)
            fids = _map_formulas(self, kind, fa, fb) if kind in ("and", "or") else np.full(sel.size, -1, I64)
        self.put(d.name, sel, rlo, rhi, frozenset(), maybe)
        self._set_pfid(d.name, sel, fids if maybe is None else np.where(maybe, -1, fids))

    # ---- memory
    def op_ld(self, inst, sel, maybe):
        addr = isa.address_operand(inst)
        space = (inst.space or "generic").split("::")[0]
        t = inst.type
        width = inst.vector_width
        nbytes = type_size(t) * width if t else 4
        dests = inst.operands[0].items if isinstance(inst.operands[0], Vec) else (inst.operands[0],)
        if space == ".param":
            return self._ld_param(inst, sel, maybe, addr, dests, t)
        value = None          # (lo, hi, taint) per element
        if space in (".global", "generic"):
            value = self._access(inst, sel, addr, nbytes, "load", space)
        elif space == ".shared":
            self._shared_access(inst, sel, addr, nbytes, "load")
        elif space == ".const":
            value = (None, None, frozenset({"data:const"}))
        lo_t, hi_t = _type_range(t) if t in INT_TYPES else (None, None)
        taint = value[2] if value else frozenset({f"data:{space[1:] if space != 'generic' else 'memory'}"})
        rng = value[0] if value and value[0] is not None else None
        for dreg in dests:
            if not isinstance(dreg, Reg):
                continue
            if t not in INT_TYPES:
                self.put_top(dreg.name, sel, self.widths.get(dreg.name, 32), frozenset({"float"}), maybe)
                continue
            if rng is not None:
                lo, hi = rng
            else:
                lo = np.full(sel.size, lo_t, I64)
                hi = np.full(sel.size, hi_t, I64)
            wd = self.widths.get(dreg.name, _width_of_type(t))
            nlo, nhi = _norm_interval(lo, hi, wd)
            self.put(dreg.name, sel, nlo, nhi, taint, maybe)
            if dreg.name in self.pfid:
                self.pfid[dreg.name][sel] = -1

    op_ldu = op_ld

    def _ld_param(self, inst, sel, maybe, addr, dests, t):
        base = addr.base if addr is not None else None
        off = addr.offset or 0 if addr is not None else 0
        name = base.name if isinstance(base, Sym) else None
        k = self.param_index.get(name)
        base_off = off
        for n_elem, dreg in enumerate(dests):
            off = base_off + n_elem * (type_size(t) if t else 4)
            if not isinstance(dreg, Reg):
                continue
            w = self.widths.get(dreg.name, _width_of_type(t))
            if k is None:
                self.put_top(dreg.name, sel, w, frozenset({"data:param"}), maybe)
                continue
            kind = self.params.get(k, ("int", 0))
            if kind[0] == "ptr" and off == 0:
                v = np.full(sel.size, (k + 1) * PARAM_STRIDE, I64)
                self.put(dreg.name, sel, v, v, frozenset({f"ptr:{k}"}), maybe)
            elif kind[0] == "bytes" and t in INT_TYPES and off + type_size(t) <= 8:
                tw = _width_of_type(t)
                raw = (int(kind[1]) >> (8 * off)) & ((1 << tw) - 1)
                if t[1] == "s" and raw >= 1 << (tw - 1):
                    raw -= 1 << tw
                v = np.full(sel.size, _const(raw, w), I64)
                self.put(dreg.name, sel, v, v, frozenset({f"struct:{k}"}), maybe)
            elif kind[0] == "int" and off == 0 and t in INT_TYPES:
                tw = _width_of_type(t)
                val = int(kind[1])
                v = np.array([val & ((1 << 64) - 1)], dtype=np.uint64).view(I64)
                v = _wrap(v, tw) if tw < 64 else v
                if t[1] == "u" and tw < 64:
                    v = _unsigned_exact(v, tw)
                v = _wrap(v, w) if w < 64 else v
                v = np.full(sel.size, v[0], I64)
                self.put(dreg.name, sel, v, v, frozenset(), maybe)
            else:
                why = f"struct:{k}" if kind[0] == "struct" else ("float" if kind[0] == "float" else f"data:param{k}")
                self.put_top(dreg.name, sel, w, frozenset({why}), maybe)
            if dreg.name in self.pfid:
                self.pfid[dreg.name][sel] = -1

    def _store_like(self, inst, sel, kind):
        """Record the bytes a store or an atomic touches in global or shared memory."""
        addr = isa.address_operand(inst)
        space = (inst.space or "generic").split("::")[0]
        t = inst.type
        nbytes = type_size(t) * inst.vector_width if t else 4
        if space in (".global", "generic"):
            self._access(inst, sel, addr, nbytes, kind, space)
        elif space == ".shared":
            self._shared_access(inst, sel, addr, nbytes, kind)
        # .param stores are arguments of a call (the call itself is refused)

    def op_st(self, inst, sel, maybe):
        self._store_like(inst, sel, "store")

    def op_atom(self, inst, sel, maybe):
        self._store_like(inst, sel, "atomic")
        if inst.opcode == "atom":
            self._defs_top(inst, sel, maybe, "data:atomic")

    op_red = op_atom

    def op_cp(self, inst, sel, maybe):
        mods = inst.modifiers
        if any(m in mods for m in (".commit_group", ".wait_group", ".wait_all")) or \
                (".mbarrier" in mods and ".arrive" in mods):
            return
        if ".async" not in mods or ".bulk" in mods or len(inst.operands) < 3:
            if _touches_global(inst) or ".bulk" in mods:
                raise TraceError(f"unsupported memory instruction {inst.name}")
            return
        dst, src = inst.operands[0], inst.operands[1]
        size_op = inst.operands[2]
        nbytes = int(size_op.value) if isinstance(size_op, Imm) else 16
        self._access(inst, sel, src, nbytes, "load", ".global")
        self._shared_access(inst, sel, dst, nbytes, "store")

    def op_prefetch(self, inst, sel, maybe):
        return

    op_prefetchu = op_prefetch
    op_applypriority = op_prefetch
    op_createpolicy = lambda self, inst, sel, maybe: self._defs_top(inst, sel, maybe, "policy")

    def op_discard(self, inst, sel, maybe):
        raise TraceError(f"unsupported memory instruction {inst.name}")

    def _address(self, inst, sel, addr: Addr):
        base = addr.base
        off = addr.offset or 0
        if isinstance(base, Sym) and base.name in self.param_index:
            lo, hi = _full(64, sel.size)
            return lo, hi, frozenset({"param-space"})
        lo, hi, ta = self.get(base, sel, 64)
        return lo + off, hi + off, ta

    def _access(self, inst, sel, addr, nbytes, kind, space):
        """Record a global/generic access; return (value range or None, taint) for loads."""
        lo, hi, ta = self._address(inst, sel, addr)
        end = hi + nbytes
        # decode: pointer params
        k1 = np.floor_divide(lo + (1 << 40), PARAM_STRIDE) - 1
        k2 = np.floor_divide(end - 1 + (1 << 40), PARAM_STRIDE) - 1
        in_param = (k1 == k2) & (k1 >= 0) & (k1 < len(self.fn.params)) & (lo >= PARAM_STRIDE // 2) & (end <= SYM_BASE)
        shared = (lo >= SHARED_WIN) & (end <= SHARED_WIN + (1 << 32))
        local = (lo >= LOCAL_WIN) & (end <= LOCAL_END)
        symr = (lo >= SYM_BASE) & (end <= SHARED_WIN)
        bad = ~(in_param | shared | local | symr)
        loaded_range = None
        seen: set = set()
        taint = frozenset()
        if in_param.any():
            ks = k1[in_param]
            los = lo[in_param]
            ends = end[in_param]
            for k in ([ks[0]] if (ks == ks[0]).all() else np.unique(ks)):
                k = int(k)
                m = ks == k
                if f"ptr:{k}" not in ta or self.params.get(k, ("int",))[0] != "ptr":
                    bad[np.flatnonzero(in_param)[m]] = True
                    continue
                base = (k + 1) * PARAM_STRIDE
                align = _natural_alignment(inst, nbytes)
                if align > 1:
                    sub_lo = los[m]
                    ex = sub_lo == hi[in_param][m]
                    if ((sub_lo[ex] % align) != 0).any():
                        self._need_multiple(align, f"{inst.name} would be misaligned (it needs {align}-byte "
                                                   "alignment) for these sizes")
                if int(los[m].min()) - base < -self.MAX_SPAN or int(ends[m].max()) - base > self.MAX_SPAN:
                    bad[np.flatnonzero(in_param)[m]] = True
                    continue
                self.buffers[k].add(int(los[m].min()) - base, int(ends[m].max()) - base, kind,
                                    inst.type, int(np.max(nbytes)))
                taint |= {f"data:{k}"}
                seen.add(k)
        if shared.any():
            ssel = sel[shared]
            self._shared_exact(inst, ssel, lo[shared] - SHARED_WIN, end[shared] - SHARED_WIN, kind, nbytes)
            taint |= {"data:shared"}
        if symr.any():
            j = np.floor_divide(lo[symr] - SYM_BASE + SYM_STRIDE // 2, SYM_STRIDE)
            if kind != "load":
                names = sorted({self.global_syms.get(int(x), "?") for x in np.unique(j)})
                raise TraceError(f"writes the module variable {', '.join(names)}, which a launch spec cannot compare")
            taint |= {"data:module-variable"}
        if bad.any():
            # what the load would read comes from the buffers its pointer derives from
            taint |= {f"data:{t[4:]}" for t in ta if t.startswith("ptr:")}
            self._unbounded(inst, ta, kind)
        if kind == "load":
            if len(seen) == 1 and not bad.any() and taint == {f"data:{min(seen)}"} and min(seen) in self.load_ranges:
                loaded_range = self.load_ranges[min(seen)]
            if loaded_range is not None:
                rlo = np.full(sel.size, loaded_range[0], I64)
                rhi = np.full(sel.size, loaded_range[1], I64)
                return (rlo, rhi), None, taint
            return None, None, taint or frozenset({"data:memory"})
        return None

    def _unbounded(self, inst, taint, kind):
        data = sorted(t for t in taint if t.startswith("data:"))
        ptrs = sorted(t for t in taint if t.startswith("ptr:"))
        pidx = [int(t[5:]) for t in data if t[5:].isdigit()]
        names = lambda idx: ", ".join(str(i) for i in idx)
        what = {"load": "reads", "store": "writes", "atomic": "updates"}[kind]
        structs = sorted(t[7:] for t in taint if t.startswith("struct:"))
        if not ptrs and not any(t.startswith("sym:") for t in taint):
            if structs:
                raise TraceError(f"{inst.name} {what} through a pointer held in by-value struct parameter "
                                 f"{', '.join(structs)}: pointers inside structs are not modelled")
            if pidx:
                msg = (f"{what} through a pointer loaded from memory (parameter {names(pidx)}): "
                       "pointers stored in buffers are not modelled")
            else:
                why = ", ".join(sorted(taint)) or "unknown"
                msg = f"{what} at an address that does not derive from a pointer parameter ({why})"
            raise TraceError(f"{inst.name} {msg}")
        others = [t for t in taint if not t.startswith(("ptr:", "sym:")) and not (t.startswith("data:") and t[5:].isdigit())]
        if pidx and not others:
            for k in pidx:
                self.index_sources.setdefault(k, f"{inst.name} {what} at an index loaded from parameter {k}")
            msg = (f"{inst.name} {what} parameter {names(int(p[4:]) for p in ptrs)} at an index loaded from "
                   f"parameter {names(pidx)} with no bounds check")
            if msg not in self.problems:
                self.problems.append(msg)
            return
        why = ", ".join(sorted(others)) or "a value with no bound"
        raise TraceError(
            f"{inst.name} {what} parameter {names(int(p[4:]) for p in ptrs) or '?'} at an offset that has no bound "
            f"(it depends on {why})")

    def _shared_access(self, inst, sel, addr, nbytes, kind):
        base = addr.base
        off = addr.offset or 0
        lo, hi, ta = self.get(base, sel, 64)
        lo, hi = lo + off, hi + off
        # 64-bit shared addresses may be generic-window values converted back
        lo = np.where(lo >= SHARED_WIN, lo - SHARED_WIN, lo)
        hi = np.where(hi >= SHARED_WIN, hi - SHARED_WIN, hi)
        self._shared_exact(inst, sel, lo, hi + nbytes, kind, nbytes)

    def _shared_exact(self, inst, sel, lo, end, kind, nbytes):
        if not self.shared_layout:
            return
        if not np.isscalar(nbytes):
            nbytes = int(np.max(nbytes)) if np.size(nbytes) else 0
            end = np.maximum(end, lo + 1)
            lo_exact = False
        else:
            lo_exact = True
        j1 = np.floor_divide(lo + SHARED_STRIDE // 2, SHARED_STRIDE)
        j2 = np.floor_divide(end - 1 + SHARED_STRIDE // 2, SHARED_STRIDE)
        ok = (j1 == j2) & np.isin(j1, list(self.shared_layout))
        if not ok.all():
            self.shape_problems.append(f"{inst.name}: a shared-memory address that is not provably inside one shared variable")
            return
        for j in np.unique(j1):
            j = int(j)
            m = j1 == j
            start, size = self.shared_layout[j]
            o_lo = lo[m] - j * SHARED_STRIDE
            o_end = end[m] - j * SHARED_STRIDE
            if j == self.dyn_slot:
                self.dyn_used = max(self.dyn_used, int(o_end.max()))
            if int(o_lo.min()) < 0 or int(o_end.max()) > size:
                self.shape_problems.append(
                    f"{inst.name}: shared memory {self.shared_name[j]} accessed at bytes "
                    f"{int(o_lo.min())}..{int(o_end.max())} but it has {size}")
                continue
            lanes = sel[m]
            exact = ((o_end - o_lo) == nbytes) & lo_exact
            cta = self.th["cta"][self.lane_thread[lanes]]
            if kind in ("store", "atomic"):
                if (~exact).any():
                    self.sh_inexact_write[np.unique(cta[~exact])] = True
            if exact.any():
                idx = (cta[exact] * self.shared_total + start + o_lo[exact])[:, None] + np.arange(nbytes)[None, :]
                idx = idx.ravel()
                if kind in ("store", "atomic"):
                    self.sh_written.ravel()[idx] = True
                if kind in ("load", "atomic"):
                    self.sh_read.ravel()[idx] = True

    def _check_shared_init(self):
        bad = self.sh_read & ~self.sh_written
        bad[self.sh_inexact_write] = False
        if bad.any():
            cta, byte = np.argwhere(bad)[0]
            for j, (start, size) in self.shared_layout.items():
                if start <= byte < start + size:
                    self.shape_problems.append(
                        f"reads shared memory {self.shared_name[j]} byte {byte - start} that no thread of the block writes")
                    break

    # ---- no-ops and opaque results
    def op_bar(self, inst, sel, maybe):
        if ".warp" in inst.modifiers and inst.operands:
            self._full_warp_check(inst, sel, inst.operands[0])
        self._defs_top(inst, sel, maybe, "barrier")

    op_barrier = op_bar
    op_membar = op_bar
    op_fence = op_bar
    op_nanosleep = op_bar
    op_griddepcontrol = op_bar
    op_pmevent = op_bar
    op_setmaxnreg = op_bar
    op_elect = lambda self, inst, sel, maybe: self._defs_top(inst, sel, maybe, "elect")

    def op_mbarrier(self, inst, sel, maybe):
        self._defs_top(inst, sel, maybe, "mbarrier")

    def _warp(self, inst, sel, maybe):
        if ".sync" in inst.modifiers and inst.operands:
            mask = inst.operands[0] if inst.opcode == "bar" else inst.operands[-1]
            self._full_warp_check(inst, sel, mask)
        self._defs_top(inst, sel, maybe, f"data:{inst.opcode}")

    op_shfl = _warp
    op_vote = _warp
    op_match = _warp
    op_redux = _warp
    op_activemask = _warp
    op_ldmatrix = _warp
    op_mma = _warp
    op_wgmma = _warp
    op_movmatrix = _warp

    def op_stmatrix(self, inst, sel, maybe):
        return

    def op_wmma(self, inst, sel, maybe):
        mods = inst.modifiers
        load, store = ".load" in mods, ".store" in mods
        space = (inst.space or "generic").split("::")[0]
        if not (load or store) or space == ".shared":
            self._defs_top(inst, sel, maybe, "wmma")
            return
        # a warp-wide tile: rows x cols elements, `stride` elements between rows (columns)
        import re as _re
        shape = next((m for m in mods if _re.fullmatch(r"\.m\d+n\d+k\d+", m)), None)
        mat = next((m for m in mods if m in (".a", ".b", ".c", ".d")), None)
        t = inst.type
        bits = {".b1": 1, ".s4": 4, ".u4": 4}.get(t, type_size(t) * 8 if t else 0)
        if shape is None or mat is None or not bits:
            raise TraceError(f"unsupported memory instruction {inst.name}")
        mm, nn, kk = (int(x) for x in _re.findall(r"\d+", shape))
        rows, cols = {".a": (mm, kk), ".b": (kk, nn), ".c": (mm, nn), ".d": (mm, nn)}[mat]
        outer, inner = (rows, cols) if ".row" in mods else (cols, rows)
        addr = inst.operands[1] if load else inst.operands[0]
        if not isinstance(addr, Addr):
            raise TraceError(f"unsupported memory instruction {inst.name}")
        stride_op = inst.operands[2] if len(inst.operands) > 2 else None
        if stride_op is None:
            stride = np.full(sel.size, inner, I64)
        else:
            slo, shi, _ = self.get(stride_op, sel, 32)
            if (slo < 0).any():
                raise TraceError(f"{inst.name} with a stride that may be negative")
            stride = shi
        nbytes = -(-((outer - 1) * stride + inner) * bits // 8)
        self._access(inst, sel, addr, nbytes, "load" if load else "store", space)
        if load:
            self._defs_top(inst, sel, maybe, "data:wmma")

    def _texture(self, inst, sel, maybe):
        raise TraceError(f"uses textures or surfaces ({inst.name}); a launch spec cannot describe them")

    op_tex = _texture
    op_tld4 = _texture
    op_suld = _texture
    op_sust = _texture
    op_sured = _texture
    op_txq = _texture
    op_suq = _texture

    def op_isspacep(self, inst, sel, maybe):
        lo, hi, _ = self.get(inst.operands[1], sel, 64)
        space = inst.space or ""
        ex = lo == hi
        if space.startswith(".shared"):
            r = (lo >= SHARED_WIN) & (lo < SHARED_WIN + (1 << 32))
        elif space == ".local":
            r = (lo >= LOCAL_WIN) & (lo < LOCAL_END)
        elif space == ".global":
            r = lo < SHARED_WIN
        else:
            r = np.zeros(sel.size, bool)
        r = r.astype(I64)
        self.put(inst.operands[0].name, sel, np.where(ex, r, 0), np.where(ex, r, 1), frozenset(), maybe)
        if inst.operands[0].name in self.pfid:
            self.pfid[inst.operands[0].name][sel] = -1

    def op_call(self, inst, sel, maybe):
        target = None
        for o in inst.operands:
            if isinstance(o, Sym):
                target = o.name
                break
        if target in ("vprintf", "__assertfail", "free", "__nv_free", "__cudaCDP2Synchronize"):
            self._call_results_top(inst, sel, maybe)
            return
        raise TraceError(f"calls {target or 'a function pointer'} (calls are not analysed)")

    def _call_results_top(self, inst, sel, maybe):
        from ptx_ir.nodes import Paren
        if inst.operands and isinstance(inst.operands[0], Paren) and len(inst.operands) > 1 and isinstance(inst.operands[1], Sym):
            for r in inst.operands[0].items:
                if isinstance(r, Reg):
                    self.put_top(r.name, sel, self.widths.get(r.name, 32), frozenset({"call"}), maybe)

    op_ret = op_bar
    op_exit = op_bar


_CMPS = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"}


def _natural_alignment(inst, nbytes) -> int:
    """The alignment the hardware requires for this access (vector accesses: their size)."""
    if not np.isscalar(nbytes):
        t = inst.type
        return type_size(t) if t else 1
    n = int(nbytes)
    return n if n and n & (n - 1) == 0 and n <= 16 else 1


def _touches_global(inst) -> bool:
    if not isa.touches_memory(inst):
        return False
    sp = inst.space
    if sp is None:
        return True
    return sp.split("::")[0] in (".global",)


def _uv(lo, hi, w):
    return _unsigned_view(np.asarray(lo), np.asarray(hi), w)


def _mul_iv(uns: bool, w: int):
    def iv(al, ah, bl, bh):
        if uns and w < 64:
            al, ah = _uv(al, ah, w)
            bl, bh = _uv(bl, bh, w)
        c = [al * bl, al * bh, ah * bl, ah * bh]
        return np.minimum.reduce(c), np.maximum.reduce(c)
    return iv


def _mulhi(a, b, w, uns):
    if w <= 32:
        if uns:
            return ((_unsigned_exact(a, w).astype(np.uint64) * _unsigned_exact(b, w).astype(np.uint64)) >> np.uint64(w)).astype(I64)
        return np.right_shift(a * b, w)
    # 64-bit: 32-bit limbs
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a0, a1 = ua & m32, ua >> s32
    b0, b1 = ub & m32, ub >> s32
    p00 = a0 * b0
    p01 = a0 * b1
    p10 = a1 * b0
    p11 = a1 * b1
    mid = (p00 >> s32) + (p01 & m32) + (p10 & m32)
    hi = p11 + (p01 >> s32) + (p10 >> s32) + (mid >> s32)
    if not uns:
        hi = hi - np.where(a < 0, ub, np.uint64(0)) - np.where(b < 0, ua, np.uint64(0))
    return hi.view(I64)


def _rewidth(lo, hi, w, wd, signed):
    """A w-bit result into a wd-bit register (ld/cvt style: zero/sign extension)."""
    if wd > w and not signed and w < 64:
        ex = lo == hi
        u = _unsigned_exact(lo, w)
        ulo, uhi = _unsigned_view(lo, hi, w)
        return np.where(ex, u, ulo.astype(I64)), np.where(ex, u, uhi.astype(I64))
    if wd < w:
        ex = lo == hi
        r = _wrap(lo, wd)
        nlo, nhi = _norm_interval(lo, hi, wd)
        return np.where(ex, r, nlo), np.where(ex, r, nhi)
    return lo, hi


def _pred_combine(kind, alo, ahi, blo, bhi):
    if kind == "and":
        return alo & blo, ahi & bhi
    if kind == "or":
        return alo | blo, ahi | bhi
    ex = (alo == ahi) & (blo == bhi)
    r = alo ^ blo
    return np.where(ex, r, 0), np.where(ex, r, 1)


def _map_formulas(tracer, kind, fa, fb):
    out = np.full(fa.size, -1, I64)
    if kind == "not":
        for v in np.unique(fa):
            if v >= 0:
                out[fa == v] = tracer._formula_id(("not", int(v)))
        return out
    if fa.size and (fa == fa[0]).all() and (fb == fb[0]).all():
        if fa[0] >= 0 or fb[0] >= 0:
            out[:] = tracer._formula_id((kind, int(fa[0]), int(fb[0])))
        return out
    key = (fa + 1) * (1 << 31) + (fb + 1)
    uniq, inv = np.unique(key, return_inverse=True)
    for i, kv in enumerate(uniq):
        x, y = int(kv >> 31) - 1, int(kv & ((1 << 31) - 1)) - 1
        if x < 0 and y < 0:
            continue
        out[inv == i] = tracer._formula_id((kind, x, y))
    return out


def trace(module, fn, grid, block, shared_bytes, params, load_ranges=None, *,
          deadline: float | None = None, max_lane_steps: int | None = None) -> TraceResult:
    """Trace one launch of ``fn`` (see the module docstring). ``deadline``: a
    ``time.monotonic()`` value after which the trace gives up with a problem;
    ``max_lane_steps``: the work after which it gives up (both say "budget")."""
    t = Tracer(module, fn, grid, block, shared_bytes, params, load_ranges, deadline)
    if max_lane_steps is not None:
        t.MAX_LANE_STEPS = max_lane_steps
    return t.run()


def _const(v: int, w: int) -> int:
    v &= (1 << 64) - 1
    if w < 64:
        v &= (1 << w) - 1
        if v >= 1 << (w - 1):
            v -= 1 << w
        return v
    return v - (1 << 64) if v >= 1 << 63 else v


def _fit(lo, hi, w):
    """Canonical w-bit values: exact lanes wrapped, intervals normalised."""
    if w >= 64:
        return lo, hi
    ex = lo == hi
    r = _wrap(lo, w)
    nlo, nhi = _norm_interval(lo, hi, w)
    return np.where(ex, r, nlo), np.where(ex, r, nhi)
