"""Memory bookkeeping of a trace: where every access lands, and the results.

:class:`MemoryMap` lays out the fake address space (pointer parameters far apart, module
variables, shared variables back to back in one byte space per CTA, the local window);
:class:`AccessRecorder` decodes each access to *(buffer, byte offset)* and keeps, per pointer
parameter, the lowest and highest byte touched (:class:`BufferAccess`), the shared bytes each
CTA writes and reads, and the problems: unbounded accesses (a :class:`TraceError` or, when an
index distribution may fix it, a problem with its source in ``index_sources``), shared
accesses out of bounds, and the size multiples vector accesses need.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ptx_ir.nodes import VarDecl, type_size
from superopt.specs.trace.intervals import (I64, LOCAL_END, LOCAL_WIN, PARAM_STRIDE, SHARED_STRIDE,
                                            SHARED_WIN, SYM_BASE, SYM_STRIDE)


class TraceError(Exception):
    """The kernel does something the tracer cannot bound; the message says what."""


class TraceTimeout(BaseException):
    """The caller's hard deadline passed. A BaseException on purpose: no ``except Exception``
    between the tracer's loop and the caller that set the deadline may swallow it."""


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
    # (struct param, byte offset) of fields used as addresses while traced as bytes (see
    # AccessRecorder.struct_pointers): a retrace with them as virtual pointers may succeed.
    struct_pointers: set = field(default_factory=set)
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




class MemoryMap:
    """Fake addresses of the module's and the kernel's variables, and the shared layout."""

    def __init__(self, module, fn, shared_bytes: int):
        self.sym_value: dict[str, int] = {}
        self.sym_kind: dict[str, str] = {}
        self.shared_size: dict[int, int | None] = {}   # shared slot -> size (None: dynamic)
        self.shared_name: dict[int, str] = {}
        self.global_syms: dict[int, str] = {}
        decls = [d for d in module.globals]
        decls += [s for s in (fn.body or ()) if isinstance(s, VarDecl) and s.space != ".reg"]
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
            self.shared_size[dyn_slot] = shared_bytes
        # Shared bookkeeping: one flat byte space per CTA, slots laid out back to back.
        self.shared_layout: dict[int, tuple[int, int]] = {}
        off = 0
        for slot, size in sorted(self.shared_size.items()):
            size = int(size or 0)
            self.shared_layout[slot] = (off, size)
            off += size
        self.shared_total = off


class AccessRecorder:
    """Accesses of one trace (all chunks of CTAs) and what they prove or refute."""
    MAX_SPAN = 1 << 31              # an access range wider than this counts as unbounded

    def __init__(self, fn, params: dict, load_ranges: dict, memory: MemoryMap):
        # Virtual pointer params (pointer fields of by-value structs, see Tracer) have
        # indices past the kernel's own and live in the same address map.
        self.nparams = max([len(fn.params)] + [k + 1 for k in params])
        self.memory_params = fn.params
        self.params = params
        self.load_ranges = load_ranges
        self.buffers = {i: BufferAccess(i, p.name) for i, p in enumerate(fn.params)
                        if params.get(i, ("int",))[0] == "ptr"}
        for k, kind in params.items():
            if k >= len(fn.params) and kind[0] == "ptr":
                self.buffers[k] = BufferAccess(k, kind[1] if len(kind) > 1 else f"virtual{k}")
        # (struct param index, byte offset) of 8-byte struct fields the kernel accessed
        # memory through while they were traced as plain bytes: virtual pointers next time.
        self.struct_pointers: set = set()
        self.problems: list[str] = []
        self.shape_problems: list[str] = []
        self.index_sources: dict = {}
        self.needs_multiple = 1
        self.multiple_reason = ""
        self.memory = memory
        self.shared_layout = memory.shared_layout
        self.shared_total = memory.shared_total
        self.shared_name = memory.shared_name
        self.global_syms = memory.global_syms
        self.dyn_slot = memory.dyn_slot
        self.dyn_used = 0

    def start_chunk(self, ncta: int):
        """Fresh shared-memory bitmaps for the ``ncta`` CTAs of the next chunk."""
        if self.shared_total:
            self.sh_written = np.zeros((ncta, self.shared_total), bool)
            self.sh_read = np.zeros((ncta, self.shared_total), bool)
            self.sh_inexact_write = np.zeros(ncta, bool)

    def end_chunk(self):
        if self.shared_total:
            self.check_shared_init()

    def need_multiple(self, m: int, why: str):
        if m > self.needs_multiple:
            self.needs_multiple = m
            self.multiple_reason = why

    def global_access(self, inst, sel, lo, hi, ta, nbytes, kind, cta):
        """Record a global/generic access at addresses [lo, hi] (+ nbytes) of lanes ``sel``
        (``cta``: their CTA within the chunk); for loads return (value range or None, None, taint)."""
        end = hi + nbytes
        # decode: pointer params
        k1 = np.floor_divide(lo + (1 << 40), PARAM_STRIDE) - 1
        k2 = np.floor_divide(end - 1 + (1 << 40), PARAM_STRIDE) - 1
        in_param = (k1 == k2) & (k1 >= 0) & (k1 < self.nparams) & (lo >= PARAM_STRIDE // 2) & (end <= SYM_BASE)
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
                        self.need_multiple(align, f"{inst.name} would be misaligned (it needs {align}-byte "
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
            self.shared_access(inst, ssel, lo[shared] - SHARED_WIN, end[shared] - SHARED_WIN, kind, nbytes,
                               cta[shared])
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
            self.unbounded(inst, ta, kind)
        if kind == "load":
            if len(seen) == 1 and not bad.any() and taint == {f"data:{min(seen)}"} and min(seen) in self.load_ranges:
                loaded_range = self.load_ranges[min(seen)]
            if loaded_range is not None:
                rlo = np.full(sel.size, loaded_range[0], I64)
                rhi = np.full(sel.size, loaded_range[1], I64)
                return (rlo, rhi), None, taint
            return None, None, taint or frozenset({"data:memory"})
        return None

    def unbounded(self, inst, taint, kind):
        data = sorted(t for t in taint if t.startswith("data:"))
        ptrs = sorted(t for t in taint if t.startswith("ptr:"))
        pidx = [int(t[5:]) for t in data if t[5:].isdigit()]
        names = lambda idx: ", ".join(self._label(i) for i in idx)
        what = {"load": "reads", "store": "writes", "atomic": "updates"}[kind]
        # struct:k (any bytes of struct param k) or struct:k@off (its 8-byte field at off)
        fields = {tuple(int(x) for x in t[7:].split("@")) for t in taint if t.startswith("struct:") and "@" in t[7:]}
        structs = sorted({t[7:].split("@")[0] for t in taint if t.startswith("struct:")}, key=int)
        if not ptrs and not any(t.startswith("sym:") for t in taint):
            if structs:
                self.struct_pointers |= fields
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

    def _label(self, k: int) -> str:
        """A param index as messages give it (a virtual pointer: its field's name)."""
        kind = self.params.get(k, ("int",))
        if k >= len(self.memory_params) and kind[0] == "ptr" and len(kind) > 1:
            return f"{k} ({kind[1]}, a struct's pointer field)"
        return str(k)

    def shared_access(self, inst, sel, lo, end, kind, nbytes, cta):
        """Record a shared access at 32-bit shared addresses [lo, end) of lanes ``sel``."""
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
            cta_m = cta[m]
            if kind in ("store", "atomic"):
                if (~exact).any():
                    self.sh_inexact_write[np.unique(cta_m[~exact])] = True
            if exact.any():
                idx = (cta_m[exact] * self.shared_total + start + o_lo[exact])[:, None] + np.arange(nbytes)[None, :]
                idx = idx.ravel()
                if kind in ("store", "atomic"):
                    self.sh_written.ravel()[idx] = True
                if kind in ("load", "atomic"):
                    self.sh_read.ravel()[idx] = True

    def check_shared_init(self):
        bad = self.sh_read & ~self.sh_written
        bad[self.sh_inexact_write] = False
        if bad.any():
            cta, byte = np.argwhere(bad)[0]
            for j, (start, size) in self.shared_layout.items():
                if start <= byte < start + size:
                    self.shape_problems.append(
                        f"reads shared memory {self.shared_name[j]} byte {byte - start} that no thread of the block writes")
                    break


    def result(self, *, lane_steps: int, steps: int, threads: int) -> TraceResult:
        return TraceResult(buffers=self.buffers, problems=self.problems,
                           shape_problems=self.shape_problems, index_sources=self.index_sources,
                           struct_pointers=self.struct_pointers,
                           shared_used=self.dyn_used, lane_steps=lane_steps, steps=steps,
                           needs_multiple=self.needs_multiple, multiple_reason=self.multiple_reason,
                           threads=threads)


def _natural_alignment(inst, nbytes) -> int:
    """The alignment the hardware requires for this access (vector accesses: their size)."""
    if not np.isscalar(nbytes):
        t = inst.type
        return type_size(t) if t else 1
    n = int(nbytes)
    return n if n and n & (n - 1) == 0 and n <= 16 else 1
