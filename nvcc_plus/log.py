"""One-line messages on stderr: ``nvcc-plus: <file>: <what happened>``."""
from __future__ import annotations

import sys


class Log:
    def __init__(self, stream=None):
        self.stream = stream
        self._seen: set[str] = set()

    def _emit(self, text: str) -> None:
        if text in self._seen:
            return
        self._seen.add(text)
        stream = self.stream or sys.stderr
        stream.write(text + "\n")
        stream.flush()

    def line(self, file: str | None, what: str) -> None:
        """The user-facing line: ``nvcc-plus: a.cu: <what>``."""
        self._emit(f"nvcc-plus: {file}: {what}" if file else f"nvcc-plus: {what}")

    def info(self, what: str) -> None:
        """Verbose/diagnostic output (only printed when the caller decides to)."""
        self._emit(f"nvcc-plus: {what}")
