"""Device allocations the GPU worker reuses across a check's input sets and across requests.

Every launch of a check gets its own allocations, ``[guard][data][guard]`` per buffer, filled
completely before the launch (the data: an input, or an output's poison; the guards: random
bytes), so no launch can see what an earlier one left. Getting them from ``cuMemAlloc`` and
handing them back with ``cuMemFree`` costs a driver call each and, for the free, a wait for the
whole device: beside seven other compilations' workers on one GPU each such wait also waits for
their work (the contention bench, bench/judge/check_cost.py, 2026-12-04: the worker's free
phase 6x and its fill 4x slower with eight processes than alone). A kernel's sets have the same
sizes from candidate to candidate, so an allocation handed back is kept here, by its exact size,
and the next set of that size takes it: fewer driver calls, no device-wide wait.

Bounded by bytes (``SUPEROPT_GPU_POOL_BYTES``, at most 1/32 of the device's free memory, half the
kept inputs' share); past the bound the least recently used sizes are freed. The worker scrubs an
allocation before it comes back (an asynchronous memset on its stream) and fills it completely
before the next launch. ``alloc(n)`` -> device pointer and ``free(dptr)`` are the device's
(CUDA-free tests give fakes).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable


class AllocationPool:
    def __init__(self, limit: int, alloc: Callable, free: Callable):
        self.limit = max(0, int(limit))
        self._alloc, self._free = alloc, free
        self._idle: "OrderedDict[int, list]" = OrderedDict()     # size -> idle pointers, least recent first
        self.bytes = 0                      # idle bytes held
        self.reused = 0                     # takes served from the pool
        self.allocated = 0                  # takes that allocated

    def take(self, n: int):
        """A device allocation of exactly ``n`` bytes: an idle one of that size, else a new one."""
        idle = self._idle.get(n)
        if idle:
            d = idle.pop()
            self.bytes -= n
            if not idle:
                del self._idle[n]
            self.reused += 1
            return d
        d = self._alloc(n)
        self.allocated += 1
        return d

    def give(self, d, n: int) -> None:
        """Hand back an allocation of ``n`` bytes that no launch uses any more: kept for the next
        take of that size when the bound allows, else freed."""
        if n > self.limit:
            self._free(d)
            return
        while self.bytes + n > self.limit and self._idle:
            self._evict_one()
        self._idle.setdefault(n, []).append(d)
        self._idle.move_to_end(n)
        self.bytes += n

    def _evict_one(self) -> None:
        size, idle = next(iter(self._idle.items()))
        self._free(idle.pop(0))
        self.bytes -= size
        if not idle:
            del self._idle[size]

    def clear(self) -> None:
        """Free every idle allocation (device memory ran out, or the worker ends)."""
        while self._idle:
            self._evict_one()

    def __len__(self) -> int:
        return sum(len(v) for v in self._idle.values())
