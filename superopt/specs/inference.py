"""How to launch a kernel so that a rewrite of it can be judged: explicit or inferred specs.

:func:`infer_specs` answers, for one ``.entry`` of a PTX module, with an
:class:`InferenceResult`: one or several :class:`~superopt.specs.launch_spec.LaunchSpec` (several
launch shapes), or the reason the kernel is *not verifiable*. In order of priority:

1. **nvcc-plus.toml** — a ``[kernels."NAME"]`` table in the format of
   :mod:`superopt.specs.launch_spec`, where NAME is the PTX entry name, the demangled signature
   (``saxpy(int, float, float const*, float*)``), the demangled name (``saxpy``,
   ``ns::scale<float>``) or the unqualified name.
2. **A ``// nvcc-plus:`` comment** beside the kernel in the .cu source (syntax in
   :mod:`superopt.specs.comments`).
3. **Inference from the IR**, below.

Inference
---------
* *Parameters.* Pointers become buffers (element type from the demangled C++ type, else
  from the PTX types accessed through them), other parameters scalars. A by-value struct
  of 1, 2, 4 or 8 bytes becomes an integer scalar of that size holding its fields (floats
  1.5, 0.75, ...; integers 3; an empty functor 0); an 8-byte struct that is only a pointer
  (``thrust::device_ptr``, an iterator) a buffer. Other structs are traced the same way
  (their raw bytes) and become ``bytes`` params holding the bytes they were traced with (a
  capture gives the program's own bytes, pointer fields included). An 8-byte field the kernel
  accesses memory through is a *virtual pointer param* (:mod:`superopt.specs.virtual_pointers`):
  an ``embedded`` buffer the ``bytes`` param's ``pointers`` name, bounded and fitted like a
  pointer param; the 32-bit integer fields of such a struct get the fixed primes
  ``STRUCT_SIZES`` (the bytes do not vary between launches, so lengths through them are
  constants).
* *Scalars.* Integer scalars that bound thread indices, loops or addresses are *sizes*:
  they get distinct primes (never multiples of a block size). Their scale doubles from 24
  while the traced launch stays cheap to check (at most ~1.3e5 threads, 16 MB of buffers,
  a bounded number of traced thread-steps), so 1-D kernels get n ~ 1e5, 2-D ~ 300 x 250,
  GEMM ~ 100 x 80 x 120. Scalars compared only with constants (modes, tile sizes) get 8,
  divisors 7, shift amounts 3; float scalars ordinary values (1.5, 0.75, ...).
* *Grid.* From the guards ``index(blockIdx.d) < bound`` (:func:`superopt.specs.facts.grid_bounds`):
  ``grid.d = cdiv(bound, extent per block)``, so the last block is partial; grid-stride
  loops get a quarter of that, so that threads loop. Unbounded grid dimensions get a
  small constant (shrunk if the launch is too costly); so do dimensions bounded by a
  compile-time constant (``i < NX`` with ``#define NX 256``) when the full launch is too
  costly to trace: the grid then covers the low corner of the domain.
* *Block shapes.* 1-D: 256, 96, 1024 (and others if those do not fit); 2-D: 32x8, 16x16,
  32x4; 3-D: 8x8x4, 32x4x2, 16x4x4; a tile written as a constant (``blockIdx.x * 32``)
  goes first, and before it the block a shared tile implies (``t[16][17]`` stored at
  ``t[threadIdx.y][threadIdx.x]``: 16x16), which when it works is the only shape kept;
  ``.reqntid``/``.maxntid`` are obeyed; warp-level collectives keep block sizes multiples
  of 32. Before all of them come the constant blocks the .cu source launches the kernel
  with (:mod:`superopt.specs.source_launches`: ``k<<<g, THREADS>>>`` with ``#define THREADS
  512``); when every launch there uses one constant block and it works, it is the only
  shape kept. A shape is dropped when the kernel then touches shared memory out
  of bounds, reads shared memory no thread of the block writes, reaches ``trap``, or
  writes no buffer at all. Dynamic shared memory is sized from what the trace touches.
* *Proof.* Every launch that the spec allows — the spec's scalar values and the other
  sizes it lists (``values``; ``vary_sizes`` is off, so the checker uses only those) —
  is traced by :mod:`superopt.specs.trace` over every thread. A buffer's length is an
  expression over the scalars (``n``, ``w*h``, ``M*K``, ``n + 1``, ``cdiv(n, 256)``,
  ``256``) fitted to the traced extents and checked to cover them at every one of those
  launches. Data-dependent indices without a bounds check (histogram bins, gathers) make
  the index buffer draw its values from ``index:0..1000`` and the indexed buffer 1000
  long. Whatever cannot be bounded (a pointer loaded from memory, a loop whose trip count
  depends on data, textures, calls) makes the kernel not verifiable, with the reason.
* *Time.* Inference from the IR of one kernel stops after ``deadline_s`` (10 s by
  default): the tracer checks it at every step and raises a ``TraceTimeout``
  (a BaseException, so that no ``except Exception`` on the way swallows it); the kernel
  is then not verifiable, "inference timed out after N s".
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import ptx_ir
from superopt.specs.launch_spec import Buffer, Bytes, LaunchSpec, Scalar, SpecError, elem_type, eval_expr, load_specs
from superopt.specs.comments import directive_spec, find_directives, find_kernels
from superopt.specs.facts import (ParamInfo, affine_to_expr, grid_bounds, kernel_traits,
                                 param_infos, scalar_roles, tile_block)
from superopt.specs.trace import TraceResult, TraceTimeout, trace
from superopt.specs.virtual_pointers import VirtualPointers

__all__ = ["InferenceResult", "infer_specs", "check_spec", "launch_problems", "explicit_specs", "INDEX_RANGE"]

INDEX_RANGE = 1000                    # values of index buffers without a bound: 0..999
MAX_THREADS = 1 << 17
MAX_LANE_STEPS = 2_500_000            # traced work of the main launch
MAX_STEPS = 4000
MAX_BYTES = 16 << 20                  # all buffers of one launch
MAX_BUFFER_BYTES = 8 << 20
DEADLINE_S = 10.0                     # seconds for one kernel: a hard cap (infer_specs(deadline_s=))
TRACE_BUDGET = 30.0                   # seconds for one trace (a safety net; the budgets that
                                      # decide are the deterministic ones below)
TOTAL_LANE_STEPS = 40_000_000         # traced work for one kernel, all traces together
TOTAL_STEPS = 20_000
SCALE_START = 24
SCALE_MIN = 3
SHARED_PROBE = (1 << 20) - 1024       # dynamic shared memory while measuring what is used
MAX_DYNAMIC_SHARED = 48 * 1024        # without the opt-in attribute, what a launch may ask for
SCALE_MAX = 100_000
SIZE_FACTORS = [1.0, 0.83, 1.19, 0.71, 1.31, 0.91, 1.09, 0.77, 1.23, 0.67]
FLOAT_VALUES = [1.5, 0.75, -2.0, 0.5, 3.0, -0.25]
# 32-bit integer fields of a by-value struct holding pointers (rows, cols, nnz, ...): fixed
# (the bytes of a struct do not vary between launches), distinct primes, cheap to trace
STRUCT_SIZES = (37, 53, 29, 41, 47, 31)
DEFAULT_GRID = (13, 5, 3)
SHAPES = {
    1: [(256, 1, 1), (96, 1, 1), (1024, 1, 1), (128, 1, 1), (64, 1, 1), (32, 1, 1), (512, 1, 1)],
    2: [(32, 8, 1), (16, 16, 1), (32, 4, 1), (8, 8, 1), (32, 16, 1), (64, 4, 1), (32, 32, 1)],
    3: [(8, 8, 4), (32, 4, 2), (16, 4, 4), (8, 8, 8), (4, 4, 4), (32, 8, 4)],
}
# The blocks a program that computes its block at run time usually picks: the search times the
# rewrite to keep at each (superopt.search.launch_shapes), beside the inferred and source ones.
USUAL_BLOCKS = {
    1: [(128, 1, 1), (256, 1, 1), (512, 1, 1), (1024, 1, 1)],
    2: [(32, 4, 1), (16, 16, 1), (32, 8, 1), (32, 16, 1), (32, 32, 1)],
    3: [(8, 4, 4), (8, 8, 4), (8, 8, 8), (16, 8, 8)],
}
_RESERVED = {"min", "max", "cdiv", "ceil_div"}
NO_WRITES = "it writes no buffer: there is no output a check could compare"


# --------------------------------------------------------------------------- result

@dataclass
class InferenceResult:
    kernel: str                              # the PTX entry name
    specs: list = field(default_factory=list)
    origin: str | None = None                # "toml:<file>", "comment", "inferred"
    reason: str | None = None                # why not verifiable (when specs is empty)
    notes: list = field(default_factory=list)
    signature: str | None = None             # demangled C++ signature
    # the blocks the .cu source launches the kernel with (superopt.specs.source_launches)
    source_blocks: Any = None
    # infer_specs(blocks=...): (block, why) of each block asked for and not given a spec
    skipped_blocks: list = field(default_factory=list)

    @property
    def verifiable(self) -> bool:
        return bool(self.specs)

    def __bool__(self) -> bool:
        return self.verifiable

    def summary(self) -> str:
        name = self.signature or self.kernel
        if not self.specs:
            return f"{name}: not verifiable: {self.reason}"
        shapes = ", ".join(_fmt_shape(s.block) for s in self.specs)
        return f"{name}: {len(self.specs)} launch spec(s) ({self.origin}; blocks {shapes})"

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "signature": self.signature, "origin": self.origin,
                "verifiable": self.verifiable, "reason": self.reason, "notes": list(self.notes),
                "specs": [s.to_dict() for s in self.specs]}


class _NotVerifiable(Exception):
    pass


# --------------------------------------------------------------------------- entry point

def infer_specs(module, kernel_name: str, *, source_text: str | None = None, config: Any = None,
                max_specs: int = 3, deadline_s: float | None = DEADLINE_S, blocks: list | None = None,
                usual: bool = False, launch_text: str | None = None) -> InferenceResult:
    """Launch specs for ``kernel_name`` in ``module`` (a ptx_ir Module or PTX text).

    ``config`` is the nvcc-plus.toml document (a dict, as nvcc_plus.config hands it over),
    a path to a TOML/JSON spec file, or its text. ``source_text`` is the .cu source, for
    ``// nvcc-plus:`` comments and C++ parameter names; ``launch_text`` the translation unit as the
    build preprocessed it (its user part: source_launches.unit_launch_text), where the launches'
    blocks are read when given (they respect -D and #if there), else from ``source_text``.
    ``deadline_s``: wall-clock seconds
    inference from the IR may take (None: no cap); past it the trace stops at once and the
    kernel is not verifiable ("inference timed out after N s").

    ``blocks`` (and ``usual``: also :data:`USUAL_BLOCKS` for the kernel's block dimensions):
    infer from the IR at exactly those blocks, one spec each, for the other launch shapes the
    program may use (:mod:`superopt.search.launch_shapes`); a block the kernel's
    ``.reqntid``/``.maxntid`` forbid, that breaks its warp collectives or on which tracing
    rejects it is left out, with the reason in ``skipped_blocks``. No toml or comment spec is
    read then.
    """
    if isinstance(module, str):
        module = ptx_ir.parse(module)
    fn = _resolve(module, kernel_name)
    if fn is None:
        names = ", ".join(k.name for k in module.kernels) or "none"
        return InferenceResult(kernel=kernel_name, reason=f"no kernel {kernel_name!r} in the module (has: {names})")
    sig = fn.signature
    result = InferenceResult(kernel=fn.name, signature=sig)
    infos = param_infos(fn)
    decl = _source_decl(source_text, fn) if source_text else None
    names = _spec_names(infos, decl.params if decl else None)

    if blocks is not None or usual:
        return _at_blocks(module, fn, infos, names, result, list(blocks or []), usual, deadline_s)
    # 1. nvcc-plus.toml
    try:
        found = explicit_specs(config, fn)
    except SpecError as e:
        found, result.notes = None, [f"nvcc-plus.toml: {e}"]
    if found:
        specs, origin = found
        return _explicit(result, module, fn, infos, specs, origin)
    # 2. // nvcc-plus: comments
    if source_text and decl is not None:
        texts = find_directives(source_text).get(decl.name, [])
        if texts:
            try:
                specs = [directive_spec(t, fn.name, infos, decl.params) for t in texts]
            except SpecError as e:
                result.reason = f"the // nvcc-plus: comment for {decl.name} is invalid: {e}"
                return result
            return _explicit(result, module, fn, infos, specs, "comment")
    # 3. inference
    try:
        inferrer = _Inferrer(module, fn, infos, names, result, max_specs, deadline_s)
        if launch_text or source_text:
            from superopt.specs.source_launches import launch_blocks
            inferrer.source_blocks = result.source_blocks = launch_blocks(launch_text or source_text).get(
                _short(fn.signature) if fn.signature else fn.name)
        inferrer.run()
    except _NotVerifiable as e:
        result.specs = []
        result.reason = str(e)
    except TraceTimeout:
        result.specs = []
        result.reason = f"inference timed out after {deadline_s:g} s"
    result.origin = "inferred" if result.specs else None
    return result


def _at_blocks(module, fn, infos, names, result: InferenceResult, blocks: list, usual: bool,
               deadline_s) -> InferenceResult:
    """:func:`infer_specs` at the blocks asked for (its ``blocks``/``usual``)."""
    inferrer = _Inferrer(module, fn, infos, names, result, max(1, len(blocks) + 8), deadline_s)
    inferrer.forced = [tuple((list(b) + [1, 1, 1])[:3]) for b in blocks]
    inferrer.forced_usual = usual
    try:
        inferrer.run()
    except _NotVerifiable as e:
        result.specs = []
        asked = inferrer.asked or inferrer.forced
        result.skipped_blocks += [(b, str(e)) for b in asked
                                  if b not in {s for s, _ in result.skipped_blocks}]
    except TraceTimeout:
        result.specs = []
        result.reason = f"inference timed out after {deadline_s:g} s"
        return result
    have = {tuple(sp.block) for sp in result.specs} | {b for b, _ in result.skipped_blocks}
    stopped = next((n for n in result.notes if n.startswith("stopped after")), "inference gave it no spec")
    result.skipped_blocks += [(b, stopped) for b in (inferrer.asked or inferrer.forced) if b not in have]
    result.origin = "inferred" if result.specs else None
    return result


def _resolve(module, name: str):
    kernels = module.kernels
    for k in kernels:
        if k.name == name:
            return k
    norm = _norm(name)
    for level in (lambda k: _norm(k.signature or "") == norm,
                  lambda k: _norm(_base(k.signature or "")) == norm,
                  lambda k: _norm(_short(k.signature or "")) == norm):
        hits = [k for k in kernels if k.signature and level(k)]
        if len(hits) == 1:
            return hits[0]
    hits = [k for k in kernels if name in k.name]
    return hits[0] if len(hits) == 1 else None


def _norm(s: str) -> str:
    return re.sub(r"\s+", "", s or "")


def _base(sig: str) -> str:
    """``void ns::scale<float>(float*, int)`` -> ``ns::scale<float>``."""
    depth = 0
    head = sig
    for i in range(len(sig) - 1, -1, -1):
        ch = sig[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                head = sig[:i]
                break
    # drop a return type (templates are demangled with one): the last space outside <>
    depth = 0
    cut = 0
    for i, ch in enumerate(head):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == " " and depth == 0:
            cut = i + 1
    return head[cut:].strip()


def _short(sig: str) -> str:
    b = _base(sig)
    b = re.sub(r"<.*>$", "", b)
    return b.split("::")[-1]


def _source_decl(source: str, fn):
    try:
        decls = find_kernels(source)
    except Exception:
        return None
    short = _short(fn.signature) if fn.signature else fn.name
    hits = [d for d in decls if d.name == short and len(d.params) == len(fn.params)]
    return hits[0] if hits else None


def _spec_names(infos: list[ParamInfo], cxx: list | None) -> list[str]:
    out, used = [], set()
    for i, p in enumerate(infos):
        n = cxx[i] if cxx and i < len(cxx) and cxx[i] else f"p{i}"
        if not re.fullmatch(r"[A-Za-z_]\w*", n) or n in _RESERVED:
            n = f"p{i}"
        while n in used:
            n = f"{n}_{i}"
        used.add(n)
        out.append(n)
    return out


# --------------------------------------------------------------------------- explicit specs

def explicit_specs(config, fn) -> tuple[list, str] | None:
    """Specs for ``fn`` from nvcc-plus.toml (a dict, a path or text); None when it has none."""
    if config is None:
        return None
    origin = "toml"
    tables: dict = {}
    if isinstance(config, dict):
        path = config.get("config_path")
        origin = f"toml:{path}" if path else "toml"
        found = explicit_table(config, fn)
        if found is None:
            return None
        name, d = found
        try:
            return _specs_of_table(d, name, origin), origin
        except SpecError as e:
            # another kernel's table is not this kernel's business: only its own is read
            raise SpecError(f'[kernels."{name}"]: {e}') from None
    elif isinstance(config, str):
        import os
        fmt = None
        if "\n" not in config and os.path.exists(config):
            origin = f"toml:{config}"
            fmt = "json" if config.endswith(".json") else "toml"
        else:
            # launch_spec guesses JSON for any text starting with "[": a TOML table header too
            fmt = "json" if config.lstrip().startswith("{") else "toml"
        for name, spec in load_specs(config, fmt=fmt).items():
            tables[name] = [spec]
    else:
        raise SpecError(f"config must be a dict, a path or TOML text, not {type(config).__name__}")
    if not tables:
        return None
    sig = fn.signature or ""
    keys = [fn.name, _norm(sig), _norm(_base(sig)), _norm(_short(sig))]
    for key in keys:
        for name, specs in tables.items():
            if key and (name == key or _norm(name) == key):
                return specs, origin
    return None


def explicit_table(config: dict, fn) -> tuple[str, Any] | None:
    """(name, table) of ``fn``'s ``[kernels."NAME"]`` table in the nvcc-plus.toml document
    ``config``, matched by name only (nothing parsed), or None."""
    kern = config.get("kernels") if isinstance(config, dict) else None
    if not isinstance(kern, dict) or not kern:
        return None
    sig = fn.signature or ""
    for key in (fn.name, _norm(sig), _norm(_base(sig)), _norm(_short(sig))):
        for name, d in kern.items():
            if key and (name == key or _norm(name) == key):
                return name, d
    return None


def _specs_of_table(d, name, origin) -> list:
    if not isinstance(d, (dict, list)) or (isinstance(d, list) and not all(isinstance(x, dict) for x in d)):
        raise SpecError(f"launch spec for {name!r}: not a table (grid, block and params)")
    if isinstance(d, list):
        return [LaunchSpec.from_dict(x, kernel=name, origin=origin) for x in d]
    if isinstance(d, dict) and "shapes" in d:
        base = {k: v for k, v in d.items() if k != "shapes"}
        return [LaunchSpec.from_dict({**base, **s}, kernel=name, origin=origin) for s in d["shapes"]]
    return [LaunchSpec.from_dict(d, kernel=name, origin=origin)]


def _explicit(result, module, fn, infos, specs, origin):
    out = []
    for spec in specs:
        problem = _fits(spec, infos)
        if problem:
            where = "nvcc-plus.toml" if origin.startswith("toml") else "the // nvcc-plus: comment"
            result.reason = f"the spec in {where} does not fit {fn.name}: {problem}"
            result.specs = []
            return result
        out.append(replace(spec, kernel=fn.name, origin=origin))
    result.specs = out
    result.origin = origin
    for spec in out:
        result.notes += check_spec(module, fn, spec)
    return result


def _fits(spec: LaunchSpec, infos: list[ParamInfo]) -> str | None:
    kparams = spec.kernel_params
    if len(kparams) != len(infos):
        return f"it has {len(kparams)} params, the kernel {len(infos)}"
    for p, info in zip(kparams, infos):
        if isinstance(p, Bytes):
            if p.size != info.size:
                return f"bytes param {p.name!r} has {p.size} bytes, parameter {info.index} {info.size}"
            continue
        if isinstance(p, Buffer) != (info.kind == "ptr"):
            what = "a pointer" if info.kind == "ptr" else f"a {info.kind} ({info.ptx_type})"
            return f"param {p.name!r} is a {p.kind} but parameter {info.index} is {what}"
        if info.kind == "struct" and (isinstance(p, Buffer) or p.elem.size != info.size):
            return (f"parameter {info.index} is a {info.size}-byte by-value struct; give a scalar of that size "
                    f"or its bytes (kind = \"bytes\", size = {info.size}, hex = \"...\")")
    try:
        spec.resolved()
    except SpecError as e:
        return str(e)
    return None


def check_spec(module, fn, spec: LaunchSpec, *, max_threads: int = 1 << 20) -> list[str]:
    """Trace ``spec`` (its values and listed variants) and say where its buffers are too
    small or the launch cannot be bounded; [] when it covers everything it was traced for.
    A bytes param is traced with its bytes, its pointer fields as the embedded buffers."""
    notes = []
    variants = [{}]
    explicit = {s.name: s.values for s in spec.scalars if s.values}
    for i in range(max((len(v) for v in explicit.values()), default=0)):
        variants.append({n: v[i % len(v)] for n, v in explicit.items()})
    for ov in variants:
        try:
            rs = spec.resolved(ov)
        except SpecError as e:
            notes.append(f"spec cannot be resolved with {ov}: {e}")
            continue
        threads = math.prod(rs.grid) * math.prod(rs.block)
        if threads > max_threads:
            notes.append(f"launch {rs.grid}x{rs.block} too large to trace; buffer lengths not checked")
            continue
        notes += launch_problems(module, fn, rs)
    return notes


def launch_problems(module, fn, rs: LaunchSpec, *, max_lane_steps: int | None = None,
                    deadline: float | None = None, alignment: bool = False) -> list[str]:
    """Trace the one launch of the resolved spec ``rs`` over every thread and say where its
    buffers do not cover what the kernel touches or the launch cannot be bounded (problems of
    the tracer, shape problems: shared memory out of bounds or read before any thread of the
    block writes it, a trap); [] when it covers everything. Unpinned float scalars are traced
    as unknown (the checker varies them), index buffers with their distribution's range.
    ``max_lane_steps`` and ``deadline`` (a ``time.monotonic()`` value) bound the trace (past
    them it is a problem: "analysis budget"); ``alignment``: also a problem when some access
    would be misaligned, or a full-warp collective would run with lanes gone, at these sizes
    (inference then makes sizes multiples: ``_NeedMultiple``)."""
    notes = []
    # tracer indices: the kernel's params in order, then the embedded buffers (virtual
    # pointer params, reached through the pointer fields of bytes params)
    ordered = rs.kernel_params + [p for p in rs.params if isinstance(p, Buffer) and p.embedded]
    at = {p.name: i for i, p in enumerate(ordered)}
    kinds, ranges = {}, {}
    for i, p in enumerate(ordered):
        if isinstance(p, Bytes):
            value = int.from_bytes(p.raw, "little")
            ptrs = {off: at[b] for off, b in p.pointers.items()}
            kinds[i] = ("bytes", value, ptrs) if ptrs else ("bytes", value)
            continue
        if isinstance(p, Buffer):
            kinds[i] = ("ptr", p.name) if p.embedded else ("ptr",)
            if p.distribution.startswith("index:"):
                env = rs.scalar_values()
                lo, _, hi = p.distribution[6:].partition("..")
                ranges[i] = (eval_expr(lo, env), eval_expr(hi, env) - 1)
        elif p.elem.is_float:
            # a float's value may decide control flow only where the checker keeps it:
            # where the format has ``pinned``, the checker varies unpinned float scalars
            fixed = p.pinned if hasattr(p, "pinned") else True
            kinds[i] = ("float", p.value) if fixed else ("float",)
        else:
            kinds[i] = ("int", p.value)
    r = trace(module, fn, rs.grid, rs.block, rs.shared_bytes, kinds, ranges, deadline=deadline,
              max_lane_steps=max_lane_steps)
    label = ", ".join(f"{k}={v}" for k, v in rs.scalar_values().items() if k in rs.size_params()) or "as given"
    for prob in r.problems + r.shape_problems:
        notes.append(f"launch ({label}): {prob}")
    if alignment and r.needs_multiple > 1:
        notes.append(f"launch ({label}): {r.multiple_reason}")
    for i, acc in r.buffers.items():
        p = ordered[i]
        if acc.end is None:
            continue
        if acc.lo < 0:
            notes.append(f"launch ({label}): buffer {p.name!r} is accessed {-acc.lo} bytes before its start")
        need = -(-acc.end // p.elem.size)
        if need > p.length:
            notes.append(f"launch ({label}): buffer {p.name!r} has {p.length} elements but the kernel "
                         f"touches element {need - 1}")
    return notes


# --------------------------------------------------------------------------- inference

def _nextprime(n: int) -> int:
    n = max(2, int(n))
    while True:
        if n < 4 or all(n % d for d in range(2, int(math.isqrt(n)) + 1)):
            return n
        n += 1


class _Inferrer:
    def __init__(self, module, fn, infos, names, result: InferenceResult, max_specs: int,
                 deadline_s: float | None = DEADLINE_S):
        self.module = module
        self.fn = fn
        self.infos = infos
        self.names = names
        self.result = result
        self.max_specs = max_specs
        self.dists: dict[int, tuple[int, int]] = {}     # param -> index range of its values
        self.notes = result.notes
        import time
        self._time = time.monotonic
        self.deadline = None if deadline_s is None else self._time() + deadline_s
        self.spent_lanes = 0
        self.spent_steps = 0
        self.cache: dict = {}
        self.grid_factor = 1.0            # shrinks fixed grids when a launch is too costly
        # the constant blocks the .cu source launches this kernel with (source_launches)
        self.source_blocks = None
        # infer_specs(blocks=...): exactly these blocks (and the usual ones), none dropped silently
        self.forced: list | None = None
        self.forced_usual = False
        self.asked: list = []

    # -- top level
    def run(self):
        fn, infos = self.fn, self.infos
        # By-value structs of other sizes are traced as raw bytes like the small ones and
        # given as bytes params (_note_big_structs).
        self.big_structs = [p for p in infos if p.kind == "struct" and p.size not in (1, 2, 4, 8)]
        # pointer fields of by-value structs: virtual pointer params (superopt.specs.virtual_pointers)
        self.virtual = VirtualPointers(infos, self.names)
        self.virtual.seed(fn)
        if not any(p.kind == "ptr" for p in infos) and not self.virtual:
            held = [p for p in infos if p.kind == "struct" and p.loaded and p.size >= 8
                    and (not p.fields or any(t in (".u64", ".b64", ".s64") for _, t in p.fields))]
            if not held:
                raise _NotVerifiable("it has no pointer parameters: there is no output a check could compare")
            # the trace may still find accesses through its fields (struct_pointers)
        self.bounds = grid_bounds(fn)
        self.traits = kernel_traits(fn, self.module, self.bounds)
        self.tile_block = tile_block(fn, self.module) if self.traits.block_dims >= 2 else None
        self.roles = scalar_roles(fn)
        self.ptx_names = {p.ptx_name: self.names[p.index] for p in infos if p.kind == "int"}
        self._classify_scalars()
        shapes = self._shapes()
        if not shapes:
            raise _NotVerifiable("no block shape satisfies the kernel's .reqntid/.maxntid")
        self.multiple = 1
        self.exact_floats = False
        for _attempt in range(5):
            try:
                self._run_shapes(shapes)
                return self._note_big_structs()
            except _NotVerifiable as e:
                # A loop whose trip count comes from float parameters (t < steps * dt): trace
                # again with their values known, and pin them in the spec.
                floats = [p for p in self.infos if p.kind == "float"]
                if self.exact_floats or not floats or not _loop_problem(str(e)):
                    raise
                self.exact_floats = True
                self.notes.append(f"float parameters {', '.join(self.names[p.index] for p in floats)} are "
                                  f"pinned: a loop's trip count depends on them ({e})")
                self.cache.clear()
                self.hist = None
            except _NeedMultiple as e:
                if not self.scaled or e.multiple <= self.multiple:
                    raise _NotVerifiable(e.reason)
                self.multiple = e.multiple
                self.notes.append(f"sizes are multiples of {e.multiple}: {e.reason}")
                self.cache.clear()
                self.hist = None
        raise _NotVerifiable("no sizes satisfy the kernel's alignment and warp requirements")

    def _note_big_structs(self):
        """Structs of more than 8 bytes are given as the bytes they were traced with (a
        ``bytes`` param): the check passes them as they are, like a pinned scalar."""
        for p in self.big_structs:
            if self.virtual.of_struct(p.index):
                continue                  # its note (_struct_note) says how it is given
            self.notes.append(f"parameter {p.index} ({self.names[p.index]}) is a {p.size}-byte struct passed by "
                              f"value: given as the bytes it was traced with ({self.struct_values[p.index]:#x}, "
                              "little-endian); the check does not vary them (a capture gives the program's own)")

    def _run_shapes(self, shapes):
        specs, rejected = [], []
        scale = None
        first_scale = None
        for shape in shapes:
            if len(specs) >= self.max_specs:
                break
            try:
                if scale is None:
                    scale = first_scale = self._choose_scale(shape)
                    self.first_shape = shape
                else:
                    scale = self._rescale(shape, first_scale)
                spec, scale = self._spec_for_shape(shape, scale)
            except _ShapeRejected as e:
                rejected.append(f"{_fmt_shape(shape)}: {e}")
                if self.forced is not None:
                    self.result.skipped_blocks.append((shape, str(e)))
                continue
            except _NotVerifiable as e:
                if not specs:
                    raise
                self.notes.append(f"stopped after {len(specs)} launch shape(s): {e}")
                break
            specs.append(spec)
            if self.forced is not None:
                continue                  # every block asked for gets its own spec
            if self._only_source_shape(shape):
                # the program launches it with this block and no other: other shapes would
                # judge launches it never makes (and a kernel written for its block may race)
                self.notes.append(f"block {_fmt_shape(shape)}: the block every launch in the source uses")
                break
            if shape == self.tile_block:
                # the block the shared tile was written for; other shapes would race on it
                self.notes.append(f"block {_fmt_shape(shape)}: the shape its shared tile implies")
                break
        if rejected:
            self.notes.append("block shapes rejected: " + "; ".join(rejected[:4])
                              + (f" (+{len(rejected) - 4} more)" if len(rejected) > 4 else ""))
        if not specs:
            if rejected and all(r.endswith(NO_WRITES) for r in rejected):
                raise _NotVerifiable(NO_WRITES)
            firsts = [r for r in rejected if not r.endswith(NO_WRITES)] or rejected
            raise _NotVerifiable(f"no launch shape works: {firsts[0]}" if firsts else "no launch shape works")
        self.result.specs = specs

    # -- scalars
    def _classify_scalars(self):
        self.size_idx, self.stride_idx, self.fixed = [], [], {}
        self.struct_values = {}
        for p in self.infos:
            if p.kind == "struct":
                # a struct that holds pointers (a params struct: pointers + sizes) gets 32-bit
                # integer fields big enough for loops to run and lengths to mean something
                ints = STRUCT_SIZES if self.virtual.of_struct(p.index) else (3,)
                self.struct_values[p.index] = _struct_bytes(p, ints)
        nfloat = 0
        for p in self.infos:
            if p.kind == "float":
                self.fixed[p.index] = FLOAT_VALUES[nfloat % len(FLOAT_VALUES)]
                nfloat += 1
            elif p.kind == "int":
                r = self.roles.get(p.index, set())
                if r & {"compared", "loop"}:
                    self.size_idx.append(p.index)
                elif "address" in r:
                    self.stride_idx.append(p.index)
                elif "compared_const" in r:
                    self.fixed[p.index] = 8          # a mode or a tile size checked against constants
                elif "divisor" in r:
                    self.fixed[p.index] = 7
                elif "shift" in r:
                    self.fixed[p.index] = 3
                elif r:
                    self.fixed[p.index] = 3
                else:
                    self.fixed[p.index] = 1
                if "divisor" in r and p.index not in self.fixed:
                    self.fixed.pop(p.index, None)

    def _values(self, scale: float) -> dict[int, int | float]:
        vals = dict(self.fixed)
        vals.update(self.struct_values)
        taken = set()
        m = getattr(self, "multiple", 1)
        lowest = 2 if m == 1 else 5          # m * p: a multiple of m, never of a block size
        for j, i in enumerate(self.size_idx):
            v = _nextprime(max(lowest, round(scale * SIZE_FACTORS[j % len(SIZE_FACTORS)] / m)))
            while v in taken:
                v = _nextprime(v + 1)
            taken.add(v)
            vals[i] = v * m
        top = max([vals[i] for i in self.size_idx], default=scale)
        for j, i in enumerate(self.stride_idx):
            v = _nextprime(max(3, round((top * 1.25 + 3 + 2 * j) / m)))
            while v in taken:
                v = _nextprime(v + 1)
            taken.add(v)
            vals[i] = v * m
        for i, v in list(vals.items()):
            info = self.infos[i]
            if info.kind == "int":
                t = elem_type(info.scalar_type)
                if t.kind == "uint" and t.size == 1:
                    vals[i] = min(int(v), 255)
                elif t.size == 1:
                    vals[i] = min(int(v), 127)
                elif t.size == 2:
                    vals[i] = min(int(v), 32767 if t.kind == "int" else 65535)
        return vals

    @property
    def scaled(self) -> bool:
        return bool(self.size_idx or self.stride_idx)

    # -- shapes and grids
    def _forced_shapes(self) -> list[tuple]:
        """The blocks infer_specs(blocks=...) asked for, less those the kernel cannot run at
        (each in ``skipped_blocks`` with the reason)."""
        t = self.traits
        asked = list(self.forced or [])
        if self.forced_usual:
            asked += [b for b in USUAL_BLOCKS[t.block_dims] if b not in asked]
        self.asked = asked
        out = []
        for s in asked:
            why = None
            if t.reqntid and tuple(s) != tuple(t.reqntid):
                why = f"the kernel's .reqntid {_fmt_shape(t.reqntid)} forbids it"
            elif t.maxntid and math.prod(s) > t.maxntid:
                why = f"the kernel's .maxntid {t.maxntid} (__launch_bounds__) forbids it"
            elif t.warp_collectives and math.prod(s) % 32:
                why = "its warp collectives need whole warps"
            elif any(x != 1 for x in s[t.block_dims:]):
                why = f"the kernel reads no threadIdx beyond {'xyz'[t.block_dims - 1]}"
            if why:
                self.result.skipped_blocks.append((s, why))
            elif s not in out:
                out.append(s)
        return out

    def _shapes(self) -> list[tuple]:
        t = self.traits
        if self.forced is not None:
            return self._forced_shapes()
        if t.reqntid:
            return [t.reqntid]
        dims = t.block_dims
        cands = list(SHAPES[dims])
        if t.tile:
            tile = tuple(t.tile.get(d, 1 if d >= dims else None) for d in range(3))
            if all(x is not None for x in tile) and math.prod(tile) <= 1024:
                cands.insert(0, tile)
            elif 0 in t.tile and dims == 1:
                cands.insert(0, (t.tile[0], 1, 1))
        if self.tile_block:
            cands.insert(0, self.tile_block)
        for b in reversed(self._source_shapes()):
            cands.insert(0, b)
        out = []
        for s in cands:
            if t.maxntid and math.prod(s) > t.maxntid:
                continue
            if t.warp_collectives and math.prod(s) % 32:
                continue
            if s not in out:
                out.append(s)
        if t.maxntid and not out:
            n = t.maxntid
            out = [(n, 1, 1)] if dims == 1 else [(min(n, 32), max(1, n // 32), 1)]
        return out

    def _source_shapes(self) -> list[tuple]:
        """The blocks the source launches the kernel with, those the kernel's indexing can
        use (no extent in a dimension it never reads)."""
        if not self.source_blocks:
            return []
        dims = self.traits.block_dims
        return [b for b in self.source_blocks.blocks if all(x == 1 for x in b[dims:])]

    def _only_source_shape(self, shape) -> bool:
        """Every launch of the kernel in the source uses this one constant block."""
        sb = self.source_blocks
        return bool(sb) and sb.all_constant and sb.blocks == (shape,)

    def _grid_exprs(self, shape) -> list:
        out = []
        for d in range(3):
            if d not in self.traits.grid_dims:
                out.append(1)
                continue
            bs = [b for b in self.bounds if b.dim == d]
            gs = any(b.grid_stride for b in bs)
            exprs = []
            for b in bs:
                e = affine_to_expr(b.expr, self.ptx_names)
                ext = b.extent(shape[d])
                if e is None or ext <= 0:
                    continue
                if re.fullmatch(r"\d+", e) and int(e) <= 2:
                    continue                                   # a lower bound (x > 0)
                ext *= 4 if gs else 1
                if re.fullmatch(r"\d+", e) and self.grid_factor < 1:
                    # a bound fixed at compile time (#define NX 256): no size to shrink, so a
                    # launch too costly to analyse covers the low corner of the domain (the
                    # kernel's own guard keeps every thread of a partial grid in bounds)
                    exprs.append(str(max(1, int(-(-int(e) // ext) * self.grid_factor))))
                    continue
                exprs.append(f"cdiv({e}, {ext})" if ext != 1 else e)
            exprs = sorted(set(exprs))
            if not exprs:
                out.append(max(1, int(DEFAULT_GRID[d] * self.grid_factor)))
            elif len(exprs) == 1:
                out.append(exprs[0])
            else:
                out.append("max(" + ", ".join(exprs) + ")")
        return out

    def _env(self, vals: dict) -> dict:
        return {self.names[i]: v for i, v in vals.items() if self.infos[i].kind == "int"}

    def _grid(self, exprs, vals) -> tuple:
        env = self._env(vals)
        return tuple(max(1, eval_expr(g, env)) for g in exprs)

    # -- tracing
    def _kinds(self, vals):
        k = {}
        for p in self.infos:
            if p.kind == "ptr":
                k[p.index] = ("ptr",)
            elif p.kind == "float":
                k[p.index] = ("float", vals[p.index]) if self.exact_floats else ("float",)
            elif p.kind == "struct":
                ptrs = self.virtual.of_struct(p.index)
                k[p.index] = ("bytes", vals[p.index], ptrs) if ptrs else ("bytes", vals[p.index])
            else:
                k[p.index] = ("int", vals[p.index])
        for v in self.virtual:
            k[v.index] = ("ptr", v.name)
        return k

    def _name(self, k: int) -> str:
        """The spec name of a param, virtual pointers (struct fields) included."""
        return self.virtual[k].name if k in self.virtual else self.names[k]

    def _trace(self, shape, vals, shared, lane_budget=None) -> TraceResult:
        """Trace one launch; data-dependent unbounded indices get index distributions."""
        key = (shape, tuple(sorted(vals.items())), shared, tuple(sorted(self.dists.items())), self.virtual.key())
        if key in self.cache:
            return self.cache[key]
        exprs = self._grid_exprs(shape)
        grid = self._grid(exprs, vals)
        if grid[1] > 65535 or grid[2] > 65535:
            raise _TooBig(f"grid {grid} exceeds the y/z limits")
        for _round in range(4 + 2 * len(self.infos)):
            ranges = {i: r for i, r in self.dists.items()}
            now = self._time()
            if self.deadline is not None and now > self.deadline:
                raise TraceTimeout("inference passed its deadline")
            if self.spent_lanes > TOTAL_LANE_STEPS or self.spent_steps > TOTAL_STEPS:
                raise _NotVerifiable("the analysis needs more work than its budget allows "
                                     f"({self.spent_lanes} traced thread-steps)")
            r = trace(self.module, self.fn, grid, shape, shared, self._kinds(vals), ranges,
                      deadline=now + TRACE_BUDGET, max_lane_steps=lane_budget, hard_deadline=self.deadline)
            self.spent_lanes += r.lane_steps
            self.spent_steps += r.steps
            if r.problems and [f for f in sorted(r.struct_pointers) if self.virtual.add(*f)]:
                continue                      # an access through a struct's pointer field: model it
            fixable = [k for k in r.index_sources if k not in self.dists]
            if r.problems and fixable:
                for k in fixable:
                    if k in self.virtual:
                        et = elem_type(_elem_from_trace([r.buffers[k]]) if k in r.buffers else "s32")
                    else:
                        et = elem_type(self.infos[k].elem or "s32")
                    if et.is_float:
                        raise _NotVerifiable(f"parameter {k} holds float values used as indices with no bounds check")
                    if et.size == 1 and et.kind == "int":
                        raise _NotVerifiable(f"parameter {k} holds indices with no bounds check")
                    self.dists[k] = (0, INDEX_RANGE - 1)
                    self.notes.append(
                        f"{self._name(k)} holds indices used with no bounds check "
                        f"({r.index_sources[k].split(' ')[0]}): its values are drawn from index:0..{INDEX_RANGE}")
                continue
            break
        if r.problems:
            msg = r.problems[0]
            if "analysis budget" in msg or "ran out of time" in msg:
                if self.deadline is not None and self._time() > self.deadline:
                    raise TraceTimeout("inference passed its deadline")
                raise _TooBig(msg)
            raise _NotVerifiable(msg)
        if r.needs_multiple > 1:
            raise _NeedMultiple(r.needs_multiple, r.multiple_reason)
        self.cache[(shape, tuple(sorted(vals.items())), shared, tuple(sorted(self.dists.items())),
                    self.virtual.key())] = r
        return r

    def _cost_ok(self, r: TraceResult, bytes_: int) -> bool:
        return (r.threads <= MAX_THREADS and r.lane_steps <= MAX_LANE_STEPS and r.steps <= MAX_STEPS
                and bytes_ <= MAX_BYTES)

    def _bytes(self, r: TraceResult) -> int:
        return sum(max(0, a.end or 0) for a in r.buffers.values())

    def _fits_budget(self, r: TraceResult) -> bool:
        bufmax = max([(a.end or 0) for a in r.buffers.values()], default=0)
        return (r.threads <= MAX_THREADS and r.lane_steps <= MAX_LANE_STEPS and r.steps <= MAX_STEPS
                and self._bytes(r) <= MAX_BYTES and bufmax <= MAX_BUFFER_BYTES)

    def _rescale(self, shape, scale: float) -> float:
        """The scale for another block shape: lowered when that shape launches more threads
        (a fixed grid with a bigger block) than the first one did at ``scale``."""
        if not self.scaled or not getattr(self, "hist", None):
            return scale
        first = self._grid(self._grid_exprs(self.first_shape), self._values(scale))
        t_first = math.prod(first) * math.prod(self.first_shape)
        e = self.work_exponent
        s = scale
        while s / 2 >= SCALE_START:
            g = self._grid(self._grid_exprs(shape), self._values(s))
            t = math.prod(g) * math.prod(shape)
            est = self.main_work * (t / max(t_first, 1)) * (s / scale) ** max(e - 1.0, 0.0)
            if t <= MAX_THREADS and est <= MAX_LANE_STEPS:
                break
            s /= 2
        return s

    def _choose_scale(self, shape) -> float:
        """The largest scale (doubling from a small one) whose launch stays cheap: each
        step is traced, and the next is tried only if its cost, extrapolated from the last
        two, fits the budgets."""
        if not self.scaled:
            return 1.0
        shared = SHARED_PROBE if self.traits.dynamic_shared else 0
        exprs = self._grid_exprs(shape)
        s = float(SCALE_START)
        hist = []
        best = None
        while s <= SCALE_MAX:
            grid = self._grid(exprs, self._values(s))
            if math.prod(grid) * math.prod(shape) > MAX_THREADS or grid[1] > 65535 or grid[2] > 65535:
                break
            if len(hist) >= 2:
                (_, a), (_, b) = hist[-2], hist[-1]
                pred = []
                for x, y, lim in ((a.lane_steps, b.lane_steps, MAX_LANE_STEPS), (a.steps, b.steps, MAX_STEPS),
                                  (self._bytes(a), self._bytes(b), MAX_BYTES)):
                    grow = max(y, 1) / max(x, 1)
                    pred.append(y * max(grow, 1.0) > lim)
                if any(pred):
                    break
            try:
                r = self._trace(shape, self._values(s), shared, lane_budget=MAX_LANE_STEPS * 2)
            except _TooBig as e:
                self.last_budget = str(e)
                break
            if r.shape_problems and not (shared and _only_dynamic_oob(r)):
                raise _ShapeRejected(_dedupe(r.shape_problems)[0])
            if not self._fits_budget(r):
                break
            best = s
            hist.append((s, r))
            s *= 2
        if best is None:
            s = SCALE_START / 2
            while s >= SCALE_MIN and best is None:
                try:
                    r = self._trace(shape, self._values(s), shared, lane_budget=MAX_LANE_STEPS * 2)
                except _TooBig as e:
                    self.last_budget = str(e)
                    s /= 2
                    continue
                if r.shape_problems:
                    raise _ShapeRejected(_dedupe(r.shape_problems)[0])
                if self._fits_budget(r):
                    best = s
                    hist.append((s, r))
                s /= 2
        if best is None:
            why = getattr(self, "last_budget", None)
            raise _NotVerifiable(why or "even a small launch is too costly to analyse")
        self.hist = hist
        self.main_work = hist[-1][1].lane_steps
        if len(hist) >= 2:
            a, b = hist[-2][1].lane_steps, hist[-1][1].lane_steps
            self.work_exponent = max(0.0, math.log(max(b, 1) / max(a, 1), 2))
        else:
            self.work_exponent = 1.0
        return best

    def _spec_for_shape(self, shape, scale):
        """Trace the launches of one shape and build its spec; may lower the scale."""
        for _attempt in range(6):
            try:
                return self._build(shape, scale), scale
            except _TooBig as e:
                if not self.scaled:
                    if self.grid_factor <= 1 / 16:
                        raise _NotVerifiable(f"the launch is too costly to analyse: {e}")
                    self.grid_factor /= 2
                    continue
                if scale / 2 < SCALE_MIN:
                    raise _NotVerifiable(f"the launch is too costly to analyse: {e}")
                scale = scale / 2
        raise _NotVerifiable("the launch stays too costly to analyse at small sizes")

    def _build(self, shape, scale) -> LaunchSpec:
        scales = [scale]
        if self.scaled:
            s1 = scale * 0.6
            s2 = min(24.0, scale * 0.3)
            scales += [s1, s2] if s2 < s1 else [s1]
        tuples = [self._values(s) for s in scales]
        # drop variants identical to an earlier one
        uniq = []
        for t in tuples:
            if t not in uniq:
                uniq.append(t)
        tuples = uniq
        exprs = self._grid_exprs(shape)
        shared = 0
        if self.traits.dynamic_shared:
            used = 0
            for vals in tuples:
                r = self._trace(shape, vals, SHARED_PROBE)
                used = max(used, r.shared_used)
            shared = -(-used // 16) * 16
            if shared > MAX_DYNAMIC_SHARED:
                raise _TooBig(f"needs {shared} bytes of dynamic shared memory")
        results = [None] * len(tuples)
        dropped = []
        for n in range(len(tuples)):
            r = self._trace(shape, tuples[n], shared, lane_budget=MAX_LANE_STEPS * 2 if n == 0 else None)
            if r.shape_problems:
                if n == 0:
                    raise _ShapeRejected(_dedupe(r.shape_problems)[0])
                dropped.append(n)              # a smaller size the kernel was not written for
                continue
            if n == 0 and not self._cost_ok(r, self._bytes(r)):
                raise _TooBig(f"{r.threads} threads, {r.lane_steps} traced steps, {self._bytes(r)} bytes")
            results[n] = r
        if dropped:
            keep = [n for n in range(len(tuples)) if n not in dropped]
            self.notes.append(f"block {_fmt_shape(shape)}: {len(dropped)} smaller size(s) dropped: "
                              f"{_dedupe(self._trace(shape, tuples[dropped[0]], shared).shape_problems)[0]}")
            tuples = [tuples[n] for n in keep]
            results = [results[n] for n in keep]
        return self._make_spec(shape, exprs, shared, tuples, results)

    def _struct_note(self, p, name, value):
        if not p.fields:
            note = (f"{name} is an empty {p.size}-byte struct (a functor?) the kernel never reads: "
                    f"passed as a {p.scalar_type} 0")
        else:
            desc = ", ".join(f"+{o} {t[1:]}" for o, t in p.fields)
            as_ = (f"the {p.scalar_type}" if p.size in (1, 2, 4, 8) else f"its {p.size} raw bytes")
            ptrs = self.virtual.of_struct(p.index)
            if ptrs:
                ints = ", ".join(map(str, STRUCT_SIZES[:3]))
                held = ", ".join(f"+{o} -> {self.virtual[j].name}" for o, j in sorted(ptrs.items()))
                as_ = f"its {p.size} raw bytes"
                what = f"floats 1.5, 0.75, ...; 32-bit integers {ints}, ...; pointer fields: embedded buffers {held}"
            else:
                what = "floats 1.5, 0.75, ...; integers 3"
            note = (f"{name} is a {p.size}-byte struct passed by value ({desc}): passed as "
                    f"{as_} {value:#x} ({what})")
        if note not in self.notes:
            self.notes.append(note)

    # -- the spec
    def _make_spec(self, shape, exprs, shared, tuples, results) -> LaunchSpec:
        envs = []
        for vals in tuples:
            env = self._env(vals)
            envs.append(env)
        grid_terms = []
        for d, g in enumerate(exprs):
            if isinstance(g, str):
                grid_terms.append(g)
        size_names = [self.names[i] for i in self.size_idx + self.stride_idx]
        divisors = [self.names[p.index] for p in self.infos
                    if p.kind == "int" and "divisor" in self.roles.get(p.index, set())]
        params = []
        fit = lambda need: _fit_length(list(zip(envs, need)), size_names, grid_terms, divisors)
        for p in self.infos:
            name = self.names[p.index]
            if p.kind == "ptr":
                params.append(self._buffer(p.index, name, p.elem, results, fit))
            elif p.kind == "struct" and self.virtual.of_struct(p.index):
                # pointer fields name embedded buffers (appended below); their bytes are
                # zero here, the checker writes each buffer's address there at every launch
                ptrs = self.virtual.of_struct(p.index)
                raw = bytearray(int(tuples[0][p.index]).to_bytes(p.size, "little"))
                for off in ptrs:
                    raw[off:off + 8] = bytes(8)
                params.append(Bytes(name=name, size=p.size, hex=raw.hex(),
                                    pointers={off: self.virtual[j].name for off, j in ptrs.items()}))
                self._struct_note(p, name, int.from_bytes(bytes(raw), "little"))
            elif p.kind == "float":
                params.append(_scalar(name, p.scalar_type, tuples[0][p.index], pinned=self.exact_floats))
            elif p.kind == "struct" and p.size not in (1, 2, 4, 8):
                # the bytes the launch was traced with (float fields ordinary values, integer fields 3)
                params.append(Bytes(name=name, size=p.size,
                                    hex=int(tuples[0][p.index]).to_bytes(p.size, "little").hex()))
                self._struct_note(p, name, tuples[0][p.index])
            elif p.kind == "struct":
                params.append(Scalar(name=name, type=p.scalar_type, value=tuples[0][p.index]))
                self._struct_note(p, name, tuples[0][p.index])
            else:
                vals = [t[p.index] for t in tuples]
                varies = len(set(vals)) > 1
                params.append(Scalar(name=name, type=p.scalar_type, value=vals[0],
                                     values=vals[1:] if varies else None))
        for v in sorted(self.virtual, key=lambda v: (v.struct, v.offset)):
            b = self._buffer(v.index, v.name, None, results, fit)
            params.append(replace(b, embedded=True))
        if not any(isinstance(b, Buffer) and b.direction != "in" for b in params):
            raise _ShapeRejected(NO_WRITES)
        spec = LaunchSpec(kernel=self.fn.name, grid=exprs, block=shape, params=params,
                          shared_bytes=shared, vary_sizes=False, origin="inferred")
        # every launch the spec allows was traced: check the lengths cover it
        for n, vals in enumerate(tuples):
            ov = {self.names[i]: v for i, v in vals.items()
                  if self.infos[i].kind == "int" and v != tuples[0][i]}
            rs = spec.resolved(ov)
            for i, a in results[n].buffers.items():
                b = rs.param(self._name(i))
                if a.end is not None and b.length * b.elem.size < a.end:
                    raise AssertionError(f"internal: {b.name} length {b.length} does not cover {a.end} bytes")
        return spec


    def _buffer(self, index: int, name: str, elem, results, fit) -> Buffer:
        """The buffer of pointer param ``index`` (virtual ones included) from its accesses in
        every traced launch: element type, length fitted over the launches, direction, and
        an index distribution when its values are used as unchecked indices."""
        accs = [r.buffers[index] for r in results]
        etype = elem or _elem_from_trace(accs)
        esize = elem_type(etype).size
        need = []
        for a in accs:
            if a.end is None:
                need.append(0)
                continue
            if a.lo < 0:
                raise _NotVerifiable(f"parameter {index} ({name}) is accessed {-a.lo} bytes before its start")
            need.append(-(-a.end // esize))
        read = any(a.read for a in accs)
        written = any(a.written for a in accs)
        atomic = any(a.atomic for a in accs)
        direction = "inout" if (read and written) or atomic else ("out" if written else "in")
        dist = "auto"
        if index in self.dists:
            if written or atomic:
                raise _NotVerifiable(
                    f"parameter {index} ({name}) holds indices used with no bounds check and the "
                    "kernel also writes it, so the values it reads back have no bound")
            lo, hi = self.dists[index]
            dist = f"index:{lo}..{hi + 1}"
        return Buffer(name=name, type=etype, length_expr=fit(need), direction=direction, distribution=dist)


def _loop_problem(msg: str) -> bool:
    return "loop exit depends on data" in msg or "does not settle" in msg


def _scalar(name, type_, value, *, pinned: bool) -> Scalar:
    """A Scalar, pinned (the checker must not vary it) where the spec format has that field."""
    import dataclasses
    if pinned and any(f.name == "pinned" for f in dataclasses.fields(Scalar)):
        return Scalar(name=name, type=type_, value=value, pinned=True)
    return Scalar(name=name, type=type_, value=value)


def _only_dynamic_oob(r) -> bool:
    return all("accessed at bytes" in p for p in r.shape_problems)


def _struct_bytes(p: ParamInfo, ints: tuple = (3,)) -> int:
    """Little-endian contents for a small by-value struct: its float fields get ordinary
    values, its integer fields 3 (32-bit ones the values ``ints`` in turn); bytes no load
    reads stay 0."""
    import struct as _st
    buf = bytearray(p.size)
    nf = ni = 0
    for off, t in p.fields:
        n = {".f32": 4, ".f64": 8, ".f16": 2, ".bf16": 2}.get(t)
        if n and off + n <= p.size:
            v = FLOAT_VALUES[nf % len(FLOAT_VALUES)]
            nf += 1
            if t == ".f32":
                buf[off:off + 4] = _st.pack("<f", v)
            elif t == ".f64":
                buf[off:off + 8] = _st.pack("<d", v)
            elif t == ".f16":
                buf[off:off + 2] = _st.pack("<e", v)
            else:
                buf[off:off + 2] = _st.pack("<f", v)[2:4]
            continue
        try:
            from ptx_ir.nodes import type_size
            n = type_size(t)
        except Exception:
            n = 1
        if off + n <= p.size and not any(buf[off:off + n]):
            v = ints[ni % len(ints)] if n == 4 else 3
            ni += n == 4
            buf[off:off + n] = v.to_bytes(n, "little")
    return int.from_bytes(bytes(buf), "little")


class _ShapeRejected(Exception):
    pass


class _NeedMultiple(Exception):
    def __init__(self, multiple: int, reason: str):
        super().__init__(reason)
        self.multiple = multiple
        self.reason = reason


class _TooBig(Exception):
    pass


def _fmt_shape(s) -> str:
    s = list(s)
    while len(s) > 1 and s[-1] == 1:
        s.pop()
    return "x".join(map(str, s))


def _dedupe(xs):
    out = []
    for x in xs:
        if x not in out:
            out.append(x)
    return out


def _elem_from_trace(accs) -> str:
    types = {}
    for a in accs:
        for t, n in a.types.items():
            types[t] = max(types.get(t, 0), n)
    from superopt.specs.facts import _elem_from_accesses
    return _elem_from_accesses(set(types)) or "u8"


# --------------------------------------------------------------------------- length fitting

def _monomials(names: list[str], degree: int = 3) -> list[tuple]:
    from itertools import combinations_with_replacement
    out = [()]
    for d in range(1, degree + 1):
        out += list(combinations_with_replacement(names, d))
    return out


def _fit_length(samples: list[tuple[dict, int]], size_names: list[str], grid_terms: list[str],
                divisors: list[str]):
    """A length expression >= the needed element count in every sample (env, need),
    as tight and as simple as the candidates allow (see the module doc)."""
    needs = [n for _, n in samples]
    if max(needs) <= 0:
        return 1
    if len(set(needs)) == 1:
        return needs[0]
    terms: list[tuple[str, list[int], float]] = []
    for mono in _monomials(size_names):
        if not mono:
            continue
        text = "*".join(mono)
        vals = [math.prod(env[n] for n in mono) for env, _ in samples]
        terms.append((text, vals, len(mono)))
    for g in grid_terms:
        if re.fullmatch(r"[A-Za-z_]\w*", g):
            continue                          # a plain scalar: already a monomial
        vals = [eval_expr(g, env) for env, _ in samples]
        terms.append((g, vals, 0.5))
        for n in size_names:
            terms.append((f"{n}*{g}" if "+" not in g else f"{n}*({g})",
                          [v * env[n] for v, (env, _) in zip(vals, samples)], 1.5))
    for dname in divisors:
        for n in size_names:
            if n == dname:
                continue
            text = f"cdiv({n}, {dname})"
            terms.append((text, [eval_expr(text, env) for env, _ in samples], 1.2))
    best = None
    for text, vals, cx in terms:
        if max(vals) <= 0:
            continue
        ks = {1}
        for v, need in zip(vals, needs):
            if v > 0:
                ks.add(max(1, need // v))
                ks.add(max(1, -(-need // v)))
        for k in ks:
            c = max(need - k * v for v, need in zip(vals, needs))
            c = max(c, 0)
            if any(k * v + c < 1 for v in vals):
                continue
            slack = max((k * v + c - need) / max(need, 1) for v, need in zip(vals, needs))
            score = slack + 0.02 * (cx + (1 if c else 0) + (0.5 if k != 1 else 0))
            if best is None or score < best[0]:
                best = (score, text, k, c)
    if best is None:
        return max(needs)
    _, text, k, c = best
    expr = text if k == 1 else (f"{k}*({text})" if "+" in text else f"{k}*{text}")
    if c:
        expr = f"{expr} + {c}"
    for env, need in samples:
        if eval_expr(expr, env) < need:
            raise AssertionError(f"internal: fitted length {expr} does not cover {need} at {env}")
    return expr
