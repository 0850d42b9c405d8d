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
kernel did not write is recognisable and cannot match by accident; the candidate's launches
start from :data:`POISONS` in turn (NaN, random bits, nvcc's own results). Every buffer gets a
guard zone of :data:`GUARD_BYTES` random canary bytes on each side.

The input plan (:func:`input_plan`) is the same whatever the spec's origin: main sets, tail
sets for every residue mod 8 (and 15 mod 16), one large set (:class:`LargeTarget`,
per backend) and a whole-block set where the large one is not run; free float scalars get
``-a``, 0 and -0.0, and values with a full random significand (:func:`inexact_float`).

Aliased sets (:func:`alias_layouts`, :func:`aliased_set`) lay one written buffer inside the
allocation of another (in place, shifted by one element, in the middle of a larger input), for
the check's launches whose buffers overlap (superopt.judge.alias_check).
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field, replace
from typing import Union

import numpy as np

from superopt.specs.launch_spec import ElemType, LaunchSpec, SpecError, elem_type, eval_expr

__all__ = [
    "GUARD_BYTES", "InputSet", "misalign", "misalign_bytes", "fresh_seed", "make_rng", "generate", "poison", "complement_poison",
    "poison_unlike", "make_guards", "make_input_set", "FLOAT_DISTS", "INT_DISTS",
    "default_distribution", "float_specials", "is_nan_bits", "size_variants", "tail_variants",
    "free_scalars", "multiple_variant", "input_plan", "snapshot_array", "extra_sizes", "large_variant",
    "LargeTarget", "CPU_LARGE", "InputPlan", "PlannedSet", "inexact_float", "work_growth", "is_inferred",
    "POISONS", "candidate_poison", "TAIL_RESIDUES", "MAX_ALIAS_LAYOUTS", "AliasLayout", "alias_layouts",
    "one_thread_sizes", "AliasGeometry", "alias_geometry", "union_bytes", "union_view", "normalize_alias",
    "aliased_set",
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
        return x.astype(et.dtype, copy=False)           # x is the caller's own temporary


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


# From this many elements on, a buffer is drawn in its own width (integers in the narrowest type
# that holds the range, floats in float32 for an f32 buffer): the same distributions, another
# stream of numbers. numpy draws bounded integers and floats in the width it is asked for, and a
# captured buffer of 64 Mi elements drawn as int64 (float64) and narrowed took 0.1 s per array on
# the H200's host, several times what drawing it narrow takes (the economy bench's tune build,
# 2026-12-04: 242 draws, 24 s of one compilation's 89). Smaller buffers keep the earlier stream,
# so inputs recorded from a seed (tests/emulator's corpus golden cases) stay what they were.
NARROW_DRAW_ELEMENTS = 1 << 20


def _draw_dtype(lo: int, hi: int, n: int):
    """The integer type [lo, hi) is drawn in for ``n`` elements (:data:`NARROW_DRAW_ELEMENTS`)."""
    if n < NARROW_DRAW_ELEMENTS:
        return np.int64 if hi <= (1 << 62) else np.uint64
    for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64):
        info = np.iinfo(t)
        if info.min <= lo and hi - 1 <= info.max:
            return t
    return np.uint64


def _gen_ints(et: ElemType, n: int, dist: str, rng: np.random.Generator, env: dict) -> np.ndarray:
    lo_t, hi_t = _int_bounds(et)
    name, _, arg = dist.partition(":")
    if name in ("uniform_small", "uniform") and not arg:
        lo, hi = (-8, 8) if et.kind == "int" else (0, 16)
        return rng.integers(lo, hi, size=n, dtype=_draw_dtype(lo, hi, n)).astype(et.dtype)
    if name in ("uniform", "index"):
        lo, hi = _parse_range(arg, env)
        if hi <= lo:
            raise SpecError(f"distribution {dist!r}: empty range [{lo}, {hi}) with {env}")
        if lo < lo_t or hi - 1 > hi_t:
            raise SpecError(f"distribution {dist!r}: [{lo}, {hi}) does not fit {et.name}")
        return rng.integers(lo, hi, size=n, dtype=_draw_dtype(lo, hi, n)).astype(et.dtype)
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
        if et.name == "f32" and n >= NARROW_DRAW_ELEMENTS and all(abs(v) < 1e30 for v in (lo, hi)):
            # drawn in float32 (as wide as the buffer holds; four times faster at captured sizes)
            x = rng.random(n, dtype=np.float32)
            x *= np.float32(hi - lo)
            x += np.float32(lo)
            return np.minimum(x, np.nextafter(np.float32(hi), np.float32(lo)))      # [lo, hi)
        x = rng.uniform(lo, hi, n)
    elif name == "positive":
        narrow = et.name == "f32" and n >= NARROW_DRAW_ELEMENTS
        if narrow:
            x = rng.random(n, dtype=np.float32)
            np.subtract(np.float32(1), x, out=x)                                               # (0, 1]
            big = rng.random(n, dtype=np.float32) < 0.1
        else:
            x = 1.0 - rng.random(n)                                                           # (0, 1]
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

def random_bits(n: int, bits_dtype, rng: np.random.Generator) -> np.ndarray:
    """``n`` words of random bits (a new, writable array). From :data:`NARROW_DRAW_ELEMENTS`
    on they are drawn as words (another stream of numbers): ``rng.bytes``, its copy and the
    masks into new arrays made a captured output's poison slow (64 Mi floats: 0.55 s on this
    project's CPU machine, 2026-12-04, ``bench.judge.draw_cost``; as words, masked in place, 0.17 s)."""
    if n >= NARROW_DRAW_ELEMENTS:
        return rng.integers(0, np.iinfo(bits_dtype).max, size=n, dtype=bits_dtype, endpoint=True)
    return np.frombuffer(rng.bytes(n * np.dtype(bits_dtype).itemsize), dtype=bits_dtype).copy()


def poison(et: Union[ElemType, str], n: int, rng: np.random.Generator) -> np.ndarray:
    """A fresh poison pattern: quiet NaNs with random payloads, or random int bits."""
    if isinstance(et, str):
        et = elem_type(et)
    raw = random_bits(n, et.bits_dtype, rng)
    if et.is_float:
        sign, exp_mask, man_mask, quiet = _float_layout(et)
        t = et.bits_dtype.type
        raw &= t(sign | man_mask)
        raw |= t(exp_mask | quiet)
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
        r = random_bits(p.size, et.bits_dtype, rng)
        e = r >> t(et.man_bits)
        e &= t(7)                                             # 0..7
        e += t(bias - 4)
        e <<= t(et.man_bits)
        r &= t(sign | man_mask)
        r |= e
        return r.view(et.dtype)
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


def make_guards(rng: np.random.Generator, extra: int = 0) -> tuple[bytes, bytes]:
    """Random canaries before and after a buffer: :data:`GUARD_BYTES` each, ``extra`` more in a
    misaligned set (:func:`misalign`: the buffer then starts that far past an aligned boundary)."""
    n = GUARD_BYTES + int(extra)
    g = rng.integers(0, 256, size=2 * n, dtype=np.uint8).tobytes()
    return g[:n], g[n:]


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
    kind: str = "main"          # what the set is for: main | tail | whole blocks | large | aliased
    # an aliased set (:func:`aliased_set`): one buffer laid out inside another's allocation
    alias: "AliasLayout | None" = None
    # a misaligned set (:func:`misalign`): every buffer starts this many bytes past an aligned
    # boundary (its guard zones are that much longer; the allocations stay aligned)
    misaligned: int = 0

    @property
    def scalars(self) -> dict:
        return self.spec.scalar_values()

    def sizes(self) -> dict[str, int]:
        return {b.name: b.length for b in self.spec.buffers}

    def describe(self) -> dict:
        d = {"set": self.index, "label": self.label, "kind": self.kind, "seed": self.seed, "scalars": self.scalars,
             "grid": list(self.spec.grid), "block": list(self.spec.block),
             "lengths": self.sizes(), "distributions": dict(self.distributions)}
        if self.alias is not None:
            d["alias"] = self.alias.to_dict()
        if self.misaligned:
            d["misaligned_bytes"] = self.misaligned
        return d

    @property
    def guard_bytes(self) -> int:
        """The length of each guard zone of this set's buffers."""
        return GUARD_BYTES + self.misaligned

    def with_outputs(self, outputs: dict[str, np.ndarray], rng: np.random.Generator, tag: str = "") -> "InputSet":
        """Same inputs, new initial output contents and fresh guard canaries (an aliased set:
        made consistent again, :func:`normalize_alias`)."""
        data = dict(self.data)
        data.update(outputs)
        guards = {name: make_guards(rng, self.misaligned) for name in self.guards}
        out = replace(self, data=data, guards=guards, run_tag=tag)
        return normalize_alias(out) if out.alias is not None else out


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
                   label: str | None = None, program_data: bool | None = None, kind: str = "main",
                   rotation: int | None = None) -> InputSet:
    """Generate one input set for ``spec`` (resolved with ``scalars`` overrides).

    ``distributions`` overrides buffer distributions by name; ``auto`` buffers get the
    rotation of :func:`default_distribution` for ``index``. With a snapshot in the spec
    (``spec.snapshot``), set 0 (or ``program_data=True``) starts every buffer that is not
    output-only from the program's own data; buffers of distribution ``snapshot`` start from
    it in every set. ``kind``: what the set is for (:class:`PlannedSet`), named in its label.
    ``rotation``: the position in the rotation of ``auto`` distributions (default ``index``).
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
            d = default_distribution(et, index if rotation is None else rotation)
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
        label = f"set {index}" + (f", {kind}" if kind != "main" else "") + (f" ({sizes})" if sizes else "")
    return InputSet(index=index, label=label, seed=seed, spec=rs, data=data, guards=guards,
                    distributions=dists, kind=kind)


# --------------------------------------------------------------------------- free scalars

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


def _bits_to_float(bits: int, et: ElemType) -> float:
    """The value of the ``et`` bit pattern ``bits``, as a Python float (exact)."""
    if et.name == "bf16":
        return float(np.array([bits << 16], np.uint32).view(np.float32)[0])
    return float(np.array([bits], et.bits_dtype).view(et.dtype)[0])


def inexact_float(et: ElemType, near: float, rng: np.random.Generator, spread: int = 2) -> float:
    """A value of type ``et`` whose significand uses every bit (random, lowest bit set), of
    random sign, within a factor ``2**spread`` of ``|near|`` (1.5 where ``near`` is 0 or not
    finite). Products with it are inexact for almost every operand, so a rewrite that rounds a
    product once more than nvcc's code (``mul.rn`` + ``add.rn`` for an ``fma.rn``) differs in
    many elements; a dyadic value (2.0, -2.0, 0.0, -0.0) keeps every ``a*x`` exact and hides it."""
    a = abs(float(near))
    if a == 0.0 or not math.isfinite(a):
        a = 1.5
    bias = (1 << (et.exp_bits - 1)) - 1
    e = math.frexp(a)[1] - 1 + int(rng.integers(-spread, spread + 1))
    e = min(max(e, 1 - bias), bias)                      # a normal number
    man = int(rng.integers(0, 1 << et.man_bits)) | 1
    sign = int(rng.integers(0, 2))
    return _bits_to_float((sign << (8 * et.size - 1)) | ((e + bias) << et.man_bits) | man, et)


def _free_value(s, i: int, rng: np.random.Generator):
    """Main set ``i``'s value of free scalar ``s``. Floats: ``-a``, ``0.0``, ``-0.0`` in sets
    1, 2, 3 whatever the seed (a rewrite that folds ``a``, or is wrong only for its sign or for
    a zero, meets them in a check of 4 sets), then values with a full random significand near
    ``a`` and far above it (:func:`inexact_float`). Ints: zero, one, other magnitudes."""
    v = s.value
    if s.elem.is_float:
        a = float(v) if v else 1.5
        k = (i - 1) % 5
        if k < 3:
            return (-a, 0.0, -0.0)[k]
        if k == 3:
            return inexact_float(s.elem, a, rng)
        return inexact_float(s.elem, a * float(rng.uniform(100, 5000)), rng, spread=0)
    v = int(v)
    if v > 1:
        choices = [0, 1, v // 2, v - 1]
    elif v in (0, 1):
        choices = [1 - v, v]
    else:
        choices = [-1, 0, v // 2 or v]
    return choices[(i - 1) % len(choices)]


# --------------------------------------------------------------------------- sizes

# Vector widths (elements) and unroll factors the passes version on: sizes in the extra
# "tail" sets cover every residue modulo 8 and the residue 15 modulo 16, and one main set is
# an exact multiple of the block and of 16, so a rewrite that is wrong only for one residue
# (or only when nothing is left over) meets an input that shows it.
TAIL_RESIDUES = (0, 1, 2, 3, 4, 5, 6, 7, 15)
MULTIPLE_OF = 16
# the largest buffer of a tail set holds at most max(this, two blocks + 16) elements: a spec with
# several sizes (w x h, GEMM's M, N, K) gets them all smaller, so that nine tail sets stay cheap
TAIL_MAX_ELEMENTS = 4096


@dataclass(frozen=True)
class LargeTarget:
    """The one large input set a backend runs (:func:`large_variant`): its largest buffer
    reaches ``elements`` elements (indices past 2^16 and 2^17 on the CPU emulator, where
    16-bit index arithmetic or a rewrite wrong only for large ``i`` shows), within
    ``max_bytes`` of buffers and ``max_threads`` threads, its work (the product of the size
    parameters) at most ``max_growth`` times that of the spec's own sizes. Whether nvcc's own
    launch there is cheap enough is decided by the check from nvcc's launches on the other
    sets: its predicted time may be ``time_factor`` x their slowest launch, or ``rest_factor``
    x all of them together (both grow with the machine's load alike, so the choice does not
    depend on it), or ``max_seconds`` whatever they took."""
    elements: int = (1 << 17) + (1 << 10)
    max_growth: float = 64.0
    max_bytes: int = 64 << 20
    max_threads: int = 1 << 22
    time_factor: float = 3.0
    rest_factor: float = 1.0
    max_seconds: float = 0.0


CPU_LARGE = LargeTarget()


def is_inferred(spec: LaunchSpec) -> bool:
    """The spec came from inference (its sizes are the ones the tracer followed)."""
    return str(spec.origin or "").startswith("inferred")


def _size_value(v: int, i: int, bx: int, rng: np.random.Generator) -> int:
    step = bx * MULTIPLE_OF // np.gcd(bx, MULTIPLE_OF)
    if i % 3 == 1 and v >= step:
        return int((v // step) * step)                  # an exact multiple of block and of 16
    if i % 3 == 2:
        cand = v - int(rng.integers(1, max(2, min(bx, v))))   # a little smaller, not a multiple
    else:
        cand = int(rng.integers(1, max(2, min(v, 2 * bx))))   # part of one or two blocks
    if cand % bx == 0 and cand > 1:
        cand -= 1
    return max(1, cand)


def _varied_sizes(spec: LaunchSpec) -> list[str]:
    """Size parameters the main sets may give other values: the spec lets sizes vary, and the
    parameter has no explicit ``values`` and is not pinned."""
    if not spec.vary_sizes:
        return []
    return [s.name for s in spec.scalars
            if s.name in spec.size_params() and not s.values and not s.pinned]


def extra_sizes(spec: LaunchSpec) -> dict[str, int]:
    """Size parameters the extra sets (tails, whole blocks, large) give their own values, each
    with the multiple its values keep. An explicit spec: those :func:`_varied_sizes` allows
    (multiple 1; none where it says ``vary_sizes = false``). An inferred spec: every unpinned
    size parameter, its ``values`` being only the sizes the tracer followed (the check proves
    the extra ones in bounds with the tracer before it runs them: superopt.judge.size_proof),
    with the greatest common divisor of those values when there are several (inference makes
    sizes ``m * prime`` when the kernel's vector accesses or warp collectives need multiples
    of ``m``)."""
    if spec.vary_sizes:
        return {n: 1 for n in _varied_sizes(spec)}
    if not is_inferred(spec):
        return {}
    out = {}
    sizes = set(spec.size_params())
    for s in spec.scalars:
        if s.name in sizes and not s.pinned and int(s.value) >= 1:
            vals = {int(s.value), *(int(v) for v in (s.values or ()))}
            out[s.name] = max(1, math.gcd(*vals)) if len(vals) > 1 else 1
    return out


def size_variants(spec: LaunchSpec, count: int, rng: np.random.Generator) -> list[dict]:
    """Scalar overrides for ``count`` main input sets: the spec's values first; then sizes
    that are exact multiples of the block, a little smaller and not multiples, or small (never
    larger than the spec's, so a fixed grid still covers them); explicit ``values`` lists of
    scalars when given; and fresh values of the free scalars (:func:`_free_value`)."""
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


def _largest(spec: LaunchSpec, ov: dict) -> int | None:
    try:
        rs = spec.resolved(ov)
    except SpecError:
        return None
    return max((int(b.length) for b in rs.buffers), default=0)


def tail_variants(spec: LaunchSpec, rng: np.random.Generator | None = None) -> list[dict]:
    """Overrides for the small "tail" sets: every size parameter of :func:`extra_sizes` at
    ``m * (16k + r)`` for each residue ``r`` of :data:`TAIL_RESIDUES` (``m`` the multiple it
    keeps; ``16k + r`` up to two blocks past 16, at most the spec's value); with several size
    parameters all ``k`` shrink together until the largest buffer holds at most
    ``max(TAIL_MAX_ELEMENTS, two blocks + 16)`` elements. Every residue gets its own tail set,
    even one a main set's size has: a main set may hide it (``a = 0`` there, values of 2^40).
    Deterministic (the check proves an inferred spec's tail sizes once and reuses the proof);
    empty when no size may vary. ``rng`` is not used (kept for callers that pass one)."""
    sizes = extra_sizes(spec)
    if not sizes:
        return []
    base = spec.scalar_values()
    reach = 2 * max(spec.block) + MULTIPLE_OF
    budget = max(TAIL_MAX_ELEMENTS, 2 * spec.threads + MULTIPLE_OF)
    out: list[dict] = []
    for r in TAIL_RESIDUES:
        ks: dict[str, int] = {}
        for name, m in sizes.items():
            units = int(base[name]) // m
            top = min(units, max(reach // m, MULTIPLE_OF + r))
            k = max(0, (top - r) // MULTIPLE_OF)
            if 1 <= k * MULTIPLE_OF + r <= units:
                ks[name] = k
        if not ks:
            continue
        f = 1.0
        while True:
            scaled = {n: (max(1 if k else 0, int(k * f)) if f < 1 else k) for n, k in ks.items()}
            ov = {n: sizes[n] * (k * MULTIPLE_OF + r) for n, k in scaled.items() if k * MULTIPLE_OF + r >= 1}
            big = _largest(spec, ov)
            if big is None or big <= budget or all(k <= 1 for k in scaled.values()):
                break
            f *= 0.7
        if big is not None and ov and ov not in out:
            out.append(ov)
    return out


def multiple_variant(spec: LaunchSpec, planned: list[dict]) -> list[dict]:
    """One more set when no planned set gives a size parameter a value that is an exact
    multiple of block.x and of 16 (e.g. an inferred spec with its own list of sizes): the
    largest such multiple not above the spec's value, so that code wrong only for whole
    blocks shows. Not when the spec says ``vary_sizes = false`` itself or pins the size (an
    inferred spec's ``vary_sizes = false`` only says its values were chosen for it: the check
    proves the extra size in bounds first, superopt.judge.size_proof)."""
    if not spec.vary_sizes and not is_inferred(spec):
        return []
    keep = extra_sizes(spec) if not spec.vary_sizes else {}
    bx = int(spec.block[0])
    base = spec.scalar_values()
    ov: dict = {}
    for name in spec.size_params():
        if spec.param(name).pinned:
            continue
        step = math.lcm(bx, MULTIPLE_OF, keep.get(name, 1))
        if any(int(o.get(name, base[name])) % step == 0 and int(o.get(name, base[name])) > 0 for o in planned):
            continue
        m = (int(base[name]) // step) * step
        if m >= step:
            ov[name] = m
    return [ov] if ov else []


def _type_max(spec: LaunchSpec, name: str) -> int:
    et = spec.param(name).elem
    bits = 8 * et.size
    return (1 << (bits - 1)) - 1 if et.kind == "int" else (1 << bits) - 1


def _fits(spec: LaunchSpec, ov: dict, target: LargeTarget):
    """(largest buffer, total bytes, threads) of the launch at ``ov``, or None past a limit of
    ``target`` or of a launch (grid y and z up to 65535)."""
    try:
        rs = spec.resolved(ov)
    except SpecError:
        return None
    threads = math.prod(rs.grid) * rs.threads
    nbytes = sum(b.nbytes for b in rs.buffers)
    if (threads > target.max_threads or nbytes > target.max_bytes or rs.grid[0] > (1 << 31) - 1
            or rs.grid[1] > 65535 or rs.grid[2] > 65535):
        return None
    return max((int(b.length) for b in rs.buffers), default=0), nbytes, threads


def large_variant(spec: LaunchSpec, target: LargeTarget = CPU_LARGE) -> dict | None:
    """Overrides for the one large input set: every size parameter of :func:`extra_sizes`
    scaled by one factor, each an exact multiple of block.x, of 16 and of the multiple it keeps
    (so the large set is also a whole-block set, :func:`multiple_variant`: the tails cover the
    residues), the smallest factor that makes the largest buffer reach ``target.elements``, within the
    target's bytes, threads and work growth (:class:`LargeTarget`) and the parameters'
    integer ranges. None when the spec's own sizes already reach it (the main sets cover it),
    when no size may vary, or when the target cannot be reached within those limits (a set
    that does not reach it would cost without showing what it is for). Deterministic."""
    sizes = extra_sizes(spec)
    if not sizes:
        return None
    base = {n: int(v) for n, v in spec.scalar_values().items() if n in sizes}
    start = _largest(spec, {})
    if start is None or start >= target.elements:
        return None

    bx = int(spec.block[0])

    def at(t: float):
        ov = {}
        for name, m in sizes.items():
            step = math.lcm(bx, MULTIPLE_OF, m)
            val = step * max(1, math.ceil(base[name] * t / step))
            if val > _type_max(spec, name):
                return None
            ov[name] = max(val, base[name])
        growth = math.prod(ov[n] / base[n] for n in ov)
        if growth > target.max_growth:
            return None
        got = _fits(spec, ov, target)
        return None if got is None else (ov, got[0])

    def boundary(lo: float, hi: float, ok) -> tuple[float, float]:
        """(last factor not ok, first ok) between ``lo`` (not ok) and ``hi`` (ok), to a thousandth."""
        while hi - lo > 1e-3 * hi:
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        return lo, hi

    def reaches(t: float) -> bool:
        g = at(t)
        return g is not None and g[1] >= target.elements

    lo, t = 1.0, 2.0                            # lo: within every limit, short of the target
    while not reaches(t):
        if at(t) is None:                       # past a limit first: the largest factor within them
            t = boundary(lo, t, lambda x: at(x) is None)[0]
            if not reaches(t):
                return None
            break
        lo, t = t, 2 * t
        if t > 2.0 ** 40:
            return None
    g = at(boundary(lo, t, reaches)[1])
    return None if g is None else g[0]


def work_growth(spec: LaunchSpec, ov: dict) -> float:
    """How many times the spec's work the overrides ``ov`` give it, estimated as the product
    of the size parameters' growth (exact for element-wise kernels and for loops over sizes:
    ``n``, ``w*h``, GEMM's ``M*N*K``)."""
    base = spec.scalar_values()
    return math.prod(max(1, int(v)) / max(1, int(base[n])) for n, v in ov.items() if n in spec.size_params())


# --------------------------------------------------------------------------- the plan

@dataclass
class PlannedSet:
    """One input set of the plan: its scalar overrides and what it is for (``main``, ``tail``,
    ``whole blocks``, ``large``). ``fallback``: run only when the large set is not (a large
    set is a whole-block size too)."""
    overrides: dict
    kind: str = "main"
    fallback: bool = False

    def rotation(self, index: int) -> int:
        """Where set ``index`` is in the rotation of ``auto`` distributions. Main sets: their
        index (every distribution, specials and large magnitudes included). Tail sets: the
        ordinary ones in turn (floats N(0, 1), U[-1, 1), positive; ints each of theirs); the
        whole-block and the large set: the first (floats N(0, 1)). What those sets are for (one
        element past the last whole vector, indices past 2^17) must not be hidden by values that
        absorb a small error (``y + 1`` on y = 2^40, a NaN either way)."""
        if self.kind == "tail":
            return (0, 2, 4)[index % 3]
        return 0 if self.kind in ("whole blocks", "large") else index

    @property
    def extra(self) -> bool:
        return self.kind != "main"


@dataclass
class InputPlan:
    sets: list[PlannedSet]
    notes: list[str] = field(default_factory=list)


def _sizes_text(ov: dict, spec: LaunchSpec) -> str:
    sizes = set(spec.size_params())
    return ", ".join(f"{k}={v}" for k, v in ov.items() if k in sizes) or "the spec's sizes"


def input_plan(spec: LaunchSpec, sets: int, rng: np.random.Generator, *, large: LargeTarget | None = CPU_LARGE,
               prove=None) -> InputPlan:
    """Every input set the check runs, the same plan whatever the spec's origin: ``sets``
    main sets (:func:`size_variants`), the small tail sets (:func:`tail_variants`), a
    whole-block set when none of those has one (:func:`multiple_variant`) and one large set
    (:func:`large_variant` at ``large``; None: none). Free float scalars get a value with a
    full random significand near the spec's in every extra set (:func:`inexact_float`).

    ``prove(overrides)``: None when the spec's buffers are proven to cover the launch at those
    sizes, else the reason (an inferred spec: superopt.judge.size_proof); a tail or whole-block
    set it does not prove is left out with a note. The large set comes last, as candidates in
    order (at ``large``, then at the CPU's smaller target when ``large`` is larger): the check
    runs the first that it proves and finds affordable, and proves it only then (a proof at
    2^17 costs a trace of as many threads). A large set is a whole-block size: the whole-block
    set is then its ``fallback``, run only when no large set is (superopt.judge.check)."""
    plan = InputPlan([PlannedSet(ov) for ov in size_variants(spec, sets, rng)])

    def admit(ov: dict, kind: str) -> bool:
        why = prove(ov) if prove is not None else None
        if why:
            plan.notes.append(f"no {kind} set at {_sizes_text(ov, spec)}: the inferred spec's buffers are not "
                              f"proven to cover that launch ({why})")
        return not why

    for ov in tail_variants(spec):
        if admit(ov, "tail"):
            plan.sets.append(PlannedSet(ov, "tail"))
    targets = [large] if large is not None else []
    if large is not None and large.elements > CPU_LARGE.elements:
        targets.append(replace(large, elements=CPU_LARGE.elements))
    bigs = []
    for t in targets:
        ov = large_variant(spec, t)
        if ov is not None and ov not in [b.overrides for b in bigs]:
            bigs.append(PlannedSet(ov, "large"))
    for ov in multiple_variant(spec, [p.overrides for p in plan.sets]):
        if admit(ov, "whole-block"):
            plan.sets.append(PlannedSet(ov, "whole blocks", fallback=bool(bigs)))
    plan.sets.extend(bigs)
    floats = [s for s in free_scalars(spec) if s.elem.is_float]
    for p in plan.sets:
        if p.extra:
            for s in floats:
                p.overrides[s.name] = inexact_float(s.elem, float(s.value), rng)
    return plan


# --------------------------------------------------------------------------- candidate poisons

# The candidate's two launches of set i start their outputs from POISONS[i % 3] and
# POISONS[(i + 1) % 3]: every set has one launch whose poison no element of nvcc's results
# equals (an element the candidate fails to write shows), and over the sets each launch meets
# NaN, random bits and nvcc's own results (code right only while its output holds NaN fails).
POISONS = ("nan", "bits", "baseline")


def candidate_poison(kind: str, ref: np.ndarray, et: Union[ElemType, str], rng: np.random.Generator,
                     equal=None) -> np.ndarray:
    """Initial contents of an output buffer for a candidate's launch. ``nan``: quiet NaNs with
    random payloads (floats; ints random bits), :func:`poison_unlike`. ``bits``: random bits
    (floats of every kind, NaN rarely). ``baseline``: nvcc's own results ``ref``. For ``nan``
    and ``bits`` no element equals ``ref`` (``equal(ref, p)``: the check's comparison under its
    policy; default: bitwise, any NaN equal to any NaN)."""
    if isinstance(et, str):
        et = elem_type(et)
    if kind not in POISONS:
        raise ValueError(f"unknown poison {kind!r} (known: {', '.join(POISONS)})")
    if kind == "baseline":
        return np.array(ref, copy=True)
    if kind == "nan" or not et.is_float:       # ints: random bits either way
        p = poison_unlike(ref, et, rng)
        if kind == "nan" or equal is None:
            return p
    else:
        p = np.frombuffer(rng.bytes(ref.size * et.size), dtype=et.bits_dtype).copy().view(et.dtype)
    same = equal(ref, p) if equal is not None else (
        (_bits(ref, et) == _bits(p, et)) | (is_nan_bits(ref, et) & is_nan_bits(p, et)))
    if same.any():
        fix = poison_unlike(ref[same], et, rng)
        p = p.copy()
        p[same] = fix
    return p


# --------------------------------------------------------------------------- aliased layouts

# Every input set of the plan gives each pointer parameter its own allocation, so a candidate
# that assumes its buffers do not overlap would pass; a program may pass overlapping pointers
# (``scale(x, x)``, ``y = x + 1``), and nvcc's code stays right for them. The check therefore
# also runs a few *aliased* sets (superopt.judge.check): one written buffer laid out inside
# the allocation of another. At most this many layouts per kernel:
MAX_ALIAS_LAYOUTS = 6


@dataclass(frozen=True)
class AliasLayout:
    """The written buffer ``buffer`` laid out inside the allocation of ``onto``: its view starts
    ``offset`` bytes after ``onto``'s start (negative: before it). ``kind``: ``in place`` (the same
    start, as ``scale(x, x)``), ``shift`` (``shift`` elements of ``buffer``'s type, e.g. +1 and -1:
    ``y = x + 1``), ``middle`` (inside a larger input, about its middle). Offsets keep natural
    alignment (a multiple of both element sizes) and ``align``: the widest access the kernel
    makes (:func:`superopt.judge.alias_check.access_alignment`; 16 for ``ld.global.v4.f32``),
    since a program cannot pass a pointer that its kernel's vector accesses would fault on. Then
    a shift is by that many bytes and the edge layouts share that many. ``offset`` is None until
    :meth:`at` resolves the layout for a set's lengths."""
    buffer: str
    onto: str
    kind: str
    shift: int = 0                 # elements of `buffer`'s type from `onto`'s start
    offset: int | None = None      # bytes, once resolved
    align: int = 1                 # bytes every offset is a multiple of

    def at(self, rs: LaunchSpec) -> "AliasLayout | None":
        """This layout for the resolved spec ``rs`` (lengths known), or None when it has no
        meaning there (the middle of an input that is not larger than the buffer; an edge layout
        whose aligned offset would be the in-place one)."""
        w, h = rs.param(self.buffer), rs.param(self.onto)
        step = math.lcm(w.elem.size, h.elem.size, max(1, int(self.align)))
        if self.kind == "middle":
            off = ((h.nbytes - w.nbytes) // 2) // step * step
            if off <= 0:
                return None
            return replace(self, shift=off // w.elem.size, offset=off)
        if self.kind in ("last", "first"):
            # one element (or aligned step) in common: W's first on H's last, or W's last on H's
            # first (the edge a launch-time range check gets wrong when it is off by one)
            if w.elem.size != h.elem.size:
                return None
            off = (h.nbytes - h.elem.size) // step * step if self.kind == "last" else \
                -((w.nbytes - w.elem.size) // step * step)
            if off == 0:
                return None
            return replace(self, shift=off // w.elem.size, offset=off)
        off = self.shift * (step if self.shift else w.elem.size)
        return replace(self, shift=off // w.elem.size, offset=off)

    def describe(self) -> str:
        text = self._describe()
        return text + (f" ({self.align}-byte aligned: the kernel's widest access)" if self.align > 1 else "")

    def _describe(self) -> str:
        if self.kind == "in place":
            return f"{self.buffer} aliased onto {self.onto} at the same start (in place)"
        if self.kind == "middle":
            where = f" (+{self.shift} elements)" if self.offset is not None else ""
            return f"{self.buffer} aliased onto the middle of {self.onto}{where}"
        if self.kind == "last":
            return f"{self.buffer} starting on the last element of {self.onto}"
        if self.kind == "first":
            return f"{self.buffer} ending on the first element of {self.onto}"
        return f"{self.buffer} aliased onto {self.onto} at {self.shift:+d} element{'s' if abs(self.shift) != 1 else ''}"

    def to_dict(self) -> dict:
        return {"layout": self.describe(), "buffer": self.buffer, "onto": self.onto, "kind": self.kind,
                "shift_elements": self.shift, "offset_bytes": self.offset}


def alias_layouts(spec: LaunchSpec, cap: int = MAX_ALIAS_LAYOUTS, align: int = 1) -> list[AliasLayout]:
    """The aliased layouts the check runs for ``spec`` (at most ``cap``; none for a kernel
    without a written buffer (``out``/``inout``) and another buffer parameter). For the first
    written buffer W that has another buffer H of the same element size (H: an input before an
    output, then one of W's length expression, then parameter order): W on H in place, at +1
    and at -1 element, W's first element on H's last and W's last on H's first (one element in
    common: the edge an off-by-one range check misses); then W on the middle of the largest input larger than W (at the spec's
    sizes; any element size). Buffers reached only through a struct (``embedded``) are left
    out. ``align``: the bytes every offset is a multiple of (:class:`AliasLayout`)."""
    bufs = [b for b in spec.buffers if not b.embedded]
    written = [b for b in bufs if b.direction in ("out", "inout")]
    if not written or len(bufs) < 2:
        return []
    try:
        rs = spec.resolved()
        nbytes = {b.name: b.nbytes for b in rs.buffers}
    except SpecError:
        nbytes = {}
    out: list[AliasLayout] = []
    for w in written:
        hosts = [h for h in bufs if h.name != w.name and h.elem.size == w.elem.size]
        if not hosts:
            continue
        hosts.sort(key=lambda h: (h.direction == "out", str(h.length_expr) != str(w.length_expr)))
        h = hosts[0]
        a = _wider(align, w, h)
        out = [AliasLayout(w.name, h.name, "in place", align=a), AliasLayout(w.name, h.name, "shift", 1, align=a),
               AliasLayout(w.name, h.name, "shift", -1, align=a), AliasLayout(w.name, h.name, "last", align=a),
               AliasLayout(w.name, h.name, "first", align=a)]
        break
    for w in written:
        bigger = [h for h in bufs if h.name != w.name and h.direction != "out"
                  and nbytes.get(h.name, 0) > nbytes.get(w.name, 0) + 2 * math.lcm(w.elem.size, h.elem.size)]
        if bigger:
            h = max(bigger, key=lambda h: nbytes[h.name])
            out.append(AliasLayout(w.name, h.name, "middle", align=_wider(align, w, h)))
            break
    return out[:cap]


def _wider(align: int, *bufs) -> int:
    """``align`` where it asks more than the buffers' element sizes give, else 1 (nothing to add)."""
    return align if align > 1 and any(align % b.elem.size or align > b.elem.size for b in bufs) else 1


def one_thread_sizes(spec: LaunchSpec, ov: dict) -> dict | None:
    """``ov`` with the size parameters that set the grid (all sizes where none does) at their
    smallest value (1, or the multiple their values keep: :func:`extra_sizes`), so that one
    thread of the launch does the work: None when the spec does not let those sizes vary or
    nothing changes. A sized kernel guards its threads (``if (i < n)``), so the others exit."""
    sizes = extra_sizes(spec)
    if not sizes:
        return None
    from superopt.specs.launch_spec import expr_names
    in_grid = {n for g in spec.grid for n in expr_names(g)} & set(sizes)
    pick = in_grid or set(sizes)
    new = dict(ov)
    for n in pick:
        new[n] = sizes[n]
    return None if all(new.get(n) == ov.get(n, spec.scalar_values().get(n)) for n in pick) else new


@dataclass
class AliasGeometry:
    """Where the views of an aliased set lie in the one allocation (the *union*) that holds
    both: ``at[name]`` is each view's byte offset in the union of ``size`` bytes. The overlap
    starts from the bytes of ``winner`` (:func:`normalize_alias`); the elements ``first`` to
    ``stop`` (exclusive) of ``loser`` lie inside the winner's bytes (compared through the
    winner's view); ``overlap`` is that range as a mask over the loser's elements.

    The range is computed, not the mask: a check makes this geometry several times per aliased
    set (packing, unpacking, judging), and at captured sizes a per-element mask made each time
    cost more host time than the launches."""
    size: int
    at: dict
    winner: str
    loser: str
    first: int
    stop: int
    length: int

    @functools.cached_property
    def overlap(self) -> np.ndarray:
        m = np.zeros(self.length, bool)
        m[self.first:self.stop] = True
        return m


def _overlap_range(start: int, es: int, length: int, ws: int, we: int) -> tuple[int, int]:
    """Elements k of a buffer at byte ``start`` (``es`` bytes each, ``length`` of them) whose bytes
    meet [ws, we): start + k*es < we and start + (k+1)*es > ws, as a range [first, stop)."""
    first = min(max((ws - start) // es, 0), length)           # k > (ws - start)/es - 1
    stop = min(max(-((start - we) // es), 0), length)         # k < (we - start)/es
    return first, max(first, stop)


def alias_geometry(s: InputSet) -> AliasGeometry:
    cached = s.__dict__.get("_alias_geometry")
    if cached is not None and cached[0] is s.alias and cached[1] is s.spec:
        return cached[2]
    lay = s.alias
    w, h = s.spec.param(lay.buffer), s.spec.param(lay.onto)
    lo = min(0, lay.offset)
    hi = max(h.nbytes, lay.offset + w.nbytes)
    at = {h.name: -lo, w.name: lay.offset - lo}
    # an input's data is what the overlap holds (a buffer the kernel reads); between two inputs
    # or two outputs, the host's
    winner, loser = (w, h) if (h.direction == "out" and w.direction != "out") else (h, w)
    es = loser.elem.size
    first, stop = _overlap_range(at[loser.name], es, int(loser.length), at[winner.name],
                                 at[winner.name] + winner.nbytes)
    geom = AliasGeometry(size=hi - lo, at=at, winner=winner.name, loser=loser.name, first=first, stop=stop,
                         length=int(loser.length))
    s.__dict__["_alias_geometry"] = (s.alias, s.spec, geom)
    return geom


def union_bytes(s: InputSet, geom: AliasGeometry | None = None) -> np.ndarray:
    """The initial bytes of an aliased set's union: the loser's data, then the winner's over it."""
    geom = geom or alias_geometry(s)
    u = np.zeros(geom.size, np.uint8)
    for name in (geom.loser, geom.winner):
        b = np.ascontiguousarray(s.data[name]).view(np.uint8).reshape(-1)
        u[geom.at[name]:geom.at[name] + b.size] = b
    return u


def union_view(u: np.ndarray, s: InputSet, name: str, geom: AliasGeometry | None = None) -> np.ndarray:
    """Buffer ``name``'s elements in the union bytes ``u`` (a copy)."""
    geom = geom or alias_geometry(s)
    p = s.spec.param(name)
    return np.ascontiguousarray(u[geom.at[name]:geom.at[name] + p.nbytes]).view(p.elem.dtype).copy()


def normalize_alias(s: InputSet) -> InputSet:
    """An aliased set whose ``data`` agrees with its union: the loser's elements in the overlap
    take the winner's bytes, so that each buffer's ``data`` is what the kernel sees through it.
    The overlap thus holds the input's data (an output's poison only where no input covers it)."""
    geom = alias_geometry(s)
    data = dict(s.data)
    data[geom.loser] = union_view(union_bytes(s, geom), s, geom.loser, geom)
    return replace(s, data=data)


def aliased_set(spec: LaunchSpec, seed: int, index: int, overrides: dict, layout: AliasLayout,
                rng: np.random.Generator, spec_floats: bool = False) -> InputSet | None:
    """One aliased input set: fresh inputs at ``overrides`` (free float scalars get a value with a
    full random significand: :func:`inexact_float`; with ``spec_floats`` they keep the spec's
    values), ``layout`` resolved for its lengths, data made consistent (:func:`normalize_alias`).
    None when the layout has no meaning at these sizes (the views would not overlap, or the input
    is not larger)."""
    ov = dict(overrides)
    for sc in free_scalars(spec):
        if sc.elem.is_float and not spec_floats:
            ov[sc.name] = inexact_float(sc.elem, float(sc.value), rng)
    s = make_input_set(spec, seed, index, scalars=ov, kind="aliased", rotation=0)
    lay = layout.at(s.spec)
    if lay is None:
        return None
    sizes = _sizes_text(ov, spec)
    label = f"aliased set {index} ({lay.describe()}; {sizes})"
    s = replace(s, alias=lay, label=label)
    g = alias_geometry(s)
    if g.stop <= g.first:
        return None                      # side by side at these sizes (a buffer of one element at -1)
    return normalize_alias(s)


# --------------------------------------------------------------------------- misaligned buffers

def misalign_bytes(spec: LaunchSpec, widest_access: int) -> int | None:
    """How far past a 16-byte boundary a misaligned set starts every buffer: the least offset
    every buffer's element and nvcc's widest access (``widest_access`` bytes) allow, or None
    where that is 16 or more (nothing narrower than a 16-byte vector to show).

    A ``float*`` parameter may point 4 bytes past a cudaMalloc'd start (``scale(x + 1, n - 1)``):
    nvcc's code cannot assume more, and its scalar accesses run there. A candidate that reads or
    writes it as ``float4`` without testing the pointer at launch faults there (a misaligned
    address: on a GPU a sticky error that ends the program). Every other input set starts each
    buffer 256-aligned, so without this set such a candidate passes."""
    off = max([1, int(widest_access or 1)] + [b.elem.size for b in spec.buffers])
    for b in spec.buffers:
        off = math.lcm(off, b.elem.size)
    return off if off < 16 else None


def misalign(s: InputSet, off: int, rng: np.random.Generator) -> InputSet:
    """``s`` with every buffer starting ``off`` bytes past an aligned boundary (longer front and
    back guard zones: the same allocations on every backend), named so in its label."""
    label = s.label[:-1] + f"; every buffer {off} bytes past a 16-byte boundary)" if s.label.endswith(")") \
        else s.label + f" (every buffer {off} bytes past a 16-byte boundary)"
    return replace(s, misaligned=int(off), label=label,
                   guards={name: make_guards(rng, off) for name in s.guards})
