"""Shared helpers for the driver tests: how to run nvcc-plus and the real nvcc, small sources.

Imported as ``tests.driver.helpers`` (pytest runs with --import-mode=importlib)."""
from __future__ import annotations

import os
import shutil
import stat
import itertools
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

_BUILDS = itertools.count()

REAL_NVCC = os.environ.get("NVCC_PLUS_REAL_NVCC") or shutil.which("nvcc")


def console_script() -> str | None:
    """The installed nvcc-plus next to this Python (not a pyenv shim, which costs ~0.1 s a call)."""
    beside = Path(sys.executable).parent / "nvcc-plus"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("nvcc-plus")


def _nvcc_plus_argv() -> list[str]:
    exe = console_script()
    if exe:
        return [exe]
    return [sys.executable, "-m", "nvcc_plus"]


NVCC_PLUS = _nvcc_plus_argv()

needs_nvcc = pytest.mark.skipif(REAL_NVCC is None, reason="nvcc not found")


def base_env(**extra: str) -> dict[str, str]:
    """The environment for a run: nvcc-plus variables cleared, the fake optimizers importable."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NVCC_PLUS_") and k not in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")}
    paths = [str(HERE), str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    # Every run is a build of its own (the lines a build says once, nvcc_plus.once, are said by
    # each), not one build with every other run of this pytest process group; a test that wants
    # one build of several runs passes the same NVCC_PLUS_BUILD_LEDGER to each.
    env["NVCC_PLUS_BUILD_LEDGER"] = os.path.join(tempfile.gettempdir(),
                                                 f"nvcc-plus-test-{os.getpid()}-{next(_BUILDS)}.ledger")
    env.update(extra)
    return env


def run(argv, cwd, env=None, check=False) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], cwd=str(cwd), env=env or base_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv} failed ({proc.returncode}):\n{proc.stdout.decode()}\n"
                             f"{proc.stderr.decode()}")
    return proc


def nvcc(args, cwd, env=None, check=True):
    return run([REAL_NVCC, *args], cwd, env, check)


def plus(args, cwd, env=None, check=True):
    return run([*NVCC_PLUS, *args], cwd, env, check)


def fatbin_section(obj: Path) -> bytes:
    out = obj.with_suffix(obj.suffix + ".nv_fatbin")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(obj), str(out)],
                   check=True)
    return out.read_bytes()


def plus_lines(stderr: bytes) -> list[str]:
    return [ln for ln in stderr.decode().splitlines() if ln.startswith("nvcc-plus:")]


def write_wrapper(directory: Path, name: str = "nvcc-plus") -> Path:
    """An executable that runs nvcc-plus (CMake needs a path, not an argv)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    exe = console_script()
    if exe:
        # The console script itself, under the wanted name.
        path.write_text(f'#!/bin/sh\nexec "{exe}" "$@"\n# nvcc-plus wrapper\n')
    else:
        path.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}${{PYTHONPATH:+:$PYTHONPATH}}" '
                        f'exec "{sys.executable}" -m nvcc_plus "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


KERNEL_CU = r"""
#include <cstdio>
#include "scale.h"
__global__ void k(float* x) { x[threadIdx.x] = x[threadIdx.x] * SCALE + 1.0f; }
namespace { __global__ void hidden(int* y) { y[threadIdx.x] += 1; } }
__device__ int counter;
void launch(float* d, int* e) { k<<<1, 32>>>(d); hidden<<<1, 32>>>(e); }
"""

MAIN_CU = r"""
#include <cstdio>
void launch(float*, int*);
int main() { float* d = nullptr; int* e = nullptr; launch(d, e); std::printf("done\n"); return 0; }
"""

SCALE_H = "#pragma once\n#ifndef SCALE\n#define SCALE 2.0f\n#endif\n"


def opt_env(name: str, **extra: str) -> dict[str, str]:
    extra = {"NVCC_PLUS_MODE": "optimize", "NVCC_PLUS_OPTIMIZER": f"fake_optimizers:{name}", **extra}
    return base_env(**extra)


def pair(ref_args, plus_args, cwd, plus_env, ref_env=None, check=True, ref_cwd=None):
    """Run plain nvcc and nvcc-plus side by side (two cores): (nvcc's result, nvcc-plus's)."""
    def start(argv, env, where):
        return subprocess.Popen([str(a) for a in argv], cwd=str(where), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
    procs = [start([REAL_NVCC, *ref_args], ref_env or base_env(), ref_cwd or cwd),
             start([*NVCC_PLUS, *plus_args], plus_env, cwd)]
    results = []
    for argv, proc in zip((ref_args, plus_args), procs):
        out, err = proc.communicate()
        res = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        if check and res.returncode != 0:
            raise AssertionError(f"{proc.args} failed ({res.returncode}):\n{out.decode()}\n{err.decode()}")
        results.append(res)
    return results[0], results[1]
