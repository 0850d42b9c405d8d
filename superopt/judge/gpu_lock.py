"""A lock per GPU, so that concurrent compilations (make -j) never time kernels at once.

    from superopt.judge.gpu_lock import gpu_lock
    with gpu_lock(0, timeout=600):
        ...  # time kernels on GPU 0

An fcntl lock on ``<lock dir>/gpu-<id>.lock``: released by the kernel when the process exits,
so a crashed compilation never leaves a stale lock. The lock dir is NVCC_PLUS_LOCK_DIR, else
$XDG_RUNTIME_DIR/nvcc-plus, else <tmp>/nvcc-plus-locks-<uid>, created private (mode 0700,
owner checked, never through a symlink: see superopt.store.private_dir; the lock file itself
must be a regular file, opened without following a symlink: superopt.store.safe_files). The id is whatever names the GPU
stably (an index, or better a UUID from CUDA_VISIBLE_DEVICES/cuDeviceGetUuid).
"""
from __future__ import annotations

import fcntl
import os
import re
import tempfile
import time
from contextlib import contextmanager

from superopt.store.private_dir import private_dir
from superopt.store.safe_files import open_regular


class LockTimeout(TimeoutError):
    pass


def lock_dir() -> str:
    from superopt.config.settings import env_value
    d = env_value("NVCC_PLUS_LOCK_DIR")
    if not d:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        d = (os.path.join(xdg, "nvcc-plus") if xdg and os.path.isdir(xdg)
             else os.path.join(tempfile.gettempdir(), f"nvcc-plus-locks-{os.getuid()}"))
    return private_dir(d)


def lock_path(gpu: int | str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", str(gpu))
    return os.path.join(lock_dir(), f"gpu-{name}.lock")


@contextmanager
def gpu_lock(gpu: int | str, timeout: float | None = None, poll: float = 0.05):
    """Hold GPU ``gpu`` exclusively. timeout None waits forever; 0 tries once."""
    fd = open_regular(lock_path(gpu), os.O_RDWR | os.O_CREAT)    # no symlink, no FIFO
    try:
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockTimeout(f"GPU {gpu} is busy (waited {timeout:g} s)") from None
                    time.sleep(poll)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
