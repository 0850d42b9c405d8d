"""Calls run at the same time in daemon threads, for work that waits outside Python (numpy's
large draws, a compute-sanitizer process): the input sets of a large shape
(superopt.judge.check) and the candidate's sanitizer tools (superopt.judge.sanitize).

Daemon threads, not a pool: a time limit that stops the search (the driver's alarm, raised in
the calling thread while it waits here) neither waits for them nor keeps the process from
exiting."""
from __future__ import annotations

import threading
from typing import Callable


def run_at_once(calls: list[Callable], name: str = "superopt-at-once") -> list:
    """Each of ``calls`` (no arguments) in a thread of its own, all at once; their results in
    order once every one has ended. The first exception one raised (in that order) is raised
    here instead."""
    got: list = [None] * len(calls)

    def work(k: int) -> None:
        try:
            got[k] = ("ok", calls[k]())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            got[k] = ("raised", exc)
    threads = [threading.Thread(target=work, args=(k,), name=f"{name}-{k}", daemon=True) for k in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for how, value in got:
        if how == "raised":
            raise value
    return [value for _, value in got]
