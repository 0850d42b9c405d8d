"""Live progress of a long search on stderr, only when stderr is a terminal (or
``NVCC_PLUS_PROGRESS=on``), as ``make`` users expect from a compiler that takes minutes.

The view implements :class:`superopt.search.progress.SearchProgress` by duck typing (the driver
reaches superopt only through ``optimize_ptx``; the view travels as ``config["progress"]``).
rich is imported, and the live line started, only when a kernel search actually starts, so
builds that apply cached or locked decisions stay as quiet and fast as nvcc. The line is
transient: when the module is done, the one-line summary (:mod:`nvcc_plus.summary`) remains.
"""
from __future__ import annotations

import os
import sys


def wanted(setting: str, stream=None) -> bool:
    """Whether to show live progress: ``on``, ``off``, or ``auto`` = stderr is a terminal
    (and TERM is not ``dumb``)."""
    if setting == "on":
        return True
    if setting == "off":
        return False
    stream = stream or sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and os.environ.get("TERM") != "dumb"


class ProgressView:
    def __init__(self, label: str, stream=None):
        self.label = label                 # "k.cu compute_90"
        self.stream = stream or sys.stderr
        self._progress = None
        self._task = None

    def _start(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, \
            TextColumn, TimeElapsedColumn
        console = Console(file=self.stream, force_terminal=self.stream.isatty() or None,
                          highlight=False)
        self._progress = Progress(SpinnerColumn(), TextColumn("nvcc-plus: {task.description}"),
                                  BarColumn(bar_width=20), MofNCompleteColumn(), TimeElapsedColumn(),
                                  console=console, transient=True)
        self._progress.start()
        self._task = self._progress.add_task(self.label, total=total)

    def kernel_started(self, kernel: str, index: int, total: int, budget_s: float) -> None:
        if self._progress is None:
            self._start(total)
        short = kernel.split("(")[0][:40]
        self._progress.update(self._task, total=total, completed=index - 1,
                              description=f"{self.label}: searching {short} (budget {budget_s:g} s)")
        self._progress.refresh()          # show the new kernel now, not at the next tick

    def kernel_finished(self, kernel: str, status: str, seconds: float) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
