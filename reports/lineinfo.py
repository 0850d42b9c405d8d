"""Source lines behind a kernel's PTX, from ``.loc`` directives (``-lineinfo`` or ``-G``).

``.loc FILE LINE COL`` names a file by its index in the module's ``.file`` table. Records keep
the kernel's function text; when that text has no ``.file`` table the indices cannot be
resolved (guessing that index 1 is the ``.cu`` file would be wrong for code inlined from
headers), so only line numbers are reported and the note says why.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')


@dataclass
class SourceLine:
    file: str
    line: int
    text: str | None
    baseline: int = 0             # PTX instructions attributed to this line, nvcc's
    optimized: int = 0            # and nvcc-plus's


@dataclass
class SourceLines:
    lines: list[SourceLine] = field(default_factory=list)
    note: str = ""


def _is_instruction(raw: str) -> bool:
    text = raw.split("//", 1)[0].strip()
    return bool(text) and not text.startswith((".", "{", "}", ")")) and not text.endswith(":")


def _attribute(ptx: str) -> tuple[Counter, dict[int, str]]:
    files: dict[int, str] = {}
    counts: Counter = Counter()
    where: tuple[int, int] | None = None
    for raw in ptx.splitlines():
        if m := _FILE.match(raw):
            files[int(m.group(1))] = m.group(2)
        elif m := _LOC.match(raw):
            where = (int(m.group(1)), int(m.group(2)))
        elif where and _is_instruction(raw):
            counts[where] += 1
    return counts, files


def source_lines(baseline_ptx: str | None, optimized_ptx: str | None, extra_files: dict[int, str] | None = None) -> SourceLines:
    """The source lines either PTX is attributed to, with instruction counts on each side."""
    base, base_files = _attribute(baseline_ptx or "")
    opt, opt_files = _attribute(optimized_ptx or "")
    if not base and not opt:
        return SourceLines([], "no line information in the PTX (build with -lineinfo to see source lines)")
    files = {**(extra_files or {}), **opt_files, **base_files}
    unresolved = sorted({f for f, _ in (set(base) | set(opt)) if f not in files})
    texts: dict[str, list[str] | None] = {}
    out = []
    for (f, line) in sorted(set(base) | set(opt)):
        path = files.get(f, f"file #{f}")
        if path not in texts:
            try:
                texts[path] = Path(path).read_text(errors="replace").splitlines() if f in files else None
            except OSError:
                texts[path] = None
        lines = texts[path]
        text = lines[line - 1] if lines and 0 < line <= len(lines) else None
        out.append(SourceLine(path, line, text, base.get((f, line), 0), opt.get((f, line), 0)))
    notes = []
    if unresolved:
        notes.append(f"file index {', '.join(map(str, unresolved))} not resolved: the record keeps the kernel's "
                     "PTX without its module's .file table")
    missing = sorted(p for p, t in texts.items() if t is None and not p.startswith("file #"))
    if missing:
        notes.append(f"source not readable here: {', '.join(missing)}")
    return SourceLines(out, "; ".join(notes))
