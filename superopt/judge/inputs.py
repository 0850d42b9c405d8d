"""Input generation for the differential check.

Every call draws fresh inputs: the master seed comes from ``os.urandom`` unless one is
given (then the run is reproducible), and each input set gets its own generator derived
from (master seed, set index).

Buffer distributions (the ``distribution`` of a :class:`~superopt.specs.launch_spec.Buffer`):

==================  ===========================================================
``auto``            the checker rotates through the defaults for the type
``normal``          floats: N(0, 1)
``uniform``         floats: U[-1, 1); ints: like ``uniform_small``
``uniform:LO..HI``  U[LO, HI) (ints: LO..HI-1); LO, HI literals or expressions
``positive``        floats: U(0, 1] mixed with a few larger magnitudes
``large``           floats: large magnitudes, random sign
``specials``        floats: normal values mixed with NaN, ±Inf, denormals, -0.0,
                    +0.0, largest finite, smallest normal, large magnitudes
``uniform_small``   ints: small values (signed -8..7, unsigned 0..15)
``full``            ints: the full range of the type (random bits)
``near_bounds``     ints: min, min+1, -1, 0, 1, max-1, max mixed with random values
``index:LO..HI``    ints in [LO, HI), expressions over scalar params ("index:0..n")
==================  ===========================================================

Buffers are never all zeros (unless the domain allows nothing else, e.g. index:0..1).

Output buffers are *poisoned*: filled with a pattern that differs on every run (quiet
NaNs with a random payload for floats, random bytes for ints), so that an element the
kernel did not write is recognisable and cannot match by accident. Every buffer gets a
guard zone of :data:`GUARD_BYTES` random canary bytes on each side.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field, replace
from typing import Union

import numpy as np

from superopt.specs.launch_spec import ElemType, LaunchSpec, SpecError, elem_type, eval_expr

__all__ = [
    "GUARD_BYTES", "InputSet", "fresh_seed", "make_rng", "generate", "poison", "complement_poison",
    "poison_unlike", "make_guards", "make_input_set", "FLOAT_DISTS", "INT_DISTS",
    "default_distribution", "float_specials", "is_nan_bits", "size_variants", "tail_variants",
    "free_scalars", "multiple_variant", "input_plan", "snapshot_array",
]

GUARD_BYTES = 256

FLOAT_DISTS = ("normal", "specials", "uniform", "large", "positive")
INT_DISTS = ("uniform_small", "full", "near_bounds")


def fresh_seed() -> int:
    """A 63-bit seed from the OS entropy pool."""
    return int.from_bytes(os.urandom(8), "little") >> 1


def make_rng(seed: int, *salt: int) -> np.random.Generator:
    return np.random.default_rng([int(seed) & ((1 << 64) - 1), *[int(s) & ((1 << 64) - 1) for s in salt]])


def default_distribution(et: ElemType, set_index: int) -> str:
    """The rotation used for ``auto`` buffers: set 0 plain, later sets harsher."""
    dists = FLOAT_DISTS if et.is_float else INT_DISTS
    return dists[set_index % len(dists)]


# --------------------------------------------------------------------------- bits helpers

def _bits(a: np.ndarray, et: ElemType) -> np.ndarray:
    return np.ascontiguousarray(a).view(et.bits_dtype)


def _from_bits(b: np.ndarray, et: ElemType) -> np.ndarray:
    return np.ascontiguousarray(b.astype(et.bits_dtype, copy=False)).view(et.dtype)


def _float_layout(et: ElemType):
    width = et.size * 8
    sign = 1 << (width - 1)
    exp_mask = ((1 << et.exp_bits) - 1) << et.man_bits
    man_mask = (1 << et.man_bits) - 1
    quiet = 1 << (et.man_bits - 1)
    return sign, exp_mask, man_mask, quiet


def is_nan_bits(a: np.ndarray, et: ElemType) -> np.ndarray:
    """Elementwise NaN test on the bits (works for f16, bf16, f32, f64)."""
    sign, exp_mask, man_mask, _ = _float_layout(et)
    t = et.bits_dtype.type
    return (_bits(a, et) & t(~sign & ((1 << (8 * et.size)) - 1))) > t(exp_mask)


def _f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even f32 -> bf16 bits (NaN stays NaN)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    nan = np.isnan(x)
    out = rounded.astype(np.uint16)
    out[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def _cast_floats(x: np.ndarray, et: ElemType) -> np.ndarray:
    """float64 values -> storage array of the element type."""
    with np.errstate(over="ignore", invalid="ignore"):
        if et.name == "bf16":
            return _f32_to_bf16_bits(x.astype(np.float32))
        return x.astype(et.dtype)


# --------------------------------------------------------------------------- specials

def float_specials(et: ElemType) -> np.ndarray:
    """NaN (quiet, with payloads, negative), ±Inf, ±0, denormals, extremes, as storage."""
    sign, exp_mask, man_mask, quiet = _float_layout(et)
    bias = (1 << (et.exp_bits - 1)) - 1
    max_exp = (1 << et.exp_bits) - 2
    bits = [
        exp_mask | quiet,                       # canonical quiet NaN
        exp_mask | quiet | 1,                   # NaN with payload
        sign | exp_mask | quiet,                # negative NaN
        exp_mask,                               # +Inf
        sign | exp_mask,                        # -Inf
        0,                                      # +0
        sign,                                   # -0
        1,                                      # smallest denormal
        sign | 1,                               # negative smallest denormal
        man_mask,                               # largest denormal
        (man_mask >> 1) | sign,                 # a negative mid denormal
        1 << et.man_bits,                       # smallest normal
        (max_exp << et.man_bits) | man_mask,    # largest finite
        sign | (max_exp << et.man_bits) | man_mask,
        ((bias + (max_exp - bias) * 3 // 4) << et.man_bits) | (man_mask // 3),   # large magnitude
        sign | ((bias + (max_exp - bias) // 2) << et.man_bits) | (man_mask // 5),
        (bias << et.man_bits),                  # 1.0
        sign | ((bias - 1) << et.man_bits),     # -0.5
    ]
    return _from_bits(np.array(bits, dtype=np.uint64), et)


# --------------------------------------------------------------------------- generation

def _parse_range(arg: str, env: dict) -> tuple[int, int]:
    lo, sep, hi = arg.partition("..")
    if not sep:
        raise SpecError(f"range {arg!r} must be LO..HI")
    return eval_expr(lo.strip(), env), eval_expr(hi.strip(), env)


def _parse_float_range(arg: str, env: dict) -> tuple[float, float]:
    lo, sep, hi = arg.partition("..")
    if not sep:
        raise SpecError(f"range {arg!r} must be LO..HI")

    def f(s):
        s = s.strip()
        try:
            return float(s)
        except ValueError:
            return float(eval_expr(s, env))
    return f(lo), f(hi)


def _int_bounds(et: ElemType) -> tuple[int, int]:
    bits = et.size * 8
    if et.kind == "int":
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def _gen_ints(et: ElemType, n: int, dist: str, rng: np.random.Generator, env: dict) -> np.ndarray:
    lo_t, hi_t = _int_bounds(et)
    name, _, arg = dist.partition(":")
    if name in ("uniform_small", "uniform") and not arg:
        lo, hi = (-8, 8) if et.kind == "int" else (0, 16)
        return rng.integers(lo, hi, size=n, dtype=np.int64).astype(et.dtype)
    if name in ("uniform", "index"):
        lo, hi = _parse_range(arg, env)
        if hi <= lo:
            raise SpecError(f"distribution {dist!r}: empty range [{lo}, {hi}) with {env}")
        if lo < lo_t or hi - 1 > hi_t:
            raise SpecError(f"distribution {dist!r}: [{lo}, {hi}) does not fit {et.name}")
        return rng.integers(lo, hi, size=n, dtype=np.int64 if hi <= (1 << 62) else np.uint64).astype(et.dtype)
    if name == "full":
        return rng.integers(0, 256, size=n * et.size, dtype=np.uint8).view(et.dtype).copy()
    if name == "near_bounds":
        edges = sorted({lo_t, lo_t + 1, hi_t - 1, hi_t} | ({-1, 0, 1} if et.kind == "int" else {0, 1, 2}))
        edge_arr = np.array(edges, dtype=et.dtype)
        full = rng.integers(0, 256, size=n * et.size, dtype=np.uint8).view(et.dtype).copy()
        pick = rng.random(n) < 0.5
        full[pick] = edge_arr[rng.integers(0, len(edges), size=int(pick.sum()))]
        return full
    raise SpecError(f"unknown integer distribution {dist!r} for {et.name} "
                    f"(known: uniform_small, uniform:LO..HI, full, near_bounds, index:LO..HI)")


def _gen_floats(et: ElemType, n: int, dist: str, rng: np.random.Generator, env: dict) -> np.ndarray:
    name, _, arg = dist.partition(":")
    finite_max = {"f16": 6.0e4, "bf16": 3.0e38, "f32": 3.0e38, "f64": 1.0e300}[et.name]
    if name == "normal":
        if et.name in ("f32", "f64"):
            return rng.standard_normal(n, dtype=et.dtype)
        x = rng.standard_normal(n)
    elif name == "uniform":
        lo, hi = _parse_float_range(arg, env) if arg else (-1.0, 1.0)
        x = rng.uniform(lo, hi, n)
    elif name == "positive":
        x = 1.0 - rng.random(n)                       # (0, 1]
        big = rng.random(n) < 0.1
        x[big] *= 10.0 ** rng.uniform(0, np.log10(finite_max) / 4, big.sum())
    elif name == "large":
        # random sign and mantissa, exponent in the top two thirds of the finite range
        sign, exp_mask, man_mask, _ = _float_layout(et)
        t = et.bits_dtype.type
        bias = (1 << (et.exp_bits - 1)) - 1
        max_exp = (1 << et.exp_bits) - 2
        lo = bias + (max_exp - bias) // 3
        r = np.frombuffer(rng.bytes(n * et.size), dtype=et.bits_dtype)
        e = rng.integers(lo, max_exp + 1, size=n).astype(et.bits_dtype)
        return ((r & t(sign | man_mask)) | (e << t(et.man_bits))).astype(et.bits_dtype).view(et.dtype)
    elif name == "specials":
        out = (rng.standard_normal(n, dtype=et.dtype) if et.name in ("f32", "f64")
               else _cast_floats(rng.standard_normal(n), et))
        if not n:
            return out
        sp = float_specials(et)
        k = max(1, n // 4)                          # about a quarter of the elements special
        pos = rng.integers(0, n, size=k)
        out[pos] = sp[rng.integers(0, len(sp), size=k)]
        if n >= len(sp):                            # every special at least once
            out[rng.choice(n, size=len(sp), replace=False)] = sp[rng.permutation(len(sp))]
        return out
    elif name == "int":
        x = rng.integers(-16, 17, n).astype(np.float64)
    else:
        raise SpecError(f"unknown float distribution {dist!r} for {et.name} "
                        f"(known: normal, uniform[:LO..HI], positive, large, specials, int)")
    return _cast_floats(x, et)


def generate(et: Union[ElemType, str], n: int, dist: str, rng: np.random.Generator,
             env: dict | None = None) -> np.ndarray:
    """``n`` elements of type ``et`` drawn from distribution ``dist`` (storage array)."""
    if isinstance(et, str):
        et = elem_type(et)
    env = env or {}
    dist = dist.strip()
    if dist.startswith("index:") and et.is_float:
        raise SpecError(f"index distribution on a float buffer ({et.name})")
    a = _gen_floats(et, n, dist, rng, env) if et.is_float else _gen_ints(et, n, dist, rng, env)
    a = np.ascontiguousarray(a)
    if n and not _bits(a, et).any():
        # never all zeros: put a non-zero value somewhere the domain allows
        i = int(rng.integers(0, n))
        if et.is_float:
            a[i] = _cast_floats(np.array([1.0]), et)[0]
        elif dist.startswith(("index:", "uniform:")):
            lo, hi = _parse_range(dist.partition(":")[2], env)
            if hi - lo > 1:
                a[i] = lo + 1 if lo + 1 != 0 else lo
        else:
            a[i] = 1
    return a


# --------------------------------------------------------------------------- poison

def poison(et: Union[ElemType, str], n: int, rng: np.random.Generator) -> np.ndarray:
    """A fresh poison pattern: quiet NaNs with random payloads, or random int bits."""
    if isinstance(et, str):
        et = elem_type(et)
    raw = np.frombuffer(rng.bytes(n * et.size), dtype=et.bits_dtype).copy()
    if et.is_float:
        sign, exp_mask, man_mask, quiet = _float_layout(et)
        t = et.bits_dtype.type
        raw = (raw & t(sign | man_mask)) | t(exp_mask | quiet)
    return raw.view(et.dtype)


def complement_poison(p: np.ndarray, et: Union[ElemType, str], rng: np.random.Generator | None = None) -> np.ndarray:
    """A second poison that differs from ``p`` in every element.

    Ints: the bitwise complement. Floats: finite random values of either sign (``p`` is all
    NaN), so that a kernel that reads its output buffer before writing it (``out[i] += v``
    on a buffer declared ``out``) gives different results with the two poisons instead of
    NaN both times.
    """
    if isinstance(et, str):
        et = elem_type(et)
    if et.is_float:
        # random sign and mantissa, exponent within 2**-4 .. 2**3: finite, never NaN, so it
        # differs from every element of p (all NaN)
        rng = rng if rng is not None else make_rng(fresh_seed())
        sign, exp_mask, man_mask, _ = _float_layout(et)
        t = et.bits_dtype.type
        bias = (1 << (et.exp_bits - 1)) - 1
        r = np.frombuffer(rng.bytes(p.size * et.size), dtype=et.bits_dtype)
        e = (r >> t(et.man_bits)) & t(7)                      # 0..7
        out = (r & t(sign | man_mask)) | ((e + t(bias - 4)) << t(et.man_bits))
        return out.astype(et.bits_dtype).view(et.dtype)
    return (~_bits(p, et)).view(et.dtype)


def poison_unlike(ref: np.ndarray, et: Union[ElemType, str], rng: np.random.Generator) -> np.ndarray:
    """A poison no element of which equals ``ref`` (NaN-equal, and far for tolerances).

    Used for the candidate's output buffers: an element the candidate leaves unwritten can
    then never pass as equal to the baseline's value.
    """
    if isinstance(et, str):
        et = elem_type(et)
    p = poison(et, ref.size, rng)
    t = et.bits_dtype.type
    if et.is_float:
        nan = is_nan_bits(ref, et)
        if not nan.any():
            return p
        # NaN poison is unlike every number; where the reference is NaN use a finite value.
        if nan.any():
            fin = _cast_floats(rng.uniform(1.0, 2.0, int(nan.sum())) * np.where(rng.random(int(nan.sum())) < 0.5, -1, 1), et)
            p = p.copy()
            p[nan] = fin
        return p
    rb = _bits(ref, et)
    pb = _bits(p, et).copy()
    same = pb == rb
    if same.any():
        pb[same] = rb[same] ^ t((1 << (8 * et.size)) - 1)
    return pb.view(et.dtype)


def make_guards(rng: np.random.Generator) -> tuple[bytes, bytes]:
    g = rng.integers(0, 256, size=2 * GUARD_BYTES, dtype=np.uint8).tobytes()
    return g[:GUARD_BYTES], g[GUARD_BYTES:]


# --------------------------------------------------------------------------- input sets

@dataclass
class InputSet:
    """One concrete launch: scalar values, resolved launch shape, buffer contents, guards.

    ``data`` holds the initial contents of every buffer (in/inout: generated values; out:
    poison). ``spec`` is the spec resolved for this set (grid and lengths are ints).
    """
    index: int
    label: str
    seed: int
    spec: LaunchSpec
    data: dict[str, np.ndarray]
    guards: dict[str, tuple[bytes, bytes]]
    distributions: dict[str, str] = field(default_factory=dict)
    run_tag: str = ""           # which run of the set this is (baseline-1, candidate-2, ...)

    @property
    def scalars(self) -> dict:
        return self.spec.scalar_values()

    def sizes(self) -> dict[str, int]:
        return {b.name: b.length for b in self.spec.buffers}

    def describe(self) -> dict:
        return {"set": self.index, "label": self.label, "seed": self.seed, "scalars": self.scalars,
                "grid": list(self.spec.grid), "block": list(self.spec.block),
                "lengths": self.sizes(), "distributions": dict(self.distributions)}

    def with_outputs(self, outputs: dict[str, np.ndarray], rng: np.random.Generator, tag: str = "") -> "InputSet":
        """Same inputs, new initial output contents and fresh guard canaries."""
        data = dict(self.data)
        data.update(outputs)
        guards = {name: make_guards(rng) for name in self.guards}
        return replace(self, data=data, guards=guards, run_tag=tag)


@functools.lru_cache(maxsize=16)
def _snapshot_cached(path: str, stamp: tuple, dtype: str, length: int) -> np.ndarray:
    a = np.fromfile(path, dtype=np.dtype(dtype), count=length)
    a.flags.writeable = False
    return a


def snapshot_array(path: str, et: ElemType, length: int) -> np.ndarray:
    """``length`` elements of ``et`` from a capture's snapshot file (read once, read-only);
    SpecError naming the file when it cannot give them."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise SpecError(f"snapshot {path}: {e.strerror or e}") from None
    if st.st_size < length * et.size:
        raise SpecError(f"snapshot {path}: {st.st_size} bytes, the buffer needs {length * et.size}")
    return _snapshot_cached(path, (st.st_mtime_ns, st.st_size), et.dtype.str, int(length))


def make_input_set(spec: LaunchSpec, seed: int | None = None, index: int = 0, *,
                   scalars: dict | None = None, distributions: dict | None = None,
                   label: str | None = None, program_data: bool | None = None) -> InputSet:
    """Generate one input set for ``spec`` (resolved with ``scalars`` overrides).

    ``distributions`` overrides buffer distributions by name; ``auto`` buffers get the
    rotation of :func:`default_distribution` for ``index``. With a snapshot in the spec
    (``spec.snapshot``), set 0 (or ``program_data=True``) starts every buffer that is not
    output-only from the program's own data; buffers of distribution ``snapshot`` start from
    it in every set.
    """
    if seed is None:
        seed = fresh_seed()
    rng = make_rng(seed, index)
    rs = spec.resolved(scalars)
    env = rs.scalar_values()
    data: dict[str, np.ndarray] = {}
    guards: dict[str, tuple[bytes, bytes]] = {}
    dists: dict[str, str] = {}
    before = (rs.snapshot or {}).get("before") or {}
    if program_data is None:
        program_data = index == 0 and bool(before)
    for b in rs.buffers:
        et = b.elem
        d = (distributions or {}).get(b.name, b.distribution)
        if d == "snapshot" or (program_data and b.name in before and b.direction != "out"):
            data[b.name] = snapshot_array(before[b.name], et, b.length)
            dists[b.name] = "program data"
            guards[b.name] = make_guards(rng)
            continue
        if d == "auto":
            d = default_distribution(et, index)
        if b.direction == "out":
            data[b.name] = poison(et, b.length, rng)
            dists[b.name] = "poison"
        else:
            data[b.name] = generate(et, b.length, d, rng, env)
            dists[b.name] = d
        guards[b.name] = make_guards(rng)
    if label is None:
        shown = set(spec.size_params()) | set(scalars or {})
        sizes = ", ".join(f"{k}={v}" for k, v in env.items() if k in shown)
        label = f"set {index}" + (f" ({sizes})" if sizes else "")
    return InputSet(index=index, label=label, seed=seed, spec=rs, data=data, guards=guards,
                    distributions=dists)


# Vector widths (elements) and unroll factors the passes version on: sizes in the extra
# "tail" sets cover every residue modulo 8 and the residue 15 modulo 16, and one main set is
# an exact multiple of the block and of 16, so a rewrite that is wrong only for one residue
# (or only when nothing is left over) meets an input that shows it.
TAIL_RESIDUES = (0, 1, 2, 3, 4, 5, 6, 7, 15)
MULTIPLE_OF = 16


def free_scalars(spec: LaunchSpec) -> list:
    """Scalars a kernel must not be specialised on: not a size (buffer lengths and the grid
    do not depend on them), not pinned by the spec, no explicit ``values``. Integer ones
    only where the spec lets sizes vary (an inferred spec proved its bounds for its values
    alone)."""
    sizes = set(spec.size_params())
    out = []
    for s in spec.scalars:
        if s.name in sizes or s.pinned or s.values:
            continue
        if s.elem.is_float or spec.vary_sizes:
            out.append(s)
    return out


def _free_value(s, i: int, rng: np.random.Generator):
    """Set ``i``'s value of free scalar ``s``: other signs, zero, -0.0, other magnitudes."""
    v = s.value
    if s.elem.is_float:
        a = float(v) if v else 1.5
        choices = [-a, 0.0, -0.0, a * float(rng.uniform(50, 5000)), float(rng.normal()) * 3.0 or 0.25]
        return choices[(i - 1) % len(choices)]
    v = int(v)
    if v > 1:
        choices = [0, 1, v // 2, v - 1]
    elif v in (0, 1):
        choices = [1 - v, v]
    else:
        choices = [-1, 0, v // 2 or v]
    return choices[(i - 1) % len(choices)]


def _size_value(v: int, i: int, bx: int, rng: np.random.Generator) -> int:
    step = bx * MULTIPLE_OF // np.gcd(bx, MULTIPLE_OF)
    if i % 3 == 1 and v >= step:
        return (v // step) * step                       # an exact multiple of block and of 16
    if i % 3 == 2:
        cand = v - int(rng.integers(1, max(2, min(bx, v))))   # a little smaller, not a multiple
    else:
        cand = int(rng.integers(1, max(2, min(v, 2 * bx))))   # part of one or two blocks
    if cand % bx == 0 and cand > 1:
        cand -= 1
    return max(1, cand)


def _varied_sizes(spec: LaunchSpec) -> list[str]:
    """Size parameters the checker may give other values: the spec lets sizes vary, and the
    parameter has no explicit ``values`` and is not pinned."""
    if not spec.vary_sizes:
        return []
    return [s.name for s in spec.scalars
            if s.name in spec.size_params() and not s.values and not s.pinned]


def size_variants(spec: LaunchSpec, count: int, rng: np.random.Generator) -> list[dict]:
    """Scalar overrides for ``count`` input sets: the spec's values first; then sizes that
    are exact multiples of the block, a little smaller and not multiples, or small (never
    larger than the spec's, so a fixed grid still covers them); explicit ``values`` lists of
    scalars when given; and fresh values of the free scalars (:func:`free_scalars`)."""
    out: list[dict] = [{}]
    explicit = {s.name: s.values for s in spec.scalars if s.values}
    sizes = _varied_sizes(spec)
    free = free_scalars(spec)
    bx = spec.block[0]
    base = spec.scalar_values()
    for i in range(1, count):
        ov: dict = {}
        for name, vals in explicit.items():
            ov[name] = vals[(i - 1) % len(vals)]
        for name in sizes:
            v = int(base[name])
            if v > 1:
                ov[name] = _size_value(v, i, bx, rng)
        for s in free:
            ov[s.name] = _free_value(s, i, rng)
        out.append(ov)
    return out[:count]


def tail_variants(spec: LaunchSpec, rng: np.random.Generator) -> list[dict]:
    """Overrides for the small "tail" sets: every size parameter at ``k*16 + r`` for each
    residue ``r`` of :data:`TAIL_RESIDUES` (at most the spec's value). Empty when the spec
    does not let sizes vary or has no size parameter."""
    sizes = _varied_sizes(spec)
    if not sizes:
        return []
    base = spec.scalar_values()
    out = []
    for r in TAIL_RESIDUES:
        ov = {}
        for name in sizes:
            v = int(base[name])
            top = min(v, 2 * spec.block[0] + MULTIPLE_OF)
            k = max(0, (top - r) // MULTIPLE_OF)
            if k * MULTIPLE_OF + r <= v and k * MULTIPLE_OF + r >= 1:
                ov[name] = k * MULTIPLE_OF + r
        if ov and ov not in out:
            out.append(ov)
    return out


def multiple_variant(spec: LaunchSpec, planned: list[dict]) -> list[dict]:
    """One more set when no planned set gives a size parameter a value that is an exact
    multiple of block.x and of 16 (e.g. an inferred spec with its own list of sizes): the
    largest such multiple not above the spec's value, so that code wrong only for whole
    blocks shows. Not when the spec says ``vary_sizes = false`` itself or pins the size
    (an inferred spec's ``vary_sizes = false`` only says its values were chosen for it; a
    baseline that misbehaves on the extra set has it dropped)."""
    if not spec.vary_sizes and spec.origin != "inferred":
        return []
    bx = int(spec.block[0])
    step = bx * MULTIPLE_OF // int(np.gcd(bx, MULTIPLE_OF))
    base = spec.scalar_values()
    ov: dict = {}
    for name in spec.size_params():
        if spec.param(name).pinned:
            continue
        if any(int(o.get(name, base[name])) % step == 0 and int(o.get(name, base[name])) > 0 for o in planned):
            continue
        m = (int(base[name]) // step) * step
        if m >= step:
            ov[name] = m
    return [ov] if ov else []


def input_plan(spec: LaunchSpec, sets: int, rng: np.random.Generator) -> list[dict]:
    """Scalar overrides of every input set the check runs: ``sets`` main sets
    (:func:`size_variants`), the small tail sets (:func:`tail_variants`), and a whole-block
    set when none of those has one (:func:`multiple_variant`)."""
    planned = size_variants(spec, sets, rng) + tail_variants(spec, rng)
    return planned + multiple_variant(spec, planned)
