"""Block shapes a .cu source launches its kernels with, where they are compile-time constants.

Inference guesses block sizes from a list of usual ones (256, 96, 1024, ...), and a wrong
guess can make nvcc's own code impossible to judge (a Blelloch scan written for 512 threads
run with 256 is not deterministic) or judge a kernel at a shape the program never uses. The
translation unit nvcc-plus compiles often says which block it launches with::

    #define SCAN_THREADS 512
    scan_blocks<<<nblocks, SCAN_THREADS>>>(d_in, d_out, d_sums, n);

    constexpr int TILE = 16;  dim3 block(TILE, TILE);  sgemm<<<grid, block>>>(...);

This module reads those launches from the source text (comments and string literals blanked
as :mod:`superopt.specs.comments` does, no preprocessor run): object-like ``#define``s, ``const``/``constexpr`` integer variables and ``dim3``
variables declared with constant arguments are resolved, C integer arithmetic is evaluated;
anything else (a block computed at run time, a macro with parameters, a name defined twice
with different values) is not a constant and is left to inference. A block found here is
only a candidate shape: inference still traces the kernel with it and drops it when it does
not fit (see :mod:`superopt.specs.inference`).
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from superopt.specs.comments import _strip_comments

__all__ = ["SourceBlocks", "launch_blocks"]

_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*(<(?:[^<>;{}]|<[^<>;{}]*>)*>)?\s*<<<(.*?)>>>", re.S)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*(.*?)[ \t]*$", re.M)
_INT_TYPES = (r"(?:unsigned\s+int|unsigned\s+long|unsigned|int|long|short|size_t|uint32_t|int32_t|"
              r"uint64_t|int64_t|uint16_t|int16_t)")
_CONST = re.compile(r"\b(?:static\s+)?(?:constexpr|const)\s+(?:static\s+)?" + _INT_TYPES
                    + r"\s+([A-Za-z_]\w*)\s*=\s*([^;{}]+);")
_DIM3 = re.compile(r"\b(?:const\s+)?dim3\s+([A-Za-z_]\w*)\s*(?:=\s*dim3\s*)?(?:=\s*)?([({])([^;{}()]*(?:\([^;{}()]*\))?[^;{}()]*)[)}]\s*;")
_SUFFIX = re.compile(r"\b(\d+)(?:[uU][lL]{0,2}|[lL]{1,2}[uU]?)\b")
_CAST = re.compile(r"\(\s*(?:unsigned\s+int|unsigned|int|long|size_t|uint32_t|int32_t)\s*\)")
_MAX_DEPTH = 12


@dataclass(frozen=True)
class SourceBlocks:
    """The constant blocks a kernel is launched with in the source, in order of appearance;
    ``all_constant``: every launch of it there has a constant block."""
    blocks: tuple
    all_constant: bool


def _split_top(text: str) -> list[str]:
    """Split at commas outside (), [], {} and <>."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return out


class _Names:
    """What the source defines: name -> expression text (None when defined twice differently)."""

    def __init__(self, text: str):
        self.exprs: dict[str, str | None] = {}
        self.dims: dict[str, list[str] | None] = {}
        for m in _DEFINE.finditer(text):
            self._add(self.exprs, m.group(1), m.group(2).rstrip("\\").strip())
        for m in _CONST.finditer(text):
            self._add(self.exprs, m.group(1), m.group(2).strip())
        for m in _DIM3.finditer(text):
            self._add(self.dims, m.group(1), _split_top(m.group(3)))

    @staticmethod
    def _add(table: dict, name: str, value) -> None:
        if name in table and table[name] != value:
            table[name] = None           # defined twice, differently: not a constant
        else:
            table[name] = value

    def value(self, expr: str, depth: int = 0) -> int | None:
        if depth > _MAX_DEPTH or not expr:
            return None
        text = _CAST.sub("", _SUFFIX.sub(r"\1", expr.strip()))
        text = re.sub(r"(?<![/])/(?![/])", "//", text)
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError:
            return None
        return self._eval(tree.body, depth)

    def _eval(self, node, depth: int) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            e = self.exprs.get(node.id)
            return None if e is None else self.value(e, depth + 1)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self._eval(node.operand, depth)
            return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
        if isinstance(node, ast.BinOp):
            a, b = self._eval(node.left, depth), self._eval(node.right, depth)
            if a is None or b is None:
                return None
            op = node.op
            if isinstance(op, ast.Add):
                return a + b
            if isinstance(op, ast.Sub):
                return a - b
            if isinstance(op, ast.Mult):
                return a * b
            if isinstance(op, (ast.FloorDiv, ast.Mod)):
                if b == 0 or a < 0 or b < 0:
                    return None          # C truncates, Python floors: only the agreeing case
                return a // b if isinstance(op, ast.FloorDiv) else a % b
            if isinstance(op, ast.LShift) and 0 <= b < 32:
                return a << b
            if isinstance(op, ast.RShift) and 0 <= b < 64:
                return a >> b
            if isinstance(op, ast.BitAnd):
                return a & b
            if isinstance(op, ast.BitOr):
                return a | b
        return None

    def block(self, arg: str) -> tuple | None:
        """The block of a launch's second argument, or None when it is not a constant."""
        arg = arg.strip()
        m = re.fullmatch(r"dim3\s*[({](.*)[)}]", arg, re.S) or re.fullmatch(r"\{(.*)\}", arg, re.S)
        if m:
            parts = _split_top(m.group(1))
        elif re.fullmatch(r"[A-Za-z_]\w*", arg) and arg in self.dims:
            parts = self.dims[arg]
            if parts is None:
                return None
        else:
            parts = [arg]
        if not 1 <= len(parts) <= 3:
            return None
        dims = [self.value(p) for p in parts]
        if any(d is None or d < 1 for d in dims):
            return None
        dims += [1] * (3 - len(dims))
        if dims[0] * dims[1] * dims[2] > 1024:
            return None
        return tuple(dims)


@functools.lru_cache(maxsize=32)
def launch_blocks(source: str) -> dict[str, SourceBlocks]:
    """Kernel (its C++ name, template arguments dropped) -> the constant blocks the source
    launches it with."""
    text = _strip_comments(source)
    names = _Names(text)
    found: dict[str, list] = {}
    constant: dict[str, bool] = {}
    for m in _LAUNCH.finditer(text):
        args = _split_top(m.group(3))
        if len(args) < 2:
            continue
        name = m.group(1)
        block = names.block(args[1])
        constant[name] = constant.get(name, True) and block is not None
        if block is not None and block not in found.setdefault(name, []):
            found[name].append(block)
        found.setdefault(name, [])
    return {n: SourceBlocks(tuple(b), constant[n]) for n, b in found.items() if b}
