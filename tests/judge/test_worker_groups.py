"""A run request's sets launched as a group (``Worker._run_group``) on a fake CUDA driver, without
a GPU: every set's fill, launch, compares and copies queued first, then each launch waited for in
turn and the group read once.

The fake runs queued work only when the worker waits (a stream sync, a synchronous copy) or polls
an event (up to that event), as a GPU would have done by then; a launched "kernel" is a Python
function of the set's device memory, which may fault (every later call then fails with the sticky
error, as a CUDA context does) or never end."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from superopt.judge.backends import _gpu_worker as gw
from superopt.judge.backends._proto import EXPECTED
from superopt.judge.backends.gpu import GpuBackend
from tests.judge.test_worker_sets import G, FakeDriver, blob, fake_worker, guards

ILLEGAL_ADDRESS = 700


class Hang(Exception):
    pass


class KernelDriver(FakeDriver):
    """FakeDriver with user kernels, the scrub kernel, events and a sticky fault."""

    def __init__(self, kernel):
        super().__init__()
        # {function: f(addresses, driver)}, or the one "kernel"; f may raise (a fault, a hang)
        self.kernels = kernel if isinstance(kernel, dict) else {"kernel": kernel}
        self.order: list = []           # the user kernels launched, in order
        self.sticky = 0
        self.events: dict[int, float | None] = {}
        self.clock = 0.0
        self.hung = False

    def _run(self, upto=None):
        while self.queue and not self.sticky and not self.hung:
            op = self.queue.pop(0)
            try:
                op()
            except Hang:
                self.hung = True
                self.queue.insert(0, op)
                return
            except MemoryError:
                self.sticky = ILLEGAL_ADDRESS
                self.queue.clear()
                return
            if upto is not None and getattr(op, "event", None) == upto:
                return

    def _ret(self, *rest):
        return (self.sticky, *rest) if self.sticky else (0, *rest)

    def cuStreamSynchronize(self, stream):
        self.syncs += 1
        self._run()
        return self._ret()

    def _pinned(self, addr: int) -> bool:
        return any(base <= addr < base + len(buf) for base, buf in self.host_bufs.items())

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        if not self._pinned(int(src)):
            # as the driver does: a copy from pageable memory waits for the stream first
            self._run()
            assert not self.hung, "a copy from pageable memory queued behind a launch that never ends"
        return super().cuMemcpyHtoDAsync(dst, src, n, stream)

    def cuEventCreate(self, flags):
        k = len(self.events) + 1
        self.events[k] = None
        return (0, k)

    def cuEventRecord(self, ev, stream):
        self.events[ev] = None

        def op(ev=ev):
            self.clock += 1.0
            self.events[ev] = self.clock
        op.event = ev
        self.queue.append(op)
        return self._ret()

    def cuEventQuery(self, ev):
        self._run(upto=ev)
        if self.sticky:
            return (self.sticky,)
        return (0,) if self.events[ev] is not None else (600,)

    def cuEventElapsedTime(self, a, b):
        return self._ret(self.events[b] - self.events[a])

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        if fn == "differ":
            return super().cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
        if fn in ("scrub", "flush"):
            return self._ret()
        addrs = []
        if params:                      # the set kernels take (in, out, scalar)
            ptrs = np.ctypeslib.as_array((ctypes.c_uint64 * 3).from_address(params))
            addrs = [int(np.ctypeslib.as_array((ctypes.c_uint64 * 1).from_address(int(p)))[0]) for p in ptrs]
        self.queue.append(lambda a=addrs, f=self.kernels[fn]: f(a, self))
        self.order.append(fn)
        return self._ret()

    def cuEventSynchronize(self, ev):
        self.syncs += 1
        self._run(upto=ev)
        return self._ret()

    def cuMemFree(self, d):
        self._run()                     # cuMemFree waits for the device's work on it
        return super().cuMemFree(d)

    def cuModuleUnload(self, mod):
        return (0,)

    def cuGetErrorName(self, err):
        return (0, f"CUDA_ERROR_{int(err)}".encode())



def group_worker(kernel):
    w, _ = fake_worker()
    cu = KernelDriver(kernel)
    w.cu = cu
    w.events, w.spent = [], {}
    w.scrub_fn = "scrub"
    w.info.update(smem_optin=1024)
    w.load = lambda ptx, cubin=None: ("module", "")
    w.loaded_cubin = True
    w.function = lambda mod, name: "kernel"
    from superopt.judge.backends.resident import WorkerStore
    w.store = WorkerStore(0, w._dev_alloc, w._dev_upload, w._dev_free, lambda d, n: 0)
    return w, cu


def copy_doubled(addrs, cu):
    """out[i] = 2 * in[i] (bytes, mod 256); the scalar is the length."""
    src, dst, n = addrs[0], addrs[1], addrs[2] & 0xFFFFFFFF
    s, so = cu._at(src, n)              # the device's memory as it is (the kernel runs in order)
    d, do = cu._at(dst, n)
    d[do:do + n] = (np.frombuffer(bytes(s[so:so + n]), np.uint8) * 2).astype(np.uint8).tobytes()


def make_request(n_sets: int, n: int = 24, expect: dict | None = None):
    blobs, sets = [], []
    for k in range(n_sets):
        inp, out = blob(n, 100 + k), blob(n, 200 + k)
        blobs += [inp, out]
        ln = np.array([n], np.uint64).tobytes()
        s = {"guard": G, "grid": (1, 1, 1), "block": (32, 1, 1), "shared": 0,
             "params": [("b", 2 * k, *guards(2 * k)), ("b", 2 * k + 1, *guards(2 * k + 1)), ("s", ln)]}
        sets.append(s)
    return {"op": "run", "ptx": "", "kernel": "k", "timeout": 0.05, "sets": sets, "blobs": blobs}


def outputs(rep):
    return [r["buffers"][1][0] for r in rep["results"]]


def test_a_requests_sets_run_as_one_group_with_one_wait_and_each_keeps_its_results():
    w, cu = group_worker(copy_doubled)
    req = make_request(5)
    rep = w._op_run(req)
    assert not rep["fatal"] and "batched_fault" not in rep
    for k, r in enumerate(rep["results"]):
        assert r["status"] == "ok" and r["elapsed"] is not None
        inp = req["blobs"][2 * k]
        assert r["buffers"][0] == (None, *guards(2 * k))                       # the input: unchanged
        assert bytes(r["buffers"][1][0]) == (inp * 2).astype(np.uint8).tobytes()
        assert r["buffers"][1][1:] == guards(2 * k + 1)
    assert cu.syncs == 1                # the whole group, read once


def test_one_set_a_group_when_the_request_says_so():
    w, cu = group_worker(copy_doubled)
    rep = w._op_run(dict(make_request(4), batch=False))
    assert [r["status"] for r in rep["results"]] == ["ok"] * 4
    assert cu.syncs == 4


def test_groups_are_bounded_by_bytes_and_count(monkeypatch):
    sets = [{"guard": G, "params": [("b", k, b"", b"")]} for k in range(5)]
    blobs = [np.zeros(n, np.uint8) for n in (100, 100, 1000, 100, 100)]
    monkeypatch.setattr(gw, "GROUP_BYTES", 2 * (100 + 2 * G) + 10)
    assert gw._groups(sets, blobs) == [[0, 1], [2], [3, 4]]         # the large set alone
    monkeypatch.setattr(gw, "GROUP_SETS", 1)
    assert gw._groups(sets, blobs) == [[0], [1], [2], [3], [4]]
    assert gw._groups(sets, blobs, together=False) == [[0], [1], [2], [3], [4]]


def test_a_result_equal_to_the_expected_one_is_compared_on_the_device_in_a_group():
    w, cu = group_worker(copy_doubled)
    req = make_request(3)
    want = [(req["blobs"][2 * k] * 2).astype(np.uint8) for k in range(3)]
    dev = {}
    for k in range(3):
        d = cu.cuMemAlloc(want[k].nbytes)[1]
        cu.write(d, want[k].tobytes())
        req["blobs"].append(want[k])
        dev[len(req["blobs"]) - 1] = d
        req["sets"][k]["expect"] = {1: len(req["blobs"]) - 1}
    w._resident_blobs = lambda req, blobs: (blobs, dev, [])
    w._kept_changed = lambda req: []
    req["sets"][1]["expect"] = {1: 0}        # set 1 expects its input: it differs, comes back whole
    dev[0] = cu.cuMemAlloc(24)[1]
    cu.write(dev[0], req["blobs"][0].tobytes())
    rep = w._op_run(req)
    got = outputs(rep)
    assert got[0] == EXPECTED and got[2] == EXPECTED
    assert bytes(got[1]) == want[1].tobytes()


def test_a_crash_in_a_group_is_fatal_and_says_the_group_must_run_again_one_set_at_a_time():
    calls = []

    def faults_on_third(addrs, cu):
        calls.append(addrs)
        if len(calls) == 3:
            raise MemoryError("illegal address")
        copy_doubled(addrs, cu)
    w, cu = group_worker(faults_on_third)
    rep = w._op_run(make_request(5))
    assert rep["fatal"] and rep["batched_fault"]
    statuses = [r["status"] for r in rep["results"]]
    assert "crash" in statuses and "ok" not in statuses
    # one at a time (what the parent asks next, in a fresh worker): the sets before keep their results
    calls.clear()
    w, cu = group_worker(faults_on_third)
    rep = w._op_run(dict(make_request(5), batch=False))
    assert rep["fatal"] and "batched_fault" not in rep
    assert [r["status"] for r in rep["results"]] == ["ok", "ok", "crash", "not_run", "not_run"]
    assert "set 2 before it ended in crash" in rep["results"][3]["error"]


def test_a_launch_that_never_ends_times_out_even_with_sets_from_pageable_memory_after_it():
    """Every set's data here comes from pageable memory, whose copies wait for the stream: the
    fills are queued before the first launch, so nothing waits behind the launch that hangs."""
    def hangs_on_first(addrs, cu):
        raise Hang()
    w, cu = group_worker(hangs_on_first)
    rep = w._op_run(make_request(4, n=64))
    assert rep["fatal"] and [r["status"] for r in rep["results"]] == ["timeout", "not_run", "not_run", "not_run"]


def test_without_page_locked_memory_each_set_is_a_group_of_its_own():
    """Copies back into pageable memory wait for the stream: queued behind a launch that never
    ends they would wait for ever, so without page-locked memory nothing is queued behind one."""
    w, cu = group_worker(copy_doubled)
    cu.cuMemHostAlloc = lambda n, flags: (2,)                # CUDA_ERROR_OUT_OF_MEMORY
    rep = w._op_run(make_request(3))
    assert [r["status"] for r in rep["results"]] == ["ok"] * 3
    assert cu.syncs == 3


def test_a_launch_that_never_ends_times_out_and_is_fatal():
    def hangs_on_second(addrs, cu, seen=[]):
        seen.append(1)
        if len(seen) == 2:
            raise Hang()
        copy_doubled(addrs, cu)
    w, cu = group_worker(hangs_on_second)
    rep = w._op_run(make_request(3))
    assert rep["fatal"] and rep["batched_fault"]
    # set 0 ended but was not read before the context had to go: the parent runs them again
    assert [r["status"] for r in rep["results"]] == ["not_run", "timeout", "not_run"]
    assert rep["results"][1]["error"].startswith("no completion within")
    assert "set 1 before it ended in timeout" in rep["results"][0]["error"]


def test_a_launch_error_that_leaves_the_context_usable_fails_that_set_only():
    w, cu = group_worker(copy_doubled)
    launch = cu.cuLaunchKernel
    n = [0]

    def refuse_second(fn, *a):
        if fn == "kernel":
            n[0] += 1
            if n[0] == 2:
                return (1,)             # CUDA_ERROR_INVALID_VALUE
        return launch(fn, *a)
    cu.cuLaunchKernel = refuse_second
    rep = w._op_run(make_request(3))
    assert not rep["fatal"]
    assert [r["status"] for r in rep["results"]] == ["ok", "launch_error", "ok"]
    assert bytes(rep["results"][2]["buffers"][1][0]) == (make_request(3)["blobs"][4] * 2).astype(np.uint8).tobytes()


def test_the_parent_runs_a_request_again_one_set_at_a_time_after_a_fault_in_a_group(monkeypatch):
    be = object.__new__(GpuBackend)
    sent = []

    def fake_request(base, wire, hard):
        sent.append(base.get("batch", True))
        status = "crash" if base.get("batch", True) else "ok"
        return {"results": [{"status": status, "error": None, "elapsed": None, "buffers": None}],
                "fatal": base.get("batch", True), "batched_fault": base.get("batch", True)}
    be._run_request = fake_request
    be._cubin = lambda ptx: None
    be.scrub_shared, be.jit_allowance, be.grace_per_set = True, 1.0, 1.0
    be._resident = None
    from superopt.judge.inputs import make_input_set
    from superopt.specs.launch_spec import LaunchSpec
    spec = LaunchSpec.from_dict({"kernel": "k", "grid": [1, 1, 1], "block": [32, 1, 1],
                                 "params": [{"name": "x", "kind": "buffer", "type": "f32", "length": 8,
                                             "direction": "inout"}]})
    s = make_input_set(spec, 1, 0)
    res = be.run_many("ptx", spec, [s])
    assert sent == [True, False]
    assert res[0].status == "ok"


@pytest.mark.parametrize("n_sets", [1, 7])
def test_staging_room_is_sized_for_the_whole_group_before_anything_is_queued(n_sets):
    """No page-locked buffer is replaced while copies of the group are queued on it: the room
    for every set's guards and flags is taken up front."""
    w, cu = group_worker(copy_doubled)
    for name in ("in", "out"):          # room for one set's guards only, left by an earlier request
        ptr = cu.cuMemHostAlloc(4 * G, 0)[1]
        w.pinned[name] = (ptr, 4 * G, np.ctypeslib.as_array((ctypes.c_uint8 * (4 * G)).from_address(ptr)), True)
    freed = []
    free_host = cu.cuMemFreeHost

    def watch(ptr):
        assert not cu.queue, "a page-locked buffer freed while copies were queued"
        freed.append(ptr)
        return free_host(ptr)
    cu.cuMemFreeHost = watch
    req = make_request(n_sets, n=64)
    rep = w._op_run(req)
    assert [r["status"] for r in rep["results"]] == ["ok"] * n_sets
    for k, r in enumerate(rep["results"]):
        assert r["buffers"][1][1:] == guards(2 * k + 1)
        assert bytes(r["buffers"][1][0]) == (req["blobs"][2 * k] * 2).astype(np.uint8).tobytes()
    assert len(freed) == (2 if n_sets > 1 else 0)


def timing_worker(a_units: float, b_units: float):
    """A worker whose prepared timing launches "A" (``a_units`` of the fake clock) and "B"."""
    def lasts(units):
        def k(addrs, cu):
            cu.clock += units
        return k
    w, cu = group_worker({"A": lasts(a_units), "B": lasts(b_units)})
    w.flush_fn = "flush"
    w.flush_buf = (cu.cuMemAlloc(1024)[1], 1024)
    w.sink = cu.cuMemAlloc(256)[1]
    w.prepared = w.prepared_id = None
    w._time_setup = lambda req: {"fns": ["A", "B"], "args": [[], []], "dev": {}, "mods": [], "allocs": [[], []]}
    return w, cu


def time_request(**kw):
    return dict({"op": "time", "set": {"grid": (1, 1, 1), "block": (32, 1, 1), "shared": 0},
                 "warmup": 3, "reps": 30, "flush_l2": True}, **kw)


def test_a_timing_queues_its_rounds_and_waits_once_per_run_of_rounds():
    w, cu = timing_worker(3.0, 2.0)
    rep = w._op_time(time_request())
    # each launch between its own events: A's 3 units and the event's 1, B's 2 and 1
    assert rep["a_ms"] == [4.0] * 30 and rep["b_ms"] == [3.0] * 30
    assert rep["warmup_pairs"] == 3
    # interleaved, the order alternated: warm-up A B, B A, A B, then the rounds from A B again
    assert cu.order[:6] == ["A", "B", "B", "A", "A", "B"]
    assert cu.order[6:12] == ["A", "B", "B", "A", "A", "B"] and len(cu.order) == 6 + 60
    assert cu.syncs == 2                # the warm-up's, then all 30 rounds (no rule: no look between)


def test_the_early_stop_looks_at_its_look_points_and_nowhere_else():
    w, cu = timing_worker(3.0, 2.0)
    seen = []
    import superopt.judge.early_stop as es
    real = es.should_stop

    def spy(done, a, b, rule):
        seen.append((done, len(a), len(b)))
        return real(done, a, b, rule)
    es.should_stop, saved = spy, es.should_stop
    try:
        rep = w._op_time(time_request(reps=60, stop_early={"first": 20, "every": 5, "faster": True}))
    finally:
        es.should_stop = saved
    # every round B is 1 unit faster with no spread: clearly faster at the first look
    assert rep["stopped"] == 20 and rep["stopped_as"] == es.FASTER
    assert seen == [(20, 20, 20)]
    assert len(rep["a_ms"]) == len(rep["b_ms"]) == 20


def test_next_look():
    from superopt.judge.early_stop import next_look
    rule = {"first": 20, "every": 5}
    assert [next_look(d, rule, 60) for d in (0, 7, 20, 21, 24, 25, 58)] == [20, 20, 25, 25, 25, 30, 60]
    assert next_look(0, None, 60) == 60 and next_look(0, rule, 12) == 12


def test_warm_up_until_its_time_has_passed_in_runs_of_pairs(monkeypatch):
    """At least ``warmup_min`` pairs, then more until ``warmup_s`` has passed, at most ``warmup``."""
    w, cu = timing_worker(1.0, 1.0)
    clock = [0.0]

    def slow_sync(ev, sync=cu.cuEventSynchronize):
        clock[0] += 0.004               # each run of pairs takes 4 ms of the host's clock here
        return sync(ev)
    cu.cuEventSynchronize = slow_sync
    monkeypatch.setattr(gw.time, "perf_counter", lambda: clock[0])
    rep = w._op_time(time_request(warmup=10, warmup_min=2, warmup_s=0.010, reps=4))
    # 2 pairs in 4 ms (2 ms a pair): 3 more for the 6 ms left; 5 pairs in 8 ms (1.6 ms a pair): 2
    # more for the 2 ms left; 12 ms have passed
    assert rep["warmup_pairs"] == 7
    rep = w._op_time(time_request(warmup=10, warmup_min=2, warmup_s=1.0, reps=4))
    assert rep["warmup_pairs"] == 10


def test_a_crash_in_a_group_leaves_the_sets_before_it_their_results_through_the_parent():
    """End to end with GpuBackend: the worker process (the real run code on the fake driver) faults
    on the third launch of a group; the parent's answer is that of the request run again one set
    at a time in a fresh worker: the two sets before the fault keep their results."""
    import sys
    from pathlib import Path

    from superopt.judge.inputs import make_input_set
    from superopt.specs.launch_spec import LaunchSpec
    spec = LaunchSpec.from_dict({"kernel": "k", "grid": [1, 1, 1], "block": [32, 1, 1],
                                 "params": [{"name": "a", "kind": "buffer", "type": "u8", "length": 24, "direction": "in"},
                                            {"name": "b", "kind": "buffer", "type": "u8", "length": 24, "direction": "out"},
                                            {"name": "n", "kind": "scalar", "type": "u64", "value": 24}]})
    sets = [make_input_set(spec, 5, k) for k in range(4)]
    worker = Path(__file__).with_name("judge_fake_group_worker.py")
    be = GpuBackend(worker_cmd=[sys.executable, str(worker)])
    try:
        res = be.run_many("// crash:2\n", spec, sets)
        assert [r.status for r in res] == ["ok", "ok", "crash", "not_run"], [(r.status, r.error) for r in res]
        for s, r in zip(sets[:2], res[:2]):
            assert np.array_equal(r.outputs["b"], (s.data["a"] * 2).astype(np.uint8))
        assert "set 2 before it ended in crash" in res[3].error
        # a request without a fault runs as one group, in one reply
        res = be.run_many("// fine\n", spec, sets)
        assert [r.status for r in res] == ["ok"] * 4
    finally:
        be.close()


def test_slow_rounds_are_queued_a_few_at_a_time_and_the_time_limit_still_stops_them(monkeypatch):
    """Rounds of 0.2 s each: runs of one round (a quarter second at most between looks at the
    clock), and ``max_seconds`` ends the timing after the eleventh round, as when every round
    was waited for."""
    w, cu = timing_worker(1.0, 1.0)
    clock = [0.0]
    seen = [0]

    def slow_sync(ev, sync=cu.cuEventSynchronize):
        clock[0] += 0.1 * (len(cu.order) - seen[0])        # 0.1 s a launch, 0.2 s a round
        seen[0] = len(cu.order)
        return sync(ev)
    cu.cuEventSynchronize = slow_sync
    monkeypatch.setattr(gw.time, "perf_counter", lambda: clock[0])
    rep = w._op_time(time_request(warmup=1, reps=100, max_seconds=1.0))
    assert len(rep["a_ms"]) == len(rep["b_ms"]) == 11
    assert cu.syncs == 1 + 11           # the warm-up's, then one wait a round
