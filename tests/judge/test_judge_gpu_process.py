"""The GPU backend's process handling, with fake workers (CPU only): a hanging or dying
runner must never take the caller down, and must be replaced on the next run."""
import sys
from pathlib import Path

import pytest

from superopt.judge.backends.gpu import GpuBackend
from superopt.judge.check import COULD_NOT_JUDGE, check
from superopt.judge.inputs import make_input_set
from superopt.specs.launch_spec import load_spec

HERE = Path(__file__).parent
SPEC = load_spec(str(HERE / "kernels" / "judge.toml")).resolved({"n": 1000})
PTX = (HERE / "kernels" / "ptx" / "baseline.ptx").read_text()


def backend(mode, **kw):
    b = GpuBackend(worker_cmd=[sys.executable, str(HERE / "judge_fake_worker.py"), mode], **kw)
    b.jit_allowance = 1.0
    b.grace_per_set = 0.5
    return b


def test_echo_worker_roundtrip():
    b = backend("echo")
    try:
        assert b.available() == (True, "gpu: Fake GPU")
        s = make_input_set(SPEC, seed=1)
        r = b.run(PTX, SPEC, s, timeout=1)
        assert r.status == "ok"
        assert all(r.guards_intact.values()) and all(r.inputs_unchanged.values())
        assert r.outputs["x"].tobytes() == s.data["x"].tobytes()
    finally:
        b.close()


def test_hanging_worker_is_killed_and_replaced():
    b = backend("hang")
    try:
        s = make_input_set(SPEC, seed=1)
        r = b.run(PTX, SPEC, s, timeout=0.2)
        assert r.status == "timeout" and "killed" in r.error
        assert b._proc is None                 # killed
        r = b.run(PTX, SPEC, s, timeout=0.2)   # a fresh worker is started
        assert r.status == "timeout" and b.restarts == 0 and b._proc is None
    finally:
        b.close()


def test_dying_worker_reports_crash_with_stderr():
    b = backend("crash")
    try:
        r = b.run(PTX, SPEC, make_input_set(SPEC, seed=1), timeout=1)
        assert r.status == "crash" and "segfault-ish" in r.error
        r = b.run(PTX, SPEC, make_input_set(SPEC, seed=2), timeout=1)
        assert r.status == "crash"
    finally:
        b.close()


def test_fatal_reply_kills_worker():
    b = backend("fatal")
    try:
        r = b.run(PTX, SPEC, make_input_set(SPEC, seed=1), timeout=1)
        assert r.status == "crash" and "ILLEGAL_ADDRESS" in r.error
        assert b._proc is None
    finally:
        b.close()


@pytest.mark.parametrize("mode", ["nogpu", "die"])
def test_no_gpu_is_could_not_judge(mode):
    b = backend(mode, startup_timeout=20)
    ok, why = b.available()
    assert not ok and why.startswith("no GPU")
    v = check(PTX, PTX, SPEC, backend=b)
    assert v.status == COULD_NOT_JUDGE and v.exit_code == 2 and "no GPU" in v.reason
    b.close()


def test_slow_start_times_out():
    b = backend("slow_start", startup_timeout=0.5)
    ok, why = b.available()
    assert not ok and "did not start" in why
    b.close()


def test_shared_memory_blob_transport(tmp_path):
    import numpy as np
    from superopt.judge.backends import _proto
    from superopt.judge.backends.gpu import _load_file_buffers
    blobs = [np.arange(1000, dtype=np.uint8), np.zeros(0, np.uint8), np.frombuffer(b"xyz" * 999, np.uint8)]
    desc = _proto.write_blobs(blobs)
    try:
        got = _proto.read_blobs(desc)
        assert [g.tobytes() for g in got] == [b.tobytes() for b in blobs]
        assert all(o % 64 == 0 for o, _ in desc["items"])
    finally:
        _proto.remove(desc["file"])
    out = tmp_path / "out"
    out.write_bytes(b"abcdef")
    results = [{"buffers": [(("file", 2, 3), b"f", b"b"), (None, b"f", b"b")]}, {"buffers": None}]
    _load_file_buffers(results, str(out))
    assert results[0]["buffers"][0][0].tobytes() == b"cde" and results[0]["buffers"][1][0] is None


def test_a_replys_buffers_are_mapped_from_its_file_and_outlive_it(tmp_path):
    """The reply's file is mapped copy-on-write, not read into a copy: the arrays stay valid once
    the file is removed (as GpuBackend does at once), may be written, and never write the file."""
    import numpy as np
    from superopt.judge.backends.gpu import _load_file_buffers
    data = np.random.default_rng(1).integers(0, 256, size=3 << 20, dtype=np.uint8)
    out = tmp_path / "reply.out"
    data.tofile(out)
    n = 1 << 20
    results = [{"buffers": [(("file", 0, n), b"", b""), (("file", n, 2 * n), b"", b"")]}]
    _load_file_buffers(results, str(out))
    first, second = results[0]["buffers"][0][0], results[0]["buffers"][1][0]
    out.unlink()
    assert first.tobytes() == data[:n].tobytes() and second.tobytes() == data[n:].tobytes()
    first.view(np.uint32)[:] = 7                      # the compares' callers may write to it
    assert first.view(np.uint32)[3] == 7 and second.tobytes() == data[n:].tobytes()
    out.write_bytes(b"")
    empty = [{"buffers": [(("file", 0, 0), b"", b"")]}]
    _load_file_buffers(empty, str(out))
    assert empty[0]["buffers"][0][0].nbytes == 0


def test_a_kernels_timings_send_one_input_set_written_once(monkeypatch):
    """The candidates of one kernel are timed on one input set: its wire form is written to
    shared memory once and named by every timing request (not packed again inside a window that
    holds the GPU alone); another set replaces it, and close() and exit remove the file."""
    import os

    import superopt.judge.backends.gpu as gpu_mod
    b = GpuBackend(worker_cmd=[sys.executable, str(HERE / "judge_fake_worker.py"), "echo"])
    sent = []
    monkeypatch.setattr(b, "_request", lambda msg, timeout, step=None: sent.append(msg) or {"a_ms": [1.0], "b_ms": [1.0]})
    monkeypatch.setattr(b, "_cubin", lambda ptx: None)
    packs = []
    real_pack = gpu_mod.pack_sets
    monkeypatch.setattr(gpu_mod, "pack_sets", lambda *a, **kw: packs.append(1) or real_pack(*a, **kw))
    one, two = make_input_set(SPEC, seed=1), make_input_set(SPEC, seed=2)
    for _ in range(3):
        b.time_pair(PTX, PTX, SPEC, one)
    files = {m["blobs"]["file"] for m in sent}
    # each timing is a prepare (under a shared step) and its rounds: both name the one file
    assert [m["op"] for m in sent] == ["time_prepare", "time"] * 3 and len(files) == 1 and len(packs) == 1
    first = files.pop()
    assert os.path.exists(first) and first in gpu_mod._KEPT_FILES
    b.time_pair(PTX, PTX, SPEC, two)
    second = sent[-1]["blobs"]["file"]
    assert second != first and not os.path.exists(first) and os.path.exists(second)
    b.close()
    assert not os.path.exists(second) and second not in gpu_mod._KEPT_FILES
    b.time_pair(PTX, PTX, SPEC, one)                 # exit removes what close() did not
    third = sent[-1]["blobs"]["file"]
    gpu_mod._remove_kept_files()
    assert not os.path.exists(third) and not gpu_mod._KEPT_FILES
