"""Launch specs: how to launch one kernel so that it can be judged.

A :class:`LaunchSpec` names the kernel, its grid, block and dynamic shared memory, and for
every kernel parameter, in the order of the PTX ``.entry`` signature, either a
:class:`Scalar` (a value) or a :class:`Buffer` (a device allocation: element type, length
expression over the scalar parameters, direction and value distribution).

Specs round-trip through plain dicts, JSON and TOML::

    kernel = "saxpy"
    grid = ["cdiv(n, 256)", 1, 1]      # ints, or expressions over scalar params
    block = [256, 1, 1]
    shared_bytes = 0

    [[params]]
    name = "x"
    kind = "buffer"
    type = "f32"
    length = "n"                       # expression over scalar params
    direction = "in"                   # in | out | inout
    distribution = "auto"              # see superopt.judge.inputs

    [[params]]
    name = "n"
    kind = "scalar"
    type = "u32"
    value = 100000

Length and grid expressions are parsed with :mod:`ast` and may use integer literals,
scalar parameter names, ``+ - * // %``, unary minus, parentheses and the functions
``min``, ``max`` and ``cdiv`` (ceiling division). Nothing else is evaluated.

This module only models and evaluates specs; inferring them from the IR lives elsewhere.
"""
from __future__ import annotations

import ast
import json
import math
import tomllib
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Union

import numpy as np

from ptx_ir.types import Kind, ptx_type

__all__ = [
    "ElemType", "ELEM_TYPES", "elem_type", "Scalar", "Buffer", "Bytes", "ParamSpec", "LaunchSpec",
    "SpecError", "eval_expr", "expr_names", "load_specs", "load_spec", "dumps_toml",
]


class SpecError(ValueError):
    """A launch spec that cannot be read, evaluated or used."""


# --------------------------------------------------------------------------- types

@dataclass(frozen=True)
class ElemType:
    name: str          # canonical PTX-like name: u8 s8 u16 s16 f16 bf16 u32 s32 f32 u64 s64 f64
    size: int          # bytes
    kind: str          # "uint" | "int" | "float"
    dtype: np.dtype    # numpy storage dtype (bf16 is stored as uint16)
    exp_bits: int = 0  # float types only
    man_bits: int = 0

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def bits_dtype(self) -> np.dtype:
        """Unsigned integer dtype of the same width, for bit-level views."""
        return np.dtype(f"u{self.size}")


_KIND_NAMES = {Kind.UNSIGNED: "uint", Kind.SIGNED: "int", Kind.FLOAT: "float"}


def _et(name, dtype, e=0, m=0):
    """An element type whose size and kind are the PTX type table's (ptx_ir.types)."""
    row = ptx_type(name)
    return ElemType(name, row.size, _KIND_NAMES[row.kind], np.dtype(dtype), e, m)


ELEM_TYPES: dict[str, ElemType] = {
    "u8": _et("u8", "u1"), "s8": _et("s8", "i1"),
    "u16": _et("u16", "u2"), "s16": _et("s16", "i2"),
    "u32": _et("u32", "u4"), "s32": _et("s32", "i4"),
    "u64": _et("u64", "u8"), "s64": _et("s64", "i8"),
    "f16": _et("f16", "f2", 5, 10),
    "bf16": _et("bf16", "u2", 8, 7),
    "f32": _et("f32", "f4", 8, 23),
    "f64": _et("f64", "f8", 11, 52),
}
_ALIASES = {
    "b8": "u8", "b16": "u16", "b32": "u32", "b64": "u64", "pred": "u8", "bool": "u8",
    "uint8": "u8", "int8": "s8", "uint16": "u16", "int16": "s16", "uint32": "u32",
    "int32": "s32", "uint64": "u64", "int64": "s64", "i8": "s8", "i16": "s16", "i32": "s32",
    "i64": "s64", "char": "s8", "uchar": "u8", "short": "s16", "ushort": "u16", "int": "s32",
    "uint": "u32", "unsigned": "u32", "long": "s64", "ulong": "u64", "size_t": "u64",
    "half": "f16", "float16": "f16", "bfloat16": "bf16", "float": "f32", "float32": "f32",
    "double": "f64", "float64": "f64",
}


def elem_type(name: str) -> ElemType:
    """The element type for a name (PTX spelling, C spelling or numpy spelling)."""
    key = str(name).strip().lstrip(".").lower()
    key = _ALIASES.get(key, key)
    try:
        return ELEM_TYPES[key]
    except KeyError:
        raise SpecError(f"unknown element type {name!r} (known: {', '.join(ELEM_TYPES)})") from None


# --------------------------------------------------------------------------- expressions

_MAX_EXPR_LEN = 256
_MAX_ABS = 1 << 62


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


_FUNCS = {"min": min, "max": max, "cdiv": _cdiv, "ceil_div": _cdiv}
_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
}


def parse_expr(expr: str) -> ast.AST:
    if len(expr) > _MAX_EXPR_LEN:
        raise SpecError(f"expression too long ({len(expr)} chars): {expr[:40]}...")
    try:
        return ast.parse(expr.strip(), mode="eval").body
    except SyntaxError as e:
        raise SpecError(f"cannot parse expression {expr!r}: {e.msg}") from None


def eval_expr(expr: Union[str, int], env: dict[str, Any]) -> int:
    """Evaluate an integer length/grid expression over scalar values, safely.

    Allowed: int literals, names in ``env``, ``+ - * // %``, unary ``-``/``+``,
    parentheses and calls of ``min``, ``max``, ``cdiv``. ``/`` is refused (use ``//``).
    """
    if isinstance(expr, bool):
        raise SpecError("a boolean is not a length")
    if isinstance(expr, (int, np.integer)):
        return int(expr)
    if not isinstance(expr, str):
        raise SpecError(f"expression must be an int or a string, not {type(expr).__name__}")

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int):
                raise SpecError(f"only integer literals are allowed in {expr!r}")
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise SpecError(f"unknown name {node.id!r} in {expr!r} (scalars: {', '.join(sorted(env)) or 'none'})")
            v = env[node.id]
            if isinstance(v, (float, np.floating)):
                if not float(v).is_integer():
                    raise SpecError(f"{node.id!r} = {v} is not an integer (in {expr!r})")
                v = int(v)
            return int(v)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0:
                raise SpecError(f"division by zero in {expr!r}")
            r = _BINOPS[type(node.op)](a, b)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            raise SpecError(f"'/' is not allowed in {expr!r}: use '//' (floor) or cdiv(a, b)")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            r = ev(node.operand)
            r = -r if isinstance(node.op, ast.USub) else r
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in _FUNCS and not node.keywords):
            args = [ev(a) for a in node.args]
            if node.func.id in ("cdiv", "ceil_div"):
                if len(args) != 2:
                    raise SpecError(f"cdiv takes two arguments in {expr!r}")
                if args[1] == 0:
                    raise SpecError(f"division by zero in {expr!r}")
            elif not args:
                raise SpecError(f"{node.func.id}() needs arguments in {expr!r}")
            r = _FUNCS[node.func.id](*args)
        else:
            raise SpecError(f"not allowed in a length expression: {ast.dump(node)[:60]} (in {expr!r})")
        if abs(r) > _MAX_ABS:
            raise SpecError(f"value out of range in {expr!r}")
        return r

    return int(ev(parse_expr(expr)))


def expr_names(expr: Union[str, int]) -> set[str]:
    """The names an expression refers to (function names excluded)."""
    if not isinstance(expr, str):
        return set()
    tree = parse_expr(expr)
    funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in funcs}


# --------------------------------------------------------------------------- params

DIRECTIONS = ("in", "out", "inout")


@dataclass
class Scalar:
    """A by-value kernel parameter."""
    name: str
    type: str
    value: Union[int, float]
    # Other values the checker may use in further input sets (e.g. sizes). None: the
    # checker decides (size parameters get sizes that are not multiples of the block).
    values: list | None = None
    # The kernel may rely on this value (a compile-time-like constant of the program): the
    # checker does not vary it, and the evidence says so. Unpinned scalars that fix no
    # length or grid get other values (signs, zero, -0.0, magnitudes) in further sets.
    pinned: bool = False
    kind: str = field(default="scalar", init=False)

    def __post_init__(self):
        self.type = elem_type(self.type).name
        self.value = _coerce_scalar(self.value, self.type, self.name)
        if self.values is not None:
            self.values = [_coerce_scalar(v, self.type, self.name) for v in self.values]

    @property
    def elem(self) -> ElemType:
        return ELEM_TYPES[self.type]

    def to_dict(self) -> dict:
        d = {"name": self.name, "kind": "scalar", "type": self.type, "value": self.value}
        if self.values is not None:
            d["values"] = list(self.values)
        if self.pinned:
            d["pinned"] = True
        return d


@dataclass
class Buffer:
    """A pointer parameter: a device allocation of ``length`` elements of ``type``."""
    name: str
    type: str
    length_expr: Union[str, int]
    direction: str = "in"
    distribution: str = "auto"
    length: int | None = None        # the evaluated length (set by LaunchSpec.resolved())
    # Not a kernel parameter: an allocation reached only through a pointer field of a
    # ``bytes`` parameter (a by-value struct holding pointers). It is filled, guarded and
    # compared like any buffer; the struct's field is set to its address at launch.
    embedded: bool = False
    kind: str = field(default="buffer", init=False)

    def __post_init__(self):
        self.type = elem_type(self.type).name
        if self.direction not in DIRECTIONS:
            raise SpecError(f"buffer {self.name!r}: direction must be one of {DIRECTIONS}, not {self.direction!r}")
        if isinstance(self.length_expr, str):
            expr_names(self.length_expr)   # syntax check now
        if self.length is None and isinstance(self.length_expr, int):
            self.length = int(self.length_expr)
        self.distribution = str(self.distribution or "auto")

    @property
    def elem(self) -> ElemType:
        return ELEM_TYPES[self.type]

    @property
    def nbytes(self) -> int:
        if self.length is None:
            raise SpecError(f"buffer {self.name!r}: length not evaluated yet")
        return self.length * self.elem.size

    def to_dict(self) -> dict:
        d = {"name": self.name, "kind": "buffer", "type": self.type, "length": self.length_expr,
             "direction": self.direction, "distribution": self.distribution}
        if self.embedded:
            d["embedded"] = True
        return d


@dataclass
class Bytes:
    """A by-value parameter given as its raw bytes: a struct passed by value (e.g. a params
    struct of more than 8 bytes), usually as a program passed it (from a capture). Its
    pointer fields are listed in ``pointers`` (byte offset -> the name of an ``embedded``
    buffer of the spec) and are set to that buffer's address at every launch; all other
    bytes are passed as given. The checker does not vary them (like a pinned scalar)."""
    name: str
    size: int
    hex: str
    pointers: dict = field(default_factory=dict)
    kind: str = field(default="bytes", init=False)

    def __post_init__(self):
        self.size = int(self.size)
        try:
            raw = bytes.fromhex(str(self.hex))
        except ValueError:
            raise SpecError(f"bytes param {self.name!r}: hex {str(self.hex)[:24]!r} is not hexadecimal") from None
        if len(raw) != self.size or self.size < 1:
            raise SpecError(f"bytes param {self.name!r}: {len(raw)} bytes of hex for size {self.size}")
        self.hex = raw.hex()
        ptrs = {}
        for off, buf in dict(self.pointers or {}).items():
            try:
                o = int(off)
            except (TypeError, ValueError):
                raise SpecError(f"bytes param {self.name!r}: pointer offset {off!r} is not an integer") from None
            if o < 0 or o + 8 > self.size or o % 8:
                raise SpecError(f"bytes param {self.name!r}: a pointer at offset {o} does not fit an aligned "
                                f"8-byte field of {self.size} bytes")
            ptrs[o] = str(buf)
        self.pointers = dict(sorted(ptrs.items()))

    @property
    def raw(self) -> bytes:
        return bytes.fromhex(self.hex)

    def packed(self, addresses: dict[str, int]) -> bytes:
        """The bytes to pass, pointer fields set to ``addresses[buffer name]``."""
        b = bytearray(self.raw)
        for off, name in self.pointers.items():
            b[off:off + 8] = int(addresses[name]).to_bytes(8, "little")
        return bytes(b)

    def to_dict(self) -> dict:
        d = {"name": self.name, "kind": "bytes", "size": self.size, "hex": self.hex}
        if self.pointers:
            d["pointers"] = {str(k): v for k, v in self.pointers.items()}
        return d


ParamSpec = Union[Scalar, Buffer, Bytes]


def _coerce_scalar(v, type_name: str, pname: str):
    et = ELEM_TYPES[type_name]
    if et.is_float:
        if isinstance(v, str):
            try:
                v = float(v)
            except ValueError:
                raise SpecError(f"scalar {pname!r}: {v!r} is not a number") from None
        return float(v)
    if isinstance(v, str):
        try:
            v = int(v, 0)
        except ValueError:
            raise SpecError(f"scalar {pname!r}: {v!r} is not an integer") from None
    if isinstance(v, float):
        if not v.is_integer():
            raise SpecError(f"scalar {pname!r} of type {type_name}: {v} is not an integer")
        v = int(v)
    v = int(v)
    bits = et.size * 8
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if et.kind == "int" else (0, (1 << bits) - 1)
    if not lo <= v <= hi:
        raise SpecError(f"scalar {pname!r}: {v} does not fit {type_name}")
    return v


def param_from_dict(d: dict) -> ParamSpec:
    if not isinstance(d, dict):
        raise SpecError(f"a param must be a table, not {d!r}")
    d = dict(d)
    kind = d.pop("kind", None)
    t = d.pop("type", None)
    if "scalar" in d:
        kind, t = "scalar", d.pop("scalar")
    elif "buffer" in d:
        kind, t = "buffer", d.pop("buffer")
    name = d.pop("name", None)
    if not name:
        raise SpecError(f"param without a name: {d!r}")
    if kind == "bytes" or (kind is None and "hex" in d):
        size = d.pop("size", None)
        hexs = d.pop("hex", t)
        if hexs is None:
            raise SpecError(f"bytes param {name!r}: no hex")
        p = Bytes(name=name, size=len(str(hexs)) // 2 if size is None else size, hex=hexs,
                  pointers=d.pop("pointers", None) or {})
        if d:
            raise SpecError(f"param {name!r}: unknown keys {sorted(d)}")
        return p
    if t is None:
        raise SpecError(f"param {name!r}: no type")
    if kind is None:
        kind = "buffer" if ("length" in d or "direction" in d) else "scalar"
    if kind == "scalar":
        if "value" not in d:
            raise SpecError(f"scalar {name!r}: no value")
        pinned = d.pop("pinned", False)
        if not isinstance(pinned, bool):
            raise SpecError(f"scalar {name!r}: pinned must be true or false, not {pinned!r}")
        p = Scalar(name=name, type=t, value=d.pop("value"), values=d.pop("values", None), pinned=pinned)
    elif kind == "buffer":
        length = d.pop("length", d.pop("length_expr", None))
        if length is None:
            raise SpecError(f"buffer {name!r}: no length")
        embedded = d.pop("embedded", False)
        if not isinstance(embedded, bool):
            raise SpecError(f"buffer {name!r}: embedded must be true or false, not {embedded!r}")
        p = Buffer(name=name, type=t, length_expr=length, direction=d.pop("direction", "in"),
                   distribution=d.pop("distribution", "auto"), embedded=embedded)
    else:
        raise SpecError(f"param {name!r}: kind must be 'scalar', 'buffer' or 'bytes', not {kind!r}")
    if d:
        raise SpecError(f"param {name!r}: unknown keys {sorted(d)}")
    return p


# --------------------------------------------------------------------------- the spec

def _dim3(v, what: str) -> tuple:
    if isinstance(v, (int, str)):
        v = [v]
    v = list(v)
    if not 1 <= len(v) <= 3:
        raise SpecError(f"{what} must have 1 to 3 dimensions, not {v!r}")
    v = v + [1] * (3 - len(v))
    out = []
    for x in v:
        if isinstance(x, bool):
            raise SpecError(f"{what}: {x!r} is not a dimension")
        if isinstance(x, str):
            try:
                x = int(x)
            except ValueError:
                expr_names(x)
        out.append(x)
    return tuple(out)


@dataclass
class LaunchSpec:
    """How to launch one kernel: a grid, a block, dynamic shared memory and its params."""
    kernel: str
    grid: tuple
    block: tuple
    params: list[ParamSpec]
    shared_bytes: int = 0
    # Let the checker try other values of size parameters (sizes not multiples of the block).
    vary_sizes: bool = True
    # Where the spec came from: "toml:FILE", "comment", "inferred", ... (reports only).
    origin: str | None = None
    # The program's own buffers around one real launch (a capture's --data snapshot):
    # {"before": {buffer: file}, "after": {buffer: file}}. The first input set starts from
    # "before", and nvcc's code must reproduce "after" on it (a golden test); buffers whose
    # distribution is "snapshot" start from "before" in every set.
    snapshot: dict | None = None
    # Buffers whose contents decide the kernel's addresses or loop trips and that are drawn at
    # random here (a captured launch without its --data snapshot): nvcc's own code may fault on
    # them, so the search asks whether it can be judged before searching (superopt.search.loop).
    # Not part of the spec's text or its key.
    random_layout: tuple = ()

    def __post_init__(self):
        self.grid = _dim3(self.grid, "grid")
        self.block = _dim3(self.block, "block")
        for b in self.block:
            if not isinstance(b, int) or b < 1:
                raise SpecError(f"block dimensions must be positive integers, not {self.block!r}")
        if math.prod(self.block) > 1024:
            raise SpecError(f"block {self.block} has more than 1024 threads")
        names = [p.name for p in self.params]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise SpecError(f"duplicate param names: {sorted(dup)}")
        scalars = {p.name for p in self.params if isinstance(p, Scalar)}
        embedded = {p.name for p in self.params if isinstance(p, Buffer) and p.embedded}
        reached = [n for p in self.params if isinstance(p, Bytes) for n in p.pointers.values()]
        for n in reached:
            if n not in embedded:
                raise SpecError(f"a bytes param points to {n!r}, which is not an embedded buffer of the spec")
        if set(reached) != embedded or len(reached) != len(set(reached)):
            raise SpecError(f"every embedded buffer is reached by exactly one pointer field "
                            f"(embedded: {sorted(embedded)}, pointer fields: {reached})")
        for p in self.params:
            if isinstance(p, Buffer):
                unknown = expr_names(p.length_expr) - scalars
                if unknown:
                    raise SpecError(f"buffer {p.name!r}: length {p.length_expr!r} names {sorted(unknown)}, which are not scalar params")
            if isinstance(p, Buffer) and p.distribution.startswith("index:"):
                lo, _, hi = p.distribution[6:].partition("..")
                unknown = (expr_names(lo) | expr_names(hi)) - scalars
                if unknown or not hi:
                    raise SpecError(f"buffer {p.name!r}: bad distribution {p.distribution!r}")
        for g in self.grid:
            unknown = expr_names(g) - scalars
            if unknown:
                raise SpecError(f"grid {self.grid!r} names {sorted(unknown)}, which are not scalar params")
        self.shared_bytes = int(self.shared_bytes)
        if self.snapshot is not None:
            snap = self.snapshot
            if not isinstance(snap, dict) or not isinstance(snap.get("before", {}), dict) \
                    or not isinstance(snap.get("after", {}), dict):
                raise SpecError("snapshot must be a table {before = {buffer = file}, after = {buffer = file}}")
            known = {b.name for b in self.buffers}
            for part in ("before", "after"):
                unknown = set(snap.get(part, {})) - known
                if unknown:
                    raise SpecError(f"snapshot {part}: {sorted(unknown)} are not buffers of the spec")
            self.snapshot = {"before": dict(snap.get("before", {})), "after": dict(snap.get("after", {}))}
        for b in self.buffers:
            if b.distribution == "snapshot" and b.name not in ((self.snapshot or {}).get("before") or {}):
                raise SpecError(f"buffer {b.name!r}: distribution 'snapshot' needs a snapshot of it")

    # -- access
    @property
    def scalars(self) -> list[Scalar]:
        return [p for p in self.params if isinstance(p, Scalar)]

    @property
    def buffers(self) -> list[Buffer]:
        """Every buffer, the embedded ones (reached through a struct) included."""
        return [p for p in self.params if isinstance(p, Buffer)]

    @property
    def kernel_params(self) -> list[ParamSpec]:
        """The kernel's parameters in order (the spec's params less embedded buffers)."""
        return [p for p in self.params if not (isinstance(p, Buffer) and p.embedded)]

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def scalar_values(self) -> dict[str, Union[int, float]]:
        return {p.name: p.value for p in self.scalars}

    def size_params(self) -> list[str]:
        """Scalar params that buffer lengths (or the grid) depend on, in param order."""
        used: set[str] = set()
        for b in self.buffers:
            used |= expr_names(b.length_expr)
        for g in self.grid:
            used |= expr_names(g)
        return [p.name for p in self.scalars if p.name in used and not p.elem.is_float]

    @property
    def is_resolved(self) -> bool:
        return all(isinstance(g, int) for g in self.grid) and all(b.length is not None for b in self.buffers)

    @property
    def threads(self) -> int:
        return math.prod(self.block)

    def resolved(self, overrides: dict | None = None) -> "LaunchSpec":
        """A copy with scalar overrides applied, lengths and grid evaluated to ints."""
        overrides = dict(overrides or {})
        params: list[ParamSpec] = []
        for p in self.params:
            if isinstance(p, Scalar):
                params.append(replace(p, value=overrides.pop(p.name)) if p.name in overrides else replace(p))
            else:
                params.append(replace(p))
        if overrides:
            raise SpecError(f"overrides for unknown scalars: {sorted(overrides)}")
        env = {p.name: p.value for p in params if isinstance(p, Scalar)}
        for p in params:
            if isinstance(p, Buffer):
                n = eval_expr(p.length_expr, env)
                if n < 0:
                    raise SpecError(f"buffer {p.name!r}: length {p.length_expr!r} = {n} < 0")
                p.length = n
        grid = tuple(eval_expr(g, env) for g in self.grid)
        if any(g < 1 for g in grid):
            raise SpecError(f"grid {self.grid!r} evaluates to {grid}")
        return replace(self, params=params, grid=grid)

    # -- (de)serialisation
    def to_dict(self) -> dict:
        d = {"kernel": self.kernel, "grid": list(self.grid), "block": list(self.block),
             "shared_bytes": self.shared_bytes, "params": [p.to_dict() for p in self.params]}
        if not self.vary_sizes:
            d["vary_sizes"] = False
        if self.origin:
            d["origin"] = self.origin
        if self.snapshot:
            d["snapshot"] = {k: dict(v) for k, v in self.snapshot.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict, *, kernel: str | None = None, origin: str | None = None) -> "LaunchSpec":
        if not isinstance(d, dict):
            raise SpecError(f"a launch spec must be a table, not {type(d).__name__}")
        d = dict(d)
        name = d.pop("kernel", None) or d.pop("name", None) or kernel
        if not name:
            raise SpecError("launch spec without a kernel name")
        try:
            grid = d.pop("grid")
            block = d.pop("block")
        except KeyError as e:
            raise SpecError(f"launch spec for {name!r}: missing {e.args[0]!r}") from None
        shared = d.pop("shared_bytes", d.pop("shared", d.pop("dynamic_shared_bytes", 0)))
        params = [param_from_dict(p) for p in d.pop("params", [])]
        vary = bool(d.pop("vary_sizes", True))
        org = d.pop("origin", None) or origin
        snap = d.pop("snapshot", None)
        if d:
            raise SpecError(f"launch spec for {name!r}: unknown keys {sorted(d)}")
        return cls(kernel=name, grid=grid, block=block, params=params, shared_bytes=shared,
                   vary_sizes=vary, origin=org, snapshot=snap)

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_json(cls, text: str) -> "LaunchSpec":
        return cls.from_dict(json.loads(text))

    def to_toml(self) -> str:
        return dumps_toml(self.to_dict())

    @classmethod
    def from_toml(cls, text: str, kernel: str | None = None) -> "LaunchSpec":
        return load_spec(text, kernel=kernel, fmt="toml")


# --------------------------------------------------------------------------- files

def _collect(doc: Any, origin: str | None) -> dict[str, LaunchSpec]:
    """Find specs in a parsed document: a single spec, or under kernels/kernel/specs/spec."""
    out: dict[str, LaunchSpec] = {}
    if isinstance(doc, list):
        for d in doc:
            s = LaunchSpec.from_dict(d, origin=origin)
            out[s.kernel] = s
        return out
    if not isinstance(doc, dict):
        raise SpecError("a spec file must hold a table")
    if "grid" in doc and "block" in doc:
        s = LaunchSpec.from_dict(doc, origin=origin)
        return {s.kernel: s}
    for key in ("kernels", "kernel", "specs", "spec"):
        if key in doc:
            v = doc[key]
            if isinstance(v, list):
                out.update(_collect(v, origin))
            elif isinstance(v, dict):
                if "grid" in v and "block" in v:
                    out.update(_collect(v, origin))
                else:
                    for name, d in v.items():
                        s = LaunchSpec.from_dict(d, kernel=name, origin=origin)
                        out[s.kernel] = s
    return out


def load_specs(source: str, *, fmt: str | None = None) -> dict[str, LaunchSpec]:
    """Read every launch spec from a TOML or JSON file path or text; name -> spec."""
    import os
    origin = None
    text = source
    if "\n" not in source and os.path.exists(source):
        from superopt.store.safe_files import CONFIG_LIMIT, read_text
        origin = f"file:{source}"
        try:        # a regular file (never a FIFO or /dev/zero), at most CONFIG_LIMIT bytes
            text = read_text(source, CONFIG_LIMIT, follow=True)
        except UnicodeDecodeError as e:
            raise SpecError(f"{source}: not UTF-8 text (byte {e.start})") from None
        except OSError as e:
            raise SpecError(f"{source}: cannot read the spec ({e.strerror or e})") from None
        if fmt is None:
            fmt = "json" if source.endswith(".json") else "toml"
    where = f"{source}: " if origin else ""
    if fmt is None:
        # "[" opens both a JSON list and a TOML table header: try JSON, then TOML.
        fmt = "json" if text.lstrip().startswith("{") else "json-or-toml" if text.lstrip().startswith("[") else "toml"
    try:
        if fmt == "json-or-toml":
            try:
                doc = json.loads(text)
            except json.JSONDecodeError:
                fmt, doc = "toml", tomllib.loads(text)
        else:
            doc = json.loads(text) if fmt == "json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise SpecError(f"{where}cannot read spec ({fmt}): {e}") from None
    except RecursionError:
        raise SpecError(f"{where}cannot read spec ({fmt}): nested too deeply") from None
    return _collect(doc, origin)


def load_spec(source: str, kernel: str | None = None, *, fmt: str | None = None) -> LaunchSpec:
    """Read one spec; with several in the file, ``kernel`` picks one (exact name)."""
    specs = load_specs(source, fmt=fmt)
    if not specs:
        import os
        where = f"{source}: " if "\n" not in source and os.path.exists(source) else ""
        raise SpecError(f"{where}no launch spec found")
    if kernel is None:
        if len(specs) == 1:
            return next(iter(specs.values()))
        raise SpecError(f"several specs ({', '.join(specs)}): name the kernel")
    if kernel in specs:
        return specs[kernel]
    raise SpecError(f"no launch spec for kernel {kernel!r} (have: {', '.join(specs)})")


# --------------------------------------------------------------------------- TOML writer

def _toml_key(k: str) -> str:
    import re
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        v = int(v)
        return str(v) if -(1 << 63) <= v < (1 << 63) else json.dumps(hex(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise SpecError(f"cannot write {type(v).__name__} to TOML")


def dumps_toml(d: dict, _prefix: str = "") -> str:
    """A small TOML writer for spec-shaped data (scalars, lists, tables, arrays of tables)."""
    lines: list[str] = []
    tables: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, dict):
            tables.append((k, v))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables.append((k, v))
        else:
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    for k, v in tables:
        full = f"{_prefix}{_toml_key(k)}"
        if isinstance(v, dict):
            lines.append(f"\n[{full}]")
            lines.append(dumps_toml(v, full + ".").rstrip("\n"))
        else:
            for item in v:
                lines.append(f"\n[[{full}]]")
                lines.append(dumps_toml(item, full + ".").rstrip("\n"))
    return "\n".join(x for x in lines if x != "") + "\n"


def iter_params(spec: LaunchSpec) -> Iterable[ParamSpec]:
    return iter(spec.params)
