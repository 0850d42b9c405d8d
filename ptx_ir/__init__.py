"""ptx_ir: the PTX language — parse, print, analyse and edit what nvcc emits.

Knows nothing of GPUs, nvcc driving or search.

    >>> import ptx_ir
    >>> module = ptx_ir.parse(text)
    >>> kernel = module.function("_Z6kernelPfS_i")
    >>> kernel.cfg, kernel.dataflow, kernel.loops, kernel.memory_accesses
    >>> text2 = ptx_ir.emit(module)
"""
from ptx_ir.errors import IRError, ParseError
from ptx_ir.nodes import (
    Addr, BinExpr, Brace, CallExpr, DataLine, Directive, Function, Guard, Imm, Instruction,
    Label, Module, Neg, Pair, Paren, Reg, ScopeClose, ScopeOpen, Section, Sink, Sym, VarDecl,
    Vec,
)
from ptx_ir.parser import parse
from ptx_ir.printer import emit

__all__ = [
    "parse", "emit", "ParseError", "IRError", "Module", "Function", "Instruction", "Label",
    "Directive", "VarDecl", "Section", "DataLine", "ScopeOpen", "ScopeClose", "Guard", "Reg",
    "Imm", "Sym", "Sink", "Neg", "Pair", "Vec", "Addr", "Paren", "BinExpr", "CallExpr", "Brace",
]
