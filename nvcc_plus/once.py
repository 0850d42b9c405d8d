"""Lines a build says once, not once per file.

Some things are true of the whole build, not of one file: there is no GPU and no
nvcc-plus.lock, a setting has a value nvcc-plus does not accept, a ``[kernels."NAME"]`` table of
nvcc-plus.toml is incomplete. Said by every compilation they are a hundred copies of one line
in a ``make -j`` log; said by none, the user never learns why nothing was optimized.

A build is what the budget ledger calls one (:mod:`nvcc_plus.budget`): the compilations of
one process group, or of one ``NVCC_PLUS_BUILD_LEDGER``. The first compilation to say a line
creates a marker file for it with ``O_EXCL`` in the owner-checked private folder; the others
find the marker and stay quiet. A marker older than a day is stale (a process group id is
reused in time), and so is one made under an earlier process with the same group id (the
group leader's start time is part of the name). When no marker can be made the line is said
(twice is better than never).
"""
from __future__ import annotations

import os
import time

from nvcc_plus.budget import STALE_S, private_folder


def _leader_start(pgid: int) -> str:
    """The start time of the process group's leader (Linux /proc), so a reused group id is
    another build; empty when it cannot be read (the leader has exited, no /proc)."""
    try:
        with open(f"/proc/{pgid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        return stat.rsplit(")", 1)[1].split()[19]       # field 22, after the command name
    except (OSError, IndexError):
        return ""


def build_id(env: dict[str, str]) -> str:
    """The build's identity: its named ledger, else its process group (and leader's start)."""
    import zlib
    named = env.get("NVCC_PLUS_BUILD_LEDGER")
    if named:
        return f"ledger-{zlib.crc32(os.path.abspath(named).encode()):08x}"
    pgid = os.getpgrp()
    start = _leader_start(pgid)
    return f"pgid-{pgid}" + (f"-{start}" if start else "")


def marker_path(line: str, env: dict[str, str]) -> str:
    """The marker of ``line`` in this build (OSError when the private folder is unusable)."""
    import hashlib
    digest = hashlib.sha256(line.encode("utf-8", "replace")).hexdigest()[:16]
    return os.path.join(private_folder(env), f"said-{build_id(env)}-{digest}")


def first_time(line: str, env: dict[str, str] | None = None) -> bool:
    """True for the first compilation of the build to say ``line`` (it then says it), False for
    the others."""
    env = os.environ if env is None else env
    try:
        path = marker_path(line, env)
    except OSError:
        return True
    from superopt.store.private_dir import open_private
    for _ in range(2):
        try:
            os.close(open_private(path, os.O_WRONLY, new=True))
            _sweep(os.path.dirname(path))
            return True
        except FileExistsError:
            try:
                st = os.lstat(path)
            except OSError:
                continue                         # removed meanwhile: try to be first again
            if time.time() - st.st_mtime <= STALE_S:
                return False
            try:
                os.unlink(path)                  # a marker of an older build with this id
            except OSError:
                return True
        except OSError:
            return True
    return True


def _sweep(folder: str) -> None:
    """Remove the markers of builds more than a day old (once per build and line: when one is made)."""
    now = time.time()
    try:
        names = [n for n in os.listdir(folder) if n.startswith("said-")]
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        try:
            if now - os.lstat(path).st_mtime > STALE_S:
                os.unlink(path)
        except OSError:
            continue
