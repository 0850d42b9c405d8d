"""Tokenizer for PTX text.

Tokens are plain tuples ``(kind, text, offset)`` so that lexing a 14,000-line module stays
cheap; line and column are computed from the offset only when an error is reported.
Comments are dropped. Newlines are kept as ``NL`` tokens because three PTX constructs end
at a line end instead of a semicolon: ``.loc``, data lines in ``.section`` blocks, and the
performance directives between a function header and its body.
"""
from __future__ import annotations

import bisect
import re

from ptx_ir.errors import ParseError

# Order matters: hex float literals before integers, dot-words before punctuation.
_TOKEN_RE = re.compile(
    r"""
    (?P<WS>[ \t\r\f\v]+)
  | (?P<NL>\n)
  | (?P<LCOMMENT>//[^\n]*)
  | (?P<BCOMMENT>/\*.*?\*/)
  | (?P<OPENCOMMENT>/\*)
  | (?P<STRING>"(?:[^"\\\n]|\\.)*")
  | (?P<FLOAT>0[fF][0-9A-Fa-f]{8}(?![0-9A-Za-z_])|0[dD][0-9A-Fa-f]{16}(?![0-9A-Za-z_]))
  | (?P<NUMBER>0[xX][0-9A-Fa-f]+U?|0[bB][01]+U?|[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+U?)
  | (?P<DOTWORD>\.[A-Za-z0-9_$]+(?:::[A-Za-z0-9_]+)*)
  | (?P<IDENT>[A-Za-z_$%][A-Za-z0-9_$]*)
  | (?P<PUNCT>[{}()\[\],;:+\-!|<>=@*/~&^])
    """,
    re.VERBOSE | re.DOTALL,
)

Token = tuple  # (kind, text, offset)


class SourceMap:
    """Maps character offsets back to (line, column) for error messages."""

    def __init__(self, text: str):
        self.text = text
        self._starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def locate(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset) - 1
        return line + 1, offset - self._starts[line] + 1

    def line_text(self, line: int) -> str:
        start = self._starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]

    def error(self, message: str, offset: int, token: str) -> ParseError:
        line, col = self.locate(offset)
        return ParseError(message, line, col, token, self.line_text(line))


def tokenize(text: str, source: SourceMap | None = None) -> list[Token]:
    """All tokens, ``NL`` included (see :func:`scan` for the parser's faster form)."""
    toks, newline_before, lines = scan(text, source)
    out: list[Token] = []
    line = 1
    for tok, nl, ln in zip(toks, newline_before, lines):
        if nl and ln > line:
            out.append(("NL", "\n" * (ln - line), tok[2]))
        line = ln
        out.append(tok)
    return out


def scan(text: str, source: SourceMap | None = None):
    """Tokens without whitespace, comments or newlines, plus for each token whether a line
    ended before it and its line number. The EOF token closes the list."""
    toks: list[Token] = []
    newline_before: list[bool] = []
    lines: list[int] = []
    append, nl_append, line_append = toks.append, newline_before.append, lines.append
    pending = True
    line = 1
    pos = 0
    for m in _TOKEN_RE.finditer(text):
        start = m.start()
        if start != pos:
            break                       # an unmatched character sits at pos
        pos = m.end()
        kind = m.lastgroup
        if kind == "WS" or kind == "LCOMMENT":
            continue
        if kind == "NL":
            pending = True
            line += 1
            continue
        if kind == "BCOMMENT":
            k = m.group().count("\n")
            if k:
                pending = True
                line += k
            continue
        if kind == "OPENCOMMENT":
            raise (source or SourceMap(text)).error("unterminated block comment", start, "/*")
        append((kind, m.group(), start))
        nl_append(pending)
        line_append(line)
        pending = False
    if pos != len(text):
        src = source or SourceMap(text)
        if text[pos] == '"':
            raise src.error("unterminated string literal", pos, text[pos:pos + 20].split("\n")[0])
        raise src.error("unexpected character", pos, text[pos])
    append(("EOF", "", len(text)))
    nl_append(True)
    line_append(line)
    return toks, newline_before, lines
