"""Parameter roles and C++ signatures of kernels.

A parameter is a *pointer* when its value reaches the address of a global/generic access,
and then it is *read*, *written* or both; otherwise a *scalar*. The C++ signature comes
from demangling the kernel's name (``_Z6kernelPfPKfi`` → ``kernel(float*, float const*,
int)``), which tells ``float*`` from ``int`` from ``const double*``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache


@dataclass
class ParamRole:
    name: str
    index: int
    ptx_type: str
    size: int
    pointer: bool = False
    read: bool = False
    written: bool = False
    atomic: bool = False
    element_types: set = field(default_factory=set)   # PTX types accessed through it
    cxx_type: str | None = None                        # from the demangled signature

    @property
    def role(self) -> str:
        if not self.pointer:
            return "scalar"
        if self.written and self.read:
            return "inout"
        return "out" if self.written else "in"


@lru_cache(maxsize=4096)
def demangle(name: str) -> str | None:
    """The demangled C++ name, or None for names that are not Itanium-mangled."""
    if not name.startswith("_Z"):
        return None
    try:
        text = _demangler()(name)
    except Exception:
        return None
    return None if not text or text == name else text


@lru_cache(maxsize=1)
def _demangler():
    """``__cxa_demangle`` of the C++ runtime the interpreter has loaded or can load by its usual
    name; cxxfilt's where that fails. (Importing cxxfilt looks its libraries up with
    ``ctypes.util.find_library``, which runs ``ldconfig -p``: a process per compilation.)"""
    import ctypes
    try:
        libcxx = ctypes.CDLL("libstdc++.so.6")
        libc = ctypes.CDLL(None)
        cxa, free = libcxx.__cxa_demangle, libc.free
    except (OSError, AttributeError):
        import cxxfilt
        return cxxfilt.demangle
    cxa.restype = ctypes.c_void_p
    cxa.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    free.argtypes = [ctypes.c_void_p]

    def run(name: str) -> str | None:
        status = ctypes.c_int()
        out = cxa(name.encode(), None, None, ctypes.byref(status))
        if not out:
            return None
        try:
            return ctypes.string_at(out).decode("utf-8", "replace") if status.value == 0 else None
        finally:
            free(out)
    return run


def signature_types(demangled: str) -> list[str] | None:
    """Top-level parameter types of a demangled function signature."""
    depth = 0
    start = None
    end = None
    for i in range(len(demangled) - 1, -1, -1):   # the last balanced (...) holds the params
        ch = demangled[i]
        if ch == ")":
            if depth == 0:
                end = i
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                start = i
                break
    if start is None or end is None:
        return None
    inner = demangled[start + 1:end].strip()
    if inner in ("", "void"):
        return []
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def param_roles(fn) -> list[ParamRole]:
    roles = []
    by_atom = {}
    for i, p in enumerate(fn.params):
        size = p.size or p.element_size
        role = ParamRole(p.name, i, p.type, size)
        roles.append(role)
        by_atom[f"param:{p.name}"] = role
    for access in fn.memory_accesses:
        if access.space not in (".global", "generic") or access.affine is None:
            continue
        for (mono, coeff) in access.affine.terms:
            if len(mono) == 1 and coeff == 1 and mono[0] in by_atom:
                role = by_atom[mono[0]]
                role.pointer = True
                if access.kind in ("load",):
                    role.read = True
                elif access.kind == "store":
                    role.written = True
                else:
                    role.read = role.written = role.atomic = True
                if access.type:
                    role.element_types.add(access.type)
    demangled = demangle(fn.name)
    types = signature_types(demangled) if demangled else None
    if types is not None and len(types) == len(roles):
        for role, cxx in zip(roles, types):
            role.cxx_type = cxx
            if cxx.endswith("*") and not role.pointer:
                role.pointer = True   # unused or only passed on; still a pointer to the host
    return roles
