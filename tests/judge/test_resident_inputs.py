"""Input buffers kept by the GPU worker across checks (superopt.judge.backends.resident), on
the CPU: the bookkeeping of both sides, and the parent's protocol against a worker stand-in
that keeps inputs with the real worker's code."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from superopt.judge.backends._gpu_worker import CudaError, Worker
from superopt.judge.backends.gpu import GpuBackend
from superopt.judge.backends.resident import MIN_BYTES, Kept, ParentTable, WorkerStore, worker_limit
from superopt.judge.inputs import make_input_set
from superopt.specs.launch_spec import load_spec

HERE = Path(__file__).parent
SPEC = load_spec(str(HERE / "kernels" / "judge.toml")).resolved({"n": 300_000})     # 1.2 MB per buffer
PTX = (HERE / "kernels" / "ptx" / "baseline.ptx").read_text()
MB = 1 << 20


def test_parent_table_names_what_it_sent_and_marks_it_read_only():
    t = ParentTable(limit=3 * MB)
    a, b = np.ones(MB // 4, np.float32), np.zeros(MB // 4, np.float32)
    small = np.ones(10, np.float32)
    use, keep = t.plan([a, b, small], {0, 2})          # b is not input data (an output's poison)
    assert use == {} and set(keep) == {0} and not a.flags.writeable and b.flags.writeable
    use, keep = t.plan([a], {0})
    assert use == {0: ParentTable.key(a)} and keep == {}
    same_bytes = a.copy()                               # equal content, another array: sent again
    assert t.plan([same_bytes], {0})[1] == {0: ParentTable.key(same_bytes)}
    with pytest.raises(ValueError):
        a[0] = 2.0                                      # a kept input cannot change behind the worker
    t.forget([ParentTable.key(a)])
    assert t.plan([a], {0})[1] == {0: ParentTable.key(a)}
    t.reset(0)                                          # a worker that keeps nothing
    assert t.plan([a], {0}) == ({}, {})


def test_parent_table_bounded_in_bytes_oldest_out():
    t = ParentTable(limit=2 * MB)
    xs = [np.full(MB // 4, i, np.float32) for i in range(3)]
    for x in xs:
        t.plan([x], {0})
    assert t.bytes <= 2 * MB
    assert ParentTable.key(xs[0]) not in t and ParentTable.key(xs[2]) in t
    assert len(t.plan([np.ones(3 * MB, np.uint8)], {0})[1]) == 0     # larger than the bound: never kept


class FakeDevice:
    """Device memory as host byte arrays; pointers are numbers."""

    def __init__(self, fail_upload=False):
        self.mem, self.freed, self.fail = {}, [], fail_upload

    def alloc(self, n):
        self.mem[len(self.mem) + len(self.freed)] = bytearray(n)
        return len(self.mem) + len(self.freed) - 1

    def upload(self, d, host):
        if self.fail:
            raise RuntimeError("upload failed")
        self.mem[d][:] = host.tobytes()

    def free(self, d):
        self.mem.pop(d)
        self.freed.append(d)

    def checksum(self, d, n):
        return hash(bytes(self.mem[d][:n]))


def _store(dev, limit):
    return WorkerStore(limit, dev.alloc, dev.upload, dev.free, dev.checksum)


def test_worker_store_keeps_device_copies_evicts_and_frees():
    dev = FakeDevice()
    st = _store(dev, 2 * MB)
    a = np.arange(MB, dtype=np.uint8)
    st.keep("a", a)
    d, n = st.get("a")
    assert bytes(dev.mem[d]) == a.tobytes() and n == MB and st.intact("a")
    a[0] = 99                                           # the device copy is the store's own
    assert dev.mem[st.get("a")[0]][0] == 0
    st.keep("b", np.ones(MB, np.uint8))
    st.keep("c", np.ones(MB, np.uint8))                 # over the bound: "a" (least recently used) out
    assert st.missing(["a", "b", "c"]) == ["a"] and st.bytes <= 2 * MB and d in dev.freed
    st.keep("huge", np.ones(3 * MB, np.uint8))          # never past the bound
    assert "huge" not in st
    st.clear()
    assert len(st) == 0 and dev.mem == {}
    bad = FakeDevice(fail_upload=True)
    st = _store(bad, 2 * MB)
    with pytest.raises(RuntimeError):
        st.keep("x", np.ones(MB, np.uint8))
    assert bad.mem == {} and "x" not in st             # the allocation was freed


def test_worker_store_sees_a_kept_copy_that_changed():
    dev = FakeDevice()
    st = _store(dev, 2 * MB)
    st.keep("a", np.arange(MB, dtype=np.uint8))
    dev.mem[st.get("a")[0]][MB - 1] ^= 1                # a wild store of some kernel
    assert not st.intact("a")


def test_worker_limit_is_a_fraction_of_free_memory():
    assert worker_limit(8 << 30) == 512 << 20
    assert worker_limit(140 << 30) == 4 << 30          # an H200's free memory: the bound's cap
    assert worker_limit(0) == 0


def test_worker_reports_missing_keys_and_runs_nothing():
    w = object.__new__(Worker)
    dev = FakeDevice()
    w.store = _store(dev, 4 * MB)
    blob = np.arange(MB, dtype=np.uint8)
    out, devmap, missing = w._resident_blobs({"resident": {"use": {}, "keep": {0: "k"}}}, [blob])
    assert missing == [] and 0 in devmap and isinstance(out[0], Kept) and out[0].nbytes == MB
    assert bytes(dev.mem[devmap[0]]) == blob.tobytes()
    out, devmap, missing = w._resident_blobs({"resident": {"use": {0: "k"}, "keep": {}}}, [np.zeros(0, np.uint8)])
    assert missing == [] and out[0].nbytes == MB                       # the kept copy stands in
    assert w._resident_blobs({"resident": {"use": {0: "gone"}, "keep": {}}}, [np.zeros(0, np.uint8)])[2] == ["gone"]

    def full(n):
        raise CudaError(2, "cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY")
    w.store = WorkerStore(4 * MB, full, dev.upload, dev.free, dev.checksum)
    out, devmap, missing = w._resident_blobs({"resident": {"use": {}, "keep": {0: "k2"}}}, [blob])
    assert devmap == {} and missing == [] and out[0] is blob            # no room: it travels as before


def test_worker_drops_kept_copies_a_request_changed():
    w = object.__new__(Worker)
    dev = FakeDevice()
    w.store = _store(dev, 4 * MB)
    w._resident_blobs({"resident": {"use": {}, "keep": {0: "k", 1: "j"}}},
                      [np.arange(MB, dtype=np.uint8), np.ones(MB, np.uint8)])
    req = {"resident": {"use": {0: "k", 1: "j"}, "keep": {}}}
    assert w._kept_changed(req) == []
    dev.mem[w.store.get("j")[0]][5] = 7
    assert w._kept_changed(req) == ["j"] and "j" not in w.store and "k" in w.store


def _backend(mode):
    b = GpuBackend(worker_cmd=[sys.executable, str(HERE / "judge_fake_resident_worker.py"), mode])
    b.jit_allowance = 5.0
    return b


@pytest.mark.parametrize("mode", ["keep", "forget"])
def test_inputs_sent_once_and_the_runs_see_them(mode):
    """The second check of the same inputs sends none of them (only the outputs' poison), and the
    worker's runs still start from exactly the inputs; a worker that lost them asks again."""
    b = _backend(mode)
    try:
        s = make_input_set(SPEC, seed=3)
        first = b.run_many(PTX, SPEC, [s], timeout=1)[0]
        again = s.with_outputs({"out": np.full(300_000, np.nan, np.float32)}, np.random.default_rng(1))
        second = b.run_many(PTX, SPEC, [again], timeout=1)[0]
        log = b._request({"op": "log"}, 10)["log"]
    finally:
        b.close()
    for r, st in ((first, s), (second, again)):
        assert r.status == "ok"
        for name in ("x", "y", "out"):
            assert r.outputs[name].tobytes() == st.data[name].tobytes(), name
    assert [len(e["resident"]["keep"]) for e in log[:1]] == [2]          # x and y kept; out is poison
    big = [n for n in log[0]["sent"] if n >= MIN_BYTES]
    assert len(big) == 3
    if mode == "keep":
        assert len(log) == 2 and log[1]["missing"] == []
        assert sorted(n for n in log[1]["sent"] if n >= MIN_BYTES) == [1_200_000]    # only out's poison
    else:
        # the worker forgot: it said so, nothing ran, and the parent sent the inputs again
        assert len(log) == 3 and sorted(log[1]["missing"]) == sorted(log[0]["resident"]["keep"].values())
        assert len([n for n in log[2]["sent"] if n >= MIN_BYTES]) == 3


@pytest.mark.parametrize("mode", ["keep", "forget"])
def test_a_kernels_timings_send_its_set_once(mode):
    """Timings of one input set that the caller reuses (a search's candidates of a kernel) keep
    its big buffers, outputs' poison included, from the first timing on and fill both copies
    from them; a worker that lost them keeps them again from the set's file (no resend round
    trip); a one-off timing keeps nothing. Every timing's buffers hold the set's bytes."""
    b = _backend(mode)
    try:
        s = make_input_set(SPEC, seed=5)
        reps = [b.time_pair(PTX, PTX, SPEC, s, reps=30, keep_inputs=True) for _ in range(3)]
        one_off = b.time_pair(PTX, PTX, SPEC, make_input_set(SPEC, seed=6), reps=30)
        log = [e for e in b._request({"op": "log"}, 10)["log"] if e.get("op") == "time"]
    finally:
        b.close()
    want = [s.data[n].tobytes().hex() for n in ("x", "y", "out")]
    assert all(r["seen"] == want for r in reps)
    assert [len(e["resident"]["keep"]) for e in log[:1]] == [3]           # x, y and out's poison
    assert [e["from_device"] for e in log[:3]] == [[0, 1, 2]] * 3
    assert all(len(e["resident"]["use"]) == 3 for e in log[1:3])           # named, not planned again
    assert log[3]["resident"] is None and log[3]["from_device"] == []      # the one-off timing
    assert one_off["seen"][0] != want[0]


def test_timing_keeps_again_what_the_worker_lost():
    """A timing's set is all in its shared-memory file: a kept input the worker lost is kept
    again from there instead of asking the parent."""
    from superopt.judge.backends import _proto
    w = object.__new__(Worker)
    dev = FakeDevice()
    w.store = _store(dev, 4 * MB)
    blob = np.arange(MB, dtype=np.uint8)
    desc = _proto.write_blobs([blob])
    try:
        out, devmap = w._timing_blobs({"blobs": desc, "resident": {"use": {0: "lost"}, "keep": {}}})
    finally:
        _proto.remove(desc["file"])
    assert "lost" in w.store and isinstance(out[0], Kept) and bytes(dev.mem[devmap[0]]) == blob.tobytes()


@pytest.mark.parametrize("mode", ["keep", "forget"])
def test_a_buffer_equal_to_what_the_check_expects_does_not_travel_back(mode):
    """A candidate's check expects nvcc's results: the expected arrays are kept by the worker
    like inputs (sent once), a buffer equal to its expectation comes back as "expected" and
    its result is the expected array itself; one that differs comes back as bytes; the results
    are those of a check that expected nothing, bit for bit."""
    b = _backend(mode)
    try:
        s = make_input_set(SPEC, seed=7)
        # the stand-in answers every buffer with the bytes it was given: expecting x's data for
        # "x" matches, expecting y's data for "out" does not
        expect = [{"x": s.data["x"], "out": s.data["y"]}]
        plain = b.run_many(PTX, SPEC, [s], timeout=1)[0]
        got = [b.run_many(PTX, SPEC, [s], timeout=1, expect=expect)[0] for _ in range(2)]
        log = [e for e in b._request({"op": "log"}, 10)["log"] if e.get("op") != "time"]
    finally:
        b.close()
    for r in got:
        assert r.status == "ok"
        for name in ("x", "y", "out"):
            assert r.outputs[name].tobytes() == plain.outputs[name].tobytes(), name
        assert r.outputs["x"] is s.data["x"] and r.inputs_unchanged["x"] is True
        assert r.inputs_unchanged["out"] == plain.inputs_unchanged["out"]
    runs = [e for e in log if not e["missing"]]
    assert [e["expected"] for e in runs] == [0, 1, 1]
    if mode == "keep":
        assert len(runs[2]["resident"]["keep"]) == 0          # all named: nothing big sent again
        assert sorted(n for n in log[-1]["sent"] if n >= MIN_BYTES) == [1_200_000]     # out's poison


def test_expectations_are_left_out_where_they_cannot_be_kept():
    """Arrays too small to keep, of another size than their buffer, and sets past the list get
    no expectation (their buffers travel back as before)."""
    from superopt.judge.backends.gpu import pack_sets
    b = GpuBackend(worker_cmd=["true"])
    b._resident.reset(64 * MB)
    s = make_input_set(SPEC, seed=8)
    wire = pack_sets(SPEC, [s, s])
    n_blobs = len(wire["blobs"])
    other = s.data["y"].copy()
    added = b._add_expected(wire, [s, s], [{"x": s.data["x"][:10], "y": other, "out": s.data["y"][:-1]}])
    assert added == [{"y": other}, {}]
    assert wire["sets"][0]["expect"] == {1: n_blobs} and "expect" not in wire["sets"][1]
    assert wire["expected"] == {n_blobs} and wire["sources"][n_blobs] is other
    # an array that already travels is named by its own blob, not sent twice
    again = pack_sets(SPEC, [s])
    b._add_expected(again, [s], [{"y": s.data["x"]}])
    assert len(again["blobs"]) == n_blobs and again["sets"][0]["expect"] == {1: 0} and again["expected"] == {0}


def test_a_set_run_again_keeps_its_outputs_poison_too():
    """A set the caller runs again (a check's candidate sets, made once per kernel) has every
    big buffer kept, its output's poison included: the second run sends nothing big."""
    b = _backend("keep")
    try:
        s = make_input_set(SPEC, seed=9)
        got = [b.run_many(PTX, SPEC, [s], timeout=1, reused=[True])[0] for _ in range(2)]
        log = [e for e in b._request({"op": "log"}, 10)["log"] if e.get("op") != "time"]
    finally:
        b.close()
    for r in got:
        assert r.status == "ok" and r.outputs["out"].tobytes() == s.data["out"].tobytes()
    assert len(log[0]["resident"]["keep"]) == 3                      # x, y and out's poison
    assert [n for n in log[1]["sent"] if n >= MIN_BYTES] == []


def test_the_kept_copies_a_request_used_are_summed_together_and_a_changed_one_is_named():
    dev = FakeDevice()
    calls = []

    def checksums(where):
        calls.append(len(where))
        return [dev.checksum(d, n) for d, n in where]
    store = WorkerStore(1 << 20, dev.alloc, dev.upload, dev.free, dev.checksum, checksums)
    for k in "abc":
        store.keep(k, np.arange(16, dtype=np.uint8) + ord(k))
    calls.clear()
    assert store.changed(["a", "b", "c", "gone"]) == []
    d, _ = store.get("b")
    dev.mem[d][3] ^= 1                  # a run wrote onto the kept copy of "b"
    assert store.changed(["a", "b", "c"]) == ["b"] and not store.intact("b") and store.intact("a")
    assert calls[:2] == [3, 3]          # one call (one wait on the device) for all the keys
