"""The GPU worker's fill and readback of a set (``Worker._alloc_set``, ``Worker._read_set``) on a
fake CUDA driver, without a GPU.

The fake runs what is queued on a stream only when the worker waits (``cuStreamSynchronize``, a
synchronous copy): a worker that reads a result before waiting for it, or rewrites its
page-locked staging buffer while copies from it are still queued, gets wrong bytes here, as it
could on a GPU. The GPU tests (tests/judge/test_resident_gpu.py, test_judge_gpu.py) run the same
code on the device."""
from __future__ import annotations

import ctypes

import numpy as np

from superopt.judge.backends._gpu_worker import Worker
from superopt.judge.backends._proto import EXPECTED
from superopt.judge.backends.alloc_pool import AllocationPool

G = 16                                  # guard bytes in these sets


class FakeDriver:
    """Device memory as byte arrays at made-up addresses, one stream whose work waits for a sync."""

    CUdeviceptr = int

    def __init__(self):
        self.mem: dict[int, bytearray] = {}
        self.next = 1 << 32
        self.queue: list = []
        self.host_bufs: dict[int, ctypes.Array] = {}
        self.syncs = 0

    # memory
    def _at(self, addr: int, n: int) -> tuple[bytearray, int]:
        for base, buf in self.mem.items():
            if base <= addr and addr + n <= base + len(buf):
                return buf, addr - base
        raise AssertionError(f"device access outside any allocation: {addr:#x}+{n}")

    def cuMemAlloc(self, n):
        base = self.next
        self.next += (n + 4095) // 4096 * 4096 + 4096
        self.mem[base] = bytearray(np.random.default_rng(base).integers(0, 256, n, dtype=np.uint8).tobytes())
        return (0, base)

    def cuMemFree(self, d):
        del self.mem[int(d)]
        return (0,)

    def cuMemHostAlloc(self, n, flags):
        buf = ctypes.create_string_buffer(n)
        self.host_bufs[ctypes.addressof(buf)] = buf
        return (0, ctypes.addressof(buf))

    def cuMemFreeHost(self, ptr):
        del self.host_bufs[int(ptr)]
        return (0,)

    # queued work
    def _run(self):
        queued, self.queue = self.queue, []
        for op in queued:
            op()

    def cuStreamSynchronize(self, stream):
        self.syncs += 1
        self._run()
        return (0,)

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        def op(dst=int(dst), src=int(src), n=n):
            buf, off = self._at(dst, n)
            buf[off:off + n] = ctypes.string_at(src, n)
        self.queue.append(op)
        return (0,)

    def cuMemcpyDtoDAsync(self, dst, src, n, stream):
        def op(dst=int(dst), src=int(src), n=n):
            s, so = self._at(src, n)
            d, do = self._at(dst, n)
            d[do:do + n] = s[so:so + n]
        self.queue.append(op)
        return (0,)

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        def op(dst=int(dst), src=int(src), n=n):
            s, so = self._at(src, n)
            ctypes.memmove(dst, bytes(s[so:so + n]), n)
        self.queue.append(op)
        return (0,)

    def cuMemcpyDtoH(self, dst, src, n):
        self._run()                     # the legacy stream waits for the worker's stream
        s, so = self._at(int(src), n)
        ctypes.memmove(dst, bytes(s[so:so + n]), n)
        return (0,)

    def cuMemsetD32Async(self, d, value, count, stream):
        def op(d=int(d)):
            buf, off = self._at(d, 4 * count)
            buf[off:off + 4 * count] = np.full(count, value, np.uint32).tobytes()
        self.queue.append(op)
        return (0,)

    def cuMemsetD8Async(self, d, value, n, stream):
        def op(d=int(d)):
            buf, off = self._at(d, n)
            buf[off:off + n] = bytes([value]) * n
        self.queue.append(op)
        return (0,)

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        assert fn == "differ", fn
        ptrs = np.ctypeslib.as_array((ctypes.c_uint64 * 4).from_address(params))
        a, b, n, flag = (int(np.ctypeslib.as_array((ctypes.c_uint64 * 1).from_address(int(p)))[0]) for p in ptrs)

        def op():
            x, xo = self._at(a, n)
            y, yo = self._at(b, n)
            if x[xo:xo + n] != y[yo:yo + n]:
                f, fo = self._at(flag, 4)
                f[fo:fo + 4] = (1).to_bytes(4, "little")
        self.queue.append(op)
        return (0,)

    # what the test does as "the kernel"
    def write(self, addr: int, data: bytes):
        self._run()
        buf, off = self._at(addr, len(data))
        buf[off:off + len(data)] = data

    def read(self, addr: int, n: int) -> bytes:
        self._run()
        buf, off = self._at(addr, n)
        return bytes(buf[off:off + n])


def fake_worker() -> tuple[Worker, FakeDriver]:
    cu = FakeDriver()
    w = object.__new__(Worker)
    w.cu, w.stream = cu, "stream"
    w.rng = np.random.default_rng(1)
    w.pinned, w.staged_in_flight, w.words = {}, False, {}
    w.util_mod, w.differ_fn = "util", "differ"
    w.info = {"sm_count": 4}
    w.pool = AllocationPool(0, w._dev_alloc, w._dev_free)
    return w, cu


def blob(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def guards(seed: int) -> tuple[bytes, bytes]:
    r = np.random.default_rng(1000 + seed)
    return r.integers(0, 256, G, dtype=np.uint8).tobytes(), r.integers(0, 256, G, dtype=np.uint8).tobytes()


def test_a_set_is_filled_with_its_guards_and_data_and_read_back_with_what_changed():
    w, cu = fake_worker()
    inp, out = blob(40, 1), blob(24, 2)
    (fi, bi), (fo, bo) = guards(1), guards(2)
    s = {"guard": G, "params": [("b", 0, fi, bi), ("s", b"\x07\0\0\0"), ("b", 1, fo, bo)]}
    args, allocs = w._alloc_set(s, [inp, out])
    (d_in, n_in, _, _), (d_out, n_out, _, _) = allocs
    # what the launch sees: guard, data, guard in each allocation
    assert cu.read(int(d_in), 2 * G + 40) == fi + inp.tobytes() + bi
    assert cu.read(int(d_out), 2 * G + 24) == fo + out.tobytes() + bo
    assert int(args[0][0]) == int(d_in) + G and bytes(args[1]) == b"\x07\0\0\0"
    # the "kernel" writes the output and one byte of the back guard of the input
    cu.write(int(d_out) + G, bytes(range(24)))
    cu.write(int(d_in) + G + 40, b"\xee")
    got = w._read_set(s, [inp, out], allocs)
    assert got[0][0] is None                                  # the input did not change
    assert got[0][1] == fi and got[0][2] == b"\xee" + bi[1:]  # its damaged guard comes back as it is
    assert bytes(got[1][0]) == bytes(range(24)) and (got[1][1], got[1][2]) == (fo, bo)


def test_kept_inputs_fill_device_to_device_and_a_result_equal_to_the_expected_one_stays_there():
    w, cu = fake_worker()
    inp, want = blob(64, 3), blob(32, 4)
    kept = {0: cu.cuMemAlloc(64)[1], 2: cu.cuMemAlloc(32)[1]}
    cu.write(kept[0], inp.tobytes())
    cu.write(kept[2], want.tobytes())
    (fi, bi), (fo, bo) = guards(3), guards(4)
    poison = blob(32, 5)
    s = {"guard": G, "params": [("b", 0, fi, bi), ("b", 1, fo, bo)], "expect": {1: 2}}
    blobs = [inp, poison, want]
    args, allocs = w._alloc_set(s, blobs, kept)
    d_in, d_out = int(allocs[0][0]), int(allocs[1][0])
    assert cu.read(d_in, 2 * G + 64) == fi + inp.tobytes() + bi
    cu.write(d_out + G, want.tobytes())                       # the candidate wrote nvcc's result
    got = w._read_set(s, blobs, allocs, kept)
    assert got[0] == (None, fi, bi)                           # the kept input: unchanged, compared there
    assert got[1] == (EXPECTED, fo, bo)                       # equal to the expected result: only its guards
    # a result that differs comes back whole
    args, allocs = w._alloc_set(s, blobs, kept)
    d_out = int(allocs[1][0])
    cu.write(d_out + G, bytes(32))
    got = w._read_set(s, blobs, allocs, kept)
    assert bytes(got[1][0]) == bytes(32) and got[1][1:] == (fo, bo)


def test_two_sets_filled_back_to_back_each_get_their_own_guards():
    """A timing fills its two copies one after the other, with no wait between: the staging
    buffer of the first set's guards must not be overwritten while its copies are queued."""
    w, cu = fake_worker()
    data = blob(16, 6)
    g1, g2 = guards(6), guards(7)
    s1 = {"guard": G, "params": [("b", 0, *g1)]}
    s2 = {"guard": G, "params": [("b", 0, *g2)]}
    _, a1 = w._alloc_set(s1, [data])
    _, a2 = w._alloc_set(s2, [data])
    assert cu.read(int(a1[0][0]), 2 * G + 16) == g1[0] + data.tobytes() + g1[1]
    assert cu.read(int(a2[0][0]), 2 * G + 16) == g2[0] + data.tobytes() + g2[1]


def test_an_aliased_set_fills_the_union_once_and_reads_the_view_through_it():
    w, cu = fake_worker()
    union = blob(48, 8)
    fu, bu = guards(8)
    s = {"guard": G, "params": [("u", 0, fu, bu, 8), ("v", 0, 16)]}
    args, allocs = w._alloc_set(s, [union])
    (d, n, _, _), = allocs
    assert int(args[0][0]) == int(d) + G + 8 and int(args[1][0]) == int(d) + G + 8 + 16
    cu.write(int(d) + G, bytes(48))
    got = w._read_set(s, [union], allocs)
    assert bytes(got[0][0]) == bytes(48) and got[0][1:] == (fu, bu)
    assert got[1] == (None, b"", b"")


def test_a_set_without_guards_uses_no_staging_buffer():
    """compute-sanitizer's sets (guards=False): exact sizes, nothing staged."""
    w, cu = fake_worker()
    data = blob(20, 9)
    s = {"guard": 0, "params": [("b", 0, b"", b"")]}
    _, allocs = w._alloc_set(s, [data])
    assert "in" not in w.pinned and not w.staged_in_flight
    assert cu.read(int(allocs[0][0]), 20) == data.tobytes()
    got = w._read_set(s, [data], allocs)
    assert got == [(None, b"", b"")]


def test_without_page_locked_memory_the_copies_go_through_pageable_memory():
    """A machine that refuses cuMemHostAlloc (no page-locked memory to give): the same sets,
    through an ordinary host buffer."""
    w, cu = fake_worker()
    cu.cuMemHostAlloc = lambda n, flags: (2,)                # CUDA_ERROR_OUT_OF_MEMORY
    data = blob(32, 11)
    f, b = guards(11)
    s = {"guard": G, "params": [("b", 0, f, b)]}
    _, allocs = w._alloc_set(s, [data])
    assert cu.read(int(allocs[0][0]), 2 * G + 32) == f + data.tobytes() + b
    assert w._read_set(s, [data], allocs) == [(None, f, b)]
    assert not w.pinned["in"][3] and not w.pinned["out"][3]


def test_a_prepared_timing_leaves_no_copy_queued_when_its_step_ends():
    """time_prepare fills both copies under a step shared with checks; its queued copies must be
    done before that step ends, or they would run beside another compilation's timing."""
    w, cu = fake_worker()
    w.spent = {}
    data = blob(64, 12)
    f, b = guards(12)
    s = {"guard": G, "params": [("b", 0, f, b)]}
    w._timing_blobs = lambda req: ([data], {})
    w.load = lambda ptx, cubin=None: ("module", "")
    w.function = lambda mod, name: "fn"
    state = w._time_setup({"ptx_a": "a", "ptx_b": "b", "kernel": "k", "set": s})
    assert cu.queue == [] and not w.staged_in_flight
    for allocs in state["allocs"]:
        buf, off = cu._at(int(allocs[0][0]), 2 * G + 64)
        assert bytes(buf[off:off + 2 * G + 64]) == f + data.tobytes() + b
