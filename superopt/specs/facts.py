"""Static facts about a kernel that launch-spec inference needs, read from the IR.

* :func:`param_infos` — for every ``.entry`` parameter: pointer / integer / float / struct,
  its element type (from the demangled C++ type where there is one, else from the PTX
  types accessed through it) and elements per C++ element (``float4`` → 4 × ``f32``).
* :func:`grid_bounds` — for each grid dimension, the guards that bound it: a ``setp``
  comparing an index built from ``%ctaid.d`` (``blockIdx.x * blockDim.x + threadIdx.x``,
  ``blockIdx.y * 32 + threadIdx.y``, a grid-stride recurrence) with an expression over
  scalar parameters (``n``, ``w - 1``, ``rows * cols``). The per-block extent tells how
  many blocks cover the bound: ``cdiv(n, 4 * block.x)`` for ``(blockIdx.x*blockDim.x +
  threadIdx.x) * 4 + k < n``.
* :func:`scalar_roles` — how each integer scalar parameter is used (compared, part of an
  address, divisor, shift amount, only converted to float), by a forward walk over def-use.
* :func:`kernel_traits` — which of ``tid.y/z``, ``ctaid.y/z`` are used, warp-level
  collectives (which rule out block sizes that are not multiples of 32), ``.reqntid`` and
  ``.maxntid``, dynamic shared memory, and tile sizes written as constants
  (``blockIdx.x * 32``) that suggest the block shape the kernel was written for.
* :func:`tile_block` — the block a 2-D/3-D shared tile indexed by thread indices implies
  (``__shared__ float t[16][17]; t[threadIdx.y][threadIdx.x] = ...`` → 16x16).

Nothing here decides a launch: :mod:`superopt.specs.inference` does, and
:mod:`superopt.specs.trace` proves it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ptx_ir import isa
from ptx_ir.affine import Affine
from ptx_ir.memory import AddressEvaluator
from ptx_ir.nodes import Addr, Imm, Instruction, Reg, Sym, VarDecl

__all__ = ["ParamInfo", "Bound", "param_infos", "grid_bounds", "scalar_roles", "kernel_traits",
           "KernelTraits", "cxx_element", "affine_to_expr"]

DIMS = "xyz"

# C++ pointee spellings (as the demangler writes them) -> (element type, elements)
_CXX_SCALARS = {
    "float": "f32", "double": "f64", "int": "s32", "unsigned int": "u32", "char": "s8",
    "signed char": "s8", "unsigned char": "u8", "short": "s16", "unsigned short": "u16",
    "long": "s64", "unsigned long": "u64", "long long": "s64", "unsigned long long": "u64",
    "bool": "u8", "__half": "f16", "half": "f16", "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16",
    "__half2": "f16", "__nv_bfloat162": "bf16", "int8_t": "s8", "uint8_t": "u8",
    "int16_t": "s16", "uint16_t": "u16", "int32_t": "s32", "uint32_t": "u32",
    "int64_t": "s64", "uint64_t": "u64", "size_t": "u64", "char16_t": "u16", "char32_t": "u32",
    "wchar_t": "s32", "signed char const": "s8",
}
_CXX_VECTORS = {"float": "f32", "double": "f64", "int": "s32", "uint": "u32", "char": "s8",
                "uchar": "u8", "short": "s16", "ushort": "u16", "long": "s64", "ulong": "u64",
                "longlong": "s64", "ulonglong": "u64", "half": "f16"}
_PTX_TO_ELEM = {".f32": "f32", ".f64": "f64", ".f16": "f16", ".bf16": "bf16", ".u8": "u8", ".s8": "s8",
                ".b8": "u8", ".u16": "u16", ".s16": "s16", ".b16": "u16", ".u32": "u32", ".s32": "s32",
                ".b32": "u32", ".u64": "u64", ".s64": "s64", ".b64": "u64", ".f16x2": "f16",
                ".bf16x2": "bf16"}


def cxx_element(cxx: str | None) -> tuple[str, int] | None:
    """``float const*`` -> ("f32", 1); ``float4*`` -> ("f32", 4); None when unknown."""
    if not cxx:
        return None
    t = cxx.strip()
    if not t.endswith("*"):
        return None
    t = t[:-1].strip()
    t = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b", " ", t)
    t = " ".join(t.split())
    if t.endswith("*"):
        return ("u64", 1)                      # pointer to pointers
    t = t.replace("std::", "")
    if t in _CXX_SCALARS:
        return (_CXX_SCALARS[t], 2 if t in ("__half2", "__nv_bfloat162") else 1)
    m = re.fullmatch(r"(u?(?:char|short|int|long|longlong)|float|double|half)([1-4])", t)
    if m:
        return (_CXX_VECTORS.get(m.group(1), "u8"), int(m.group(2)))
    return None


# --------------------------------------------------------------------------- params

@dataclass
class ParamInfo:
    index: int
    ptx_name: str
    kind: str                  # ptr | int | float | struct
    ptx_type: str
    cxx: str | None
    elem: str | None = None    # buffers: element type name (launch_spec spelling)
    per_elem: int = 1          # C++ elements are this many ``elem`` (float4: 4)
    size: int = 0              # bytes of a by-value param
    loaded: bool = True        # structs: does the kernel read it at all?
    fields: list = field(default_factory=list)   # structs: (offset, PTX type) of each load

    @property
    def scalar_type(self) -> str:
        """The launch_spec type of a scalar param."""
        cxx = (self.cxx or "").replace("const", "").strip()
        if cxx in _CXX_SCALARS:
            return _CXX_SCALARS[cxx]
        if self.kind == "struct":
            return {1: "u8", 2: "u16", 4: "u32", 8: "u64"}.get(self.size, "u8")
        if self.kind == "float":
            return {".f64": "f64", ".f16": "f16", ".b16": "f16"}.get(self.ptx_type, "f32")
        t = self.ptx_type
        return {".u64": "u64", ".s64": "s64", ".b64": "u64", ".u16": "u16", ".s16": "s16",
                ".b16": "u16", ".u8": "u8", ".s8": "s8", ".b8": "u8", ".u32": "s32",
                ".s32": "s32", ".b32": "s32"}.get(t, "s32")


def param_infos(fn) -> list[ParamInfo]:
    roles = fn.param_roles
    referenced = set()
    loads: dict[str, set] = {}
    from ptx_ir.nodes import walk_operand
    for inst in fn.instructions:
        for op in inst.operands:
            for x in walk_operand(op):
                if isinstance(x, Sym):
                    referenced.add(x.name)
        if inst.opcode == "ld" and inst.space == ".param":
            a = isa.address_operand(inst)
            if a is not None and isinstance(a.base, Sym):
                t = inst.type
                width = inst.vector_width
                for i in range(width):
                    loads.setdefault(a.base.name, set()).add(((a.offset or 0) + i * _type_bytes(t), t))
    out = []
    for p, role in zip(fn.params, roles):
        cxx = role.cxx_type
        struct = bool(p.dims)
        base_cxx = (cxx or "").replace("const", "").strip()
        if struct and base_cxx in ("__half", "half", "__nv_bfloat16", "nv_bfloat16") and p.size == 2:
            out.append(ParamInfo(role.index, p.name, "float", ".f16" if "half" in base_cxx else ".bf16", cxx))
            continue
        if struct:
            fields = sorted(loads.get(p.name, ()))
            info = ParamInfo(role.index, p.name, "struct", p.type, cxx, size=p.size or 0,
                             loaded=p.name in referenced, fields=fields)
            # a struct that is just a pointer (thrust::device_ptr, an iterator): a pointer
            if p.size == 8 and fields and all(o == 0 and t in (".u64", ".b64", ".s64") for o, t in fields) \
                    and (role.pointer or _reaches_address(fn, p.name)):
                info.kind = "ptr"
                info.elem = _elem_from_accesses(role.element_types) or None
            out.append(info)
            continue
        is_ptr = role.pointer or p.ptr or bool(cxx and cxx.strip().endswith("*"))
        if cxx is not None and not cxx.strip().endswith("*") and not cxx.strip().endswith("&"):
            base = cxx.replace("const", "").strip()
            if base in _CXX_SCALARS or base in ("float", "double"):
                is_ptr = False
        if is_ptr and p.type not in (".u64", ".b64", ".s64"):
            is_ptr = False
        if is_ptr:
            elem = cxx_element(cxx)
            info = ParamInfo(role.index, p.name, "ptr", p.type, cxx)
            if elem is not None:
                info.elem, info.per_elem = elem
            else:
                info.elem = _elem_from_accesses(role.element_types)
            out.append(info)
        elif p.type in (".f32", ".f64", ".f16") or (cxx and cxx.replace("const", "").strip() in
                                                    ("float", "double", "__half", "half", "__nv_bfloat16")):
            out.append(ParamInfo(role.index, p.name, "float", p.type, cxx))
        else:
            out.append(ParamInfo(role.index, p.name, "int", p.type, cxx))
    return out


def _type_bytes(t) -> int:
    from ptx_ir.nodes import type_size
    return type_size(t) if t else 4


def _reaches_address(fn, pname: str) -> bool:
    """Does a value loaded from param ``pname`` reach the address of a memory access?"""
    for i, p in enumerate(fn.params):
        if p.name == pname:
            return "address" in scalar_roles(fn).get(i, set())
    return False


def _elem_from_accesses(types) -> str | None:
    types = sorted(types or ())
    if not types:
        return None
    sizes = {_PTX_TO_ELEM.get(t, "u8") for t in types}
    floats = [t for t in types if t.startswith(".f")]
    if floats:
        return _PTX_TO_ELEM.get(floats[0], "f32")
    signed = [t for t in types if t.startswith(".s")]
    if signed:
        return _PTX_TO_ELEM[signed[0]]
    return sorted(sizes)[0]


# --------------------------------------------------------------------------- guards

@dataclass
class Bound:
    """``index(ctaid.d, ...) < expr`` for grid dimension ``dim``."""
    dim: int
    expr: Affine                  # over param atoms and constants
    ntid_coeff: int = 0           # index = ntid_coeff * ctaid.d * ntid.d + const_coeff * ctaid.d + ...
    const_coeff: int = 0
    grid_stride: bool = False     # the index is a recurrence stepping by the whole grid

    def extent(self, block_dim: int) -> int:
        """How many index values one block covers along this dimension."""
        return abs(self.ntid_coeff) * block_dim + abs(self.const_coeff)


def affine_to_expr(a: Affine, names: dict[str, str], *, round_up: bool = True) -> str | None:
    """A spec expression for an affine form over ``param:`` atoms; None if it has others.
    With ``round_up`` negative constant terms are dropped (the result is >= the value when
    the params are non-negative)."""
    parts = []
    const = 0
    for mono, c in sorted(a.terms, key=lambda t: (-len(t[0]), t[0])):
        if not mono:
            const = c
            continue
        factors = []
        for atom in mono:
            if not atom.startswith("param:") or atom[6:] not in names:
                return None
            factors.append(names[atom[6:]])
        if c < 0:
            return None
        term = "*".join(factors)
        parts.append(term if c == 1 else f"{c}*{term}")
    if const > 0 or (const < 0 and not round_up):
        parts.append(str(const))
    if not parts:
        return None
    return " + ".join(parts).replace("+ -", "- ")


def grid_bounds(fn) -> list[Bound]:
    """Guards of the form ``index(ctaid.d) < scalar expression`` (see the module doc)."""
    ev = AddressEvaluator(fn)
    out: list[Bound] = []
    seen = set()
    for inst in fn.instructions:
        if inst.opcode != "setp" or len(inst.operands) < 3:
            continue
        t = inst.type
        if t is None or t[1] not in "usb":
            continue
        a, fa = _scaled_operand(fn, ev, inst.operands[1], inst)
        b, fb = _scaled_operand(fn, ev, inst.operands[2], inst)
        if a is None or b is None:
            continue
        for idx, lim, f in ((a, b, fa), (b, a, fb)):
            if f != 1:
                lim = lim.scale(f)        # (idx >> k) < lim  <=>  idx < lim << k (roughly)
            for bound in _bounds_of(idx, lim, ev):
                key = (bound.dim, bound.expr, bound.ntid_coeff, bound.const_coeff, bound.grid_stride)
                if key not in seen:
                    seen.add(key)
                    out.append(bound)
    return out


def _scaled_operand(fn, ev, op, inst):
    """(affine, f): the operand is ``affine / f`` (a right shift or a division by a constant
    of an affine value), or (affine, 1)."""
    if isinstance(op, Reg) and not op.is_special:
        defs = fn.def_use.definitions(inst, op.name)
        if len(defs) == 1 and isinstance(defs[0], Instruction):
            d = defs[0]
            if d.opcode in ("shr", "div") and d.guard is None and len(d.operands) == 3 \
                    and isinstance(d.operands[2], Imm) and not d.operands[2].is_float:
                k = int(d.operands[2].value)
                f = (1 << k) if d.opcode == "shr" else k
                if 1 < f <= 1 << 16:
                    src = ev.operand(d.operands[1], d)
                    if src is not None:
                        return src, f
    return ev.operand(op, inst), 1


def _bounds_of(idx: Affine, lim: Affine, ev: AddressEvaluator):
    if any(not (x.startswith("param:")) for x in lim.atoms()):
        return
    for d, ch in enumerate(DIMS):
        cta = f"%ctaid.{ch}"
        ntid = f"%ntid.{ch}"
        if cta in idx.atoms():
            yield Bound(d, lim, idx.coefficient(cta, ntid), idx.coefficient(cta))
            continue
        for atom in idx.atoms():
            if atom.startswith("iv:") and atom[3:] in ev.recurrences:
                init, step = ev.recurrences[atom[3:]]
                if cta in init.atoms():
                    gs = f"%nctaid.{ch}" in step.atoms()
                    yield Bound(d, lim, init.coefficient(cta, ntid), init.coefficient(cta), grid_stride=gs)


# --------------------------------------------------------------------------- scalar roles

_PASS = {"mov", "cvt", "add", "sub", "mul", "mad", "shl", "shr", "min", "max", "selp", "and", "or",
         "xor", "neg", "abs", "not", "div", "rem", "mul24", "mad24", "cvta", "bfe", "prmt", "slct"}


def scalar_roles(fn) -> dict[int, set]:
    """param index -> roles: compared, address, divisor, shift, float, loop (compared in a loop)."""
    du = fn.def_use
    index = {p.name: i for i, p in enumerate(fn.params)}
    loop_blocks = set()
    for loop in fn.loops:
        loop_blocks |= set(loop.blocks)
    roles: dict[int, set] = {}
    for inst in fn.instructions:
        if inst.opcode != "ld" or inst.space != ".param":
            continue
        addr = isa.address_operand(inst)
        if addr is None or not isinstance(addr.base, Sym) or addr.base.name not in index:
            continue
        k = index[addr.base.name]
        r = roles.setdefault(k, set())
        stack = [inst]
        seen = {id(inst)}
        while stack:
            cur = stack.pop()
            defs = {x.name for x in isa.defs(cur)}
            for user in du.users(cur):
                if id(user) in seen:
                    continue
                used_as = [i for i, op in enumerate(user.operands)
                           if any(isinstance(x, Reg) and x.name in defs for x in _regs(op))]
                if not used_as:
                    continue
                op = user.opcode
                if op == "setp" or op == "set":
                    others = [o for i, o in enumerate(user.operands[1:3], 1) if i not in used_as]
                    if others and all(isinstance(o, Imm) for o in others):
                        r.add("compared_const")
                    else:
                        r.add("compared")
                    if fn.block_of(user) in loop_blocks:
                        r.add("loop")
                    continue
                if isa.touches_memory(user):
                    if any(isinstance(user.operands[i], Addr) for i in used_as):
                        r.add("address")
                    continue
                if op in ("div", "rem") and 2 in used_as:
                    r.add("divisor")
                if op in ("shl", "shr", "shf") and 2 in used_as:
                    r.add("shift")
                if op == "cvt" and user.types and user.types[0].startswith(".f"):
                    r.add("float")
                    continue
                if user.type and user.type.startswith(".f"):
                    r.add("float")
                    continue
                if op in _PASS:
                    seen.add(id(user))
                    stack.append(user)
    return roles


def _regs(op):
    from ptx_ir.nodes import walk_operand
    return [x for x in walk_operand(op) if isinstance(x, Reg)]


# --------------------------------------------------------------------------- traits

@dataclass
class KernelTraits:
    block_dims: int = 1            # highest block dimension used (1..3)
    grid_dims: set = field(default_factory=set)   # grid dimensions whose ctaid is used
    warp_collectives: bool = False
    reqntid: tuple | None = None
    maxntid: int | None = None
    dynamic_shared: bool = False
    tile: dict = field(default_factory=dict)     # dim -> constant per-block extent seen
    calls: list = field(default_factory=list)


_WARP_OPS = {"shfl", "vote", "match", "redux", "activemask", "wmma", "mma", "ldmatrix", "stmatrix",
             "wgmma", "elect", "movmatrix"}


def kernel_traits(fn, module, bounds: list[Bound] | None = None) -> KernelTraits:
    t = KernelTraits()
    used = set()
    for inst in fn.instructions:
        for op in inst.operands:
            for r in _regs(op):
                used.add(r.name)
        if inst.opcode in _WARP_OPS or (inst.opcode == "bar" and ".warp" in inst.modifiers):
            t.warp_collectives = True
        if inst.opcode == "call":
            t.calls.append(next((str(o) for o in inst.operands if isinstance(o, Sym)), "?"))
    for d, ch in enumerate(DIMS):
        if f"%tid.{ch}" in used or f"%ntid.{ch}" in used:
            t.block_dims = max(t.block_dims, d + 1)
        if f"%ctaid.{ch}" in used:
            t.grid_dims.add(d)
    for dname, attr in ((".reqntid", "reqntid"), (".maxntid", "maxntid")):
        dv = fn.directive(dname)
        if dv is None:
            continue
        nums = [int(str(a)) for a in dv.args if str(a).isdigit()]
        if not nums:
            continue
        if attr == "reqntid":
            t.reqntid = tuple(nums + [1] * (3 - len(nums)))
        else:
            p = 1
            for n in nums:
                p *= n
            t.maxntid = p
    decls = list(module.globals) + [s for s in (fn.body or ()) if isinstance(s, VarDecl)]
    from ptx_ir.nodes import walk_operand
    named = {x.name for inst in fn.instructions for op in inst.operands
             for x in walk_operand(op) if isinstance(x, Sym)}
    t.dynamic_shared = any(d.space.startswith(".shared") and d.size is None and d.name in named for d in decls)
    for b in bounds or ():
        if b.const_coeff and not b.ntid_coeff and 1 < b.const_coeff <= 1024:
            t.tile.setdefault(b.dim, b.const_coeff)
    return t


# --------------------------------------------------------------------------- shared tiles

def tile_block(fn, module) -> tuple | None:
    """The block a 2-D/3-D shared tile implies, or None.

    A store ``tile[threadIdx.y][threadIdx.x] = ...`` (byte offset ``e*tid.x + R*e*tid.y``,
    nothing else) into a static ``__shared__ T tile[D][R]`` is written for a block of R
    columns (R-1 when R-1 is a power of two: the usual ``[16][17]`` padding against bank
    conflicts) and D rows; likewise ``tile[tid.z][tid.y][tid.x]`` for 3-D. Other shapes let
    threads of one block write the same shared bytes (a race that makes even nvcc's code
    non-deterministic) or leave part of the tile unwritten. All such stores must agree."""
    from ptx_ir.memory import collect_memory_accesses
    sizes = {}
    for d in list(module.globals) + [s for s in (fn.body or ()) if isinstance(s, VarDecl)]:
        if d.space.startswith(".shared") and d.size:
            sizes[d.name] = int(d.size)
    if not sizes:
        return None
    found = set()
    for a in collect_memory_accesses(fn):
        if a.kind != "store" or not a.space.startswith(".shared") or a.base is None \
                or not a.base.startswith("sym:") or a.vector_width != 1 or not a.bytes:
            continue
        size = sizes.get(a.base[4:])
        off = a.offset
        if size is None or off is None or off.constant != 0 or off.degree != 1:
            continue
        coeff = {m[0]: c for m, c in off.terms if m}
        if not set(coeff) <= {"%tid.x", "%tid.y", "%tid.z"} or "%tid.y" not in coeff:
            continue
        cx, cy, cz = coeff.get("%tid.x"), coeff["%tid.y"], coeff.get("%tid.z")
        if cx != a.bytes or cy % cx or cy <= cx:
            continue
        rx = cy // cx
        bx = rx - 1 if rx > 2 and (rx - 1) & (rx - 2) == 0 else rx
        if cz is None:
            if size % cy:
                continue
            shape = (bx, size // cy, 1)
        else:
            if cz % cy or cz <= cy or size % cz:
                continue
            shape = (bx, cz // cy, size // cz)
        if 1 < shape[0] * shape[1] * shape[2] <= 1024:
            found.add(shape)
    return found.pop() if len(found) == 1 else None
