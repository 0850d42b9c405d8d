"""A Dask scheduler and GPU workers on this host, as subprocesses started with Dask's own
command-line programs (what a user would run), for the scale benchmark and the CPU tests.

    with LocalDaskCluster(workers=[{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]) as c:
        env["NVCC_PLUS_CLUSTER"] = c.address
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class LocalDaskCluster:
    def __init__(self, workers: list[dict], *, env: dict | None = None, scheduler_env: dict | None = None,
                 nanny: bool = False, start_timeout: float = 60.0, log_dir: str | None = None):
        self.worker_envs = workers
        self.env = dict(os.environ if env is None else env)
        self.env["PYTHONPATH"] = str(ROOT) + (os.pathsep + self.env["PYTHONPATH"] if self.env.get("PYTHONPATH") else "")
        self.scheduler_env = scheduler_env or {}
        self.nanny = nanny
        self.start_timeout = start_timeout
        self.dir = Path(log_dir or tempfile.mkdtemp(prefix="nvcc-plus-dask-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.address: str | None = None

    def _spawn(self, args: list[str], env: dict, log: str) -> subprocess.Popen:
        f = open(self.dir / log, "wb")
        return subprocess.Popen([sys.executable, "-m", *args], env=env, stdout=f, stderr=subprocess.STDOUT,
                                cwd=str(ROOT), start_new_session=True)

    def start(self) -> "LocalDaskCluster":
        sched_file = self.dir / "scheduler.json"
        self.scheduler = self._spawn(
            ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(sched_file)], {**self.env, **self.scheduler_env}, "scheduler.log")
        deadline = time.monotonic() + self.start_timeout
        while not sched_file.exists() or not sched_file.read_text().strip():
            self._check_alive(deadline)
            time.sleep(0.1)
        self.address = json.loads(sched_file.read_text())["address"]
        for i, wenv in enumerate(self.worker_envs):
            self.add_worker(wenv, name=f"gpu{i}")
        self.wait_workers(len(self.worker_envs), deadline)
        return self

    def add_worker(self, wenv: dict, name: str) -> subprocess.Popen:
        args = ["distributed.cli.dask_worker", self.address, "--nthreads", "1", "--resources", "GPU=1",
                "--no-dashboard", "--name", name]
        if not self.nanny:
            args.append("--no-nanny")
        p = self._spawn(args, {**self.env, **wenv}, f"worker-{name}.log")
        self.workers.append(p)
        return p

    def wait_workers(self, n: int, deadline: float) -> None:
        from distributed import Client
        with Client(self.address, timeout=30, set_as_default=False) as c:
            while len(c.scheduler_info().get("workers", {})) < n:
                self._check_alive(deadline)
                time.sleep(0.2)

    def _check_alive(self, deadline: float) -> None:
        if self.scheduler.poll() is not None:
            raise RuntimeError(f"the Dask scheduler exited: {(self.dir / 'scheduler.log').read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the local Dask cluster did not start in {self.start_timeout:g} s "
                               f"(logs in {self.dir})")

    def kill_worker(self, i: int) -> None:
        p = self.workers[i]
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=30)

    def stop(self) -> None:
        for p in self.workers + ([self.scheduler] if self.scheduler else []):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for p in self.workers + ([self.scheduler] if self.scheduler else []):
            try:
                p.wait(timeout=3)          # a worker busy with a task it cannot interrupt: killed
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)

    def __enter__(self) -> "LocalDaskCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
