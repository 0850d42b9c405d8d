"""Pointer fields of by-value structs, modelled as *virtual* pointer parameters.

A kernel such as ``layernorm_rows(LayerNormParams p, ...)`` or ``spmv(CsrMatrix A, ...)``
reaches memory through 8-byte fields of a struct passed by value. The launch-spec format
already gives such a struct as a ``Bytes`` param whose ``pointers`` name *embedded* buffers
(the checker writes each buffer's address into the struct at every launch), so inference
can give one as soon as the tracer can bound the accesses through the fields.

The tracer and the inferrer key buffers by parameter index. A pointer field is therefore
given an index past the kernel's own parameters (``len(params) + j``): the tracer's
``("bytes", value, {offset: index})`` kind makes an ``ld.param.u64`` of the field yield
that virtual param's base address, and from there it is recorded, bounded and fitted like
any pointer param (lengths, element types, directions, index distributions). The embedded
buffers are appended to the spec's params in index order, so the index of a virtual param
is also its position among the spec's params (as :meth:`_Inferrer._make_spec` checks).

Which fields are pointers comes from the static access analysis
(:func:`superopt.specs.data_roles.struct_field_types`) and, for what that misses, from the
trace itself: an access through a field traced as bytes names the field
(``TraceResult.struct_pointers``) and the launch is traced again with it as a pointer.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["VirtualPointer", "VirtualPointers"]


@dataclass(frozen=True)
class VirtualPointer:
    index: int          # the tracer's param index (past the kernel's params)
    struct: int         # index of the by-value struct param holding the field
    offset: int         # byte offset of the 8-byte field in the struct
    name: str           # the embedded buffer's name in the spec (<struct name>_<offset>)


class VirtualPointers:
    """The pointer fields found so far, by (struct index, offset) and by virtual index."""

    def __init__(self, infos, names):
        self.infos = infos
        self.names = names
        self.by_field: dict[tuple[int, int], VirtualPointer] = {}
        self.by_index: dict[int, VirtualPointer] = {}

    def add(self, struct: int, offset: int) -> bool:
        """Model the field at ``offset`` of struct param ``struct`` as a pointer; False when
        it already is or cannot be one (not an aligned 8-byte field of a by-value struct)."""
        if (struct, offset) in self.by_field or not 0 <= struct < len(self.infos):
            return False
        info = self.infos[struct]
        if info.kind != "struct" or offset % 8 or offset < 0 or offset + 8 > info.size:
            return False
        taken = {v.name for v in self.by_index.values()} | set(self.names)
        name = f"{self.names[struct]}_{offset}"
        while name in taken:
            name += "_"
        vp = VirtualPointer(len(self.infos) + len(self.by_index), struct, offset, name)
        self.by_field[(struct, offset)] = vp
        self.by_index[vp.index] = vp
        return True

    def seed(self, fn) -> None:
        """The fields the static access analysis sees memory accessed through."""
        from superopt.specs.data_roles import struct_field_types
        by_name = {fn.params[i.index].name: i.index for i in self.infos}
        for (pname, off), _t in sorted(struct_field_types(fn).items(), key=lambda kv: (kv[0][0], kv[0][1])):
            if pname in by_name:
                self.add(by_name[pname], off)

    def of_struct(self, struct: int) -> dict[int, int]:
        """offset -> virtual index of the pointer fields of one struct param."""
        return {v.offset: v.index for v in self.by_index.values() if v.struct == struct}

    def key(self) -> tuple:
        return tuple(sorted(self.by_index))

    def __bool__(self) -> bool:
        return bool(self.by_index)

    def __iter__(self):
        return iter(sorted(self.by_index.values(), key=lambda v: v.index))

    def __contains__(self, index) -> bool:
        return index in self.by_index

    def __getitem__(self, index: int) -> VirtualPointer:
        return self.by_index[index]
