"""Input buffers kept on the GPU across a kernel's candidates (issue 23: "input sets stay
resident on the GPU across a kernel's candidates").

Every differential check sends each input buffer to the GPU worker again: the parent writes it
to a shared-memory file, the worker maps it and copies it into a fresh allocation through a
pageable host-to-device copy, under the GPU's lock. A kernel's inputs are the same arrays for
all its candidates (a candidate's input sets differ from the baseline's only in their outputs'
poison), so at captured sizes most of that traffic repeats (the economy bench's tune build,
2026-12-02: 49 of the worker's 157 held seconds copying in, 35 s of the parents' writing the files).

Here: an input array of at least :data:`MIN_BYTES`, sent once, is kept by the worker in device
memory: each run's fresh allocation is filled from it device to device, and after the run the
allocation is compared with it on the device ("this input is unchanged"), so such an input never
crosses the bus again for the kernel's later checks. Later requests name it by key instead of
sending it. Both sides bound what they keep by bytes, least recently used first out; when the
worker no longer holds a key the parent named, it runs nothing and says which keys it lacks, and
the parent sends them again (:class:`ParentTable`, :class:`WorkerStore`).

A key names an array object the parent holds a reference to while it is kept (so no other
array can take its id) and that it has made read-only: a kept array cannot change behind the
worker's copy. Outputs travel as before, unless the caller says it runs the same set again (a
check's candidate sets, made once per kernel: their outputs' poison is kept too), or expects an
output to equal an array (nvcc's result, kept and compared on the device); small buffers
travel as before.
Each run still gets fresh allocations with guard zones; the kept copies are never a kernel's
argument. A kernel that writes far outside its buffers could still hit a kept copy: the worker
keeps a checksum of each copy and checks it after every request that used it; a changed copy
fails the request's runs ("crash") and the worker restarts with nothing kept.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable

import numpy as np

MIN_BYTES = 1 << 20                 # smaller buffers travel as before
DEFAULT_LIMIT = 4 << 30             # bytes a worker keeps, at most (and at most 1/16 of free memory)


def worker_limit(free_bytes: int) -> int:
    """What a worker keeps at most, given the device's free memory at its start."""
    return int(max(0, min(DEFAULT_LIMIT, free_bytes // 16)))


class ParentTable:
    """The parent's view of what its worker keeps: key -> the array (held, read-only)."""

    def __init__(self, limit: int = 0):
        self.limit = int(limit)
        self._kept: "OrderedDict[str, np.ndarray]" = OrderedDict()
        self.bytes = 0

    def reset(self, limit: int) -> None:
        """A new worker keeps nothing yet."""
        self.limit = int(limit)
        self._kept.clear()
        self.bytes = 0

    @staticmethod
    def key(arr: np.ndarray) -> str:
        return f"{id(arr):x}:{arr.ctypes.data:x}:{arr.nbytes}"

    def eligible(self, arr: np.ndarray) -> bool:
        return self.limit > 0 and MIN_BYTES <= arr.nbytes <= self.limit and arr.flags.c_contiguous

    def plan(self, sources: list, inputs: set) -> tuple[dict, dict]:
        """For the blobs of one request (``sources[i]``: the array blob ``i`` was made from;
        ``inputs``: the indices of blobs that are input data): ({index: key} the worker holds,
        {index: key} to keep from this request). Marks kept arrays read-only."""
        use, keep = {}, {}
        for i in sorted(inputs):
            arr = sources[i]
            if not isinstance(arr, np.ndarray) or not self.eligible(arr):
                continue
            k = self.key(arr)
            if k in self._kept and self._kept[k] is arr:
                self._kept.move_to_end(k)
                use[i] = k
                continue
            arr.flags.writeable = False          # kept: it must not change behind the worker's copy
            self._kept[k] = arr
            self.bytes += arr.nbytes
            keep[i] = k
            while self.bytes > self.limit and self._kept:
                _, old = self._kept.popitem(last=False)
                self.bytes -= old.nbytes
        return use, keep

    def forget(self, keys) -> None:
        """The worker lacks these keys: send them again next time."""
        for k in keys:
            arr = self._kept.pop(k, None)
            if arr is not None:
                self.bytes -= arr.nbytes

    def __contains__(self, key: str) -> bool:
        return key in self._kept


class WorkerStore:
    """The worker's kept inputs: key -> (device copy, bytes, checksum). ``alloc(n)`` -> device
    pointer, ``upload(dptr, host)``, ``free(dptr)`` and ``checksum(dptr, n)`` -> int are the
    device's (CUDA-free tests give fakes)."""

    def __init__(self, limit: int, alloc: Callable, upload: Callable, free: Callable, checksum: Callable,
                 checksums: Callable | None = None):
        self.limit = int(limit)
        self._alloc, self._upload, self._free, self._checksum = alloc, upload, free, checksum
        self._checksums = checksums
        self._kept: "OrderedDict[str, tuple]" = OrderedDict()
        self.bytes = 0

    def missing(self, keys) -> list[str]:
        return [k for k in keys if k not in self._kept]

    def get(self, key: str) -> tuple:
        """(device pointer, bytes) of a kept input (most recently used now)."""
        self._kept.move_to_end(key)
        d, n, _ = self._kept[key]
        return d, n

    def keep(self, key: str, host: np.ndarray) -> None:
        """Keep ``host``'s bytes under ``key`` on the device; evicts the least recently used
        beyond the limit. Nothing is kept past the limit."""
        if key in self._kept:
            self._kept.move_to_end(key)
            return
        n = int(host.nbytes)
        if n > self.limit:
            return
        while self.bytes + n > self.limit and self._kept:
            self.drop(next(iter(self._kept)))
        d = self._alloc(n)
        try:
            self._upload(d, np.ascontiguousarray(host).view(np.uint8).reshape(-1))
            total = self._checksum(d, n)
        except BaseException:
            self._free(d)
            raise
        self._kept[key] = (d, n, total)
        self.bytes += n

    def intact(self, key: str) -> bool:
        """Whether the kept copy still holds the bytes it was given (its checksum)."""
        return not self.changed([key])

    def changed(self, keys) -> list[str]:
        """The kept keys among ``keys`` whose copy no longer holds the bytes it was given. With
        ``checksums`` (a list of (pointer, bytes) -> their checksums, one wait for all), the
        device sums every copy before any is read."""
        keys = [k for k in keys if k in self._kept]
        where = [self._kept[k][:2] for k in keys]
        sums = self._checksums(where) if self._checksums else [self._checksum(d, n) for d, n in where]
        return [k for k, got in zip(keys, sums) if got != self._kept[k][2]]

    def drop(self, key: str) -> None:
        d, n, _ = self._kept.pop(key)
        self.bytes -= n
        self._free(d)

    def clear(self) -> None:
        for k in list(self._kept):
            self.drop(k)

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, key: str) -> bool:
        return key in self._kept


class Kept:
    """A blob of a request that the worker keeps on the device: its size only (the bytes are
    the store's device copy)."""
    __slots__ = ("nbytes",)

    def __init__(self, nbytes: int):
        self.nbytes = int(nbytes)
