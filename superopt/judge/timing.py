"""GPU timing of a candidate against its baseline.

Method (all of it recorded in :class:`TimingResult`):

* device events around each launch alone; module loads and allocations happen first;
* warm-up launches of both (at least :data:`WARMUP_MIN` pairs, then more until
  :data:`WARMUP_S` seconds have passed, at most ``warmup`` pairs: a kernel of milliseconds is
  warm after two, and ten of them held the GPU alone for 4 s of a build's 33 s of timing), then
  ``reps`` rounds in which baseline (A) and candidate (B) are interleaved, the order alternating (A B, B A, A B, ...) so that clock drift and
  thermal changes hit both alike;
* before every timed launch the L2 is flushed by a kernel that reads a buffer twice the
  L2 size (the H200 has 60 MiB of L2; the size is read off the device), so every launch
  starts cold (reads, unlike a memset, leave no dirty lines to write back);
* baseline and candidate run on separate copies of the same inputs;
* statistics per side: median, quartiles, IQR, min, max;
* **faster** only if both hold: (1) the median gain exceeds the measured spread, i.e.
  ``median_A - median_B > (IQR_A + IQR_B) / 2``; (2) the 95% bootstrap confidence interval
  (2000 resamples) of the median of the paired ratios B_i/A_i lies entirely below
  ``1 - min_gain``;
* **slower** by the mirror rule (:func:`slower_than`): the median loss exceeds the spread and
  the ratio's interval lies entirely above 1. The search asks it of the candidate to keep at
  the other launch shapes the program may use (:mod:`superopt.search.launch_shapes`): a
  rewrite faster at the timed shape and slower at another is not kept;
* a result implying more bytes per second than the measured peak (a device-to-device
  copy, bytes read + written, measured once per worker process) is refused
  (status ``implausible``): bytes are counted from the spec (in: read once, out: written
  once, inout: both), a lower bound for a kernel that reads all of its inputs.

Without a GPU there is no measured speed: the result has status ``no_gpu`` and says so.
"""
from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass, field
from typing import Union

import numpy as np

from superopt.judge.backends.base import Backend, BackendUnavailable, get_backend
from superopt.judge.inputs import InputSet, fresh_seed, make_input_set
from superopt.specs.launch_spec import LaunchSpec

__all__ = ["Stats", "TimingResult", "time_pair", "NoGPU", "bytes_moved", "decide", "slower_than"]

BANDWIDTH_SLACK = 1.10
WARMUP_MIN = 2          # warm-up pairs at least
WARMUP_S = 0.02         # then more, until this long (at most ``warmup`` pairs)
SPREAD_METHOD = ("per side: median and IQR (Q3-Q1) of event times; faster iff median gain > "
                 "(IQR_A+IQR_B)/2 and the 95% bootstrap CI (2000 resamples) of the median of paired "
                 "ratios B/A is entirely below 1 - min_gain")


class NoGPU(RuntimeError):
    """Raised by callers that need a measured speed where there is no GPU."""


@dataclass
class Stats:
    n: int
    median: float      # seconds
    q1: float
    q3: float
    iqr: float
    min: float
    max: float

    @classmethod
    def of(cls, xs) -> "Stats":
        a = np.asarray(xs, dtype=np.float64)
        q1, med, q3 = np.percentile(a, [25, 50, 75])
        return cls(len(a), float(med), float(q1), float(q3), float(q3 - q1), float(a.min()), float(a.max()))


@dataclass
class TimingResult:
    status: str                        # ok | no_gpu | implausible | error
    faster: bool
    reason: str
    baseline: Stats | None = None
    candidate: Stats | None = None
    speedup: float | None = None       # baseline median / candidate median
    ratio_ci: tuple | None = None      # 95% CI of median(B_i / A_i)
    method: str = SPREAD_METHOD
    reps: int = 0
    flush_l2: bool = True
    flush_bytes: int = 0
    bytes_moved: int = 0
    implied_bytes_per_s: dict = field(default_factory=dict)
    peak_bytes_per_s: float | None = None
    device: dict = field(default_factory=dict)
    seed: int | None = None
    wall_seconds: float = 0.0
    slower: bool = False               # slower beyond the measured noise (slower_than)
    stopped_early: int | None = None   # rounds after which it stopped (early_stop)
    stopped_as: str | None = None      # why: "not faster" or "faster" (early_stop)
    warmup_pairs: int | None = None    # warm-up pairs run before the timed rounds

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        if self.status == "no_gpu":
            return self.reason
        if self.baseline is None or self.candidate is None:
            return f"{self.status}: {self.reason}"
        us = lambda s: f"{s.median * 1e6:.2f} us (IQR {s.iqr * 1e6:.2f}, n={s.n})"  # noqa: E731
        return (f"{self.status}: {'FASTER' if self.faster else 'not faster'}: baseline {us(self.baseline)}, "
                f"candidate {us(self.candidate)}, speedup {self.speedup:.3f}x, ratio CI "
                f"[{self.ratio_ci[0]:.3f}, {self.ratio_ci[1]:.3f}]; {self.reason}")


def bytes_moved(spec: LaunchSpec, read: set[str] | None = None) -> int:
    """The bytes a launch must at least move: a lower bound for the bandwidth sanity check.
    An ``inout`` buffer counts twice only when the kernel is known to read it (``read``: the
    names of the buffers its code loads from; None: all of them). A captured spec marks every
    buffer ``inout`` (the capture cannot tell), and a write-only output counted twice made a
    genuine speed-up look faster than the memory (a staged transpose at 6x)."""
    rs = spec if spec.is_resolved else spec.resolved()
    total = 0
    for b in rs.buffers:
        twice = b.direction == "inout" and (read is None or b.name in read)
        total += b.nbytes * (2 if twice else 1)
    return total


def buffers_read(ptx: str, spec: LaunchSpec) -> set[str] | None:
    """Names of ``spec``'s buffer parameters that the kernel provably loads from (an affine
    load based on that parameter); None when the PTX cannot be read. Buffers not among them
    may still be read through an address the analysis cannot follow: callers use this only
    to *lower* a bound. Cached: a search asks it of the same baseline at every timing, and
    parsing a module (tens of ms) inside a window that holds the GPU alone would keep every
    other compilation waiting."""
    names = tuple(getattr(p, "name", None) for p in spec.params)
    found = _buffers_read(ptx, spec.kernel, names)
    return None if found is None else set(found)


@functools.lru_cache(maxsize=32)
def _buffers_read(ptx: str, kernel: str, names: tuple) -> frozenset | None:
    try:
        import ptx_ir
        module = ptx_ir.parse(ptx, fragment=True)
        fn = next(f for f in module.kernels if f.name == kernel)
        roles = fn.param_roles
    except Exception:       # noqa: BLE001 -- an unreadable PTX keeps the old bound
        return None
    return frozenset(names[r.index] for r in roles if r.read and r.index < len(names) and names[r.index])


def _bootstrap_ci(ratios: np.ndarray, rng: np.random.Generator, n_boot: int = 2000) -> tuple[float, float]:
    idx = rng.integers(0, len(ratios), size=(n_boot, len(ratios)))
    meds = np.median(ratios[idx], axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return float(lo), float(hi)


def decide(a_s, b_s, *, min_gain: float = 0.0, seed: int = 0) -> tuple[bool, Stats, Stats, tuple, str]:
    """Apply the decision rule to paired samples (seconds). Returns (faster, A, B, CI, why)."""
    a = np.asarray(a_s, dtype=np.float64)
    b = np.asarray(b_s, dtype=np.float64)
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    sa, sb = Stats.of(a), Stats.of(b)
    ci = _bootstrap_ci(b / a, np.random.default_rng(seed))
    gain = sa.median - sb.median
    noise = (sa.iqr + sb.iqr) / 2
    beyond_spread = gain > noise
    ci_below = ci[1] < 1.0 - min_gain
    faster = bool(beyond_spread and ci_below)
    if faster:
        why = f"median gain {gain * 1e6:.3g} us > spread {noise * 1e6:.3g} us and ratio CI below {1 - min_gain:.3g}"
    elif gain <= 0:
        why = "the candidate's median is not lower"
    elif not beyond_spread:
        why = f"median gain {gain * 1e6:.3g} us is within the spread {noise * 1e6:.3g} us (noise)"
    else:
        why = f"the ratio's 95% CI [{ci[0]:.3f}, {ci[1]:.3f}] reaches {1 - min_gain:.3g}"
    return faster, sa, sb, ci, why


def slower_than(a: Stats, b: Stats, ci: tuple) -> tuple[bool, str]:
    """The mirror of :func:`decide`'s rule: the candidate (``b``) is slower than the baseline
    (``a``) beyond the measured noise when its median loss exceeds the spread
    (``median_B - median_A > (IQR_A + IQR_B) / 2``) and the 95% CI of the median of the paired
    ratios B/A lies entirely above 1. (slower, why)."""
    loss = b.median - a.median
    noise = (a.iqr + b.iqr) / 2
    if loss <= 0:
        return False, "the candidate's median is not higher"
    if loss <= noise:
        return False, f"median loss {loss * 1e6:.3g} us is within the spread {noise * 1e6:.3g} us (noise)"
    if ci[0] <= 1.0:
        return False, f"the ratio's 95% CI [{ci[0]:.3f}, {ci[1]:.3f}] reaches 1"
    return True, f"median loss {loss * 1e6:.3g} us > spread {noise * 1e6:.3g} us and ratio CI above 1"


def time_pair(baseline_ptx: str, candidate_ptx: str, spec: LaunchSpec, *,
              backend: Union[str, Backend] = "gpu", reps: int = 100, warmup: int = 10, flush_l2: bool = True,
              min_gain: float = 0.0, seed: int | None = None, max_seconds: float = 20.0,
              require_gpu: bool = False, inputs: InputSet | None = None,
              stop_not_faster: bool = False, stop_faster: bool = False,
              reused: bool | None = None) -> TimingResult:
    """Time candidate against baseline (interleaved, L2 flushed) and decide "faster".

    Only meaningful for a candidate the differential check accepted. ``require_gpu``
    raises :class:`NoGPU` instead of returning a ``no_gpu`` result. ``inputs``: the input set
    to time on (a search times its candidates on one, made once: at a program's captured sizes
    making it takes longer than the timing); by default one made from ``seed``. ``reused``:
    whether the caller times on ``inputs`` again (the GPU worker may then keep them; default:
    given inputs are reused).
    ``stop_not_faster``: the rounds may end early once the candidate is clearly not faster
    (:mod:`superopt.judge.early_stop`; a search's first timing of each candidate); never for a
    timing that must see "slower" or confirm a win. ``stop_faster`` (with it): also once it is
    clearly faster; only for a timing whose win is timed again in full before it counts.
    """
    t0 = time.monotonic()
    seed = fresh_seed() if seed is None else seed

    def no_gpu(why: str) -> TimingResult:
        msg = f"no GPU: no measured speed ({why})"
        if require_gpu:
            raise NoGPU(msg)
        return TimingResult(status="no_gpu", faster=False, reason=msg, seed=seed)

    try:
        be = get_backend(backend) if isinstance(backend, str) else backend
    except BackendUnavailable as e:
        return no_gpu(str(e))
    if not hasattr(be, "time_pair"):
        return no_gpu(f"backend {be.name!r} has no device timer")
    ok, why = be.available()
    if not ok:
        return no_gpu(why)
    if reused is None:
        reused = inputs is not None      # the caller times more candidates on them
    if inputs is None:
        inputs = make_input_set(spec, seed, 0)
    else:
        seed = inputs.seed if getattr(inputs, "seed", None) is not None else seed
    res = TimingResult(status="error", faster=False, reason="", reps=reps, flush_l2=flush_l2,
                       device=be.describe(), seed=seed)
    # before the request: inside a window holding the GPU alone, host work between timings
    # keeps every other compilation waiting
    moved = bytes_moved(inputs.spec, buffers_read(baseline_ptx, inputs.spec))
    try:
        extra = {}
        if stop_not_faster:
            from superopt.judge import early_stop
            extra["stop_early"] = {"first": early_stop.FIRST, "every": early_stop.EVERY, "z": early_stop.Z,
                                   "faster": bool(stop_faster)}
        if reused and getattr(be, "keeps_timing_inputs", False):
            extra["keep_inputs"] = True
        if getattr(be, "warms_up_by_time", False):
            extra.update(warmup_min=min(WARMUP_MIN, warmup), warmup_s=WARMUP_S)
        raw = be.time_pair(baseline_ptx, candidate_ptx, spec, inputs, reps=reps, warmup=warmup,
                           flush_l2=flush_l2, max_seconds=max_seconds, **extra)
    except (TimeoutError, ChildProcessError) as e:
        res.reason = f"timing failed: {e}"
        return res
    if "error" in raw:
        res.reason = f"timing failed: {raw['error']}"
        return res
    a = np.asarray(raw["a_ms"]) / 1e3
    b = np.asarray(raw["b_ms"]) / 1e3
    res.flush_bytes = int(raw.get("flush_bytes", 0))
    faster, sa, sb, ci, why = decide(a, b, min_gain=min_gain, seed=seed & 0xFFFFFFFF)
    res.baseline, res.candidate, res.ratio_ci = sa, sb, ci
    res.speedup = sa.median / sb.median if sb.median > 0 else None
    res.reps = sa.n
    # bandwidth sanity
    res.bytes_moved = moved
    try:
        peak = be.peak_bandwidth()
        res.peak_bytes_per_s = float(peak["bytes_per_s"]) if "bytes_per_s" in peak else None
    except (TimeoutError, ChildProcessError):
        res.peak_bytes_per_s = None
    res.status = "ok"
    res.faster = faster
    res.reason = why
    res.slower, slower_why = slower_than(sa, sb, ci)
    if res.slower:
        res.reason = f"slower: {slower_why}"
    res.warmup_pairs = raw.get("warmup_pairs")
    res.stopped_early, res.stopped_as = raw.get("stopped"), raw.get("stopped_as")
    if res.stopped_early:
        from superopt.judge.early_stop import FASTER
        if res.stopped_as == FASTER:
            res.reason += (f"; stopped after {res.stopped_early} of {reps} rounds: clearly faster (early_stop); "
                           f"a win counts only when timed again in full")
        else:
            if res.faster:      # the worker's rule and decide() disagree: never keep such a result
                res.faster = False
                res.reason = "stopped early as clearly not faster, yet decided faster: not trusted"
            res.reason += f"; stopped after {res.stopped_early} of {reps} rounds: clearly not faster (early_stop)"
    if res.bytes_moved and res.peak_bytes_per_s:
        ia = res.bytes_moved / sa.median
        ib = res.bytes_moved / sb.median
        res.implied_bytes_per_s = {"baseline": ia, "candidate": ib}
        limit = BANDWIDTH_SLACK * res.peak_bytes_per_s
        if ib > limit and ia <= limit:
            res.status = "implausible"
            res.faster = False
            res.reason = (f"refused: the candidate would move {res.bytes_moved} bytes at {ib / 1e9:.0f} GB/s, "
                          f"above the measured peak {res.peak_bytes_per_s / 1e9:.0f} GB/s; it skips work or "
                          f"the timing is wrong")
        elif ib > limit:
            res.reason += ("; bandwidth check not applicable (the baseline also exceeds the peak by the "
                           "spec's byte count: data served from L2 or buffers only partly touched)")
    res.wall_seconds = time.monotonic() - t0
    return res
