"""nounroll: mark loops ``.pragma "nounroll";`` so ptxas does not unroll them.

The reverse of ``unroll``: where ptxas's own unrolling costs registers (and so occupancy)
or instruction-cache space, telling it not to unroll can be faster. The pragma is only a
hint to ptxas: it changes no instruction, so the kernel computes exactly what it did.

``scope``: ``innermost`` marks loops that contain no other loop; ``all`` marks every loop.
Loops that already carry the pragma are left alone (an empty change list when none is left).
"""
from __future__ import annotations

from ptx_ir.nodes import Directive

from superopt.passes import Change, register
from superopt.passes.unroll import has_backward_branch, has_nounroll


def pragma() -> Directive:
    return Directive(".pragma", ['"nounroll"'], True)


@register(
    name="nounroll",
    order=70,
    summary='add .pragma "nounroll" at loop headers so ptxas keeps the loops rolled',
    assumes="nothing: the pragma is a hint to ptxas and changes no instruction",
    params={"scope": ["innermost", "all"]},
)
def nounroll(fn, *, scope: str = "innermost") -> list[Change]:
    if scope not in ("innermost", "all"):
        raise ValueError(f"scope must be 'innermost' or 'all', not {scope!r}")
    if fn.is_declaration or not has_backward_branch(fn):
        return []
    targets = []
    for loop in fn.loops:
        if scope == "innermost" and loop.children:
            continue
        if not loop.header.instructions or has_nounroll(fn, loop.header):
            continue
        targets.append(loop)
    changes = []
    for loop in targets:
        first = loop.header.instructions[0]
        fn.insert_before(first, pragma())
        changes.append(Change(f'loop {loop.header.name}: .pragma "nounroll"', first))
    return changes
