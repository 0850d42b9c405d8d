"""SUPEROPT_GPU_WORKER_PROFILE: the GPU worker under cProfile, its stats written when it exits."""
from __future__ import annotations

import os
import pstats
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_worker_writes_its_profile_when_it_ends(tmp_path):
    """On any machine: without a GPU the worker says why and ends; with one it ends at EOF. Either
    way its profile is written, and it says the worker's own loop ran under it."""
    env = dict(os.environ, SUPEROPT_GPU_WORKER_PROFILE=str(tmp_path / "prof"), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "superopt.judge.backends._gpu_worker"], input=b"", env=env,
                       capture_output=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    (prof,) = (tmp_path / "prof").glob("worker-*.prof")
    names = {fn for _, _, fn in pstats.Stats(str(prof)).stats}
    assert "_serve" in names


def test_the_bench_merges_the_workers_profiles(tmp_path):
    import cProfile
    import json

    from bench.economy.worker_profile import main, summarize

    def busy():
        return sum(i * i for i in range(20000))
    for k in range(2):
        p = cProfile.Profile()
        p.runcall(busy)
        p.dump_stats(str(tmp_path / f"worker-{k}.prof"))
    got = summarize(tmp_path, top=5)
    assert got["workers"] == 2 and len(got["by_own"]) <= 5
    row = next(r for r in got["by_cumulative"] if r["function"].endswith(":busy"))
    assert row["calls"] == 2
    assert main([str(tmp_path), "--out", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["workers"] == 2
    assert summarize(tmp_path / "none") == {"workers": 0}
