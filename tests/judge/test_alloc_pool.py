"""The GPU worker's pool of set allocations (superopt.judge.backends.alloc_pool), with a fake
device: reuse by exact size, the byte bound (a limit that must fire), eviction order."""
from __future__ import annotations

import pytest

from superopt.judge.backends.alloc_pool import AllocationPool


class FakeDevice:
    def __init__(self):
        self.next, self.live, self.freed = 1, {}, []

    def alloc(self, n):
        d = self.next
        self.next += 1
        self.live[d] = n
        return d

    def free(self, d):
        assert d in self.live, f"double free of {d}"
        del self.live[d]
        self.freed.append(d)


def test_an_allocation_handed_back_serves_the_next_take_of_its_size_only():
    dev = FakeDevice()
    pool = AllocationPool(1000, dev.alloc, dev.free)
    a = pool.take(100)
    pool.give(a, 100)
    assert pool.bytes == 100 and len(pool) == 1
    b = pool.take(200)                    # another size: a new allocation
    assert b != a and pool.allocated == 2
    assert pool.take(100) == a and pool.reused == 1
    assert pool.bytes == 0 and len(pool) == 0 and not dev.freed


def test_the_byte_bound_frees_the_least_recently_used_sizes_first():
    dev = FakeDevice()
    pool = AllocationPool(300, dev.alloc, dev.free)
    a, b, c = pool.take(100), pool.take(150), pool.take(120)
    pool.give(a, 100)
    pool.give(b, 150)
    assert pool.bytes == 250 and not dev.freed
    pool.give(c, 120)                     # over the bound: the oldest size (a's) goes
    assert dev.freed == [a] and pool.bytes == 270
    assert pool.bytes <= pool.limit
    assert set(dev.live) == {b, c}


def test_an_allocation_over_the_bound_is_freed_and_a_zero_bound_keeps_nothing():
    dev = FakeDevice()
    pool = AllocationPool(64, dev.alloc, dev.free)
    big = pool.take(65)
    pool.give(big, 65)
    assert dev.freed == [big] and pool.bytes == 0
    off = AllocationPool(0, dev.alloc, dev.free)
    d = off.take(8)
    off.give(d, 8)
    assert dev.freed[-1] == d and len(off) == 0


def test_clear_frees_every_idle_allocation():
    dev = FakeDevice()
    pool = AllocationPool(1 << 20, dev.alloc, dev.free)
    ds = [pool.take(n) for n in (10, 10, 20)]
    for d, n in zip(ds, (10, 10, 20)):
        pool.give(d, n)
    pool.clear()
    assert sorted(dev.freed) == sorted(ds) and pool.bytes == 0 and not dev.live


def test_a_failed_allocation_is_not_counted():
    def alloc(n):
        raise MemoryError("no room")
    pool = AllocationPool(100, alloc, lambda d: None)
    with pytest.raises(MemoryError):
        pool.take(10)
    assert pool.allocated == 0 and pool.bytes == 0
