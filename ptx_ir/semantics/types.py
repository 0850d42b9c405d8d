"""PTX scalar types as numpy dtypes, and immediate operands as typed numpy scalars.

Registers are stored as unsigned integers of their width (``.pred`` as bool); an
instruction reads them through ``.view(natural_dtype(type))``. ``.bf16`` has no numpy
type and is handled as its 16-bit pattern; packed ``.f16x2``/``.bf16x2`` as ``uint32``.
"""
from __future__ import annotations

import struct

import numpy as np

from ptx_ir import types as ptx_types
from ptx_ir.semantics.errors import Unsupported

# natural numpy dtype a semantic function receives/returns for each PTX type
_NATURAL = {
    ".pred": np.bool_,
    ".b8": np.uint8, ".u8": np.uint8, ".s8": np.int8,
    ".b16": np.uint16, ".u16": np.uint16, ".s16": np.int16, ".f16": np.float16,
    ".bf16": np.uint16,
    ".b32": np.uint32, ".u32": np.uint32, ".s32": np.int32, ".f32": np.float32,
    ".f16x2": np.uint32, ".bf16x2": np.uint32, ".u16x2": np.uint32, ".s16x2": np.uint32,
    ".b64": np.uint64, ".u64": np.uint64, ".s64": np.int64, ".f64": np.float64,
}

UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
SINT_OF_SIZE = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
FLOAT_OF_SIZE = {2: np.float16, 4: np.float32, 8: np.float64}


def natural_dtype(t: str) -> np.dtype:
    try:
        return np.dtype(_NATURAL[t])
    except KeyError:
        raise Unsupported(f"type {t}") from None


def has_natural_dtype(t: str) -> bool:
    """Whether the semantics can hold a value of type t in a register (see natural_dtype)."""
    return t in _NATURAL


def _row(t: str):
    """The table row of a type the semantics can hold in a register (one with a natural
    dtype); Unsupported for any other (.b128, .tf32, the fp8 formats, ...)."""
    if t not in _NATURAL:
        raise Unsupported(f"type {t}")
    return ptx_types.TYPES[t]


def type_bits(t: str) -> int:
    return _row(t).bits


def type_size(t: str) -> int:
    return _row(t).size


def is_signed(t: str) -> bool:
    return ptx_types.is_signed(t)


def is_float(t: str) -> bool:
    return ptx_types.is_float(t)


def storage_dtype(t: str) -> np.dtype:
    """Register storage dtype for a declared register type."""
    if t == ".pred":
        return np.dtype(np.bool_)
    if t == ".b128":
        raise Unsupported(".b128 registers")
    return np.dtype(UINT_OF_SIZE[type_size(t)])


def imm_bits(value, text: str, t: str) -> int:
    """The bit pattern (as a Python int of the type's width) of an immediate used as type t."""
    bits = type_bits(t)
    mask = (1 << bits) - 1
    is_hexfloat = text.lstrip("-")[:2] in ("0f", "0F", "0d", "0D")
    if t == ".pred":
        return 1 if value else 0
    if is_float(t) and t not in (".f16x2", ".bf16x2"):
        if is_hexfloat:
            raw = int(value)
            hexdigits = len(text.lstrip("-")) - 2
            if hexdigits == 8 and bits == 64:       # 0f literal used as f64: convert
                raw = struct.unpack("<Q", struct.pack("<d", struct.unpack("<f", struct.pack("<I", raw))[0]))[0]
            elif hexdigits == 16 and bits == 32:    # 0d literal used as f32: round
                raw = int(np.float64(struct.unpack("<d", struct.pack("<Q", raw))[0]).astype(np.float32).view(np.uint32))
            elif hexdigits == 8 and bits == 16:
                f = np.uint32(raw).view(np.float32)
                raw = int(f.astype(np.float16).view(np.uint16)) if t == ".f16" else int(raw >> 16)
            return raw & mask
        f = float(value)
        if bits == 64:
            return struct.unpack("<Q", struct.pack("<d", f))[0]
        if bits == 32:
            return int(np.float64(f).astype(np.float32).view(np.uint32))
        if t == ".f16":
            return int(np.float64(f).astype(np.float16).view(np.uint16))
        from ptx_ir.semantics.fp import f32_to_bf16_bits
        return int(f32_to_bf16_bits(np.array([f], np.float32), "rn")[0])
    if is_hexfloat:                      # float literal used with an integer/bit type
        return int(value) & mask
    if isinstance(value, float):
        if t in (".f16x2", ".bf16x2"):
            raise Unsupported(f"immediate {text} as {t}")
        return int(value) & mask
    return int(value) & mask


def imm_scalar(value, text: str, t: str):
    """An immediate as a numpy scalar of the natural dtype of t."""
    raw = imm_bits(value, text, t)
    if t == ".pred":
        return np.bool_(raw)
    size = type_size(t)
    return UINT_OF_SIZE[size](raw).view(natural_dtype(t))
