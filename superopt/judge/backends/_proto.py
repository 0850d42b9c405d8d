"""Length-prefixed pickle frames over pipes, with deadlines on the reading side."""
from __future__ import annotations

import os
import pickle
import select
import struct
import time

_HDR = struct.Struct("<Q")


class ProtocolTimeout(Exception):
    pass


class ProtocolEOF(Exception):
    pass


def widen_pipe(fd: int, size: int = 1 << 20) -> None:
    """Ask Linux for a larger pipe buffer (fewer wake-ups for big frames); best effort."""
    try:
        import fcntl
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (OSError, ImportError, ValueError):
        pass


def send(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    buf = memoryview(_HDR.pack(len(data)) + data)
    while buf:
        n = os.write(fd, buf)
        buf = buf[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks = []
    left = n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise ProtocolTimeout()
            r, _, _ = select.select([fd], [], [], wait)
            if not r:
                raise ProtocolTimeout()
        b = os.read(fd, min(left, 1 << 20))
        if not b:
            raise ProtocolEOF()
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def recv(fd: int, timeout: float | None = None):
    deadline = None if timeout is None else time.monotonic() + timeout
    (n,) = _HDR.unpack(_read_exact(fd, _HDR.size, deadline))
    return pickle.loads(_read_exact(fd, n, deadline))


# --------------------------------------------------------------------------- bulk data
# Big buffers travel through a file in /dev/shm (memory) instead of the pipe: the parent
# writes the input blobs, the child maps them; the child writes changed outputs to
# "<file>.out", the parent reads and deletes both.

SHM_THRESHOLD = 1 << 20

# a reply's buffer data for a buffer equal, on the device, to the array the request expected it
# to hold (GpuBackend.run_many(expect=...)): only its guards travel
EXPECTED = "expected"


def _shm_dir() -> str:
    """A private folder of this user's in /dev/shm (else the temp dir): the worker writes
    "<file>.out" next to the blobs, which must not be a name another user can plant."""
    import tempfile
    from superopt.store.private_dir import private_dir
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    return private_dir(os.path.join(base, f"superopt-{os.geteuid()}"))


def write_blobs(blobs) -> dict:
    """Write byte arrays to one shared-memory file; returns its descriptor."""
    import tempfile
    fd, path = tempfile.mkstemp(prefix="superopt-", suffix=".blobs", dir=_shm_dir())
    items = []
    off = 0
    with os.fdopen(fd, "wb") as f:
        for b in blobs:
            pad = (-off) % 64
            if pad:
                f.write(b"\0" * pad)
                off += pad
            mv = memoryview(b).cast("B")
            f.write(mv)
            items.append((off, mv.nbytes))
            off += mv.nbytes
    return {"file": path, "items": items, "size": off}


def read_blobs(desc):
    """The blobs of a descriptor as uint8 arrays (a list passes through unchanged)."""
    import numpy as np
    if not isinstance(desc, dict):
        return desc
    if desc["size"] == 0:
        return [np.zeros(0, np.uint8) for _ in desc["items"]]
    mm = np.memmap(desc["file"], dtype=np.uint8, mode="r", shape=(desc["size"],))
    return [mm[o:o + n] for o, n in desc["items"]]


def remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
