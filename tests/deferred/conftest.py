"""Fixtures of the deferred-search tests: a clean environment with its own cache and GPU-lock
folders, and the small module of tests/cluster/data (two kernels whose launch specs are in the
source's comments) with the dry-run judge (bench/scale/dryrun.py: real checks on the CPU
emulator, stand-in timings that count as measured, so decisions are stored)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "cluster" / "data"
PTX = (DATA / "k.ptx").read_text()
SRC = str(DATA / "k.cu")
KERNELS = ["_Z5saxpyifPKfPf", "_Z6squareiPKfPf"]

DRY_RUN = {"NVCC_PLUS_JUDGE": "bench.scale.dryrun:judge", "SUPEROPT_FAKE_GPUS": "GPU-dry=Dry GPU",
           "NVCC_PLUS_BUDGET": "20"}


@pytest.fixture
def env(tmp_path, monkeypatch):
    """No NVCC_PLUS_*/SUPEROPT_* variable but a private cache and GPU-lock folder; returns tmp_path."""
    for k in list(os.environ):
        if k.startswith(("NVCC_PLUS_", "SUPEROPT_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NVCC_PLUS_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("NVCC_PLUS_LOCKFILE", str(tmp_path / "nvcc-plus.lock"))
    return tmp_path


@pytest.fixture
def dry_run(env, monkeypatch):
    for k, v in DRY_RUN.items():
        monkeypatch.setenv(k, v)
    return env
