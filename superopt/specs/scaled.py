"""A launch shape for timing when the program's real sizes are unknown: the inferred shape, scaled up.

Inference picks sizes a check can afford on every candidate (n ~ 1e5, 300 x 250, GEMM ~
100 x 80 x 120: a few blocks per SM, a few MB). Timed there, a kernel is mostly launch
latency and a half-empty GPU, so the wins that matter at a program's real sizes (more
loads in flight, occupancy, vector width) do not show, and the small ones found there do
not survive. Without a capture (``superopt capture``) the real sizes are unknown, but the
inferred spec is a *family*: buffer lengths and the grid are formulas over its size
parameters (``n``, ``w*h``, ``cdiv(n, 256)``). :func:`timing_shape` evaluates that family
at sizes scaled by a common power of two, until the launch fills the GPU several times
over or its buffers reach ``TARGET_BYTES``.

Such a shape is *not* proven by the tracer (inference traced the small sizes only), so the
search uses it the way it uses a captured size: nvcc's own code must be judgeable there
first (else it is dropped), candidates are checked on the small proven shapes, timed at the
scaled one, and the one to keep is checked there too before it is kept.
"""
from __future__ import annotations

import math
from dataclasses import replace

from superopt.specs.launch_spec import LaunchSpec, Scalar, SpecError

__all__ = ["timing_shape", "scale_factor", "TARGET_BYTES", "TARGET_THREADS", "SCALED_SUFFIX",
           "MAX_TIMED_LAUNCH_S"]

SCALED_SUFFIX = ", scaled for timing"     # the end of a scaled shape's origin

TARGET_BYTES = 64 << 20          # buffers of one launch: past the 50-60 MB L2 of an H100/H200
TARGET_THREADS = 1 << 20         # ~4 waves of 2048 threads on 132 SMs
MIN_THREADS = 1 << 18            # about one full wave: a launch of a few blocks (a grid that is
                                 # not a formula of the sizes) stays latency-bound however long
                                 # its rows, and timing there says little about the program
MAX_BYTES = 256 << 20           # never more, whatever the threads (each check copies it per input set)
MAX_FACTOR = 1 << 12
MAX_TIMED_LAUNCH_S = 0.01        # nvcc's own launch there: timing takes ~120 of them, a check ~12
MAX_BUFFER_BYTES = (1 << 31) - 1  # 32-bit byte offsets (int indices times the element size) stay exact
INT_LIMITS = {1: 1 << 7, 2: 1 << 15, 4: 1 << 31, 8: 1 << 63}


def _scaled(spec: LaunchSpec, names: list[str], factor: int) -> LaunchSpec | None:
    params = []
    for p in spec.params:
        if isinstance(p, Scalar) and p.name in names:
            limit = INT_LIMITS.get(p.elem.size, 1 << 31) - 1
            value = int(p.value) * factor
            if value > limit:
                return None
            params.append(replace(p, value=value, values=None))
        else:
            params.append(p)
    return replace(spec, params=params, vary_sizes=False, snapshot=None)


def scale_factor(spec: LaunchSpec, scaled: LaunchSpec) -> int:
    """The factor ``scaled``'s size parameters were multiplied by."""
    name = spec.size_params()[0]
    return int(scaled.param(name).value) // max(1, int(spec.param(name).value))


def _measure(spec: LaunchSpec) -> tuple[int, int, int] | None:
    """(threads, total buffer bytes, largest buffer bytes) of the resolved launch, or None."""
    try:
        rs = spec.resolved()
    except (SpecError, ValueError, ZeroDivisionError, OverflowError):
        return None
    sizes = [b.nbytes for b in rs.buffers]
    return math.prod(rs.grid) * math.prod(rs.block), sum(sizes), max(sizes, default=0)


def timing_shape(spec: LaunchSpec, max_factor: int = MAX_FACTOR, min_threads: int = MIN_THREADS) -> LaunchSpec | None:
    """``spec`` at its size parameters times the smallest power of two (at least 4) that makes
    the launch reach ``TARGET_THREADS`` threads or ``TARGET_BYTES`` of buffers, within
    ``MAX_BYTES``, 32-bit buffer extents and the parameters' integer ranges. None when the
    spec has no size parameter, when the scaled launch stays under ``MIN_THREADS`` threads
    (a grid that does not grow with the sizes), or when even the first step breaks a limit.
    ``max_factor`` caps the factor (a kernel whose work grows faster than its sizes, such as an
    all-pairs loop, is retried smaller when nvcc's own launch turns out slow there; its threads
    then need not fill a wave, ``min_threads``: each of them has long work)."""
    names = spec.size_params()
    if not names or spec.snapshot:
        return None
    base = _measure(spec)
    if base is None:
        return None
    best = None
    factor = 2
    while factor <= max_factor:
        cand = _scaled(spec, names, factor)
        got = _measure(cand) if cand is not None else None
        if got is None:
            break
        threads, total, largest = got
        if total > MAX_BYTES or largest > MAX_BUFFER_BYTES:
            break
        if factor >= 4 and threads >= min_threads and (threads, total) != base[:2]:
            best = cand
        if threads >= TARGET_THREADS or total >= TARGET_BYTES:
            break
        factor *= 2
    if best is None:
        return None
    return replace(best, origin=f"{spec.origin or 'inferred'}{SCALED_SUFFIX}")
