"""Counters of the decision cache, as ccache and sccache keep them: lookups that hit or
missed, decisions applied from the lockfile, searches run and the time they took, and the
search time the hits saved (each stored decision remembers how long its search took).

Kept in ``stats.json`` in the cache directory and updated once per PTX module under a file
lock, so ``make -j`` compilations add up instead of overwriting one another. ``superopt
cache stats`` prints them; ``--zero-stats`` starts them afresh.
"""
from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

from superopt.store.safe_files import exclusive_lock

COUNTERS = ("hits", "misses", "locked", "searches", "search_s", "saved_s", "evicted")


class CacheStats:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.path = self.root / "stats.json"

    def read(self) -> dict:
        from superopt.store.safe_files import STATS_LIMIT, loads_json, read_bytes
        try:
            data = loads_json(read_bytes(self.path, STATS_LIMIT).decode())
        except (OSError, ValueError):          # absent, corrupt, a symlink, a FIFO, too large
            data = {}
        if not isinstance(data, dict):
            data = {}
        out = {k: data.get(k, 0) if isinstance(data.get(k, 0), (int, float)) else 0 for k in COUNTERS}
        out["since"] = data.get("since")
        return out

    def add(self, **counts: float) -> None:
        """Add to the counters (an OSError is the caller's to report; it must not fail a build)."""
        if not any(counts.values()):
            return
        self.root.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.root / "stats.lck"):     # never through a symlink, never truncated
            data = self.read()
            for k, v in counts.items():
                data[k] = data.get(k, 0) + v
            data["since"] = data.get("since") or _now()
            self._write(data)

    def zero(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.root / "stats.lck"):
            self._write({**{k: 0 for k in COUNTERS}, "since": _now()})

    def _write(self, data: dict) -> None:
        from superopt.store.cache import atomic_write_text
        atomic_write_text(self.path, json.dumps(data, indent=1, sort_keys=True))


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
