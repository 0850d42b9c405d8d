"""Choosing a GPU per kernel search (superopt.judge.devices), on the CPU: fake device lists,
real file locks, other processes contending for them."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from superopt.judge import devices
from superopt.judge.devices import Device, GpuBusy, GpusSettingError

ROOT = Path(__file__).resolve().parents[2]
DEVS = [Device(0, "GPU-aaaaaaaa-1111-2222-3333-444444444444", "NVIDIA H200"),
        Device(1, "GPU-bbbbbbbb-1111-2222-3333-444444444444", "NVIDIA H200"),
        Device(2, "GPU-cccccccc-1111-2222-3333-444444444444", "NVIDIA A100")]


@pytest.fixture(autouse=True)
def _private_locks(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr(devices, "_LAST", None)


def _holder(uuids: list[str], seconds: float = 30.0) -> subprocess.Popen:
    """Another process holding the locks of ``uuids`` (as a compilation's lease would)."""
    code = ("import sys, time\nfrom superopt.judge.devices import _try, Device\n"
            "fds = [_try(Device(0, u, 'x')) for u in sys.argv[1:]]\n"
            "print('held' if all(fds) else 'busy', flush=True)\n"
            f"time.sleep({seconds})\n")
    p = subprocess.Popen([sys.executable, "-c", code, *uuids], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def _stop(p: subprocess.Popen) -> None:
    p.kill()
    p.wait()


def test_uuid_format_is_nvidia_smis():
    raw = bytes(range(16))
    assert devices.format_uuid(raw) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert devices.format_uuid(raw.decode("latin-1")) == devices.format_uuid(raw)


def test_nvcc_plus_gpus_selects_by_ordinal_uuid_or_prefix():
    assert devices.select(DEVS, None) == DEVS
    assert devices.select(DEVS, "") == DEVS
    assert devices.select(DEVS, "1") == [DEVS[1]]
    assert devices.select(DEVS, "2,0") == [DEVS[2], DEVS[0]]
    assert devices.select(DEVS, DEVS[1].uuid) == [DEVS[1]]
    assert devices.select(DEVS, "GPU-cccccccc, 0, 0") == [DEVS[2], DEVS[0]]
    assert devices.select(DEVS, "bbbbbbbb") == [DEVS[1]]       # nvidia-smi's UUID without "GPU-"
    with pytest.raises(GpusSettingError, match="'7' names no visible GPU.*0 GPU-aaaaaaaa"):
        devices.select(DEVS, "7")
    with pytest.raises(GpusSettingError, match="no visible GPU"):
        devices.select(DEVS, "GPU-aa")                            # too short a prefix to trust


def test_fake_enumeration_and_allowed(monkeypatch):
    monkeypatch.setenv("SUPEROPT_FAKE_GPUS", "2")
    monkeypatch.setenv("NVCC_PLUS_GPUS", "1")
    vis = devices.visible_devices()
    assert [d.ordinal for d in vis] == [0, 1] and vis[0].uuid != vis[1].uuid
    assert devices.allowed_devices() == [vis[1]]
    monkeypatch.setenv("SUPEROPT_FAKE_GPUS", "GPU-x1=Model X,GPU-y2=Model Y")
    monkeypatch.delenv("NVCC_PLUS_GPUS")
    assert [(d.ordinal, d.uuid, d.name) for d in devices.allowed_devices()] == \
        [(0, "GPU-x1", "Model X"), (1, "GPU-y2", "Model Y")]


def test_order_prefers_last_gpu_then_spreads_by_pid():
    assert devices.order(DEVS, pid=0) == DEVS
    assert devices.order(DEVS, pid=1) == [DEVS[1], DEVS[2], DEVS[0]]
    assert devices.order(DEVS, pid=1, prefer=DEVS[0]) == [DEVS[0], DEVS[1], DEVS[2]]
    starts = {devices.order(DEVS, pid=p)[0] for p in range(6)}
    assert starts == set(DEVS)


def test_takes_a_free_gpu_when_another_process_holds_one():
    holder = _holder([DEVS[0].uuid])
    try:
        for _ in range(3):
            dev, fd = devices.acquire(DEVS[:2], deadline=time.time() + 5, prefer=DEVS[0])
            try:
                assert dev == DEVS[1]           # the preferred one is busy: the other, at once
            finally:
                devices.release(fd)
    finally:
        _stop(holder)


def test_all_busy_waits_until_the_deadline_then_gpubusy():
    holder = _holder([d.uuid for d in DEVS[:2]])
    try:
        t0 = time.monotonic()
        with pytest.raises(GpuBusy):
            devices.acquire(DEVS[:2], deadline=time.time() + 0.4)
        assert 0.35 <= time.monotonic() - t0 < 3
    finally:
        _stop(holder)


def test_all_busy_takes_whichever_frees_first():
    a = _holder([DEVS[0].uuid], seconds=30)
    b = _holder([DEVS[1].uuid], seconds=0.6)            # exits (lock released by the kernel) soon
    try:
        t0 = time.monotonic()
        dev, fd = devices.acquire(DEVS[:2], deadline=time.time() + 10, prefer=DEVS[0])
        devices.release(fd)
        assert dev == DEVS[1] and time.monotonic() - t0 < 8
    finally:
        _stop(a)
        _stop(b)


def test_lease_is_exclusive_per_gpu_across_processes_and_two_searches_run_at_once(tmp_path, monkeypatch):
    """Four processes, each leasing a GPU of two for 0.6 s: two at a time, never two on one GPU."""
    monkeypatch.setenv("SUPEROPT_FAKE_GPUS", "2")
    log = tmp_path / "log"
    code = ("import sys, time, os\nfrom superopt.judge import devices\n"
            "with devices.lease() as d:\n"
            "    t0 = time.time(); time.sleep(0.6); t1 = time.time()\n"
            "    open(sys.argv[1], 'a').write(f'{d.uuid} {t0} {t1}\\n')\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", code, str(log)], env=env) for _ in range(4)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    wall = time.monotonic() - t0
    spans = [(u, float(a), float(b)) for u, a, b in (ln.split() for ln in log.read_text().splitlines())]
    assert len(spans) == 4
    by_gpu: dict[str, list] = {}
    for u, a, b in spans:
        by_gpu.setdefault(u, []).append((a, b))
    assert len(by_gpu) == 2                             # both GPUs were used
    for runs in by_gpu.values():                        # never two at once on one GPU
        runs.sort()
        assert all(runs[i][1] <= runs[i + 1][0] + 1e-3 for i in range(len(runs) - 1))
    overlap = any(a1 < b2 and a2 < b1 for (u1, a1, b1) in spans for (u2, a2, b2) in spans if u1 != u2)
    assert overlap                                      # the two GPUs searched at the same time
    assert wall < 4 * 0.6 + 6                           # (python start-up dominates on a busy CI host)


def test_lease_is_reentrant_and_sets_the_backend_device(monkeypatch):
    monkeypatch.setenv("SUPEROPT_FAKE_GPUS", "3")
    monkeypatch.setenv("NVCC_PLUS_GPUS", "2")
    assert devices.current() is None
    with devices.lease() as dev:
        assert dev.ordinal == 2 and devices.current() == dev and devices.default_ordinal() == 2
        with devices.lease() as again:                  # no second lock (it would deadlock on flock)
            assert again == dev
        assert devices.current() == dev
    assert devices.current() is None


def test_threads_lease_different_gpus(monkeypatch):
    """Two threads of one process (a Dask worker with two threads) hold two GPUs, each its own."""
    monkeypatch.setenv("SUPEROPT_FAKE_GPUS", "2")
    seen, barrier = {}, threading.Barrier(2, timeout=10)

    def run(name):
        with devices.lease(deadline=time.time() + 10) as d:
            barrier.wait()
            seen[name] = (d, devices.current())

    ts = [threading.Thread(target=run, args=(n,)) for n in "ab"]
    [t.start() for t in ts]
    [t.join(20) for t in ts]
    assert seen["a"][0] != seen["b"][0]
    assert all(d == cur for d, cur in seen.values())


def test_gpu_backend_starts_on_the_leased_ordinal_and_refuses_another_uuid(tmp_path, monkeypatch):
    from superopt.judge.backends.gpu import GpuBackend
    monkeypatch.setenv("SUPEROPT_FAKE_GPUS", "GPU-x1=Fake,GPU-y2=Fake")
    monkeypatch.setenv("NVCC_PLUS_GPUS", "1")
    worker = tmp_path / "w.py"
    worker.write_text("import os, sys\nfrom superopt.judge.backends import _proto\n"
                      "o = int(os.environ['SUPEROPT_GPU_DEVICE'])\n"
                      "_proto.send(1, {'ok': True, 'info': {'name': 'Fake', 'ordinal': o, "
                      "'uuid': sys.argv[1] or ['GPU-x1', 'GPU-y2'][o]}})\n"
                      "_proto.recv(0)\n")
    with devices.lease() as dev:
        good = GpuBackend(worker_cmd=[sys.executable, str(worker), ""])
        try:
            assert good.device == dev.ordinal == 1
            ok, why = good.available()
            assert ok, why
            assert good.info()["uuid"] == "GPU-y2"
        finally:
            good.close()
        bad = GpuBackend(worker_cmd=[sys.executable, str(worker), "GPU-x1"])
        try:
            ok, why = bad.available()
            assert not ok and "not to the leased GPU-y2" in why
        finally:
            bad.close()


def test_backend_registry_has_one_gpu_backend_per_device(monkeypatch):
    from superopt.judge.backends import base

    class Fake:
        def __init__(self):
            self.device = devices.default_ordinal()
            self.closed = False

        def close(self):
            self.closed = True

    monkeypatch.setitem(base._FACTORIES, "gpu", Fake)
    monkeypatch.setattr(base, "_INSTANCES", {})
    monkeypatch.setenv("SUPEROPT_FAKE_GPUS", "2")
    monkeypatch.setenv("NVCC_PLUS_GPUS", "0")
    with devices.lease():
        a = base.get_backend("gpu")
        assert base.get_backend("gpu") is a and a.device == 0
    monkeypatch.setenv("NVCC_PLUS_GPUS", "1")
    with devices.lease():                               # a switch closes the idle worker on GPU 0
        b = base.get_backend("gpu")
        assert b is not a and b.device == 1
    assert a.closed and not b.closed


def test_in_thread_carries_the_gpu_and_deadline_and_refuses_inside_a_step():
    """devices.in_thread: another thread's steps run on this thread's GPU, until its deadline
    (a step that cannot get the GPU then raises GpuBusy there too); while this thread holds a
    step, nothing is handed over (that thread's step would wait for this one)."""
    seen = {}

    def probe():
        seen["device"] = devices.current()
        seen["deadline"] = devices._local.deadline
        return "ran"
    deadline = time.time() + 0.3
    with devices.assign(deadline=deadline, devices=DEVS[:1]) as dev:
        run = devices.in_thread(probe)
        t = threading.Thread(target=run)
        t.start()
        t.join()
        assert seen == {"device": dev, "deadline": deadline}
        with devices.gpu_step(dev.uuid, "check"):
            assert devices.in_thread(probe) is None
        other = _holder([dev.uuid])                  # another compilation holds the GPU alone
        try:
            got = {}

            def step():
                try:
                    with devices.gpu_step(dev.uuid, "check"):
                        got["step"] = "held"
                except GpuBusy as exc:
                    got["step"] = exc
            t = threading.Thread(target=devices.in_thread(step))
            t0 = time.monotonic()
            t.start()
            t.join(10)
            assert isinstance(got.get("step"), GpuBusy) and time.monotonic() - t0 < 5
        finally:
            other.kill()
    assert devices.in_thread(probe) is probe                         # no GPU here: nothing to carry


# A GPU worker speaking the real protocol (superopt.judge.backends._proto) that holds no GPU: on
# a run request it says its GPU work is done when asked to (note_gpu_done), then tries, as
# another compilation would, to take the GPU's lock alone while it "writes its reply"; on a
# timing request it tries the same without saying anything.
_FAKE_WORKER = r'''
import fcntl, os, sys, time
from superopt.judge.backends import _proto
from superopt.judge.gpu_lock import lock_path
IN, OUT = os.dup(0), os.dup(1)
os.dup2(2, 1)
UUID = sys.argv[1]
_proto.send(OUT, {"ok": True, "info": {"uuid": UUID, "resident_limit": 0}})

def lock_taken_within(seconds):
    fd = os.open(lock_path(UUID), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                return True
            except BlockingIOError:
                time.sleep(0.01)
        return False
    finally:
        os.close(fd)

while True:
    req = _proto.recv(IN)
    if req.get("op") == "exit":
        break
    if req.get("note_gpu_done"):
        _proto.send(OUT, {"gpu_done": True})
    if len(sys.argv) > 2 and sys.argv[2] == "hang":
        time.sleep(60)              # its GPU work done, a reply that never comes
    free = lock_taken_within(1.0)
    time.sleep(0.6)                 # the rest of the reply
    _proto.send(OUT, {"results": [], "free_while_replying": free})
'''


def test_a_run_request_lets_the_gpu_go_when_the_worker_says_its_gpu_work_is_done(tmp_path):
    """GpuBackend._request: the worker's "gpu_done" note ends the GPU step of a run request (its
    reply is host work: results written to shared memory), so another compilation may take the
    GPU while the reply is written; a timing holds it to the end. The released hold is the
    step's lease and the GPU's check time (phases), not the reply's."""
    from superopt.judge.backends.gpu import GpuBackend
    from superopt.judge.phases import recording
    uuid = "GPU-fake0000-0000-0000-0000-00000000beef"
    worker = tmp_path / "fake_worker.py"
    worker.write_text(_FAKE_WORKER)
    be = GpuBackend(worker_cmd=[sys.executable, str(worker), uuid], startup_timeout=30)
    try:
        with recording() as ph:
            rep = be._request({"op": "run"}, 20, step="check")
        assert rep["free_while_replying"] is True
        assert ph.get("lease") < 0.5 and ph.get("gpu_check") < 0.5      # the reply's wait is not GPU time
        timed = be._request({"op": "time"}, 20, step="time")
        assert timed["free_while_replying"] is False
    finally:
        be.close()


# A worker stand-in for a timing: it answers "time_prepare" and "time" and says, for each,
# whether another compilation's check could have taken the GPU meanwhile (a shared lock).
_FAKE_TIMING_WORKER = r'''
import fcntl, os, sys
from superopt.judge.backends import _proto
from superopt.judge.gpu_lock import lock_path
IN, OUT = os.dup(0), os.dup(1)
os.dup2(2, 1)
UUID = sys.argv[1]
_proto.send(OUT, {"ok": True, "info": {"uuid": UUID, "resident_limit": 0}})

def a_check_could_run():
    fd = os.open(lock_path(UUID), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)

log = []
while True:
    req = _proto.recv(IN)
    op = req.get("op")
    if op == "exit":
        break
    if op == "log":
        _proto.send(OUT, {"log": log})
        continue
    log.append({"op": op, "check_could_run": a_check_could_run(), "prepare_id": req.get("prepare_id"),
                "prepared": req.get("prepared")})
    if op == "time_prepare":
        _proto.send(OUT, {"prepared": req["prepare_id"], "spent": {"fill": 0.01}})
    else:
        _proto.send(OUT, {"a_ms": [1.0] * 20, "b_ms": [1.0] * 20, "prepared_apart": req.get("prepared") is not None})
'''


def test_a_timing_fills_its_copies_under_a_shared_step_and_holds_the_gpu_alone_only_for_its_rounds(tmp_path):
    """GpuBackend.time_pair: the copies in and the module loads (``time_prepare``) run while other
    compilations' checks may too; the rounds (``time``, naming what was prepared) hold the GPU
    alone. Inside a timing window that already holds the GPU alone, one request does both."""
    from superopt.judge.backends.gpu import GpuBackend
    from superopt.judge.inputs import make_input_set
    from superopt.specs.launch_spec import load_spec
    uuid = "GPU-fake0000-0000-0000-0000-00000000cafe"
    worker = tmp_path / "fake_timing_worker.py"
    worker.write_text(_FAKE_TIMING_WORKER)
    spec = load_spec(str(ROOT / "tests" / "judge" / "kernels" / "judge.toml")).resolved({"n": 1000})
    be = GpuBackend(worker_cmd=[sys.executable, str(worker), uuid], startup_timeout=30)
    try:
        be.time_pair("a", "b", spec, make_input_set(spec, seed=1), reps=20)
        with devices.exclusive_window(uuid):
            be.time_pair("a", "b", spec, make_input_set(spec, seed=2), reps=20)     # takes the window
            be.time_pair("a", "b", spec, make_input_set(spec, seed=3), reps=20)     # inside it
        log = be._request({"op": "log"}, 10)["log"]
    finally:
        be.close()
    assert [e["op"] for e in log] == ["time_prepare", "time", "time_prepare", "time", "time"]
    assert [e["check_could_run"] for e in log] == [True, False, True, False, False]
    assert log[1]["prepared"] == log[0]["prepare_id"] and log[3]["prepared"] == log[2]["prepare_id"]
    assert log[4]["prepared"] is None


def test_the_reply_after_gpu_done_is_bounded_by_the_requests_timeout(tmp_path):
    """The GPU is let go at "gpu_done", but the request's limit still covers the reply: a worker
    that never sends it is killed when the timeout runs out, and the GPU is free meanwhile."""
    from superopt.judge.backends.gpu import GpuBackend
    uuid = "GPU-fake0000-0000-0000-0000-00000000dead"
    worker = tmp_path / "fake_worker.py"
    worker.write_text(_FAKE_WORKER)
    be = GpuBackend(worker_cmd=[sys.executable, str(worker), uuid, "hang"], startup_timeout=30)
    try:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="no answer within 2 s"):
            be._request({"op": "run"}, 2.0, step="check")
        assert 1.5 < time.monotonic() - t0 < 10
        assert be._proc is None                          # killed
        with devices.gpu_step(uuid, "time"):             # and the GPU was given back
            pass
    finally:
        be.close()
