"""cvt: conversions between integer and floating-point types, all rounding modes."""
from __future__ import annotations

import numpy as np

from ptx_ir.semantics import fp
from ptx_ir.semantics.errors import Unsupported
from ptx_ir.semantics.types import UINT_OF_SIZE, is_float, natural_dtype, type_size

f16, f32, f64 = np.float16, np.float32, np.float64
u32, u64, i64 = np.uint32, np.uint64, np.int64

_INT_RANGE = {
    ".u8": (0, 255), ".s8": (-128, 127), ".u16": (0, 65535), ".s16": (-32768, 32767),
    ".u32": (0, 2**32 - 1), ".s32": (-2**31, 2**31 - 1), ".u64": (0, 2**64 - 1),
    ".s64": (-2**63, 2**63 - 1),
}
_FMT = {".f16": "f16", ".f32": "f32", ".f64": "f64", ".bf16": "bf16"}


def _float_to_f64(x, t):
    if t == ".bf16":
        return fp.bf16_bits_to_f32(x).astype(f64)
    return np.asarray(x).astype(f64)


def _canon_int_type(t):
    if t.startswith(".b"):
        return ".u" + t[2:]
    return t


def int_to_int(x, dt_, at, sat):
    at, dt_ = _canon_int_type(at), _canon_int_type(dt_)
    x = np.asarray(x)
    src = x.astype(i64) if at != ".u64" else x.astype(u64)
    if sat:
        lo, hi = _INT_RANGE[dt_]
        if at == ".u64":
            r = np.minimum(src, u64(min(hi, 2**64 - 1)))
            return r.astype(natural_dtype(dt_))
        slo, shi = _INT_RANGE[at]
        lo2, hi2 = max(lo, slo), min(hi, shi)
        r = np.clip(src, lo2, hi2)
        if dt_ == ".u64":
            return r.astype(u64)
        return r.astype(natural_dtype(dt_))
    size = type_size(dt_)
    return src.astype(UINT_OF_SIZE[8]).astype(UINT_OF_SIZE[size]).view(natural_dtype(dt_))


def _int_to_exact_pair(x, at):
    """(s, e): float64 s = RN(x) and exact error e (x = s + e), for any integer type."""
    x = np.asarray(x)
    if type_size(at) <= 4:
        return x.astype(f64), np.zeros(x.shape, f64)
    if at in (".s64",):
        hi = (x >> 32).astype(f64) * 4294967296.0
        lo = (x.view(u64) & u64(0xFFFFFFFF)).astype(f64)
    else:
        xu = x.view(u64) if x.dtype != np.dtype(u64) else x
        hi = (xu >> u64(32)).astype(f64) * 4294967296.0
        lo = (xu & u64(0xFFFFFFFF)).astype(f64)
    return fp.two_sum(hi, lo)


def int_to_float(x, dt_, at, mode, ftz, sat):
    at = _canon_int_type(at)
    fmt = _FMT[dt_]
    if type_size(at) <= 4 and not sat and not ftz:
        v = np.asarray(x).astype(f64)                  # exact
        if fmt == "f64":
            return v
        if fmt == "f32" and mode == "rn":
            return v.astype(f32)
        return fp.round_f64(v, fmt, mode)
    s, e = _int_to_exact_pair(x, at)
    if fmt == "f64":
        r = fp.step_directed(s, e, mode)
    else:
        r = fp.round_f64(fp.round_to_odd(s, e), fmt, mode)
    if fmt == "f32":
        if ftz:
            r = fp.ftz(r)
        if sat:
            r = fp.sat(r)
    elif sat and fmt != "bf16":
        r = fp.sat(r)
    return r


def _nan_int(dt_, at):
    """The integer a GPU's conversion gives for NaN (recorded on an H200): 0 from
    f16/bf16/f32 to 32 bits or fewer; the 'integer indefinite' 0x80..0 to 64 bits and from
    f64 (saturated to the destination type where it is narrower)."""
    if type_size(dt_) == 8:
        return 1 << 63
    if at != ".f64":
        return 0
    if dt_ in (".s32", ".u32"):
        return 1 << 31
    if dt_ in (".s16", ".s8"):
        return _INT_RANGE[dt_][0]
    return None          # not recorded: f64 NaN to u8/u16


def float_to_int(x, dt_, at, irnd, ftz):
    dt_ = _canon_int_type(dt_)
    if at == ".f32" and ftz:
        x = fp.ftz(x)
    v = _float_to_f64(x, at)
    nanv = np.isnan(v)
    if nanv.any():
        nv = _nan_int(dt_, at)
        if nv is None:
            raise Unsupported(f"cvt{'.' + irnd}{dt_}{at} of a NaN")
        r = _float_to_int_num(np.where(nanv, 0.0, v), dt_, irnd)
        bits = type_size(dt_) * 8
        return np.where(nanv, UINT_OF_SIZE[type_size(dt_)](nv & ((1 << bits) - 1)).view(natural_dtype(dt_)),
                        r).astype(natural_dtype(dt_))
    return _float_to_int_num(v, dt_, irnd)


def _float_to_int_num(v, dt_, irnd):
    if irnd == "rni":
        r = np.rint(v)
    elif irnd == "rzi":
        r = np.trunc(v)
    elif irnd == "rmi":
        r = np.floor(v)
    elif irnd == "rpi":
        r = np.ceil(v)
    else:
        raise Unsupported(f"cvt rounding .{irnd} from float to integer")
    lo, hi = _INT_RANGE[dt_]
    nan = np.isnan(r)
    r = np.where(nan, 0.0, r)
    if dt_ == ".u64":
        big = r >= 18446744073709551616.0
        neg = r <= 0
        safe = np.where(big | neg, 0.0, r)
        out = safe.astype(u64)
        out = np.where(big, u64(2**64 - 1), out)
        return out.astype(u64)
    if dt_ == ".s64":
        big = r >= 9223372036854775808.0
        small = r < -9223372036854775808.0
        safe = np.where(big | small, 0.0, r)
        out = safe.astype(i64)
        out = np.where(big, i64(2**63 - 1), np.where(small, i64(-2**63), out))
        return out.astype(i64)
    r = np.clip(r, lo, hi)
    return r.astype(i64).astype(natural_dtype(dt_))


def _nan_convert(x, dt_, at):
    """NaN results of float-to-float cvt, as recorded on an H200: to or from f64 the NaN
    keeps its sign and leading payload bits (quieted); bf16 to f32 copies the bits; every
    other conversion gives the canonical NaN of the destination."""
    fmt_d = _FMT[dt_]
    if at == ".bf16" and fmt_d == "f32":
        return (np.asarray(x, np.uint16).astype(np.uint32) << np.uint32(16)).view(f32)
    if at == ".f64" or fmt_d == "f64":
        v = _float_to_f64(x, at) if at != ".f64" else np.asarray(x, f64)
        if at == ".f64" and fmt_d == "f64":
            return fp.quiet64(v)
        if fmt_d == "f64":
            return fp.quiet64(v)             # numpy widening keeps sign and payload
        b = np.asarray(x, f64).view(u64)
        sign = (b >> u64(63)).astype(u32)
        man = b & u64(0x000FFFFFFFFFFFFF)
        if fmt_d == "f32":
            r = (sign << u32(31)) | u32(0x7FC00000) | (man >> u64(29)).astype(u32)
            return r.astype(u32).view(f32)
        if fmt_d == "f16":
            r = (sign.astype(np.uint16) << np.uint16(15)) | np.uint16(0x7E00) | (man >> u64(42)).astype(np.uint16)
            return r.astype(np.uint16).view(np.float16)
        r = (sign.astype(np.uint16) << np.uint16(15)) | np.uint16(0x7FC0) | (man >> u64(45)).astype(np.uint16)
        return r.astype(np.uint16)
    if fmt_d == "f32":
        return np.full(np.shape(x), fp.QNAN_F32.view(f32))
    if fmt_d == "f16":
        return np.full(np.shape(x), fp.QNAN_F16.view(np.float16))
    return np.full(np.shape(x), fp.QNAN_BF16)


def float_to_float(x, dt_, at, rnd, ftz, sat, relu=False):
    """cvt between float types; ``rnd`` is an fp mode (rn/rz/rm/rp), an integer rounding
    (rni/rzi/rmi/rpi, same type only) or None."""
    r = _float_to_float_num(x, dt_, at, rnd, ftz, sat, relu)
    if sat:
        return r
    src_nan = np.isnan(_float_to_f64(x, at))
    if src_nan.any():
        r = np.where(src_nan, _nan_convert(x, dt_, at), r).astype(r.dtype)
    return r


def _float_to_float_num(x, dt_, at, rnd, ftz, sat, relu=False):
    fmt_d = _FMT[dt_]
    if at == ".f32" and ftz:
        x = fp.ftz(x)
    v = _float_to_f64(x, at)
    if rnd in ("rni", "rzi", "rmi", "rpi"):
        v = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd](v)
        mode = "rn"
    else:
        mode = rnd or "rn"
    if relu:
        v = np.where(np.isnan(v), v, np.maximum(v, 0.0))
    if sat:
        v = np.minimum(np.maximum(np.where(np.isnan(v), 0.0, v), 0.0), 1.0) + 0.0
    if fmt_d == "f64":
        r = v
    elif fmt_d == "f32":
        r = fp.f64_to_f32(v, mode)
    elif fmt_d == "f16":
        r = fp.f64_to_f16(v, mode)
    else:
        return fp.f64_to_bf16_bits(v, mode)
    r = fp.canon_nan(np.asarray(r))
    if fmt_d == "f32" and ftz:
        # flushed when the value before rounding is below the smallest normal
        tiny = (np.abs(v) < 2.0 ** -126) & (v != 0)
        if tiny.any():
            r = np.where(tiny, np.where(np.signbit(v), f32(-0.0), f32(0.0)), r)
    return r


def make_cvt(dt_: str, at: str, rnd: str | None, ftz: bool, sat: bool, relu: bool = False):
    """A function converting an array of natural dtype(at) to natural dtype(dt_)."""
    dfl, afl = is_float(dt_), is_float(at)
    if dt_ in (".f16x2", ".bf16x2") or at in (".f16x2", ".bf16x2"):
        raise Unsupported(f"cvt {dt_} {at}")
    if not dfl and not afl:
        if rnd is not None:
            raise Unsupported(f"cvt.{rnd} between integer types")
        return lambda x: int_to_int(x, dt_, at, sat)
    if dfl and not afl:
        if rnd not in ("rn", "rz", "rm", "rp"):
            raise Unsupported(f"cvt to {dt_} from {at} without a rounding mode")
        return lambda x: int_to_float(x, dt_, at, rnd, ftz, sat)
    if afl and not dfl:
        if rnd not in ("rni", "rzi", "rmi", "rpi"):
            raise Unsupported(f"cvt to {dt_} from {at} without an integer rounding mode")
        return lambda x: float_to_int(x, dt_, at, rnd, ftz)
    # float -> float
    narrowing = {"f64": 3, "f32": 2, "f16": 1, "bf16": 1}
    if rnd is None and narrowing[_FMT[dt_]] < narrowing[_FMT[at]]:
        raise Unsupported(f"cvt to {dt_} from {at} without a rounding mode")
    return lambda x: float_to_float(x, dt_, at, rnd, ftz, sat, relu)
