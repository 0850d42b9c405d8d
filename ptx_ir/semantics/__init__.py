"""Exact semantics of PTX instructions over numpy lane arrays (used by the CPU emulator).

Pure functions: no state, no memory. ``decode_alu(inst)`` turns a register-to-register
instruction into a function of its source arrays; :mod:`fp` holds exactly-rounded float
arithmetic, :mod:`integer` integer and bit operations, :mod:`convert` ``cvt``,
:mod:`floatops` min/max/compare, :mod:`warp` shfl/vote/match helpers.

Anything not reproduced bit-exactly raises :class:`Unsupported` (for example the
``.approx`` transcendental instructions, whose results depend on GPU hardware tables).
"""
from ptx_ir.semantics.errors import Deadlock, KernelFault, UndefinedBehavior, Unsupported
from ptx_ir.semantics.alu import AluSpec, decode_alu
from ptx_ir.semantics.types import (
    imm_bits, imm_scalar, is_float, is_signed, natural_dtype, storage_dtype, type_bits, type_size,
)

__all__ = [
    "Unsupported", "UndefinedBehavior", "KernelFault", "Deadlock", "AluSpec", "decode_alu",
    "natural_dtype", "storage_dtype", "type_bits", "type_size", "is_float", "is_signed",
    "imm_bits", "imm_scalar",
]
