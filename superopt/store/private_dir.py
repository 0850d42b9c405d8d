"""Private folders in shared places (/tmp, /dev/shm) that another user cannot plant.

A predictable name in a world-writable folder is an invitation: another user creates it
first, or puts a symlink there, and a build run by root then writes through it. The folder
is created with mode 0700; if it exists it must be a real folder (not a symlink), owned by
us, and not writable by others — otherwise :class:`UnsafePath` names it and why.
Files inside are opened with ``O_NOFOLLOW`` (and ``O_EXCL`` where they are new).
"""
from __future__ import annotations

import os
import stat


class UnsafePath(OSError):
    pass


def private_dir(path: str) -> str:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{path} is not a folder (a symlink or file is in its place); "
                         f"remove it or set another location")
    if st.st_uid != os.geteuid():
        raise UnsafePath(f"{path} belongs to uid {st.st_uid}, not to this user ({os.geteuid()}); "
                         f"remove it or set another location")
    if st.st_mode & 0o022:
        os.chmod(path, 0o700)
    return path


def open_private(path: str, flags: int, *, new: bool = False) -> int:
    """``os.open`` that never follows a symlink at ``path`` (and, with ``new``, never opens
    an existing file)."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    if new:
        flags |= os.O_CREAT | os.O_EXCL
    return os.open(path, flags, 0o600)
