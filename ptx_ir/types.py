"""The one table of PTX scalar types: size, kind, signedness, lanes.

Everything that asks "how wide is ``.bf16x2``?" or "is ``.tf32`` a float?" reads this table:
the parser and printer, the emulator's semantics (which maps each type to a numpy dtype in
:mod:`ptx_ir.semantics.types`), the spec tracer, the passes' loop tools, the judge and the
launch-spec format. Pure Python on purpose: GPU-less builds import ``ptx_ir`` without numpy.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    PRED = "pred"
    BITS = "bits"           # .b8 … .b128: untyped bit patterns
    UNSIGNED = "unsigned"
    SIGNED = "signed"
    FLOAT = "float"         # IEEE and the narrow ML formats (.tf32, .e4m3, …)


@dataclass(frozen=True)
class PtxType:
    name: str               # with the leading dot: ".f32"
    size: int               # bytes (a .pred register counts as 1)
    kind: Kind
    lanes: int = 1          # packed types: .f16x2 has 2 lanes of 2 bytes

    @property
    def bits(self) -> int:
        return 1 if self.kind is Kind.PRED else 8 * self.size

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_int(self) -> bool:
        """Integer arithmetic types: .b, .u and .s (what integer instructions take)."""
        return self.kind in (Kind.BITS, Kind.UNSIGNED, Kind.SIGNED) and self.lanes == 1

    @property
    def is_signed(self) -> bool:
        return self.kind is Kind.SIGNED and self.lanes == 1


def _table() -> dict[str, PtxType]:
    rows = [PtxType(".pred", 1, Kind.PRED)]
    for bits in (8, 16, 32, 64, 128):
        rows.append(PtxType(f".b{bits}", bits // 8, Kind.BITS))
    for bits in (8, 16, 32, 64):
        rows.append(PtxType(f".u{bits}", bits // 8, Kind.UNSIGNED))
        rows.append(PtxType(f".s{bits}", bits // 8, Kind.SIGNED))
    rows += [PtxType(".f16", 2, Kind.FLOAT), PtxType(".bf16", 2, Kind.FLOAT),
             PtxType(".f32", 4, Kind.FLOAT), PtxType(".f64", 8, Kind.FLOAT),
             PtxType(".tf32", 4, Kind.FLOAT)]
    for fp8 in (".e4m3", ".e5m2", ".e2m1", ".e2m3", ".e3m2", ".ue8m0"):
        rows.append(PtxType(fp8, 1, Kind.FLOAT))
    rows += [PtxType(".f16x2", 4, Kind.FLOAT, 2), PtxType(".bf16x2", 4, Kind.FLOAT, 2),
             PtxType(".u16x2", 4, Kind.UNSIGNED, 2), PtxType(".s16x2", 4, Kind.SIGNED, 2),
             PtxType(".e4m3x2", 2, Kind.FLOAT, 2), PtxType(".e5m2x2", 2, Kind.FLOAT, 2),
             PtxType(".e2m1x2", 1, Kind.FLOAT, 2), PtxType(".e2m3x2", 2, Kind.FLOAT, 2),
             PtxType(".e3m2x2", 2, Kind.FLOAT, 2), PtxType(".ue8m0x2", 2, Kind.FLOAT, 2),
             PtxType(".u8x4", 4, Kind.UNSIGNED, 4), PtxType(".s8x4", 4, Kind.SIGNED, 4)]
    return {r.name: r for r in rows}


TYPES: dict[str, PtxType] = _table()
# Types narrower than a byte (.b1 in bmma/popc-style operands, .s4/.u4/.b4 in mma): valid
# type modifiers with no whole-byte size, so they have no row above.
SUB_BYTE_TYPES = frozenset({".b1", ".b4", ".s4", ".u4"})
# Every type modifier an instruction or declaration can carry (what the parser and
# ``Instruction.types`` recognise). ``.s2f6x2`` (two 8-bit fixed-point lanes of cvt) is a
# type name without arithmetic semantics here.
TYPE_NAMES = frozenset(TYPES) | SUB_BYTE_TYPES | {".s2f6x2"}
FLOAT_TYPES = frozenset(n for n, t in TYPES.items() if t.is_float)
INT_TYPES = frozenset(n for n, t in TYPES.items() if t.is_int)


def ptx_type(name: str) -> PtxType | None:
    """The table row of ``name`` (with or without its leading dot), or None."""
    return TYPES.get(name if name.startswith(".") else "." + name)


def type_size(name: str) -> int:
    """Bytes of one value of ``name``; KeyError for a name that is not a PTX type."""
    t = ptx_type(name)
    if t is None:
        raise KeyError(f"not a PTX type: {name!r}")
    return t.size


def is_float(name: str) -> bool:
    t = ptx_type(name)
    return t is not None and t.is_float


def is_int(name: str) -> bool:
    t = ptx_type(name)
    return t is not None and t.is_int


def is_signed(name: str) -> bool:
    t = ptx_type(name)
    return t is not None and t.is_signed
