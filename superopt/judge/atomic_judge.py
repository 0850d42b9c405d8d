"""Judging kernels that end in floating-point atomics by their contributions.

nvcc's code for ``atomicAdd(double*)`` reductions is not deterministic on a GPU: blocks add
their partials in an order the hardware picks. Comparing final values would make every such
kernel "could not judge"; a tolerance would give up exactness. Instead, when the baseline's
kernel has float atomic adds to global memory, the check (:mod:`superopt.judge.check`) runs
baseline and candidate instrumented by :mod:`superopt.judge.atomic_log` and compares, on
every launch:

* the **contributions**: the multiset of (buffer, byte offset, type, added value bits) of
  all float atomic adds must be the same as nvcc's (nvcc's own two runs must agree too);
* the **chain** of each target element: the old values the atomics returned must link its
  initial value to its final value through exactly those adds, in some order (an Euler
  trail from initial to final value in the graph whose edges are old -> old + value). So
  nothing but those atomics wrote the element, and its final value is one that *some* order
  of the same additions gives -- the same set of outcomes nvcc's code has;
* everything else exactly, as always (the target elements are left out of the bitwise
  comparison and of the determinism check, and only there).

The log is one more buffer, :data:`~superopt.judge.atomic_log.LOG_BUFFER`, added to every
input set as an ``inout`` of u64 words that starts zeroed; it never appears as a user
buffer (its name is reserved). Its capacity starts at ``min(max(65536, threads), limit)``
records (24 bytes each: one add per thread, as in per-thread histograms, or one per block, as
in reductions, fit; the emulator counts the log against its memory cap) and grows once to what
nvcc's code needed when a baseline run overflows (the counter keeps counting past the
capacity), up to the limit ``NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS`` (default 2**24); beyond it,
"could not judge".
Timing never sees the instrumentation: only the check runs the instrumented PTX.

Contributions and chains cannot see a plain access slipped between the atomics: a candidate
that reads a target and writes the value back (a no-op on the emulator, which runs the copy
before the adds or after them; a lost update on a GPU, where other blocks' adds land in
between) leaves the same multiset and a consistent chain. So a buffer that nvcc's code
touches only with atomics (integer ones too) must be touched only with atomics by the
candidate (:func:`plain_access_problem`, from the access summary of
:mod:`superopt.judge.race_check`, on every backend).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

from ptx_ir.semantics import fp
from superopt.judge import atomic_log as AL
from superopt.judge.atomic_log import Refused
from superopt.judge.inputs import InputSet, make_guards
from superopt.specs.launch_spec import Buffer, Bytes, LaunchSpec

__all__ = ["AtomicMode", "Log", "Refused", "decode", "max_records", "start", "chain_problem", "multiset_difference",
           "target_masks", "run_logged", "instrument_candidate", "plain_access_problem"]

DEFAULT_MAX_RECORDS = 1 << 24
WIDTH = {1: 2, 2: 2, 3: 4, 4: 8}                 # type code -> bytes
_WIDTHS = np.array([WIDTH.get(c, 0) for c in range(16)], np.uint64)   # the same, indexable by a code array
TYPE_NAME = {1: "f16", 2: "bf16", 3: "f32", 4: "f64"}


def max_records() -> int:
    """The most records a log may hold (``NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS``, default 2**24)."""
    try:
        from superopt.config.settings import env_value
        return max(1, int(float(env_value("NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS") or DEFAULT_MAX_RECORDS)))
    except ValueError:
        return DEFAULT_MAX_RECORDS


def initial_capacity(sets: list[InputSet]) -> int:
    threads = max(math.prod(int(g) for g in s.spec.grid) * math.prod(int(b) for b in s.spec.block)
                  for s in sets)
    return min(max(65536, threads), max_records())


# --------------------------------------------------------------------------- decoding

@dataclass
class Log:
    """One launch's float-atomic records, with addresses turned into (buffer, offset).

    ``buf`` indexes ``names`` (-1: no buffer of the spec; ``off`` is then the absolute
    address). ``count`` is how many adds were made; only ``min(count, capacity)`` are here."""
    count: int
    capacity: int
    names: list
    buf: np.ndarray
    off: np.ndarray
    typ: np.ndarray
    val: np.ndarray
    old: np.ndarray
    header_ok: bool = True

    @property
    def overflow(self) -> bool:
        return self.count > self.capacity

    def __len__(self) -> int:
        return int(self.buf.size)

    def order(self) -> np.ndarray:
        """Index order of the multiset key (buffer, offset, type, value)."""
        return np.lexsort((self.val, self.typ, self.off, self.buf))

    def key(self) -> tuple:
        o = self.order()
        return self.buf[o], self.off[o], self.typ[o], self.val[o]


def _ranges(rs: LaunchSpec, inst: AL.Instrumented, hdr: np.ndarray) -> list[tuple[int, int, int]]:
    """(start address, end address, buffer index) of every buffer the header locates."""
    names = [b.name for b in rs.buffers]
    kparams = rs.kernel_params
    out = []
    for k, (pi, off) in enumerate(inst.header):
        if pi >= len(kparams):
            continue
        p = kparams[pi]
        target = None
        if isinstance(p, Buffer) and off == 0:
            target = p
        elif isinstance(p, Bytes) and off in p.pointers:
            target = rs.param(p.pointers[off])
        if target is not None:
            start = int(hdr[k])
            out.append((start, start + target.nbytes, names.index(target.name)))
    return sorted(out)


def decode(raw: np.ndarray, inst: AL.Instrumented, rs: LaunchSpec) -> Log:
    """The records of one launch's log buffer ``raw`` (u64 words), for the resolved spec
    ``rs`` of its input set (without the log buffer)."""
    w = np.ascontiguousarray(raw).view(np.uint64)
    count = int(w[0])
    names = [b.name for b in rs.buffers]
    h = len(inst.header)
    header_ok = int(w[1]) == (AL.MARKER | h)
    n = min(count, inst.capacity)
    rec = w[inst.record_start:inst.record_start + AL.RECORD_WORDS * n].reshape(n, AL.RECORD_WORDS)
    typ = (rec[:, 0] >> np.uint64(AL.TYPE_SHIFT)).astype(np.uint8)
    addr = rec[:, 0] & np.uint64(AL.ADDRESS_MASK)
    width = _WIDTHS[typ]
    buf = np.full(n, -1, np.int64)
    off = addr.astype(np.int64)
    for start, end, bi in _ranges(rs, inst, w[2:2 + h]):
        inside = (addr >= np.uint64(start)) & (addr + width <= np.uint64(end)) & (buf < 0)
        buf[inside] = bi
        off[inside] = (addr[inside] - np.uint64(start)).astype(np.int64)
    return Log(count, inst.capacity, names, buf, off, typ, rec[:, 1].copy(), rec[:, 2].copy(), header_ok)


# --------------------------------------------------------------------------- comparisons

def _fmt(bits: int, code: int) -> str:
    t = TYPE_NAME.get(code, "?")
    if t == "f64":
        v = float(np.array([bits], np.uint64).view(np.float64)[0])
    elif t == "f32":
        v = float(np.array([bits], np.uint32).view(np.float32)[0])
    elif t == "f16":
        v = float(np.array([bits], np.uint16).view(np.float16)[0])
    else:
        v = float(np.array([bits << 16], np.uint32).view(np.float32)[0])
    return f"{v!r} (0x{bits:0{2 * WIDTH.get(code, 8)}x})"


def _where(log: Log, b: int, off: int, rs: LaunchSpec | None) -> str:
    if b < 0:
        return f"address 0x{off:x} (in no buffer of the spec)"
    name = log.names[b]
    es = rs.param(name).elem.size if rs is not None else 1
    el = f"element {off // es}" + (f" (byte offset {off})" if off % es else "")
    return f"buffer {name!r} {el}"


def multiset_difference(base: Log, cand: Log, rs: LaunchSpec | None = None, a: str = "nvcc's code",
                        b: str = "the candidate") -> str | None:
    """How ``cand``'s contributions differ from ``base``'s, described for the first target
    (in buffer, offset order) whose adds differ; None when the multisets are equal.
    ``a``/``b`` name the two sides in the message."""
    kb, kc = base.key(), cand.key()
    n = min(len(base), len(cand))
    neq = np.zeros(n, bool)
    for x, y in zip(kb, kc):
        neq |= x[:n] != y[:n]
    pos = int(np.argmax(neq)) if neq.any() else n
    if pos == len(base) == len(cand):
        return None
    firsts = [(int(k[0][pos]), int(k[1][pos])) for k in (kb, kc) if pos < len(k[0])]
    t = min(firsts)
    sb = (kb[0] == t[0]) & (kb[1] == t[1])
    sc = (kc[0] == t[0]) & (kc[1] == t[1])
    vb = list(zip(kb[2][sb].tolist(), kb[3][sb].tolist()))
    vc = list(zip(kc[2][sc].tolist(), kc[3][sc].tolist()))
    where = _where(base if sb.any() else cand, t[0], t[1], rs)
    if len(vb) != len(vc):
        head = f"{where} gets {len(vb)} float atomic adds from {a} and {len(vc)} from {b}"
    else:
        head = f"{where} gets {len(vb)} float atomic adds from each, with other values"
    parts = []
    for mine, theirs, who, other in ((vb, Counter(vc), a, b), (vc, Counter(vb), b, a)):
        seen: Counter = Counter()
        only = []                          # multiset difference mine - theirs, linear in the adds
        for x in mine:
            seen[x] += 1
            if seen[x] > theirs[x]:
                only.append(x)
        if only:
            parts.append(f"{who} adds {_fmt(only[0][1], only[0][0])}"
                         + (f" and {len(only) - 1} more" if len(only) > 1 else "") + f" that {other} does not")
    return head + (" (" + "; ".join(parts) + ")" if parts else "")


def _result(old: np.ndarray, val: np.ndarray, code: int) -> np.ndarray:
    """old + val as the atomic computes it (the emulator's semantics, checked on an H200:
    f32 flushes subnormals, round to nearest even), as bits of the type's width."""
    with np.errstate(all="ignore"):
        return _add(old, val, code)


def _add(old: np.ndarray, val: np.ndarray, code: int) -> np.ndarray:
    if code == 4:
        return fp.f64_add(old.view(np.float64), val.view(np.float64)).view(np.uint64)
    if code == 3:
        o, v = old.astype(np.uint32).view(np.float32), val.astype(np.uint32).view(np.float32)
        return fp.f32_add(o, v, "rn", True).view(np.uint32)
    o, v = old.astype(np.uint16), val.astype(np.uint16)
    if code == 1:
        return np.asarray(fp.h_add(o.view(np.float16), v.view(np.float16), "f16")).view(np.uint16)
    return np.asarray(fp.h_add(o, v, "bf16")).astype(np.uint16)


_NAN = {1: (0x7C00, 0x03FF), 2: (0x7F80, 0x007F), 3: (0x7F800000, 0x007FFFFF),
        4: (0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}


def _state(bits: np.ndarray, code: int) -> np.ndarray:
    """States compare by bits, except that every NaN is one state (all NaNs are equal) and,
    for f32, a subnormal is its signed zero: atom.add.f32 flushes subnormal operands, so the
    two behave the same in every later add, and the old value an atomic returns for a
    subnormal may be either (the emulator returns it flushed)."""
    exp, man = _NAN[code]
    b = bits.astype(np.uint64)
    nan = ((b & np.uint64(exp)) == np.uint64(exp)) & ((b & np.uint64(man)) != 0)
    out = np.where(nan, np.uint64(exp | man), b)
    if code == 3:
        sub = (b & np.uint64(exp)) == 0
        out = np.where(sub & ~nan, b & np.uint64(0x80000000), out)
    return out


def _components(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Weakly connected components of a graph on ``n`` nodes (hooking + pointer jumping)."""
    parent = np.arange(n)
    for _ in range(64):
        pu, pv = parent[u], parent[v]
        lo, hi = np.minimum(pu, pv), np.maximum(pu, pv)
        cross = lo != hi
        if not cross.any():
            return parent
        np.minimum.at(parent, hi[cross], lo[cross])
        while True:
            pp = parent[parent]
            if np.array_equal(pp, parent):
                break
            parent = pp
    # many rounds (an adversarial numbering): plain union-find
    root = list(range(n))

    def find(x):
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x
    for a, b in zip(u.tolist(), v.tolist()):
        ra, rb = find(a), find(b)
        if ra != rb:
            root[max(ra, rb)] = min(ra, rb)
    return np.array([find(x) for x in range(n)])


def _unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, axis=0, return_inverse=True)`` for a 2-column array, through a lexsort:
    numpy's row-unique sorts a void view, ~50x slower (7 s for the million adds of one target)."""
    if not len(a):
        return a[:0], np.zeros(0, np.int64)
    order = np.lexsort((a[:, 1], a[:, 0]))
    srt = a[order]
    new = np.empty(len(a), bool)
    new[0] = True
    new[1:] = (srt[1:] != srt[:-1]).any(1)
    inverse = np.empty(len(a), np.int64)
    inverse[order] = np.cumsum(new) - 1
    return srt[new], inverse


def _element_bits(arr: np.ndarray, off: np.ndarray, width: int) -> np.ndarray:
    raw = np.ascontiguousarray(arr).view(np.uint8)
    idx = off[:, None] + np.arange(width)
    dt = {2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    return np.ascontiguousarray(raw[idx]).view(dt).reshape(-1)


def chain_problem(log: Log, initial: dict, final: dict, rs: LaunchSpec | None = None,
                  who: str = "the candidate") -> str | None:
    """Why some target's final value is not its initial value plus its logged adds in some
    order, each add's returned old value being the value before it (None if every target's
    is). ``initial``/``final``: buffer name -> array as launched / as the launch left it."""
    if not len(log):
        return None
    ok = log.buf >= 0
    for code in np.unique(log.typ[ok]).tolist():
        sel = ok & (log.typ == code)
        if code not in WIDTH:
            return f"{who}'s float-atomic log holds an unknown type code {code}"
        w = WIDTH[code]
        buf, off = log.buf[sel], log.off[sel]
        old, val = log.old[sel], log.val[sel]
        res = _result(old, val, code).astype(np.uint64)
        # one group per target (buffer, offset)
        gkey = np.stack([buf, off], 1)
        targets, gid = _unique_rows(gkey)
        gid = gid.reshape(-1)
        g = len(targets)
        ug, ag = gid.astype(np.uint64), np.arange(g, dtype=np.uint64)   # one dtype: no float casts
        init = np.empty(g, np.uint64)
        fin = np.empty(g, np.uint64)
        for bi in np.unique(targets[:, 0]).tolist():
            m = targets[:, 0] == bi
            name = log.names[bi]
            init[m] = _element_bits(initial[name], targets[m, 1], w)
            fin[m] = _element_bits(final[name], targets[m, 1], w)
        s_old, s_res = _state(old, code), _state(res, code)
        s_init, s_fin = _state(init, code), _state(fin, code)
        # Euler trail from init to final, edges old -> old + value: every value is left as
        # often as it is reached, except init (left once more) and final (reached once more)
        starts = np.concatenate([np.stack([ug, s_old], 1), np.stack([ag, s_fin], 1)])
        ends = np.concatenate([np.stack([ug, s_res], 1), np.stack([ag, s_init], 1)])
        starts = starts[np.lexsort((starts[:, 1], starts[:, 0]))]
        ends = ends[np.lexsort((ends[:, 1], ends[:, 0]))]
        bad_groups = set()
        if not np.array_equal(starts, ends):
            diff = np.flatnonzero((starts != ends).any(1))
            bad_groups.add(int(min(starts[diff[0], 0], ends[diff[0], 0])))
        else:
            # ... and every edge in the component of the initial value
            nodes, inv = _unique_rows(np.concatenate([np.stack([ug, s_old], 1), np.stack([ug, s_res], 1),
                                                      np.stack([ag, s_init], 1)]))
            inv = inv.reshape(-1)
            m = len(gid)
            comp = _components(len(nodes), inv[:m], inv[m:2 * m])
            init_comp = comp[inv[2 * m:]]
            stray = np.flatnonzero(comp[inv[:m]] != init_comp[gid])
            if stray.size:
                bad_groups.add(int(gid[stray[0]]))
        if bad_groups:
            k = min(bad_groups)
            b, o = int(targets[k, 0]), int(targets[k, 1])
            cnt = int((gid == k).sum())
            return (f"{_where(log, b, o, rs)} ends as {_fmt(int(fin[k]), code)}, which is not its initial value "
                    f"{_fmt(int(init[k]), code)} plus its {cnt} float atomic adds in any order: {who} writes it "
                    f"by other means than those atomics (or reads it between them)")
    return None


def target_masks(log: Log, rs: LaunchSpec) -> dict:
    """Buffer name -> bool mask of the elements some logged add touches."""
    out: dict = {}
    ok = log.buf >= 0
    for bi in np.unique(log.buf[ok]).tolist():
        name = log.names[bi]
        b = rs.param(name)
        es = b.elem.size
        sel = ok & (log.buf == bi)
        lo = log.off[sel] // es
        hi = (log.off[sel] + np.maximum(_WIDTHS[log.typ[sel]], 1).astype(np.int64) - 1) // es
        m = np.zeros(b.length, bool)
        for k in range(int((hi - lo).max()) + 1):       # an add wider than an element covers several
            inside = lo + k <= hi
            m[(lo + k)[inside]] = True
        out[name] = m
    return out


# --------------------------------------------------------------------------- the mode

def _with_log(s: InputSet, words: int, zeros: np.ndarray, rng) -> InputSet:
    """``s`` with the log buffer appended (last kernel parameter), zeroed, freshly guarded."""
    spec = replace(s.spec, params=[*s.spec.params,
                                   Buffer(AL.LOG_BUFFER, "u64", words, "inout", "zeros", length=words)])
    return replace(s, spec=spec, data={**s.data, AL.LOG_BUFFER: zeros},
                   guards={**s.guards, AL.LOG_BUFFER: make_guards(rng, s.misaligned)})


def _strip(r, inst: AL.Instrumented, s: InputSet):
    """Take the log out of a run's result (so that nothing compares it as a buffer)."""
    raw = r.outputs.pop(AL.LOG_BUFFER, None)
    r.inputs_unchanged.pop(AL.LOG_BUFFER, None)
    r.guards_intact.pop(AL.LOG_BUFFER, None)
    if raw is None or not r.ok:
        return None
    return decode(raw, inst, s.spec)


def run_logged(be, inst: AL.Instrumented, spec: LaunchSpec, sets: list[InputSet], timeout, rng):
    """Run ``inst.ptx`` on ``sets`` with a log each: (results, logs), logs None where a run failed."""
    zeros = np.zeros(inst.words, np.uint64)
    lsets = [_with_log(s, inst.words, zeros, rng) for s in sets]
    lspec = replace(spec, params=[*spec.params, Buffer(AL.LOG_BUFFER, "u64", inst.words, "inout", "zeros",
                                                       length=inst.words)])
    res = be.run_many(inst.ptx, lspec, lsets, timeout=timeout)
    return res, [_strip(r, inst, s) for r, s in zip(res, sets)]


@dataclass
class AtomicMode:
    """Float atomics judged by contributions for one baseline: its instrumented PTX and, per
    input set, its log (run 1) and the target elements."""
    kernel: str
    baseline: AL.Instrumented
    logs: dict = field(default_factory=dict)        # set index -> Log of baseline run 1
    targets: dict = field(default_factory=dict)     # (set index, buffer) -> bool mask
    counts: dict = field(default_factory=dict)      # set label -> records
    baseline_source: str = ""                       # the uninstrumented baseline PTX

    @property
    def capacity(self) -> int:
        return self.baseline.capacity

    def run_baseline(self, be, spec, sets, timeout, rng):
        """Both baseline runs of every set, logged. A log that overflowed gets the capacity
        nvcc's code needed (up to :func:`max_records`) and the runs are made again."""
        res, logs = run_logged(be, self.baseline, spec, sets, timeout, rng)
        need = max([lg.count for lg in logs if lg is not None] or [0])
        if need > self.capacity and need <= max_records():
            again = AL.instrument(self.baseline_source, self.kernel, need)
            if isinstance(again, AL.Instrumented):
                self.baseline = again
                res, logs = run_logged(be, self.baseline, spec, sets, timeout, rng)
        return res, logs

    def baseline_problem(self, s: InputSet, s2: InputSet, r1, r2, l1: Log, l2: Log) -> tuple[str, bool] | None:
        """(why nvcc's code cannot be judged by contributions on set ``s``, fatal?) or None.
        Not fatal: its two runs made different contributions (the set may be dropped)."""
        for lg in (l1, l2):
            if not lg.header_ok:
                return "the float-atomic log's header was not written (instrumentation failed)", True
            if lg.overflow:
                return (f"nvcc's code made {lg.count} float atomic adds on {s.label}, more than the float-atomic "
                        f"log holds ({lg.capacity} records; NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS raises the limit "
                        f"of {max_records()})"), True
            stray = np.flatnonzero(lg.buf < 0)
            if stray.size:
                return (f"nvcc's code adds floats atomically at address 0x{int(lg.off[stray[0]]):x}, which is in no "
                        f"buffer of the spec ({stray.size} adds; a __device__ variable, shared memory through a "
                        f"generic pointer, or memory the spec does not describe): its contributions cannot be "
                        f"compared"), True
        diff = multiset_difference(l1, l2, s.spec, "its first run", "its second run")
        if diff:
            return (f"the float atomic adds of nvcc's code are not deterministic on {s.label}: {diff}"), False
        for st, r, lg in ((s, r1, l1), (s2, r2, l2)):
            why = chain_problem(lg, st.data, r.outputs, s.spec, who="nvcc's code")
            if why:
                return why + " on " + s.label + "; its float atomics cannot be judged by their contributions", True
        return None

    def accept_set(self, i: int, s: InputSet, l1: Log, l2: Log) -> None:
        self.logs[i] = l1
        for lg in (l1, l2):
            for name, m in target_masks(lg, s.spec).items():
                prev = self.targets.get((i, name))
                self.targets[(i, name)] = m if prev is None else (prev | m)
        self.counts[s.label] = l1.count

    def mask(self, i: int, name: str):
        return self.targets.get((i, name))

    def candidate_problem(self, i: int, cs: InputSet, cr, log: Log | None) -> str | None:
        """Why the candidate's float atomics on this launch differ from nvcc's, or None."""
        base = self.logs[i]
        if log is None:
            return "the candidate's float-atomic log could not be read"
        if not log.header_ok:
            return "the candidate's float-atomic log header was not written"
        diff = None if log.overflow else multiset_difference(base, log, cs.spec)
        if log.count != base.count:
            return (f"the candidate makes {log.count} float atomic adds, nvcc's code {base.count}"
                    + (f": {diff}" if diff else ""))
        if diff:
            return f"float atomic contributions differ: {diff}"
        return chain_problem(log, cs.data, cr.outputs, cs.spec)

    def evidence(self) -> dict:
        return {"judged_by": "contributions: the multiset of (buffer, element, added value bits) of every float "
                             "atomic add, and each target's chain of returned old values from its initial to its "
                             "final value",
                "sites": self.baseline.sites, "capacity": self.capacity, "records": dict(self.counts)}

    def note(self) -> str:
        n = sum(self.counts.values())
        return (f"float atomic adds ({self.baseline.sites} in the kernel) judged by their contributions, not their "
                f"order-dependent sums: {n} records over {len(self.counts)} input sets, compared as multisets per "
                f"target element with each target's chain of old values checked")


def start(baseline_ptx: str, kernel: str, sets: list[InputSet]) -> AtomicMode | str | None:
    """The atomic mode for this baseline: None when its kernel has no float atomics to
    global memory; a reason (str) when it has some the log cannot handle."""
    if not AL.has_float_atomics(baseline_ptx, kernel):
        return None
    if any(b.name == AL.LOG_BUFFER for s in sets for b in s.spec.buffers):
        return f"the spec has a buffer named {AL.LOG_BUFFER!r}, a name the float-atomic log reserves"
    inst = AL.instrument(baseline_ptx, kernel, initial_capacity(sets))
    if isinstance(inst, AL.Refused):
        return inst.reason
    return AtomicMode(kernel=kernel, baseline=inst, baseline_source=baseline_ptx)


def instrument_candidate(mode: AtomicMode, candidate_ptx: str) -> AL.Instrumented | AL.Refused:
    return AL.instrument(candidate_ptx, mode.kernel, mode.capacity)


def plain_access_problem(base, cand, names: dict | None = None) -> str | None:
    """Why the candidate's plain loads and stores are not allowed, or None: it reads or writes
    plainly a buffer that nvcc's code only updates with atomics (``base``/``cand``:
    :class:`superopt.judge.race_check.Races`), or, where nvcc's code has such buffers, it makes a
    plain global access whose buffer the analysis cannot tell and nvcc's code makes none.
    ``names``: PTX parameter name -> the launch spec's name (for the message)."""
    if base is None or cand is None:
        return None
    only = base.atomic_only()
    if not only:
        return None
    names = names or {}
    for b in sorted(only):
        if b in cand.plain:
            return (f"the candidate accesses buffer {names.get(b, b)!r}, which nvcc's code updates only with atomics, with a "
                    f"plain load or store (`{cand.plain[b]}`): other threads' atomics between its read and its "
                    f"write are lost on a GPU, whatever the emulator's order shows")
    if "?" in cand.plain and "?" not in base.plain:
        return (f"the candidate makes a plain global access whose buffer cannot be told (`{cand.plain['?']}`), "
                f"and nvcc's code updates {', '.join(repr(names.get(b, b)) for b in sorted(only))} only with atomics: it may "
                f"access those plainly")
    return None
