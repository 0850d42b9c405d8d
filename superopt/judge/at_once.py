"""Calls run at the same time in daemon threads, for work that waits outside Python (numpy's
large draws, a compute-sanitizer process): the input sets of a large shape
(superopt.judge.check), the candidate's sanitizer tools (superopt.judge.sanitize) and the
sanitizer beside a search's last checks (superopt.search.loop).

Daemon threads, not a pool: a time limit that stops the search (the driver's alarm, raised in
the calling thread while it waits here) neither waits for them nor keeps the process from
exiting."""
from __future__ import annotations

import threading
from typing import Callable


def beside(call: Callable, name: str = "superopt-beside") -> Callable[[], object]:
    """``call`` (no arguments) started now in a daemon thread of its own; returns the call that
    waits for it and gives its result, or raises in the waiting thread what it raised."""
    got: list = []

    def work() -> None:
        try:
            got.append(("ok", call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, raised there
            got.append(("raised", exc))
    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()

    def wait():
        thread.join()
        how, value = got[0]
        if how == "raised":
            raise value
        return value
    return wait


def run_at_once(calls: list[Callable], name: str = "superopt-at-once") -> list:
    """Each of ``calls`` (no arguments) in a thread of its own, all at once; their results in
    order once every one has ended. The first exception one raised (in that order) is raised
    here instead."""
    waits = [beside(call, f"{name}-{k}") for k, call in enumerate(calls)]
    got = []
    for wait in waits:
        try:
            got.append(("ok", wait()))
        except BaseException as exc:  # noqa: BLE001 - raised below, once every call has ended
            got.append(("raised", exc))
    for how, value in got:
        if how == "raised":
            raise value
    return [value for _, value in got]
