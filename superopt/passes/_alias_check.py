"""The launch-time disjointness check that no-alias versioning puts in front of a fast body.

nvcc must assume that a kernel's output may overlap its inputs; a rewrite that assumes it does
not (a global accumulator kept in a register, loads made ``ld.global.nc``, a body compiled with
``__restrict__`` parameters) is exact only when the buffers of the launch are disjoint. The
check proves that at launch: from every pointer parameter's footprint (the byte range its
accesses can reach over the whole grid, computed from the kernel's parameters and the launch
dimensions), every written range must be disjoint from every other accessed range. All threads
compute the same predicate (it depends only on parameters and ``%ntid``/``%nctaid``), so the
versioned kernel never diverges on it.

:class:`AliasCheck` is the contract between what builds the check (the footprint analysis) and
what places a fast body behind it (:mod:`superopt.passes._versioning`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ptx_ir.nodes import Instruction


@dataclass
class AliasCheck:
    """Instructions that set ``predicate`` true exactly when the launch's buffers are disjoint.

    ``instructions`` only read kernel parameters (``ld.param``) and the special registers of the
    launch; they write only registers created with ``fn.new_register`` on the function the check
    was built for, so they can be placed at its entry, before anything else.
    """

    instructions: list[Instruction]
    predicate: str                  # a .pred register: true means "no written range overlaps"
    written: list[str]              # pointer parameters the kernel writes
    compared: list[str]             # every pointer parameter whose range the check compares
    ranges: dict = field(default_factory=dict)   # param -> human-readable footprint

    def describe(self) -> str:
        pairs = ", ".join(f"{w} vs {o}" for w in self.written for o in self.compared if o != w)
        return f"launch-time no-alias check ({len(self.instructions)} instructions): {pairs}"
