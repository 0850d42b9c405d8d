"""The kernel's C signature (``--signature``) and the PTX header it pins.

``vadd(const float* a, const float* b, float* c, int n)`` (a leading ``__global__ void`` or
``extern "C"`` is allowed) names the kernel and its parameters. Each parameter is a pointer
to one element type (``float*``, ``const int*``, ``double* __restrict__``; vector types such
as ``float4*`` count in their scalar elements) or a scalar (``int``, ``unsigned``, ``float``,
``double``, ``size_t``, ``int64_t``, ...). Every parameter needs a name: the launch spec and
a numpy reference address parameters by it.

The PTX header is what nvcc writes for ``extern "C" __global__ void`` with that signature:
``.visible .entry NAME(.param .u64 NAME_param_0, .param .u32 NAME_param_1, ...)``. It is
fixed: the model writes only the body (the grammar makes it so), and a header that differs
is rejected before anything runs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import ptx_ir
from superopt.specs.launch_spec import SpecError, elem_type
from superopt.specs.comments import split_top

__all__ = ["SignatureError", "SigParam", "KernelSignature", "parse_signature", "stub_module_text",
           "DEFAULT_TARGET", "ptx_version_for"]

DEFAULT_TARGET = "sm_90"

# the PTX type of a by-value parameter, as nvcc declares it (int -> .u32, bool -> .u8, ...)
_PTX_SCALAR = {"s8": ".u8", "u8": ".u8", "s16": ".u16", "u16": ".u16", "s32": ".u32", "u32": ".u32",
               "s64": ".u64", "u64": ".u64", "f32": ".f32", "f64": ".f64", "f16": ".b16", "bf16": ".b16"}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct)\b")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SignatureError(ValueError):
    """A ``--signature`` that cannot be read, or does not fit what it is used with."""


@dataclass(frozen=True)
class SigParam:
    index: int
    name: str              # the C name (the spec and a numpy reference use it)
    cxx: str               # the C type as written, qualifiers and all
    pointer: bool
    elem: str              # element type (launch_spec spelling): pointee for pointers
    const: bool = False    # a pointer to const: an input

    @property
    def ptx_type(self) -> str:
        return ".u64" if self.pointer else _PTX_SCALAR[self.elem]

    def describe(self) -> str:
        return f"{self.cxx} {self.name}"


@dataclass(frozen=True)
class KernelSignature:
    name: str
    params: tuple[SigParam, ...]

    @property
    def text(self) -> str:
        return f"{self.name}({', '.join(p.describe() for p in self.params)})"

    def ptx_param_name(self, i: int) -> str:
        return f"{self.name}_param_{i}"

    def param(self, name: str) -> SigParam:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def __str__(self) -> str:
        return self.text


def _scalar_elem(cxx: str) -> str:
    from superopt.specs.facts import _CXX_SCALARS
    t = " ".join(_QUALIFIERS.sub(" ", cxx).split()).replace("std::", "")
    if t in _CXX_SCALARS:
        return _CXX_SCALARS[t]
    if t in ("unsigned", "signed"):
        return "u32" if t == "unsigned" else "s32"
    try:
        return elem_type(t).name
    except SpecError:
        raise SignatureError(f"unknown scalar type {cxx!r} (use int, unsigned, long long, size_t, float, "
                             f"double, int64_t, ...)") from None


def _param(index: int, decl: str) -> SigParam:
    decl = " ".join(decl.split())
    if not decl:
        raise SignatureError(f"parameter {index} is empty")
    if "[" in decl or "&" in decl or "(" in decl:
        raise SignatureError(f"parameter {index} ({decl!r}): only pointers and scalars are supported "
                             f"(no arrays, references or function pointers)")
    m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", decl)
    cxx = decl[:m.start()].strip() if m else ""
    if not m or not cxx or cxx in ("const", "volatile") or cxx.endswith("::"):
        raise SignatureError(f"parameter {index} ({decl!r}) needs a type and a name, e.g. 'const float* x'")
    name = m.group(1)
    if name in ("const", "volatile", "__restrict__", "__restrict", "restrict", "int", "float", "double",
                "unsigned", "char", "short", "long"):
        raise SignatureError(f"parameter {index} ({decl!r}) needs a name after its type")
    if "*" in cxx:
        from superopt.specs.facts import cxx_element
        base = cxx[:cxx.rindex("*") + 1]
        after = _QUALIFIERS.sub(" ", cxx[cxx.rindex("*") + 1:]).strip()
        if after:
            raise SignatureError(f"parameter {index} ({decl!r}): cannot read {after!r} after the '*'")
        if base.count("*") > 1:
            raise SignatureError(f"parameter {index} ({decl!r}): pointers to pointers are not supported")
        got = cxx_element(base)
        if got is None:
            raise SignatureError(f"parameter {index} ({decl!r}): unknown element type "
                                 f"{_QUALIFIERS.sub(' ', base[:-1]).strip()!r}")
        const = bool(re.search(r"\bconst\b", base))
        return SigParam(index, name, cxx, True, got[0], const)
    return SigParam(index, name, cxx, False, _scalar_elem(cxx))


def parse_signature(text: str) -> KernelSignature:
    """``NAME(T a, U b, ...)`` -> :class:`KernelSignature`; :class:`SignatureError` says what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise SignatureError("the signature is empty: write e.g. 'vadd(const float* a, const float* b, float* c, int n)'")
    s = " ".join(text.split())
    s = re.sub(r'^\s*extern\s+"C"\s*', "", s)
    s = re.sub(r"^\s*(__global__\s+)?(static\s+)?(void\s+)?", "", s)
    s = re.sub(r"\s*(;|\{\s*\})\s*$", "", s)
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)", s)
    if not m:
        raise SignatureError(f"cannot read the signature {text!r}: write NAME(TYPE name, ...), "
                             f"e.g. 'vadd(const float* a, const float* b, float* c, int n)'")
    name, plist = m.group(1), m.group(2).strip()
    if len(name) > 200:
        raise SignatureError("the kernel name is longer than 200 characters")
    decls = [] if plist in ("", "void") else split_top(plist)
    params = tuple(_param(i, d) for i, d in enumerate(decls))
    names = [p.name for p in params]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SignatureError(f"parameter name(s) used twice: {', '.join(dup)}")
    if not params:
        raise SignatureError("the kernel has no parameters: it could not write anything to check")
    if not any(p.pointer and not p.const for p in params):
        raise SignatureError("no parameter is a pointer to non-const memory: the kernel would have no output "
                             "(write outputs as e.g. 'float* out')")
    return KernelSignature(name, params)


def ptx_version_for(target: str) -> str:
    """A PTX ISA version that supports ``target`` (sm_100/sm_120 need 8.6/8.7)."""
    m = re.fullmatch(r"sm_(\d+)[af]?", target)
    if not m:
        raise SignatureError(f"unknown target {target!r} (write e.g. sm_90)")
    major = int(m.group(1))
    return "8.7" if major >= 100 else "8.0" if major >= 90 else "7.8"


def stub_module_text(sig: KernelSignature, target: str = DEFAULT_TARGET, *, version: str | None = None) -> str:
    """A module with the kernel's header and an empty body (``ret;``), in ptx_ir's layout:
    the header the model continues, and the baseline a numpy reference stands behind."""
    version = version or ptx_version_for(target)
    params = ",\n".join(f"\t.param {p.ptx_type} {sig.ptx_param_name(p.index)}" for p in sig.params)
    text = (f".version {version}\n.target {target}\n.address_size 64\n\n"
            f".visible .entry {sig.name}(\n{params}\n)\n{{\n\tret;\n}}\n")
    return ptx_ir.emit(ptx_ir.parse(text))
