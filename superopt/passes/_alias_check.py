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
what places a fast body behind it (:mod:`superopt.passes._versioning`). :class:`FastPath` is what
the versioning leaves for the kernel's record: the check, where the fast body came from, and the
kernel's parameters, so that the check can be run again later on a captured launch's parameters
(:mod:`superopt.search.fast_path`) without the candidate's IR.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ptx_ir.nodes import Instruction

# A bound of a range as the check's code holds it: the value of ``register`` plus ``constant``
# (``register`` None: the constant alone).
Bound = tuple  # (str | None, int)


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
    # param -> (lo, hi): where the check's code holds each compared range [lo, hi) in bytes, as
    # Bounds; empty for a check made without a footprint (the ranges then cannot be read back)
    bounds: dict = field(default_factory=dict)

    def describe(self) -> str:
        return f"launch-time no-alias check ({len(self.instructions)} instructions): {', '.join(self.pairs())}"

    def pairs(self) -> list[str]:
        """``"w vs o"`` for every written parameter and every other compared one."""
        return [f"{w} vs {o}" for w in self.written for o in self.compared if o != w]


@dataclass
class FastPath:
    """A fast body placed behind ``check`` (:func:`superopt.passes._versioning.versioned`)."""

    check: AliasCheck
    body: str                       # where the fast body comes from (a pass's ORIGIN sentence)
    params: list[str]               # the kernel's parameter names, in order

    def to_dict(self) -> dict:
        """The record's ``alias_checks[]`` entry (reports/schema.json, ``$defs/alias_check``),
        less what a capture says (added by the search)."""
        c = self.check
        return {"written": list(c.written), "compared": list(c.compared), "ranges": dict(c.ranges),
                "instructions": len(c.instructions), "body": self.body}
