"""Two listings side by side (nvcc's left, nvcc-plus's right), folded to the changed parts.

Rows carry difflib's kinds (``equal``, ``replace``, ``delete``, ``insert``) so a template can
colour them; runs of unchanged lines longer than twice the context are folded into one
``fold`` row that says how many lines it hides.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class DiffRow:
    kind: str                     # equal | replace | delete | insert | fold
    left_no: int | None = None
    left: str = ""
    right_no: int | None = None
    right: str = ""
    hidden: int = 0               # for fold rows: how many unchanged lines


def side_by_side(left: str, right: str, context: int = 3, key=None) -> list[DiffRow]:
    """Rows of ``left`` against ``right``; ``key`` maps a line to what is compared (all of it
    by default)."""
    a, b = left.expandtabs(8).splitlines(), right.expandtabs(8).splitlines()
    rows: list[DiffRow] = []
    ka, kb = (a, b) if key is None else ([key(x) for x in a], [key(x) for x in b])
    ops = difflib.SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes()
    for n, (tag, i1, i2, j1, j2) in enumerate(ops):
        if tag == "equal":
            length = i2 - i1
            head = context if n > 0 else 0
            tail = context if n < len(ops) - 1 else 0
            if length > head + tail + 1:
                for k in range(head):
                    rows.append(DiffRow("equal", i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]))
                rows.append(DiffRow("fold", hidden=length - head - tail))
                for k in range(length - tail, length):
                    rows.append(DiffRow("equal", i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]))
            else:
                for k in range(length):
                    rows.append(DiffRow("equal", i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]))
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            li, rj = i1 + k, j1 + k
            rows.append(DiffRow(tag if tag != "replace" else ("replace" if li < i2 and rj < j2 else
                                                               ("delete" if li < i2 else "insert")),
                                li + 1 if li < i2 else None, a[li] if li < i2 else "",
                                rj + 1 if rj < j2 else None, b[rj] if rj < j2 else ""))
    return rows


def changed_lines(rows: list[DiffRow]) -> tuple[int, int]:
    """(lines removed or changed on the left, lines added or changed on the right)."""
    return (sum(1 for r in rows if r.kind in ("replace", "delete") and r.left_no),
            sum(1 for r in rows if r.kind in ("replace", "insert") and r.right_no))
