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
    tokens: list[Token] = []
    append = tokens.append
    pos = 0
    n = len(text)
    match = _TOKEN_RE.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            src = source or SourceMap(text)
            if text.startswith("/*", pos):
                raise src.error("unterminated block comment", pos, "/*")
            if text[pos] == '"':
                raise src.error("unterminated string literal", pos, text[pos:pos + 20].split("\n")[0])
            raise src.error("unexpected character", pos, text[pos])
        kind = m.lastgroup
        if kind == "OPENCOMMENT":
            raise (source or SourceMap(text)).error("unterminated block comment", pos, "/*")
        if kind == "WS" or kind == "LCOMMENT":
            pass
        elif kind == "BCOMMENT":
            if "\n" in m.group():
                append(("NL", "\n", pos))
        else:
            append((kind, m.group(), pos))
        pos = m.end()
    append(("EOF", "", n))
    return tokens
