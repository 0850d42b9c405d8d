"""The README's drop-in build, as written: `make NVCC=nvcc-plus` in a project whose Makefile
says `NVCC = nvcc` (tests/driver/data/quickstart). Built with -c, so no GPU is needed; with
no GPU and nothing locked, nvcc-plus searches nothing (NVCC_PLUS_NO_GPU=locked, the default)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.driver.helpers import REAL_NVCC, base_env, needs_nvcc, write_wrapper

pytestmark = [needs_nvcc, pytest.mark.skipif(shutil.which("make") is None, reason="make not found")]

PROJECT = Path(__file__).resolve().parent / "data" / "quickstart"


def _project(tmp_path: Path) -> tuple[Path, dict]:
    proj = tmp_path / "project"
    shutil.copytree(PROJECT, proj)
    (proj / ".git").mkdir()          # a project root: discovery stops here
    bin_dir = write_wrapper(tmp_path / "bin").parent          # what `pip install -e .` puts on PATH
    env = base_env(PATH=os.pathsep.join([str(bin_dir), os.path.dirname(REAL_NVCC), os.environ["PATH"]]),
                   NVCC_PLUS_NO_GPU="locked", NVCC_PLUS_BACKEND="emulator",
                   NVCC_PLUS_CACHE_DIR=str(tmp_path / "cache"),
                   NVCC_PLUS_REPORT_DIR=str(tmp_path / "records"))
    return proj, env


def _make(args, proj, env):
    proc = subprocess.run(["make", *args], cwd=proj, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_make_nvcc_equals_nvcc_plus_builds_through_nvcc_plus(tmp_path):
    proj, env = _project(tmp_path)
    proc = _make(["NVCC=nvcc-plus"], proj, env)
    assert "nvcc-plus -O3 -arch=sm_75 -c saxpy.cu -o saxpy.o" in proc.stdout
    assert (proj / "saxpy.o").stat().st_size > 0
    # nvcc-plus ran its optimizer on the module (a record per PTX module) and searched
    # nothing without a GPU: no summary line; the one line of the build says why and what helps.
    records = [json.loads(p.read_text()) for p in (tmp_path / "records").glob("*.json")]
    assert [k["kernel"] for r in records for k in r["kernels"]] == ["_Z5saxpyifPKfPf"]
    assert records[0]["kernels"][0]["status"] == "kept-baseline"
    (line,) = proc.stderr.splitlines()
    assert line.startswith("nvcc-plus: no GPU and no nvcc-plus.lock: ")
    assert "NVCC_PLUS_NO_GPU=estimate" in line and "superopt tune" in line


def test_the_environment_form_does_not_reach_a_hard_assignment(tmp_path):
    """Why the README and docs/driver.md say `make NVCC=nvcc-plus`: with `NVCC = nvcc` in the Makefile, the
    environment's NVCC is ignored and plain nvcc runs."""
    proj, env = _project(tmp_path)
    proc = _make([], proj, {**env, "NVCC": "nvcc-plus"})
    assert "\nnvcc -O3" in "\n" + proc.stdout
    assert not (tmp_path / "records").exists()
