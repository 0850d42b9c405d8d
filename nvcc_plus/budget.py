"""A time budget for the optimizer across a whole build (``NVCC_PLUS_BUILD_BUDGET``).

``NVCC_PLUS_TIMEOUT`` bounds one PTX module; a project with hundreds of files needs a bound
on the sum. Every compilation of one build spends from one ledger, a small JSON file under a
lock: ``{"budget": S, "spent": seconds, "running": {pid: start}}``. A compilation may use
what is left when it starts, less what the compilations running beside it (``make -j``)
have already used; when nothing is left it keeps nvcc's code (decisions already in the
cache or lockfile still apply: they cost no search).

Which build a compilation belongs to: ``NVCC_PLUS_BUILD_LEDGER`` names the ledger file (a
CI script sets it, e.g. to ``$(mktemp)``, once per build); otherwise the ledger is keyed by
the process group, which ``make``, ``ninja`` and their children share when started from a
shell, in the private runtime folder. A ledger untouched for a day is started afresh.
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time

STALE_S = 24 * 3600


def private_folder(env: dict[str, str]) -> str:
    """The owner-checked private folder of the builds' ledgers (and of nvcc_plus.once's markers)."""
    from superopt.store.private_dir import private_dir   # owner check, no symlinks
    base = env.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return private_dir(os.path.join(base, f"nvcc-plus-budget-{os.geteuid()}"))


def ledger_path(env: dict[str, str]) -> str:
    named = env.get("NVCC_PLUS_BUILD_LEDGER")
    if named:
        return named
    return os.path.join(private_folder(env), f"pgid-{os.getpgrp()}.json")


class Ledger:
    """The build's ledger; ``start()`` returns the seconds this compilation may use."""

    def __init__(self, path: str, budget: float):
        self.path = path
        self.budget = budget
        self.started: float | None = None
        self.token = f"{os.getpid()}:{os.urandom(4).hex()}"

    def _update(self, fn):
        from superopt.store.safe_files import STATS_LIMIT, FileTooLarge, loads_json, open_regular, read_fd
        # a regular file only (a FIFO or device named by NVCC_PLUS_BUILD_LEDGER is an OSError
        # the driver reports), never through a symlink, never read past STATS_LIMIT
        fd = open_regular(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                raw = read_fd(fd, STATS_LIMIT, self.path)
                data = loads_json(raw) if raw.strip() else {}
            except (ValueError, FileTooLarge):
                data = {}
            if not isinstance(data, dict) or time.time() - float(data.get("touched", 0)) > STALE_S:
                data = {}
            data.setdefault("spent", 0.0)
            data.setdefault("running", {})
            data["budget"] = self.budget
            out = fn(data)
            data["touched"] = time.time()
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(data).encode())
            return out
        finally:
            os.close(fd)

    def start(self) -> float:
        now = time.time()
        self.started = now

        def take(data):
            running = {p: t for p, t in data["running"].items() if _alive(int(str(p).split(":")[0]))}
            in_flight = sum(max(0.0, now - float(t)) for t in running.values())
            running[self.token] = now
            data["running"] = running
            return max(0.0, self.budget - float(data["spent"]) - in_flight)
        return self._update(take)

    def finish(self) -> None:
        if self.started is None:
            return
        used = time.time() - self.started
        self.started = None

        def give(data):
            data["running"].pop(self.token, None)
            data["spent"] = float(data["spent"]) + used
        self._update(give)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:          # alive, another user's
        pass
    return True
