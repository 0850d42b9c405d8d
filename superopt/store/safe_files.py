"""Opening the files nvcc-plus keeps and reads, so that what lies at a path cannot turn a
build against its user.

A build runs in folders it does not control: a repository may ship ``nvcc-plus.lock.lck`` as
a symlink to a file the user cares about (``open(path, "w")`` truncates the target), put a
FIFO where a cache entry or an input is expected (reading it waits for ever), or link an
entry to ``/dev/zero`` (reading it never ends). Every lock, statistics, cache and ledger file
and every input a command reads goes through this module:

* :func:`open_regular` opens with ``O_NOFOLLOW`` (unless the caller names a path the user
  gave, which may be a symlink) and ``O_NONBLOCK`` (opening a FIFO never waits), then checks
  with ``fstat`` that it opened a regular file: anything else is :class:`NotRegularFile`.
  Nothing is ever truncated on open.
* :func:`exclusive_lock` holds an ``flock`` on such a file (a lock file is never written).
* :func:`read_bytes` / :func:`read_text` read at most ``limit`` bytes: a larger file is
  :class:`FileTooLarge`, never a ``MemoryError``.
* :func:`loads_json` and :func:`read_toml` turn a ``RecursionError`` on deeply nested input
  into ``ValueError``.

The errors are ``OSError`` subclasses carrying the path, so callers that already treat an
unreadable file as absent (a corrupt cache entry) or name it (an input) keep doing so.

Standard library only: the driver imports it on every compilation.
"""
from __future__ import annotations

import errno
import fcntl
import os
import stat
from contextlib import contextmanager

# Size caps (bytes). Generous for what each file holds; they exist so that no file can
# make a read unbounded.
CACHE_ENTRY_LIMIT = 16 << 20       # one decision (a plan and its evidence)
STATS_LIMIT = 1 << 20              # the cache's counters, a build's ledger
LOCKFILE_LIMIT = 256 << 20         # nvcc-plus.lock of a large project
CONFIG_LIMIT = 16 << 20            # nvcc-plus.toml, a launch spec file
INPUT_LIMIT = 256 << 20            # a .ptx/.cu/record file given to a command


class UnsafeFile(OSError):
    """A path that does not hold what nvcc-plus may read or lock there; names the path."""


class NotRegularFile(UnsafeFile):
    """A FIFO, device, socket or folder where a regular file is expected."""


class FileTooLarge(UnsafeFile):
    """A file larger than the limit for what it should hold."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path, flags: int = os.O_RDONLY, *, follow: bool = False, mode: int = 0o600) -> int:
    """``os.open`` of a regular file: never through a symlink at ``path`` (unless ``follow``:
    for paths the user named), never waiting on a FIFO, never truncating. Raises
    :class:`NotRegularFile` (or the ``OSError`` of the open, ``ELOOP`` for a symlink)."""
    flags |= os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    flags &= ~os.O_TRUNC
    try:
        fd = os.open(path, flags, mode)
    except IsADirectoryError:
        raise NotRegularFile(errno.EISDIR, "is a folder, not a file", str(path)) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise UnsafeFile(errno.ELOOP, "is a symlink (not followed here)", str(path)) from None
        if exc.errno == errno.ENXIO:              # O_WRONLY on a FIFO nobody reads
            raise NotRegularFile(errno.ENXIO, "is a FIFO, not a regular file", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, f"is {_kind(st.st_mode)}, not a regular file", str(path))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def exclusive_lock(path, *, mode: int = 0o644):
    """Hold an exclusive ``flock`` on the lock file ``path`` (created if missing; never
    truncated, never through a symlink, never a FIFO); yields its fd."""
    fd = open_regular(path, os.O_RDWR | os.O_CREAT, mode=mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)          # closing releases the lock


def read_fd(fd: int, limit: int, path) -> bytes:
    """At most ``limit`` bytes of the open regular file ``fd``; :class:`FileTooLarge` beyond."""
    size = os.fstat(fd).st_size
    if size > limit:
        raise FileTooLarge(errno.EFBIG, f"is {size} bytes, over the {_mib(limit)} limit", str(path))
    chunks, got = [], 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        if got > limit:          # it grew while being read
            raise FileTooLarge(errno.EFBIG, f"is over the {_mib(limit)} limit", str(path))
    return b"".join(chunks)


def read_bytes(path, limit: int, *, follow: bool = False) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``; see :func:`open_regular`)."""
    fd = open_regular(path, os.O_RDONLY, follow=follow)
    try:
        return read_fd(fd, limit, path)
    finally:
        os.close(fd)


def read_text(path, limit: int, *, follow: bool = False, errors: str = "strict") -> str:
    """UTF-8 text of the regular file ``path`` (``UnicodeDecodeError`` with ``errors="strict"``)."""
    return read_bytes(path, limit, follow=follow).decode("utf-8", errors)


def loads_json(data):
    """``json.loads`` whose nesting too deep to parse is a ``ValueError``, as any bad JSON."""
    import json
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def read_toml(path, limit: int = CONFIG_LIMIT) -> dict:
    """A TOML file the user named or that was discovered (a symlink is followed, but it must
    lead to a regular file of at most ``limit`` bytes); nesting too deep is a ``ValueError``."""
    import tomllib
    text = read_bytes(path, limit, follow=True).decode("utf-8")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ValueError("TOML nested too deeply") from None


def describe(exc: BaseException) -> str:
    """``PATH: what is wrong`` for an error of this module (or any OSError)."""
    if isinstance(exc, OSError):
        what = exc.strerror or str(exc)
        return f"{exc.filename}: {what}" if exc.filename else what
    return str(exc)


def _mib(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"
