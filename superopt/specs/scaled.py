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

*One block per row.* A grid dimension that no guard bounds (``blockIdx.x`` picks a row, and
the row count is nowhere but in the launch) is inferred as a small constant G (13, 5, 3:
``inference.DEFAULT_GRID``), and the buffers the rows live in get lengths ``G*cols``,
``G*256``, ``G`` (one partial sum per block). Scaling ``cols`` leaves G blocks, so for a spec
whose grid is all constants (no dimension is a formula of a size parameter) the *grid* is
scaled instead (:func:`row_dim`): its first dimension other than 1, a constant ``G >= 2``
that divides the coefficient of a term of some buffer length, becomes ``G*f``, and in every buffer
length each term whose constant coefficient is a multiple of G is multiplied by f
(``13*cols`` -> ``52*cols``, ``13*cols + 1`` -> ``52*cols + 1``, ``3328`` -> ``13312``); terms
and buffers that are not multiples of G (``cols`` for a gamma read by every row, a table of
1000) stay as they were, and so do the size parameters: every block runs the per-row code
the tracer followed at the inferred sizes, only more of them, at offsets further into
buffers grown in proportion. A rule, not a proof: a length taken for a multiple of G by
chance is only longer than needed (the kernel does not see lengths); a buffer that does grow
with the rows but is not written as a multiple of G (``1665*ntiles`` for 13 rows of
``128*ntiles`` and a halo of 4) keeps its length, nvcc's own code reads past its end there,
and the shape is dropped by the screening below with a note. A kernel whose blocks split one
size between them (``v = i < n ? in[i] : 0`` with an unguarded store) gets more blocks for
the same ``n``: in bounds, only less representative.

Such a shape is *not* proven by the tracer (inference traced the small sizes only), so the
search uses it the way it uses a captured size: nvcc's own code must be judgeable there
first (else it is dropped), candidates are checked on the small proven shapes, timed at the
scaled one, and the one to keep is checked there too before it is kept.
"""
from __future__ import annotations

import ast
import math
from dataclasses import replace

from superopt.specs.launch_spec import Buffer, Bytes, LaunchSpec, Scalar, SpecError, expr_names, parse_expr

__all__ = ["timing_shape", "scale_factor", "row_dim", "describe", "at_sizes_of", "TARGET_BYTES", "TARGET_THREADS",
           "SCALED_SUFFIX", "MAX_TIMED_LAUNCH_S"]

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
GRID_LIMITS = ((1 << 31) - 1, 65535, 65535)   # gridDim.x, .y, .z
DIMS = "xyz"


def _scaled(spec: LaunchSpec, names: list[str], factor: int) -> LaunchSpec | None:
    """``spec`` with the size parameters ``names`` times ``factor``; every size parameter's
    other values dropped (a scaled shape is one launch, like a capture)."""
    params = []
    sizes = set(spec.size_params())
    for p in spec.params:
        if isinstance(p, Scalar) and p.name in names:
            limit = INT_LIMITS.get(p.elem.size, 1 << 31) - 1
            value = int(p.value) * factor
            if value > limit:
                return None
            params.append(replace(p, value=value, values=None))
        elif isinstance(p, Scalar) and p.name in sizes:
            params.append(replace(p, values=None))
        else:
            params.append(p)
    return replace(spec, params=params, vary_sizes=False, snapshot=None)


# --------------------------------------------------------------------------- one block per row

def _terms(node: ast.AST) -> list[ast.AST]:
    """The terms of a sum (``a + b + c``); anything else is one term."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _terms(node.left) + _terms(node.right)
    return [node]


def _factors(node: ast.AST) -> list[ast.AST]:
    """The factors of a product (``13*a*b``, ``a*13``); anything else is one factor."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [node]


def _int_const(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _rows_length(expr, g: int, f: int):
    """``expr`` (a buffer length) with every term whose integer coefficient is a multiple of
    ``g`` multiplied by ``f``, the other terms unchanged; None when no term is such a multiple
    (or ``expr`` is not a sum of products: then it is left alone)."""
    if isinstance(expr, bool):
        return None
    if isinstance(expr, int):
        return expr * f if expr > 0 and expr % g == 0 else None
    try:
        tree = parse_expr(str(expr))
    except SpecError:
        return None
    out, hit = [], False
    for term in _terms(tree):
        factors = _factors(term)
        consts = [x for x in factors if _int_const(x)]
        k = math.prod(x.value for x in consts)
        if consts and k > 0 and k % g == 0:
            rest = [x for x in factors if not _int_const(x)]
            node: ast.AST = ast.Constant(k * f)
            for x in rest:
                node = ast.BinOp(node, ast.Mult(), x)
            out.append(node)
            hit = True
        else:
            out.append(term)
    if not hit:
        return None
    node = out[0]
    for x in out[1:]:
        node = ast.BinOp(node, ast.Add(), x)
    text = ast.unparse(node).replace(" * ", "*")
    return int(text) if text.isdigit() else text


def row_dim(spec: LaunchSpec) -> tuple[int, int, list[str]] | None:
    """(dimension, its constant G, the buffers whose lengths grow with it) for a one-block-per-row spec, the
    rows scaled by :func:`timing_shape`: the grid is all constants (none of its dimensions a
    formula of a size parameter), its first dimension other than 1 (x, unless the kernel
    reads no ``blockIdx.x``) is an integer ``G >= 2``, and G divides a term's coefficient in
    the length of at least one buffer. None otherwise. Only that first dimension: in a grid
    [13, 5] whose x is bounded by something inference does not scale (a struct field), a
    length 5 is a coincidence, not five rows. Nor a spec with a by-value struct holding
    pointers: inference gives its 32-bit fields fixed primes (37, 53, ...), and one of them
    may bound the rows (``if (blockIdx.x >= p.rows) return;`` with 13 blocks under 37 rows
    looks like 13 rows of a family), past which a grown grid would only add idle blocks."""
    if any(expr_names(g) for g in spec.grid):
        return None
    if any(isinstance(p, Bytes) and p.pointers for p in spec.params):
        return None
    d = next((d for d, g in enumerate(spec.grid) if g != 1), None)
    g = spec.grid[d] if d is not None else None
    if not isinstance(g, int) or g < 2:
        return None
    rows = [b.name for b in spec.buffers if _rows_length(b.length_expr, g, 2) is not None]
    return (d, g, rows) if rows else None


def _rows_scaled(spec: LaunchSpec, dim: int, factor: int) -> LaunchSpec | None:
    """``spec`` with grid dimension ``dim`` (a constant G) times ``factor`` and the buffer
    lengths' multiples of G with it; the scalars as they are (their other values dropped:
    like a capture, a scaled shape is one launch)."""
    g = spec.grid[dim]
    if g * factor > GRID_LIMITS[dim]:
        return None
    grid = list(spec.grid)
    grid[dim] = g * factor
    sizes = set(spec.size_params())
    params = []
    for p in spec.params:
        if isinstance(p, Buffer):
            new = _rows_length(p.length_expr, g, factor)
            params.append(p if new is None else replace(p, length_expr=new, length=None))
        elif isinstance(p, Scalar) and p.name in sizes:
            params.append(replace(p, values=None))
        else:
            params.append(p)
    return replace(spec, grid=tuple(grid), params=params, vary_sizes=False, snapshot=None)


# --------------------------------------------------------------------------- the shape

def _grid_blocks(spec: LaunchSpec) -> int:
    try:
        return math.prod(spec.resolved().grid)
    except (SpecError, ValueError, ZeroDivisionError, OverflowError):
        return 1


def scale_factor(spec: LaunchSpec, scaled: LaunchSpec) -> int:
    """The factor ``scaled``'s size parameters were multiplied by (its rows, for a spec
    scaled by its grid: :func:`row_dim`)."""
    names = spec.size_params()
    if names and scaled.param(names[0]).value != spec.param(names[0]).value:
        return int(scaled.param(names[0]).value) // max(1, int(spec.param(names[0]).value))
    return _grid_blocks(scaled) // max(1, _grid_blocks(spec))


def describe(spec: LaunchSpec, scaled: LaunchSpec) -> str:
    """What was scaled, for notes: ``n=401408, m=...`` or ``grid.x=6656 (was 13), cols=1543``."""
    parts = []
    for d, (a, b) in enumerate(zip(spec.grid, scaled.grid)):
        if a != b and isinstance(a, int):
            parts.append(f"grid.{DIMS[d]}={b} (was {a})")
    parts += [f"{p.name}={p.value}" for p in scaled.scalars if p.name in scaled.size_params()]
    return ", ".join(parts)


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
    then need not fill a wave, ``min_threads``: each of them has long work).

    A one-block-per-row spec (:func:`row_dim`: a constant grid, buffers whose lengths are
    multiples of it) scales its rows instead: the grid dimension and those multiples, by the
    same powers of two and within the same limits (and the grid's: 2^31 - 1 blocks in x, 65535
    in y and z); its size parameters stay as inferred. A spec whose grid grows with some of its
    sizes only, where scaling all of them fills the bytes before the threads fill a wave (a
    warp per row: grid ``cdiv(32*rows, 256)``, lengths ``rows*cols``), scales those alone."""
    if spec.snapshot:
        return None
    step = _step(spec)
    best = _grow(spec, step, max_factor, min_threads) if step is not None else None
    if best is None:
        return None
    return replace(best, origin=f"{spec.origin or 'inferred'}{SCALED_SUFFIX}")


def _step(spec: LaunchSpec):
    """How ``spec`` grows: factor -> the spec at that factor (or None past a limit). Decided
    at the default limits, so that a retry at a smaller factor stays in the same family."""
    rows = row_dim(spec)
    if rows is not None:
        return lambda f: _rows_scaled(spec, rows[0], f)
    names = spec.size_params()
    if not names:
        return None
    every = lambda f: _scaled(spec, names, f)                   # noqa: E731
    in_grid = [n for n in names if any(n in expr_names(g) for g in spec.grid)]
    if not in_grid or in_grid == names or _grow(spec, every, MAX_FACTOR, MIN_THREADS) is not None:
        return every
    # the grid grows with some sizes only (a warp per row: cdiv(32*rows, 256), lengths
    # rows*cols): all of them by one factor, the bytes grow as its square and reach their cap
    # before the threads fill a wave; the grid's sizes alone keep each row as inferred
    return lambda f: _scaled(spec, in_grid, f)


def _grow(spec: LaunchSpec, step, max_factor: int, min_threads: int) -> LaunchSpec | None:
    base = _measure(spec)
    if base is None:
        return None
    best = None
    factor = 2
    while factor <= max_factor:
        cand = step(factor)
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
    return best


def at_sizes_of(spec: LaunchSpec, small: LaunchSpec, big: LaunchSpec) -> LaunchSpec | None:
    """``spec`` -- the inferred family of ``small`` at another block -- at the sizes ``big``
    (``small`` scaled for timing by :func:`timing_shape`) runs: its size parameters take
    ``big``'s values (its grid and lengths are its own formulas, evaluated there) and, for a
    one-block-per-row spec (:func:`row_dim`), its rows grow by ``big``'s factor. None when a
    size parameter is not ``big``'s or a limit (``MAX_BYTES``, 32-bit extents) breaks.
    Parameters are matched by position (the names differ when one spec was inferred with the
    source's parameter names and the other without)."""
    rows = row_dim(spec)
    names = set(spec.size_params())
    if (not names and rows is None) or len(big.params) < len(spec.params):
        return None
    params = []
    for p, q in zip(spec.params, big.params):
        if isinstance(p, Scalar) and p.name in names:
            if not isinstance(q, Scalar):
                return None
            params.append(replace(p, value=q.value, values=None))
        else:
            params.append(p)
    out = replace(spec, params=params, vary_sizes=False, snapshot=None)
    if rows is not None:
        # the rows (blocks) grow as they did for the timed shape; the sizes are its own
        out = _rows_scaled(out, rows[0], scale_factor(small, big))
    if out is None:
        return None
    got = _measure(out)
    if got is None or got[1] > MAX_BYTES or got[2] > MAX_BUFFER_BYTES:
        return None
    return replace(out, origin=f"{spec.origin or 'inferred'}{SCALED_SUFFIX}")
