"""Limits a test puts on the code it runs, so that a regression fails the test instead of
hanging the run or taking the machine's memory (a FIFO read, /dev/zero)."""
from __future__ import annotations

import contextlib
import os
import resource
import signal


class Blocked(BaseException):
    """Raised into a body that blocks; not an Exception or OSError, so nothing in it takes it
    for an error it handles."""


@contextlib.contextmanager
def within(seconds: float):
    """Raise :class:`Blocked` into the body when it runs longer than ``seconds`` (SIGALRM)."""
    def on_alarm(*_):
        raise Blocked(f"blocked for more than {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def bounded_memory(extra: int):
    """At most ``extra`` more bytes of address space in the body: reading /dev/zero cannot be
    interrupted by an alarm, and when that regresses it must end in a MemoryError."""
    pages = int(open("/proc/self/statm").read().split()[0])
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = pages * os.sysconf("SC_PAGE_SIZE") + extra
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
