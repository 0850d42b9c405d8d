"""What a generation shows while it works, for ``superopt generate`` and ``%%ptxgen``.

:class:`GenerationProgress` turns the loop's events into lines (one wording everywhere) and a
status line (what is happening now, the seconds spent of the budget). Two views show it:

* :class:`TerminalProgress` (rich): on a terminal every finished step is printed once and
  the status line below it is updated in place (a rich live display, ticking while the model
  answers); elsewhere (a pipe, a log, a test) each line is printed once, nothing else.
* :class:`NotebookProgress` (Jupyter): one output area made with
  ``display(..., display_id=True)`` and updated with ``handle.update``; used only under a
  Jupyter kernel, where an update replaces the area -- in a terminal IPython an update
  prints the whole block again, so there the terminal view is used instead.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from html import escape

__all__ = ["GenerationProgress", "TerminalProgress", "NotebookProgress", "ProgressLine"]

REASON_CHARS = 300
SHOWN_LINES = 30


@dataclass(frozen=True)
class ProgressLine:
    text: str
    style: str = ""          # a rich style: "", "dim", "bold", "green", "yellow", "red"


class GenerationProgress:
    """Lines and a status made from :func:`superopt.generate.loop.generate`'s events."""

    def __init__(self, budget_s: float | None = None, notes=()):
        self.budget_s = budget_s
        self.lines: list[ProgressLine] = [ProgressLine(f"note: {n}", "dim") for n in notes]
        self.status = "starting"
        self.done = False
        self._start = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def status_line(self) -> str:
        spent = f"{self.elapsed():.0f} s" + (f" of the {self.budget_s:g} s budget" if self.budget_s else "")
        return f"{self.status} ({spent})"

    def add(self, kind: str, data: dict) -> list[ProgressLine]:
        """The lines event ``kind`` adds (also appended to :attr:`lines`)."""
        new: list[ProgressLine] = []
        if data.get("budget"):
            self.budget_s = data["budget"]
        if kind == "reference":
            new.append(ProgressLine(f"reference: running {data['label']} on {data['shapes']} launch shape(s)", "dim"))
            self.status = "running the reference"
        elif kind == "reference-ok":
            sets = data.get("sets") or []
            sizes = ", ".join(str(s.get("scalars")) for s in sets[:4])
            new.append(ProgressLine(f"reference: ran on {len(sets)} input sets ({sizes}"
                                    f"{', ...' if len(sets) > 4 else ''})", "dim"))
        elif kind == "request":
            allowed = f"; {data['allowed']:.0f} s of the budget for it" if data.get("allowed") else ""
            new.append(ProgressLine(f"round {data['round']}/{data['rounds']}: asking the model for {data['n']} "
                                    f"answer(s) (at most {data['max_tokens']} tokens each{allowed})", "bold"))
            self.status = f"round {data['round']}/{data['rounds']}: waiting for the model's answer(s)"
        elif kind == "checking":
            self.status = f"checking {data['what']}"
        elif kind == "answer":
            style = "green" if data["fate"] == "accepted" else "yellow"
            new.append(ProgressLine(f"  {data['what']}: {data['fate']}: {str(data.get('reason', ''))[:REASON_CHARS]}",
                                    style))
            self.status = f"checked {data['what']}"
        elif kind == "stopped":
            new.append(ProgressLine(f"  {data['what']}: {data['reason']}", "yellow"))
        elif kind == "timing":
            new.append(ProgressLine("timing the kernel against the reference on the GPU ..."))
            self.status = "timing the kernel"
        elif kind == "done":
            style = {"accepted": "green", "not-verified": "yellow"}.get(data.get("status"), "red")
            new.append(ProgressLine(data["line"], style))
            self.status = "done"
            self.done = True
        self.lines += new
        return new

    def text(self) -> str:
        shown = [ln.text for ln in self.lines[-SHOWN_LINES:]]
        return "\n".join(shown + ([] if self.done else [self.status_line()]))

    def html(self) -> str:
        body = escape("\n".join(ln.text for ln in self.lines[-SHOWN_LINES:]))
        status = "" if self.done else f"<div style='color:#57606a'>{escape(self.status_line())}</div>"
        return f"<pre style='margin:0'>{body}</pre>{status}"


class TerminalProgress:
    """The progress on a rich console: a context manager whose :meth:`on_event` is the loop's
    ``on_event``. On a terminal the status line is a live display (updated in place, gone at
    the end); every line is printed once."""

    def __init__(self, console, progress: GenerationProgress, *, live: bool | None = None):
        self.console = console
        self.progress = progress
        self.live = console.is_terminal if live is None else live
        self._live = None

    def __enter__(self) -> "TerminalProgress":
        for ln in self.progress.lines:
            self.console.print(ln.text, style=ln.style or None, markup=False, highlight=False)
        if self.live:
            from rich.live import Live
            from rich.text import Text
            self._live = Live(console=self.console, transient=True, refresh_per_second=2, auto_refresh=True,
                              get_renderable=lambda: Text(self.progress.status_line(), style="dim"))
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def on_event(self, kind: str, data: dict) -> None:
        for ln in self.progress.add(kind, data):
            self.console.print(ln.text, style=ln.style or None, markup=False, highlight=False)
        if self._live is not None:
            self._live.refresh()


class NotebookProgress:
    """The progress as one Jupyter output area, updated in place (``display_id``)."""

    def __init__(self, progress: GenerationProgress, display=None):
        if display is None:
            from IPython.display import display
        self.progress = progress
        self.handle = display(self, display_id=True)

    def _repr_html_(self) -> str:
        return self.progress.html()

    def __repr__(self) -> str:
        return self.progress.text()

    def on_event(self, kind: str, data: dict) -> None:
        self.progress.add(kind, data)
        if self.handle is not None:
            self.handle.update(self)
