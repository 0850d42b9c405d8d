"""Two SASS listings made comparable: addresses stripped, registers and branch targets renamed.

ptxas re-allocates registers and re-numbers addresses after any change, so a raw diff of the
SASS of a 3-line PTX change marks most of the kernel as changed (170 lines for one kernel of
issue 28): every ``R12`` became ``R14``, every branch target moved by 0x10. Here both sides are
rewritten before the diff:

* the address column, ``.reuse`` flags (operand-cache hints that follow the allocation) and
  the NOPs that pad the end go;
* a branch target becomes the label of the instruction it points at (``BRA L7``);
* nvcc's registers are renamed in order of appearance (per class: ``R``, ``P``, ``UR``, ``UP``,
  ``B``), and so are its labels;
* the rewrite's registers and labels take the names of their counterparts on nvcc's side,
  found by aligning the two listings on instruction shape (the line with register numbers
  left out): along every aligned pair each of the rewrite's operands is renamed to the one
  it stands for, from that line on; whatever has no counterpart gets a fresh name in order of
  appearance.

What is left different is what ptxas really did differently: other instructions, other
operands, another order. :func:`instruction_mix` counts each side's opcodes (with their
modifiers: ``LDG.E.128`` is not ``LDG.E``; the end's padding left out) for the table beside
the diff.
"""
from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass

__all__ = ["normalise_pair", "instruction_mix", "MixRow", "opcode"]

_ADDRESS = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s*")
_TOKEN = re.compile(r"\b(?:(UR|UP|R|P|B)(\d+)|(L)(\d+))\b")
_BRANCHES = re.compile(r"\b(?:BRA|BRX|CALL|JMP|JMX|BSSY|SSY|PBK|BREAK|BMOV|BPT|WARPSYNC)\b")
_TARGET = re.compile(r"\b0x([0-9a-f]+)\b")
_PREDICATE = re.compile(r"^@!?U?P(?:\d+|T)\s+")


def _body(text: str) -> list[str]:
    """The listing's lines without the NOPs that pad its end (alignment, never executed)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    while lines and opcode(lines[-1]) == "NOP":
        lines.pop()
    return lines


def _clean(text: str) -> list[str]:
    """Lines without addresses and ``.reuse``; branch targets as ``L<line index>``."""
    lines = _body(text)
    at = {}
    for i, line in enumerate(lines):
        m = _ADDRESS.match(line)
        if m:
            at[int(m.group(1), 16)] = i
    out = []
    for line in lines:
        line = _ADDRESS.sub("", line).replace(".reuse", "").rstrip().rstrip(";").rstrip()
        if _BRANCHES.search(line):
            line = _TARGET.sub(lambda m: f"L{at[int(m.group(1), 16)]}" if int(m.group(1), 16) in at
                               else m.group(0), line)
        out.append(line)
    return out


def _key(m: re.Match) -> tuple[str, str]:
    return (m.group(1) or m.group(3), m.group(2) or m.group(4))


def _shape(line: str) -> str:
    return _TOKEN.sub(lambda m: _key(m)[0], line)


def _tokens(line: str) -> list[tuple[str, str]]:
    return [_key(m) for m in _TOKEN.finditer(line)]


class _Names:
    """Names in order of first appearance, numbered per class."""

    def __init__(self):
        self.names: dict[tuple[str, str], str] = {}
        self.counts: Counter = Counter()

    def fresh(self, cls: str) -> str:
        n = self.counts[cls]
        self.counts[cls] += 1
        return f"{cls}{n}"

    def of(self, key: tuple[str, str]) -> str:
        if key not in self.names:
            self.names[key] = self.fresh(key[0])
        return self.names[key]


def normalise_pair(nvcc: str, rewrite: str) -> tuple[list[str], list[str]]:
    """Both listings rewritten as the module's docstring says, ready for a line diff."""
    a, b = _clean(nvcc), _clean(rewrite)
    names = _Names()
    left = [_TOKEN.sub(lambda m: names.of(_key(m)), line) for line in a]
    matcher = difflib.SequenceMatcher(None, [_shape(x) for x in a], [_shape(x) for x in b], autojunk=False)
    partner = {}
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            partner.update({j1 + k: i1 + k for k in range(i2 - i1)})
    current: dict[tuple[str, str], str] = {}        # the rewrite's token -> its name now
    for j, i in partner.items():                    # a label is the line it marks
        if ("L", str(i)) in names.names:
            current[("L", str(j))] = names.names[("L", str(i))]
    right = []
    for j, line in enumerate(b):
        if j in partner:
            for theirs, ours in zip(_tokens(a[partner[j]]), _tokens(line)):
                if ours[0] != "L":
                    current[ours] = names.of(theirs)

        def rename(m: re.Match) -> str:
            k = _key(m)
            if k not in current:
                current[k] = names.fresh(k[0])
            return current[k]
        right.append(_TOKEN.sub(rename, line))
    return left, right


def opcode(line: str) -> str:
    """The mnemonic of one SASS line with its modifiers (``LDG.E.128.CONSTANT``), without the
    address and the predicate."""
    line = _PREDICATE.sub("", _ADDRESS.sub("", line).strip())
    return line.split(None, 1)[0].rstrip(";") if line else ""


@dataclass(frozen=True)
class MixRow:
    opcode: str
    nvcc: int
    rewrite: int

    @property
    def change(self) -> int:
        return self.rewrite - self.nvcc


def instruction_mix(nvcc: str, rewrite: str) -> list[MixRow]:
    """Opcode counts of both listings, the most changed first (then by name)."""
    a = Counter(op for op in map(opcode, _body(nvcc)) if op)
    b = Counter(op for op in map(opcode, _body(rewrite)) if op)
    rows = [MixRow(op, a.get(op, 0), b.get(op, 0)) for op in a.keys() | b.keys()]
    return sorted(rows, key=lambda r: (-abs(r.change), r.opcode))
