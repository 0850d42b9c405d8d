"""What a long search tells whoever shows progress: the :class:`SearchProgress` protocol.

A search takes minutes; a build that prints nothing meanwhile looks hung. The optimizer does
not print (it runs inside nvcc-plus, whose stderr belongs to the build); it calls an
observer handed over as ``config["progress"]``, and the caller decides what to show: the
driver shows a live line on a terminal only (:mod:`nvcc_plus.progress_view`), ``superopt``
commands a rich progress bar. Observers are duck-typed: a method that is missing is skipped,
and an observer that raises is dropped (showing progress must never fail a search).
"""
from __future__ import annotations

from typing import Protocol


class SearchProgress(Protocol):
    def kernel_started(self, kernel: str, index: int, total: int, budget_s: float) -> None:
        """A search of ``kernel`` (``index`` of ``total`` to search in this module) begins."""

    def kernel_finished(self, kernel: str, status: str, seconds: float) -> None:
        """Its search ended with the kernel's status (``optimized``, ``kept-baseline``, ...)."""


class Notifier:
    """Calls an observer's methods, forgiving observers that lack one or fail."""

    def __init__(self, observer):
        self.observer = observer

    def __call__(self, method: str, *args) -> None:
        fn = getattr(self.observer, method, None) if self.observer is not None else None
        if fn is None:
            return
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - progress display is never worth a failed search
            self.observer = None
