"""A GPU-less compilation with nothing stored (no lockfile, an empty decision cache, default
settings) runs the real nvcc directly: the same object as the full path would give, for the cost
of ``mode=off`` (nvcc_plus/nothing_stored.py). Every setting that asks for more keeps the full path."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nvcc_plus import config as cfgmod
from nvcc_plus import nothing_stored
from tests.driver.helpers import REAL_NVCC, base_env, needs_nvcc, plus_lines, run
from tests.passes.data.ptx_tools import cuobjdump_path

SAXPY_CU = """
__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
no_device = pytest.mark.skipif(nothing_stored.gpu_device_present(), reason="this machine has a GPU device node")


def _env(tmp_path: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVCC_PLUS_", "SUPEROPT_"))}
    env.update({"NVCC_PLUS_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}, **extra)
    return env


def _cfg(tmp_path: Path, env: dict, toml: str | None = None):
    if toml is not None:
        (tmp_path / "nvcc-plus.toml").write_text(toml)
    return cfgmod.load({}, env=env, cwd=str(tmp_path))


def _listing_driver(listing: Path) -> str:
    """``python -c`` code running nvcc-plus that appends the modules it loaded to ``listing``
    when it execs the real nvcc (or exits)."""
    return ("import atexit, os, runpy, sys\n"
            f"def listing(): open({str(listing)!r}, 'a').write('\\n'.join(sorted(sys.modules)) + '\\n')\n"
            "atexit.register(listing)\n"
            "real_execve = os.execve\n"
            "def execve(*a):\n"
            "    listing()\n"
            "    real_execve(*a)\n"
            "os.execve = execve\n"
            "sys.argv = ['nvcc-plus'] + sys.argv[1:]\n"
            "runpy.run_module('nvcc_plus', run_name='__main__')\n")


def test_the_line_is_the_optimizers_and_the_device_question_the_judges(monkeypatch):
    from superopt.decide.searches import NO_GPU_NO_LOCKFILE
    from superopt.judge import devices
    assert nothing_stored.NO_GPU_NO_LOCKFILE == NO_GPU_NO_LOCKFILE
    assert nothing_stored.gpu_device_present() == devices.driver_present()
    monkeypatch.setenv("SUPEROPT_FAKE_GPUS", "1")
    assert nothing_stored.gpu_device_present() and devices.driver_present()


@no_device
def test_nothing_stored_means_nvcc_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    env = _env(tmp_path)
    assert nothing_stored.nvcc_alone(_cfg(tmp_path, env), [str(tmp_path)], env, str(tmp_path))


@no_device
@pytest.mark.parametrize("why", ["lockfile", "lockfile-env", "cache entry", "estimate", "emulator", "deferred",
                                 "cluster", "capture", "lock write", "report dir", "verbose", "kernels table",
                                 "mode roundtrip", "toml estimate", "fake gpus"])
def test_anything_that_asks_for_more_keeps_the_full_path(tmp_path, monkeypatch, why):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    extra, toml = {}, None
    if why == "lockfile":
        (tmp_path / "nvcc-plus.lock").write_text("{}")
    elif why == "lockfile-env":
        extra["NVCC_PLUS_LOCKFILE"] = str(tmp_path / "elsewhere.lock")
    elif why == "cache entry":
        d = tmp_path / "cache" / "decisions" / "ab"
        d.mkdir(parents=True)
        (d / "ab.json").write_text("{}")
    elif why == "estimate":
        extra["NVCC_PLUS_NO_GPU"] = "estimate"
    elif why == "emulator":
        extra["NVCC_PLUS_BACKEND"] = "emulator"
    elif why == "deferred":
        extra["NVCC_PLUS_SEARCH"] = "deferred"
    elif why == "cluster":
        extra["NVCC_PLUS_CLUSTER"] = "tcp://gpu-box:8786"
    elif why == "capture":
        extra["NVCC_PLUS_CAPTURE"] = str(tmp_path / "app.capture")
    elif why == "lock write":
        extra["NVCC_PLUS_LOCK"] = "write"
    elif why == "report dir":
        extra["NVCC_PLUS_REPORT_DIR"] = str(tmp_path / "records")
    elif why == "verbose":
        extra["NVCC_PLUS_VERBOSE"] = "1"
    elif why == "kernels table":
        toml = '[kernels."saxpy"]\nblock = [256, 1, 1]\n'
    elif why == "mode roundtrip":
        extra["NVCC_PLUS_MODE"] = "roundtrip"
    elif why == "toml estimate":
        toml = 'no_gpu = "estimate"\n'
    elif why == "fake gpus":
        extra["SUPEROPT_FAKE_GPUS"] = "1"
    env = _env(tmp_path, **extra)
    assert not nothing_stored.nvcc_alone(_cfg(tmp_path, env, toml), [str(tmp_path)], env, str(tmp_path))


@no_device
@needs_nvcc
def test_the_build_runs_nvcc_alone_says_so_once_and_gives_nvccs_object(tmp_path):
    (tmp_path / ".git").mkdir()
    for name in ("a", "b"):
        (tmp_path / f"{name}.cu").write_text(SAXPY_CU.replace("saxpy", f"saxpy_{name}"))
    listing = tmp_path / "modules.txt"
    code = _listing_driver(listing)
    env = base_env(NVCC_PLUS_CACHE_DIR=str(tmp_path / "cache"), NVCC_PLUS_BUILD_LEDGER=str(tmp_path / "b.ledger"))
    said = []
    for name in ("a", "b"):
        res = run([sys.executable, "-c", code, "-O3", "-arch=sm_90", "-c", f"{name}.cu", "-o", f"{name}.o"],
                  tmp_path, env)
        assert res.returncode == 0, res.stderr.decode()
        said += plus_lines(res.stderr)
    assert len(said) == 1 and said[0] == "nvcc-plus: " + nothing_stored.NO_GPU_NO_LOCKFILE
    mods = listing.read_text().split()
    assert "nvcc_plus.nothing_stored" in mods
    assert not [m for m in mods if m in ("superopt.optimize", "superopt.api", "nvcc_plus.replay", "ptx_ir")]
    plain = subprocess.run([REAL_NVCC, "-O3", "-arch=sm_90", "-c", "a.cu", "-o", "plain.o"], cwd=tmp_path,
                           capture_output=True)
    assert plain.returncode == 0, plain.stderr.decode()
    # nvcc's objects differ run to run (an embedded module id); their code does not
    tool = cuobjdump_path()
    if tool is None:
        pytest.skip("no cuobjdump to compare the objects' code")
    code_of = [subprocess.run([tool, "-sass", "-ptx", o], capture_output=True, text=True, check=True).stdout
               for o in (tmp_path / "a.o", tmp_path / "plain.o")]
    assert "saxpy_a" in code_of[0] and code_of[0] == code_of[1]


@no_device
@needs_nvcc
def test_a_lockfile_beside_a_dash_x_cu_source_keeps_the_full_path(tmp_path):
    """``-x cu other/k.cpp``: the optimizer reads the lockfile from the source's folder, so the
    driver asks there too (an extension scan would miss it and skip the locked decisions)."""
    (tmp_path / ".git").mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / "k.cpp").write_text(SAXPY_CU)
    (other / "nvcc-plus.lock").write_text('{"version": 1, "entries": {}}')
    build = tmp_path / "build"
    build.mkdir()
    listing = tmp_path / "modules.txt"
    code = _listing_driver(listing)
    env = base_env(NVCC_PLUS_CACHE_DIR=str(tmp_path / "cache"))
    res = run([sys.executable, "-c", code, "-arch=sm_90", "-x", "cu", "-c", str(other / "k.cpp"), "-o", "k.o"],
              build, env)
    assert res.returncode == 0, res.stderr.decode()
    assert "nvcc_plus.replay" in listing.read_text().split()
