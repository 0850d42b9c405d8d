"""Errors raised by ptx_ir."""
from __future__ import annotations


class ParseError(ValueError):
    """PTX text that ptx_ir cannot read: says where (line, column) and what (the token)."""

    def __init__(self, message: str, line: int, column: int, token: str, source_line: str = ""):
        self.message = message
        self.line = line
        self.column = column
        self.token = token
        self.source_line = source_line
        where = f"line {line}, column {column}"
        shown = token if len(token) <= 40 else token[:37] + "..."
        text = f"{where}: {message} (at {shown!r})" if token else f"{where}: {message}"
        if source_line:
            text += f"\n    {source_line.rstrip()}\n    {' ' * (column - 1)}^"
        super().__init__(text)


class IRError(ValueError):
    """A mutation that would leave the IR invalid."""
