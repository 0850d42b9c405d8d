"""The wall-time budget of one generation, as a limit that really fires.

``superopt generate --budget 600`` once ran 817 s: the budget was only looked at between
steps, and a model request in flight (a CPU model writing 2048 tokens) ran on past it. Here
every step that can take long runs under :meth:`Budget.hard`, which raises
:class:`BudgetExpired` inside the step when its seconds are up: a SIGALRM timer in the main
thread (the interpreter runs the handler between bytecodes, so it interrupts Python loops,
``time.sleep`` and blocking socket reads), the model request in a worker thread elsewhere
(:meth:`Budget.call`: the caller stops waiting; the abandoned request's answer is dropped).

:class:`BudgetExpired` is a ``BaseException`` on purpose (like ``nvcc_plus.swap.OptimizerTimeout``
and ``superopt.search.cluster.ClusterTimeout``): the model backends, ptxas and the judge
contain failures with broad ``except Exception``, which must not swallow the limit.
"""
from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from typing import Callable, TypeVar

__all__ = ["Budget", "BudgetExpired"]

T = TypeVar("T")


class BudgetExpired(BaseException):
    """The seconds a step was given ran out (``what`` says which step)."""

    def __init__(self, what: str, seconds: float):
        super().__init__(f"{what}: stopped after {seconds:.1f} s, the time it was given")
        self.what = what
        self.seconds = seconds


def _alarm_usable() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


class Budget:
    """``seconds`` of wall time from now, measured with ``clock``."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.seconds = float(seconds)
        self.clock = clock
        self.start = clock()

    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        return self.seconds - self.elapsed()

    @contextmanager
    def hard(self, what: str, seconds: float | None = None):
        """Raise :class:`BudgetExpired` in this block once ``seconds`` (default: what is left of
        the budget) have passed. Main thread only; elsewhere the block runs unbounded (the
        loop's own checks between steps still stop it). An outer timer (the driver's hard
        limit) is kept: if it is due first it is left to fire, else it is re-armed after."""
        limit = self.left() if seconds is None else min(seconds, self.left())
        if limit <= 0:
            raise BudgetExpired(what, 0.0)
        if not _alarm_usable():
            yield
            return
        outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
        if outer_left and outer_left <= limit:
            yield                              # the outer limit comes first and will fire
            return
        t0 = time.monotonic()

        def fire(signum, frame):
            raise BudgetExpired(what, time.monotonic() - t0)

        old = signal.signal(signal.SIGALRM, fire)
        signal.setitimer(signal.ITIMER_REAL, max(limit, 1e-3))
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            if outer_left:
                signal.setitimer(signal.ITIMER_REAL, max(1e-3, outer_left - (time.monotonic() - t0)))

    def call(self, fn: Callable[[], T], what: str, seconds: float | None = None) -> T:
        """``fn()`` bounded like :meth:`hard`; outside the main thread it runs in a daemon
        thread and the caller stops waiting at the limit (the abandoned call's result is
        dropped), so the limit holds in every thread."""
        if _alarm_usable():
            with self.hard(what, seconds):
                return fn()
        limit = self.left() if seconds is None else min(seconds, self.left())
        if limit <= 0:
            raise BudgetExpired(what, 0.0)
        box: dict = {}

        def run():
            try:
                box["value"] = fn()
            except BaseException as e:   # noqa: BLE001 - handed to the waiting caller
                box["error"] = e

        t0 = time.monotonic()
        worker = threading.Thread(target=run, name=f"superopt-generate: {what}", daemon=True)
        worker.start()
        worker.join(limit)
        if worker.is_alive():
            raise BudgetExpired(what, time.monotonic() - t0)
        if "error" in box:
            raise box["error"]
        return box["value"]
