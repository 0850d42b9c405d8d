"""How many kernel searches run on a GPU now, over every compilation of a build.

A compilation with several kernels searches a second one beside the first only while the GPU
has room for it (``NVCC_PLUS_KERNEL_SEARCHES=auto``: superopt.decide.searches). Each running
search holds an exclusive ``flock`` on a file of its own in ``<lock dir>/searching-<gpu>/``;
:func:`running` counts the files whose lock is held. The kernel drops a lock when its process
ends, however it ends, so a file left by a killed compilation is found (its lock can be taken)
and removed, never counted. A file is locked under a hidden name and then renamed into place,
so no counter ever sees an entry before its lock is held.
"""
from __future__ import annotations

import fcntl
import itertools
import os
import re
import threading
from contextlib import contextmanager

from superopt.judge.gpu_lock import lock_dir
from superopt.store.private_dir import private_dir
from superopt.store.safe_files import open_regular

_SEQ = itertools.count()
_SEQ_LOCK = threading.Lock()


def census_dir(gpu: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", str(gpu))
    return private_dir(os.path.join(lock_dir(), f"searching-{name}"))


@contextmanager
def registered(gpu: str):
    """Count this thread's search as running on ``gpu`` for the block."""
    where = census_dir(gpu)
    with _SEQ_LOCK:
        n = next(_SEQ)
    name = f"{os.getpid()}-{threading.get_ident()}-{n}"
    hidden, shown = os.path.join(where, f".{name}"), os.path.join(where, name)
    fd = open_regular(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(hidden, shown)
    except BaseException:
        os.close(fd)
        _unlink(hidden)
        raise
    try:
        yield
    finally:
        _unlink(shown)
        os.close(fd)


def running(gpu: str) -> int:
    """How many searches hold their entry on ``gpu`` now (stale entries are removed)."""
    where = census_dir(gpu)
    count = 0
    for name in os.listdir(where):
        if name.startswith("."):
            continue
        path = os.path.join(where, name)
        try:
            fd = open_regular(path, os.O_RDONLY)
        except OSError:
            continue                    # removed meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            count += 1                  # its search holds it
        else:
            _unlink(path)               # left by a process that ended
        finally:
            os.close(fd)
    return count


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
