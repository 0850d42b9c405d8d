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

*Blocks chosen at run time from constants* (``SourceBlocks.listed``). Kernel benchmarks pick
the block in a loop::

    int block_sizes[] = {32, 64, 128, 256, 512, 1024};
    for (int j = 0; j < 6; j++) { int block_size = block_sizes[j]; run(kernel_num, ..., block_size); }
    void run(int kernel_num, ..., int block_size) { k<<<OC, block_size, block_size * 4>>>(...); }

Such a block is no constant (inference must not take it for the only one), but the program
may use each of those values: the search times the rewrite to keep at every one
(:mod:`superopt.search.launch_shapes`). A name is followed through every assignment to it in
the file (``v = ARR[i]``, ``int v = 256``, ``for (int v : ARR)``, ``for (int v = 32; v <= 1024;
v *= 2)``) and, when it is a parameter of the function around the launch, through the calls of
that function (a few levels deep). A launch whose block is neither constant nor listed so is
*computed at run time* (``SourceBlocks.runtime``).

*The preprocessed unit* (:func:`unit_launch_text`). Read from the raw source, ``#ifndef THREADS /
#define THREADS 256`` gives 256 even when the build passes ``-DTHREADS=512``. A compilation through
nvcc-plus has the unit nvcc's own ``gcc -E`` step wrote (the input of ``cudafe++``): macros
expanded with the build's ``-D`` flags, ``#if`` branches chosen, the user's headers included.
The driver hands its path over; the lines of the user's files (not system headers, not the CUDA
toolkit's) are what launches are read from then.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from superopt.specs.comments import _strip_comments

__all__ = ["SourceBlocks", "launch_blocks", "unit_launch_text", "user_lines"]

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
_ARRAY = re.compile(r"\b(?:static\s+|constexpr\s+|const\s+)*" + _INT_TYPES
                    + r"\s+([A-Za-z_]\w*)\s*\[[^\]\[;{}]*\]\s*=?\s*\{([^{};]*)\}\s*;")
_STD_ARRAY = re.compile(r"\b(?:static\s+|constexpr\s+|const\s+)*(?:std::)?(?:vector|array)\s*<\s*" + _INT_TYPES
                        + r"\s*(?:,[^<>;{}]*)?>\s*([A-Za-z_]\w*)\s*=?\s*\{([^{};]*)\}\s*;")
_FUNC = re.compile(r"\b([A-Za-z_]\w*)\s*\(([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*)\)\s*(?:const\s*)?\{")
_KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "do", "else"}
_MAX_FOLLOW = 4          # levels of names and calls followed for a listed block
_MAX_LISTED = 64         # values one listed block may take


@dataclass(frozen=True)
class SourceBlocks:
    """The constant blocks a kernel is launched with in the source, in order of appearance;
    ``all_constant``: every launch of it there has a constant block. ``listed``: the blocks of
    launches whose block is chosen at run time among constants (an array of block sizes, a
    loop over them; see the module doc); ``runtime``: some launch's block is neither."""
    blocks: tuple
    all_constant: bool
    listed: tuple = ()
    runtime: bool = False

    @property
    def program_blocks(self) -> tuple:
        """Every block the source is known to launch the kernel with (constant or listed)."""
        return self.blocks + tuple(b for b in self.listed if b not in self.blocks)


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


def _closing(text: str, i: int, open_: str = "(", close: str = ")") -> int | None:
    """The offset of the bracket closing the one at ``i``, or None."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_:
            depth += 1
        elif text[j] == close:
            depth -= 1
            if depth == 0:
                return j
    return None


class _Names:
    """What the source defines: name -> expression text (None when defined twice differently)."""

    def __init__(self, text: str):
        self.text = text
        self.exprs: dict[str, str | None] = {}
        self.dims: dict[str, list[str] | None] = {}
        self.arrays: dict[str, list[str] | None] = {}
        for rx in (_ARRAY, _STD_ARRAY):
            for m in rx.finditer(text):
                self._add(self.arrays, m.group(1), _split_top(m.group(2)))
        self.functions = []          # (name, parameter names, body start, body end)
        for m in _FUNC.finditer(text):
            if m.group(1) in _KEYWORDS:
                continue
            end = _closing(text, m.end() - 1, "{", "}")
            if end is None:
                continue
            params = [re.findall(r"[A-Za-z_]\w*", p.split("=")[0])[-1:] for p in _split_top(m.group(2))]
            self.functions.append((m.group(1), [p[0] if p else "" for p in params], m.end(), end))
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

    # -- blocks chosen at run time among constants (SourceBlocks.listed)

    def _array(self, name: str) -> list[int] | None:
        elems = self.arrays.get(name)
        if not elems:
            return None
        vals = [self.value(e) for e in elems]
        return None if any(v is None for v in vals) else vals

    def values(self, expr: str, at: int, depth: int = 0, seen: frozenset = frozenset()) -> list[int] | None:
        """Every value ``expr`` (at offset ``at`` of the text) can take, when each is a constant
        the file names: a constant, an element of a constant array, a name every assignment of
        which is such a value, a parameter every caller passes one. None otherwise."""
        expr = expr.strip()
        v = self.value(expr)
        if v is not None:
            return [v]
        if depth > _MAX_FOLLOW:
            return None
        m = re.fullmatch(r"([A-Za-z_]\w*)\s*\[[^\[\]]*\]", expr)
        if m:
            return self._array(m.group(1))
        if not re.fullmatch(r"[A-Za-z_]\w*", expr):
            return None
        fn = self._enclosing(at)
        here = (expr, fn[0] if fn else None)
        if here in seen:
            return None
        seen = seen | {here}
        found = self._assigned(expr, depth, seen, self._scope(expr, fn, at))
        if found is False:
            return None
        out = list(found or [])
        if fn is not None and expr in fn[1]:
            passed = self._passed(fn[0], fn[1].index(expr), depth, seen)
            if passed is None:
                return None
            out += passed
        elif found is None:
            return None
        return list(dict.fromkeys(out)) or None

    def _scope(self, name: str, fn, at: int):
        """Where assignments to ``name`` seen from offset ``at`` can be: the body of the
        function around it when that function declares it (a parameter or a local), else
        everywhere but the bodies of functions that declare their own."""
        def declares(lo, hi, params):
            return name in params or re.search(r"\b(?:" + _INT_TYPES + r"|auto|dim3)\s+(?:const\s+)?"
                                               + name + r"\b", self.text[lo:hi]) is not None
        if fn is not None:
            for fname, params, lo, hi in self.functions:
                if fname == fn[0] and lo <= at < hi and declares(lo, hi, params):
                    return lambda i, lo=lo, hi=hi: lo <= i < hi
        own = [(lo, hi) for _, params, lo, hi in self.functions if declares(lo, hi, params)]
        return lambda i: not any(lo <= i < hi for lo, hi in own)

    def _assigned(self, name: str, depth: int, seen: frozenset, scope=lambda i: True):
        """The values of every assignment to ``name`` in ``scope`` (offset -> bool) ([] when
        there is none); False when one is not a listed constant (or ``name`` is changed by
        ``*=``, ``++``, ... outside a counted ``for`` header this reads)."""
        out: list[int] = []
        loops = []
        for m in re.finditer(r"\bfor\s*\(\s*(?:[\w:]+\s+)*" + name + r"\s*=\s*([^;]+);\s*" + name
                             + r"\s*(<=|<)\s*([^;]+);\s*(?:" + name + r"\s*(\*=|<<=|\+=)\s*([^)]+)|(\+\+)\s*"
                             + name + r"|" + name + r"\s*(\+\+))\s*\)", self.text):
            if not scope(m.start()):
                continue
            vals = self._counted(m)
            if vals is None:
                return False
            out += vals
            loops.append((m.start(), m.end()))
        for m in re.finditer(r"\bfor\s*\(\s*(?:[\w:&]+\s+)*&?\s*" + name + r"\s*:\s*([A-Za-z_]\w*)\s*\)", self.text):
            if not scope(m.start()):
                continue
            vals = self._array(m.group(1))
            if vals is None:
                return False
            out += vals
            loops.append((m.start(), m.end()))
        inside = lambda i: any(a <= i < b for a, b in loops)   # noqa: E731
        for m in re.finditer(r"(?<![\w.>])" + name + r"\s*=(?!=)\s*([^;,)]+)", self.text):
            if inside(m.start()) or not scope(m.start()):
                continue
            vals = self.values(m.group(1), m.start(), depth + 1, seen)
            if vals is None:
                return False
            out += vals
        for m in re.finditer(r"(?<![\w.>])" + name + r"\s*(?:\*=|\+=|-=|/=|<<=|>>=|%=|&=|\|=|\+\+|--)|(?:\+\+|--)\s*"
                             + name + r"\b", self.text):
            if not inside(m.start()) and scope(m.start()):
                return False
        return out

    def _counted(self, m) -> list[int] | None:
        """The values of a counted loop ``for (v = A; v <= B; v *= k)`` (or ``<<=``, ``+=``, ``++``)."""
        start, cmp, stop = self.value(m.group(1)), m.group(2), self.value(m.group(3))
        op = m.group(4) or "+="
        step = self.value(m.group(5)) if m.group(5) else 1
        if start is None or stop is None or step is None or start < 1:
            return None
        out, v = [], start
        while (v <= stop if cmp == "<=" else v < stop):
            out.append(v)
            if len(out) > _MAX_LISTED:
                return None
            nxt = v * step if op == "*=" else (v << step if op == "<<=" else v + step)
            if nxt <= v:
                return None
            v = nxt
        return out

    def _enclosing(self, at: int) -> tuple[str, list[str]] | None:
        """(name, parameter names) of the function whose body holds offset ``at``."""
        best = None
        for name, params, lo, hi in self.functions:
            if lo <= at < hi and (best is None or lo > best[2]):
                best = (name, params, lo)
        return None if best is None else (best[0], best[1])

    def _passed(self, fname: str, index: int, depth: int, seen: frozenset) -> list[int] | None:
        """The values every call of ``fname`` in the file passes as its argument ``index``."""
        out: list[int] = []
        calls = 0
        for m in re.finditer(r"\b" + re.escape(fname) + r"\s*\(", self.text):
            before = self.text[:m.start()].rstrip()
            prev = re.search(r"([A-Za-z_]\w*)$", before)
            if prev and prev.group(1) not in _KEYWORDS:
                continue                           # a declaration or definition (a type before the name)
            if before.endswith(("::", ".", "->")):
                continue
            close = _closing(self.text, m.end() - 1)
            if close is None or self.text[close + 1:].lstrip().startswith("{"):
                continue
            args = _split_top(self.text[m.end():close])
            if index >= len(args):
                return None
            vals = self.values(args[index], m.start(), depth + 1, seen)
            if vals is None:
                return None
            out += vals
            calls += 1
        return out if calls else None

    def _block_parts(self, arg: str) -> list[str] | None:
        """The 1 to 3 dimension expressions of a launch's second argument (``dim3(...)``,
        ``{...}``, a ``dim3`` variable, one expression), or None."""
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
        return parts if 1 <= len(parts) <= 3 else None

    def block(self, arg: str) -> tuple | None:
        """The block of a launch's second argument, or None when it is not a constant."""
        parts = self._block_parts(arg)
        if parts is None:
            return None
        dims = [self.value(p) for p in parts]
        if any(d is None or d < 1 for d in dims):
            return None
        dims += [1] * (3 - len(dims))
        if dims[0] * dims[1] * dims[2] > 1024:
            return None
        return tuple(dims)

    def listed_blocks(self, arg: str, at: int) -> list[tuple] | None:
        """Every block a launch's second argument can be when it is chosen at run time among
        constants (see :meth:`values`); None when it is not so."""
        parts = self._block_parts(arg)
        if parts is None:
            return None
        per_dim = [self.values(p, at) for p in parts]
        if any(v is None for v in per_dim):
            return None
        per_dim += [[1]] * (3 - len(per_dim))
        out = []
        for x in per_dim[0]:
            for y in per_dim[1]:
                for z in per_dim[2]:
                    if min(x, y, z) >= 1 and x * y * z <= 1024 and (x, y, z) not in out:
                        out.append((x, y, z))
        return out[:_MAX_LISTED] or None


@functools.lru_cache(maxsize=32)
def launch_blocks(source: str) -> dict[str, SourceBlocks]:
    """Kernel (its C++ name, template arguments dropped) -> the constant blocks the source
    launches it with."""
    text = _strip_comments(source)
    names = _Names(text)
    found: dict[str, list] = {}
    listed: dict[str, list] = {}
    constant: dict[str, bool] = {}
    runtime: dict[str, bool] = {}
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
        listed.setdefault(name, [])
        if block is None:
            chosen = names.listed_blocks(args[1], m.start())
            if chosen is None:
                runtime[name] = True
            else:
                listed[name] += [b for b in chosen if b not in listed[name]]
    return {n: SourceBlocks(tuple(b), constant[n], tuple(listed[n]), runtime.get(n, False))
            for n, b in found.items() if b or listed[n]}


# ---------------------------------------------------------------- the preprocessed unit

_MARKER = re.compile(r'^#\s*(?:line\s+)?\d+\s+"((?:[^"\\]|\\.)*)"((?:\s+\d+)*)\s*$')
UNIT_LIMIT = 256 << 20          # bytes of a preprocessed unit read (heavy C++ units reach tens of MB)


def user_lines(preprocessed: str) -> str:
    """The lines of ``preprocessed`` (gcc -E's output) that come from the user's files: not from a
    system header (line-marker flag 3), nor from the CUDA toolkit's headers (the folder of the
    ``cuda_runtime.h`` nvcc includes into every unit), nor from ``<built-in>``/``<command-line>``.
    Line markers are dropped; what is kept is C++ with every macro expanded."""
    out: list[str] = []
    keep = True
    toolkit: str | None = None
    for line in preprocessed.splitlines():
        if line.startswith("#"):
            m = _MARKER.match(line)
            if m:
                name = m.group(1).replace('\\\\', '\\')
                flags = m.group(2).split()
                if toolkit is None and name.endswith("/cuda_runtime.h"):
                    toolkit = name[: -len("cuda_runtime.h")]
                keep = not ("3" in flags or name.startswith("<")
                            or (toolkit is not None and name.startswith(toolkit)))
                continue
            if line.lstrip("# \t").startswith("pragma"):
                continue
        if keep:
            out.append(line)
    return "\n".join(out)


_UNITS: dict = {}


def unit_launch_text(path: str | None) -> str | None:
    """The user's part of the preprocessed unit at ``path`` (:func:`user_lines`), read once per
    file (a regular file, at most UNIT_LIMIT bytes), or None when there is none to read."""
    if not path:
        return None
    import os
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    key = (os.path.abspath(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _UNITS:
        from superopt.store.safe_files import read_text
        try:
            text = user_lines(read_text(path, UNIT_LIMIT, follow=True, errors="replace"))
        except OSError:
            text = None
        _UNITS.clear()                         # one module's unit at a time
        _UNITS[key] = text
    return _UNITS[key]
