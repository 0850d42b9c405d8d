"""The emulator's memory model: one generic 64-bit address space with three windows.

* global (and ``.const``) memory: one growing byte array, the *heap*, at ``HEAP_BASE``;
  module variables first, then every allocation (256-byte aligned like cudaMalloc).
  Any address inside the heap is accessible (guard zones included, so that a kernel
  writing past a buffer damages its guard, as on a GPU); anything else faults.
* shared memory: per block, ``SHARED_BASE + offset`` in generic addressing; shared-space
  addresses (``ld.shared``) are the offsets themselves.
* local memory: per thread, ``LOCAL_BASE + offset``; local-space addresses are offsets
  into the thread's stack of frames.

* kernel parameters: ``KPARAM_BASE + offset`` both as .param-space addresses (``mov`` of a
  parameter's name) and as generic ones (``cvta.param`` is the identity); read-only.

``cvta`` converts between the windows exactly as these constants say.
"""
from __future__ import annotations

import numpy as np

from ptx_ir.semantics.errors import KernelFault

HEAP_BASE = 0x7F00_0000_0000
SHARED_BASE = 0x7E01_0000_0000
LOCAL_BASE = 0x7E00_0000_0000
KPARAM_BASE = 0x7E02_0000_0000      # kernel parameters (param space and generic alike)
WINDOW = 1 << 32
FUNC_BASE = 0x7D00_0000_0000

_UT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SHIFT = {1: 0, 2: 1, 4: 2, 8: 3}


class Heap:
    """Global memory: a byte array addressed from HEAP_BASE."""

    def __init__(self, capacity: int = 1 << 20):
        self.buf = np.zeros(capacity, np.uint8)
        self.top = 0
        self._views()

    def _views(self):
        self.views = {w: self.buf.view(_UT[w]) for w in (1, 2, 4, 8)}

    def alloc(self, nbytes: int, align: int = 256) -> int:
        start = -(-self.top // align) * align
        end = start + max(int(nbytes), 1)
        if end > self.buf.size:
            cap = self.buf.size
            while cap < end:
                cap *= 2
            nb = np.zeros(cap, np.uint8)
            nb[: self.top] = self.buf[: self.top]
            self.buf = nb
            self._views()
        self.top = end
        return HEAP_BASE + start

    def write(self, addr: int, data) -> None:
        b = np.frombuffer(bytes(data), np.uint8) if not isinstance(data, np.ndarray) else \
            np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        off = addr - HEAP_BASE
        self.buf[off: off + b.size] = b

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        off = addr - HEAP_BASE
        return self.buf[off: off + nbytes].copy()

    def contains(self, addr: int, nbytes: int = 1) -> bool:
        off = addr - HEAP_BASE
        return 0 <= off and off + nbytes <= self.top


def _fault(kind, addrs, bad, space):
    i = int(np.flatnonzero(bad)[0])
    a = int(addrs[i])
    raise KernelFault(f"{kind} {space} address 0x{a:x}")


def offsets(addrs, base: int, limit: int, width: int, total: int, space: str):
    """Byte offsets of ``addrs`` from ``base`` checked against [0, limit) and alignment."""
    off = addrs.astype(np.uint64, copy=False) - np.uint64(base) if base else addrs.astype(np.uint64)
    if off.size:
        hi = off.max()
        if hi > np.uint64(max(limit - total, -1) if limit >= total else 0) or limit < total:
            _fault("out-of-range", addrs, off > np.uint64(max(limit - total, 0)) if limit >= total
                   else np.ones(off.shape, bool), space)
        if total > 1 and (off & np.uint64(total - 1)).any():
            _fault("misaligned", addrs, (off & np.uint64(total - 1)) != 0, space)
    return off


def gather(view_by_width, flat_off, width: int, count: int):
    """Load ``count`` consecutive elements of ``width`` bytes at byte offsets ``flat_off``."""
    v = view_by_width[width]
    ix = (flat_off >> np.uint64(_SHIFT[width])).astype(np.int64)
    if count == 1:
        return v[ix]
    return v[ix[:, None] + np.arange(count)]


def scatter(view_by_width, flat_off, width: int, count: int, vals):
    v = view_by_width[width]
    ix = (flat_off >> np.uint64(_SHIFT[width])).astype(np.int64)
    if count == 1:
        v[ix] = vals
    else:
        v[(ix[:, None] + np.arange(count)).reshape(-1)] = np.asarray(vals).reshape(-1)


def atomic_apply(view, ix, op, vals, cmp=None, kind=None, need_old=True):
    """Apply ``new = op(old, val[, cmp])`` sequentially in lane order; return the old values.

    ``kind`` describes ``op`` for the fast paths: ``("assoc", ufunc, dtype)`` for an
    associative integer operation (add, min, max, and, or, xor), ``("exch",)``, ``("cas",)``
    or None (anything else). Lanes hitting distinct addresses are applied together; lanes
    sharing an address use a segmented scan (associative ops, exch), the closed form of a
    uniform compare-and-swap, or rounds in lane order.
    """
    n = ix.size
    vals = np.broadcast_to(vals, (n,))
    if cmp is not None:
        cmp = np.broadcast_to(cmp, (n,))
    if n == 0:
        return view[ix]
    order = np.argsort(ix, kind="stable")
    sx = ix[order]
    newseg = np.empty(n, bool)
    newseg[0] = True
    newseg[1:] = sx[1:] != sx[:-1]
    if newseg.all():
        old = view[ix]
        view[ix] = op(old, vals) if cmp is None else op(old, vals, cmp)
        return old
    starts = np.flatnonzero(newseg)
    segstart = np.maximum.accumulate(np.where(newseg, np.arange(n), 0))
    rank = np.arange(n) - segstart
    heads = sx[starts]                       # the distinct addresses
    M = view[heads]                          # their values before this instruction
    seg_of = np.cumsum(newseg) - 1           # segment number of each sorted element
    kind0 = kind[0] if kind else None
    if kind0 == "fadd" and len(starts) < int(rank.max()) + 1:
        # few addresses hit by many lanes: a sequential sum per address (numpy's accumulate
        # adds left to right, rounding each step as the atomics do one after another)
        out = _fadd_segments(view, ix, order, starts, heads, vals, kind[1], kind[2])
        if out is not None:
            return out
    if kind0 == "assoc" and not need_old:
        uf, dt = kind[1], kind[2]
        v = np.ascontiguousarray(vals[order]).astype(view.dtype, copy=False).view(dt)
        tot = uf.reduceat(v, starts)
        view[heads] = uf(M.view(dt), tot).astype(dt).view(view.dtype)
        return None
    if kind0 in ("assoc", "exch"):
        v = np.ascontiguousarray(vals[order]).astype(view.dtype, copy=False)
        if kind0 == "exch":
            incl = v
        else:
            uf, dt = kind[1], kind[2]
            incl = _seg_scan(v.view(dt), segstart, uf, int(rank.max()) + 1).view(view.dtype)
            uf_v = lambda a, b: uf(a.view(dt), b.view(dt)).astype(dt).view(view.dtype)  # noqa: E731
        prev = np.empty(n, view.dtype)
        prev[1:] = incl[:-1]
        Mseg = M[seg_of]
        first = rank == 0
        if kind0 == "exch":
            old_sorted = np.where(first, Mseg, prev)
        else:
            old_sorted = np.where(first, Mseg, uf_v(Mseg, prev))
        last = np.append(starts[1:], n) - 1
        view[heads] = v[last] if kind0 == "exch" else uf_v(M, incl[last])
        out = np.empty(n, view.dtype)
        out[order] = old_sorted
        return out
    if kind0 == "cas":
        vs, cs = vals[order], cmp[order]
        uniform = (vs == vs[starts][seg_of]).all() and (cs == cs[starts][seg_of]).all()
        if uniform:
            V, C = vs[starts], cs[starts]
            hit = M == C                       # the first lane of the address swaps
            after = np.where(hit, V, M)        # everyone after it sees the new value...
            stay = after == C                  # ...unless it equals the compare value again
            if not stay[hit].any():
                Mseg, after_s = M[seg_of], after[seg_of]
                old_sorted = np.where(rank == 0, Mseg, after_s)
                view[heads] = after
                out = np.empty(n, view.dtype)
                out[order] = old_sorted
                return out
    out = np.empty(n, view.dtype)
    for r in range(int(rank.max()) + 1):
        sel = order[rank == r]
        a = ix[sel]
        old = view[a]
        view[a] = op(old, vals[sel]) if cmp is None else op(old, vals[sel], cmp[sel])
        out[sel] = old
    return out


def _seg_scan(v, segstart, uf, maxlen):
    """Inclusive scan of ``v`` with ``uf`` restarting at every segment (log-step)."""
    x = v.copy()
    pos = np.arange(v.size)
    off = 1
    while off < maxlen:
        ok = np.flatnonzero(pos - off >= segstart)
        y = x.copy()
        y[ok] = uf(x[ok - off], x[ok])
        x = y
        off *= 2
    return x


def _fadd_segments(view, ix, order, starts, heads, vals, dt, ftz):
    """Float atomic add with many lanes per address, or None when a step would need the
    careful path (an intermediate sum that an ftz add would flush)."""
    from ptx_ir.semantics import fp
    n = ix.size
    v = np.ascontiguousarray(vals[order]).astype(view.dtype, copy=False).view(dt)
    if ftz:
        v = fp.ftz(v)
    ends = np.append(starts[1:], n)
    olds = np.empty(n, dt)
    news = np.empty(len(starts), dt)
    tiny = np.finfo(dt).tiny
    for k, (a, b) in enumerate(zip(starts, ends)):
        m0 = view[heads[k]: heads[k] + 1].view(dt)
        if ftz:
            m0 = fp.ftz(m0)
        seq = np.concatenate([m0, v[a:b]])
        acc = np.add.accumulate(seq, dtype=dt)
        if dt != np.float32 and not np.isfinite(acc).all():
            return None          # f64 NaN payloads follow operand order: take the careful path
        if ftz:
            sub = (np.abs(acc) < tiny) & (acc != 0)
            if sub.any():
                return None
        olds[a:b] = acc[:-1]
        news[k] = acc[-1]
    if dt == np.float32:
        olds, news = fp.canon_nan(olds), fp.canon_nan(news)
    view[heads] = news.view(view.dtype)
    out = np.empty(n, view.dtype)
    out[order] = olds.view(view.dtype)
    return out


class GuardWatch:
    """Records global loads that touch bytes outside a watched buffer's data.

    Each watched buffer has a *zone* (its whole allocation: front guard, data, back guard,
    and the alignment padding up to the next allocation) and its *data* extent. A load
    whose bytes lie in a zone but not all inside that zone's data reads outside the buffer
    (a guard zone, or padding): counted per buffer, with the farthest distance before the
    start and past the end, in bytes. Writes there damage the guards and are caught by them.
    """

    def __init__(self, buffers):
        # buffers: (name, zone_start, zone_end, data_start, data_end) as heap byte offsets
        bs = sorted(buffers, key=lambda b: b[1])
        self.names = [b[0] for b in bs]
        self.zs = np.array([b[1] for b in bs], np.uint64)
        self.ze = np.array([b[2] for b in bs], np.uint64)
        self.ds = np.array([b[3] for b in bs], np.uint64)
        self.de = np.array([b[4] for b in bs], np.uint64)
        self.reads: dict = {}

    def record(self, off, total: int) -> None:
        if not len(self.names) or off.size == 0:
            return
        off = np.asarray(off, np.uint64)
        lo, hi = off.min(), off.max()
        if hi < self.zs[0] or lo >= self.ze[-1]:
            return
        k = np.searchsorted(self.zs, off, side="right").astype(np.int64) - 1
        inz = k >= 0
        kk = np.where(inz, k, 0)
        inz &= off < self.ze[kk]
        end = off + np.uint64(total)
        out = inz & ((off < self.ds[kk]) | (end > self.de[kk]))
        if not out.any():
            return
        for b in np.unique(kk[out]):
            sel = out & (kk == b)
            o, e = off[sel], end[sel]
            r = self.reads.setdefault(self.names[int(b)], {"count": 0, "past_end_bytes": 0, "before_start_bytes": 0})
            r["count"] += int(sel.sum())
            past = e[e > self.de[b]]
            if past.size:
                r["past_end_bytes"] = max(r["past_end_bytes"], int((past - self.de[b]).max()))
            before = o[o < self.ds[b]]
            if before.size:
                r["before_start_bytes"] = max(r["before_start_bytes"], int((self.ds[b] - before).max()))
