"""NVCC_PLUS_SEARCH=deferred on a GPU: the build returns without searching, the runner it starts
searches on the GPU (a real lease, the GPU backend), superopt cache wait waits for it, and the
next build applies the measured decisions. Skipped without a GPU."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest

from tests.deferred.conftest import DATA
from tests.driver.helpers import base_env, fatbin_section, needs_nvcc, plus, plus_lines

pytestmark = pytest.mark.gpu


@needs_nvcc
def test_deferred_build_on_a_gpu(tmp_path):
    shutil.copy(DATA / "k.cu", tmp_path / "k.cu")
    common = {"NVCC_PLUS_CACHE_DIR": str(tmp_path / "cache"), "NVCC_PLUS_LOCK_DIR": str(tmp_path / "locks"),
              "NVCC_PLUS_LOCKFILE": str(tmp_path / "nvcc-plus.lock")}
    args = ["-c", "k.cu", "-arch=sm_90"]
    t0 = time.monotonic()
    plus([*args, "-o", "plain.o"], tmp_path, base_env(NVCC_PLUS_MODE="off", **common))
    plain_s = time.monotonic() - t0
    env = base_env(NVCC_PLUS_SEARCH="deferred", NVCC_PLUS_BUDGET="10", NVCC_PLUS_QUEUE_IDLE_EXIT="5",
                   NVCC_PLUS_REPORT_DIR=str(tmp_path / "rec"), **common)
    t0 = time.monotonic()
    res = plus([*args, "-o", "deferred.o"], tmp_path, env)
    deferred_s = time.monotonic() - t0
    print(f"plain {plain_s:.2f} s, deferred {deferred_s:.2f} s")
    assert "queued 2 kernels for a search after the build" in plus_lines(res.stderr)[0]
    assert fatbin_section(tmp_path / "deferred.o") == fatbin_section(tmp_path / "plain.o")
    assert deferred_s < plain_s + 12
    wait = subprocess.run([sys.executable, "-m", "superopt", "cache", "wait", "--timeout", "400"], cwd=tmp_path,
                          env=base_env(**common), capture_output=True, text=True)
    log = (tmp_path / "cache" / "queue" / "runner.log").read_text()
    print(log)
    assert wait.returncode == 0, wait.stdout + wait.stderr
    searched = [k for p in (tmp_path / "rec").glob("*.json") for k in json.loads(p.read_text())["kernels"]
                if "seconds" in k]
    assert len(searched) == 2 and all(k.get("device", {}).get("uuid", "").startswith("GPU-") for k in searched)
    res2 = plus([*args, "-o", "next.o"], tmp_path, env)
    assert plus_lines(res2.stderr) == []           # nothing left to queue: every kernel decided
    stats = json.loads(subprocess.run([sys.executable, "-m", "superopt", "cache", "stats", "--json"], cwd=tmp_path,
                                      env=base_env(**common), capture_output=True, text=True, check=True).stdout)
    assert stats["queue"]["entries"] == 0 and stats["hits"] >= 2, stats
