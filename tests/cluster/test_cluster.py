"""Kernel searches on a Dask cluster (superopt.search.cluster), on the CPU: a scheduler and workers on
127.0.0.1 started with Dask's own programs, searching with the emulator and the dry-run judge
(bench/scale/dryrun.py: real checks on the emulator, stand-in timings) on fake GPUs; a dead
worker, an unreachable cluster and a task that outlives its limit each leave nvcc's code and
one line."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from bench.scale.localcluster import LocalDaskCluster  # noqa: E402
from superopt.search.cluster import ClusterSearch, ClusterTimeout, bounded, close_all  # noqa: E402
from superopt.optimize import optimize_module  # noqa: E402
from superopt.config.resolved import Settings

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
PTX = (DATA / "k.ptx").read_text()
SRC = str(DATA / "k.cu")
KERNELS = ["_Z5saxpyifPKfPf", "_Z6squareiPKfPf"]


def worker_env(tmp: Path, name: str = "Dry GPU", **extra) -> dict:
    return {"NVCC_PLUS_JUDGE": "bench.scale.dryrun:judge", "SUPEROPT_FAKE_GPUS": f"GPU-{name.replace(' ', '')}={name}",
            "NVCC_PLUS_LOCK_DIR": str(tmp / "worker-locks"), "NVCC_PLUS_CACHE_DIR": str(tmp / "worker-cache"),
            **extra}


@pytest.fixture
def builder(tmp_path, monkeypatch):
    """A builder without a GPU: its own cache, lock folder and lockfile."""
    for k in ("NVCC_PLUS_CLUSTER", "NVCC_PLUS_JUDGE", "SUPEROPT_FAKE_GPUS", "NVCC_PLUS_LOCK",
              "NVCC_PLUS_CLUSTER_TIMEOUT", "NVCC_PLUS_BACKEND"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NVCC_PLUS_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("NVCC_PLUS_LOCKFILE", str(tmp_path / "nvcc-plus.lock"))
    monkeypatch.setenv("NVCC_PLUS_BUDGET", "20")
    monkeypatch.setenv("NVCC_PLUS_CLUSTER_CONNECT_TIMEOUT", "3")
    return tmp_path


@pytest.fixture(autouse=True)
def _fresh_handles():
    """Each test starts as a new compilation process would: no handle on any cluster."""
    close_all()
    yield
    close_all()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dask")
    with LocalDaskCluster([worker_env(tmp)], log_dir=str(tmp / "logs")) as c:
        yield c


def compile_module(**kw):
    t0 = time.monotonic()
    res = optimize_module(PTX, source=SRC, target="sm_90", settings=Settings.from_config({}), **kw)
    return res, time.monotonic() - t0


def plans(res) -> dict:
    return {k["kernel"]: (k["status"], k.get("winner")) for k in res.records["kernels"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cluster_search_decides_as_locally_and_is_cached_and_locked(cluster, builder, monkeypatch):
    # the same search on this machine (fake GPU, dry-run judge) ...
    monkeypatch.setenv("NVCC_PLUS_JUDGE", "bench.scale.dryrun:judge")
    monkeypatch.setenv("SUPEROPT_FAKE_GPUS", "GPU-local=Dry GPU")
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(builder / "local-cache"))
    local, _ = compile_module()
    assert local.changed and {s for s, _ in plans(local).values()} == {"optimized"}
    monkeypatch.delenv("NVCC_PLUS_JUDGE")
    monkeypatch.delenv("SUPEROPT_FAKE_GPUS")
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(builder / "cache"))
    # ... and on the cluster, from a builder without a GPU
    monkeypatch.setenv("NVCC_PLUS_CLUSTER", cluster.address)
    monkeypatch.setenv("NVCC_PLUS_LOCK", "write")
    remote, _ = compile_module()
    assert remote.messages == []
    assert remote.ptx == local.ptx and plans(remote) == plans(local)
    for k in remote.records["kernels"]:
        assert k["cluster"]["gpu"] == "Dry GPU" and k["device"]["uuid"] == "GPU-DryGPU"
    from reports.load import validate
    validate(remote.records)                            # the reports read them as any other record
    validate(local.records)
    lock = (builder / "nvcc-plus.lock").read_text()
    assert lock.count('"gpu": "Dry GPU"') == 2
    # a rebuild finds the decisions in its cache under the cluster's GPU model: nothing is sent
    monkeypatch.delenv("NVCC_PLUS_LOCK")
    monkeypatch.setenv("NVCC_PLUS_LOCKFILE", str(builder / "none.lock"))
    again, seconds = compile_module()
    assert again.ptx == local.ptx
    assert [k["status"] for k in again.records["kernels"]] == ["cached", "cached"]
    # a lockfile travels to a builder with an empty cache
    monkeypatch.setenv("NVCC_PLUS_LOCKFILE", str(builder / "nvcc-plus.lock"))
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(builder / "empty-cache"))
    locked, _ = compile_module()
    assert locked.ptx == local.ptx and [k["status"] for k in locked.records["kernels"]] == ["locked", "locked"]


def test_unreachable_cluster_keeps_nvccs_code_says_so_once_and_is_remembered(builder, monkeypatch):
    address = f"tcp://127.0.0.1:{free_port()}"
    monkeypatch.setenv("NVCC_PLUS_CLUSTER", address)
    res, seconds = compile_module()
    assert res.ptx == PTX and not res.changed
    assert len(res.messages) == 1, res.messages
    assert "unreachable" in res.messages[0] and "2 kernel(s) keep nvcc's code" in res.messages[0]
    assert all("cluster search failed" in k["reason"] for k in res.records["kernels"])
    assert seconds < 20
    # the other PTX modules of this compilation (one per -gencode) say the same, so the driver
    # prints it once
    res1b, _ = compile_module()
    assert res1b.messages == res.messages
    # the next compilation of the build does not wait for it again
    close_all()
    res2, seconds2 = compile_module()
    assert res2.ptx == PTX and len(res2.messages) == 1 and "another compilation" in res2.messages[0]
    assert seconds2 < 3


def test_decisions_cached_for_a_cluster_apply_while_it_is_down(builder, monkeypatch, tmp_path):
    """The GPU models a cluster had are remembered, so its cached decisions apply offline."""
    import json
    from superopt.store.cache import DecisionCache
    address = f"tcp://127.0.0.1:{free_port()}"
    c = ClusterSearch(address)
    path = c._models_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"address": address, "models": ["Dry GPU"]}))
    assert c.models() == ["Dry GPU"] and c.down and "unreachable" in c.down
    # a decision stored under that model ("keep nvcc's code" for both kernels) is found
    import ptx_ir
    from superopt.config.resolved import Settings
    from superopt.decide.run import globals_text as _globals_text
    from superopt.judge.ptxas import ptxas_version
    from superopt.search.rules import all_pass_names     # the key's passes
    from superopt.store.cache import decision_key
    from superopt.search.options import SearchOptions     # the default least gain is in the key
    from superopt.specs.sources import explicit_specs_key
    module = ptx_ir.parse(PTX)
    for fn in module.kernels:
        explicit = explicit_specs_key(module, fn.name, source=SRC, settings=Settings())   # the user's specs are in the key
        tool = f"{ptxas_version()} explicit={explicit}" if explicit else ptxas_version()
        key = decision_key(kernel_text=ptx_ir.printer.emit_function(fn), globals_text=_globals_text(module),
                           target="sm_90", tool=f"{tool} gpu=Dry GPU min_gain={SearchOptions.min_gain:g}", policy="exact",
                           passes=all_pass_names())
        DecisionCache().put(key, {"kernel": fn.name, "plan": [], "status": "kept-baseline"})
    monkeypatch.setenv("NVCC_PLUS_CLUSTER", address)
    res, seconds = compile_module()
    assert [k["status"] for k in res.records["kernels"]] == ["cached", "cached"] and res.messages == []


def test_task_that_outlives_its_limit_keeps_nvccs_code(builder, monkeypatch, tmp_path):
    # every check waits 30 s first: the search outlives the 3 s limit whatever path it takes
    env = worker_env(tmp_path, SUPEROPT_DRYRUN_TIME_S="30", SUPEROPT_DRYRUN_CHECK_S="30")
    with LocalDaskCluster([env], log_dir=str(tmp_path / "logs")) as c:
        monkeypatch.setenv("NVCC_PLUS_CLUSTER", c.address)
        monkeypatch.setenv("NVCC_PLUS_CLUSTER_TIMEOUT", "3")
        res, seconds = compile_module()
    assert res.ptx == PTX and len(res.messages) == 1, res.messages
    assert "no answer within 3 s" in res.messages[0] and "2 kernel(s)" in res.messages[0]
    assert seconds < 10


def test_killed_worker_keeps_nvccs_code(builder, monkeypatch, tmp_path):
    env = worker_env(tmp_path, SUPEROPT_DRYRUN_TIME_S="30")
    with LocalDaskCluster([env], log_dir=str(tmp_path / "logs"),
                          scheduler_env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}) as c:
        monkeypatch.setenv("NVCC_PLUS_CLUSTER", c.address)
        monkeypatch.setenv("NVCC_PLUS_CLUSTER_GRACE", "3")
        killer = threading.Timer(2.0, c.kill_worker, args=(0,))
        killer.start()
        try:
            res, seconds = compile_module()
        finally:
            killer.cancel()
    assert res.ptx == PTX and len(res.messages) == 1, res.messages
    assert ("died" in res.messages[0] or "no GPU worker" in res.messages[0]), res.messages
    assert all("cluster search failed" in k["reason"] for k in res.records["kernels"])
    assert seconds < 20


class Outer(BaseException):
    pass


def test_bounded_fires_through_except_exception_and_keeps_the_outer_alarm():
    t0 = time.monotonic()
    with pytest.raises(ClusterTimeout):
        with bounded(0.3, "a call"):
            try:
                time.sleep(5)
            except Exception:  # noqa: BLE001 - what a library might do
                pass
    assert time.monotonic() - t0 < 2

    def outer(signum, frame):
        raise Outer()

    old = signal.signal(signal.SIGALRM, outer)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        t0 = time.monotonic()
        with bounded(0.2, "short"):
            time.sleep(0.05)
        with pytest.raises(Outer):                   # the outer limit still fires, on time
            time.sleep(5)
        assert 0.8 < time.monotonic() - t0 < 2
        signal.setitimer(signal.ITIMER_REAL, 0.3)    # an outer limit that comes first wins
        with pytest.raises(Outer):
            with bounded(5, "long"):
                time.sleep(3)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_driver_with_an_unreachable_cluster_builds_and_says_so_once(builder, tmp_path):
    """Two PTX modules (two -gencode), one line."""
    shutil.copy(DATA / "k.cu", tmp_path / "k.cu")
    env = dict(os.environ, PYTHONPATH=str(ROOT), NVCC_PLUS_CLUSTER=f"tcp://127.0.0.1:{free_port()}")
    p = subprocess.run([sys.executable, "-m", "nvcc_plus", "-gencode", "arch=compute_80,code=sm_80",
                        "-gencode", "arch=compute_90,code=sm_90", "-c", "k.cu", "-o", "k.o"],
                       cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.decode().splitlines() if ln.startswith("nvcc-plus:")]
    assert len(lines) == 1 and "unreachable" in lines[0] and "nvcc's code" in lines[0], lines
    assert (tmp_path / "k.o").stat().st_size > 0
