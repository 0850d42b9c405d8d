"""How many kernel searches the compilations of this host run now, over every compilation of a
build.

A compilation with several kernels searches a second one beside the first only while the GPUs
have room for it (``NVCC_PLUS_KERNEL_SEARCHES=auto``: superopt.decide.searches). Each
compilation that searches on a GPU holds an entry from its first kernel to its last, and each
search it runs beside its first holds one more: a build's compilations are counted from the time
they start searching, not only while a search holds a GPU, so the burst at a build's start (eight
compilations entering the optimizer within a second or two, each about to search) is seen as
the load it is. An entry is a file in ``<lock dir>/searching/`` on which its holder keeps an
exclusive ``flock``; :func:`running` counts the files whose lock is held. The kernel drops a lock
when its process ends, however it ends, so a file left by a killed compilation is found (its
lock can be taken) and removed, never counted. A file is locked under a hidden name and then
renamed into place, so no counter ever sees an entry before its lock is held.
"""
from __future__ import annotations

import fcntl
import itertools
import os
import threading

from superopt.judge.gpu_lock import lock_dir
from superopt.store.private_dir import private_dir
from superopt.store.safe_files import open_regular

_SEQ = itertools.count()
_SEQ_LOCK = threading.Lock()


def census_dir() -> str:
    return private_dir(os.path.join(lock_dir(), "searching"))


class Entry:
    """One counted search (or searching compilation) until :meth:`close` or its process's end."""

    def __init__(self):
        where = census_dir()
        with _SEQ_LOCK:
            n = next(_SEQ)
        name = f"{os.getpid()}-{threading.get_ident()}-{n}"
        hidden, self.path = os.path.join(where, f".{name}"), os.path.join(where, name)
        self._fd: int | None = open_regular(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(hidden, self.path)
        except BaseException:
            os.close(self._fd)
            _unlink(hidden)
            raise

    def close(self) -> None:
        if self._fd is not None:
            _unlink(self.path)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "Entry":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def register() -> Entry | None:
    """An :class:`Entry`, or None where the lock dir cannot be written (the count is a hint for
    scheduling, never a reason for a compilation to fail)."""
    try:
        return Entry()
    except OSError:
        return None


def running() -> int:
    """How many entries are held now (stale ones are removed); 0 where the lock dir cannot be read."""
    try:
        where = census_dir()
        names = os.listdir(where)
    except OSError:
        return 0
    count = 0
    for name in names:
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
            count += 1                  # its holder holds it
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
