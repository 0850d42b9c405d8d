"""The measured copy bandwidth of a GPU, kept on disk across compilations.

The timer's bandwidth sanity check (:mod:`superopt.judge.timing`) needs each GPU's peak
device-to-device copy bandwidth. Measured in every GPU worker, it was an *exclusive* GPU step
per compilation: under ``make -j8`` on one GPU every shared check of the other compilations
had to drain before it (15 such steps in one tune build of the program benchmark, about 50 s
of waiting, 2026-12-02). The peak belongs to the GPU, not to the compilation: it is measured
once, kept in the cache folder per GPU UUID and driver version, and measured again after
:data:`MAX_AGE_S` or when the file is missing, unreadable or implausible.
"""
from __future__ import annotations

import json
import os
import time

from superopt.store.locations import cache_dir
from superopt.store.safe_files import STATS_LIMIT, UnsafeFile, loads_json, read_text

MAX_AGE_S = 7 * 24 * 3600
FOLDER = "gpu-peak"


def _path(uuid: str, driver: int | None) -> str:
    safe = "".join(c for c in uuid if c.isalnum() or c in "-_") or "unknown"
    return str(cache_dir() / FOLDER / f"{safe}-driver{driver or 0}.json")


def read(uuid: str, driver: int | None, now: float | None = None) -> dict | None:
    """The kept measurement of GPU ``uuid`` under ``driver``, or None (absent, stale, unreadable)."""
    try:
        got = loads_json(read_text(_path(uuid, driver), STATS_LIMIT))
    except (OSError, UnsafeFile, ValueError):
        return None
    if not isinstance(got, dict):
        return None
    bw, at = got.get("bytes_per_s"), got.get("measured_at")
    if not isinstance(bw, (int, float)) or not isinstance(at, (int, float)) or not 1e9 <= bw <= 1e14:
        return None
    if (time.time() if now is None else now) - at > MAX_AGE_S:
        return None
    return {**got, "from": "kept"}


def write(uuid: str, driver: int | None, peak: dict) -> None:
    """Keep a measurement (atomically: a reader sees the old file or the new one). Failing to
    write costs only a measurement in the next compilation, so errors are ignored."""
    path = _path(uuid, driver)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({**{k: v for k, v in peak.items() if k != "from"}, "measured_at": time.time(),
                       "uuid": uuid, "driver": driver}, f)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
