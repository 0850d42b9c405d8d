"""A new user's first hour with the driver (issue 28): the GPU-less default build says once what
it did and what would help, and pays only for what it does; a bad setting, a mistyped flag, an
incomplete [kernels] table are said once, completely, with what to type; launch blocks respect
the build's -D flags."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.driver.helpers import REAL_NVCC, base_env, needs_nvcc, plus, plus_lines, run

SAXPY_CU = """__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""

THREADS_CU = """#include "launch.h"
#ifndef THREADS
#define THREADS 256
#endif
__global__ void scale(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * y[i] + 1.0f;
}
void run(float* y, int n) {
#if USE_HEADER_BLOCK
  scale<<<(n + HEADER_BLOCK - 1) / HEADER_BLOCK, HEADER_BLOCK>>>(y, n);
#else
  scale<<<(n + THREADS - 1) / THREADS, THREADS>>>(y, n);
#endif
}
"""
LAUNCH_H = "#pragma once\n#define HEADER_BLOCK 128\n"

NO_GPU_LINE = "nvcc-plus: no GPU and no nvcc-plus.lock: "


def _gpu_less(tmp_path: Path, **extra: str) -> dict:
    """A build environment without a GPU's help: a fresh decision cache and, on a machine that has
    a GPU, the emulator backend (which cannot time: the GPU-less path)."""
    from superopt.judge.devices import driver_present
    env = base_env(**{"NVCC_PLUS_CACHE_DIR": str(tmp_path / "cache"), **extra})
    if driver_present():
        env["NVCC_PLUS_BACKEND"] = "emulator"
    return env


def _project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()                  # a project root: nvcc-plus.toml discovery stops here
    (tmp_path / "a.cu").write_text(SAXPY_CU)
    (tmp_path / "b.cu").write_text(SAXPY_CU.replace("saxpy", "saxpb"))
    return tmp_path


@needs_nvcc
def test_the_gpu_less_build_says_so_once_per_build(tmp_path):
    """Two compilations of one build (one ledger): the line once, naming NVCC_PLUS_NO_GPU=estimate
    and the tune workflow; another build says it again. Each module's record keeps its reason."""
    proj = _project(tmp_path)
    env = _gpu_less(tmp_path, NVCC_PLUS_BUILD_LEDGER=str(tmp_path / "build1.ledger"),
                    NVCC_PLUS_REPORT_DIR=str(tmp_path / "records"))
    first = plus(["-c", "a.cu", "-o", "a.o"], proj, env)
    second = plus(["-c", "b.cu", "-o", "b.o"], proj, env)
    (line,) = plus_lines(first.stderr)
    assert line.startswith(NO_GPU_LINE)
    assert "NVCC_PLUS_NO_GPU=estimate" in line and "superopt tune" in line and "nvcc-plus.lock" in line
    assert plus_lines(second.stderr) == []
    assert (proj / "a.o").stat().st_size > 0 and (proj / "b.o").stat().st_size > 0
    reasons = [k["reason"] for p in sorted((tmp_path / "records").glob("*.json"))
               for k in json.loads(p.read_text())["kernels"]]
    assert len(reasons) == 2 and all(r.startswith("no GPU and no locked or cached decision") for r in reasons)
    other = plus(["-c", "a.cu", "-o", "a2.o"], proj, {**env, "NVCC_PLUS_BUILD_LEDGER": str(tmp_path / "build2.ledger")})
    assert [ln for ln in plus_lines(other.stderr) if ln.startswith(NO_GPU_LINE)] == [line]


@needs_nvcc
def test_a_build_with_a_lockfile_does_not_say_the_no_gpu_line(tmp_path):
    proj = _project(tmp_path)
    (proj / "nvcc-plus.lock").write_text(json.dumps({"version": 1, "decisions": {}}))
    res = plus(["-c", "a.cu", "-o", "a.o"], proj, _gpu_less(tmp_path))
    assert not [ln for ln in plus_lines(res.stderr) if ln.startswith(NO_GPU_LINE)]


def test_once_per_build_markers(tmp_path, monkeypatch):
    """The marker: first_time says yes once per build and line; an old marker (a reused process
    group id, a day later) is a new build; without a usable folder the line is said."""
    from nvcc_plus import once
    env = {"NVCC_PLUS_BUILD_LEDGER": str(tmp_path / "l1"), "XDG_RUNTIME_DIR": str(tmp_path)}
    assert once.first_time("line one", env) and not once.first_time("line one", env)
    assert once.first_time("line two", env)
    assert once.first_time("line one", {**env, "NVCC_PLUS_BUILD_LEDGER": str(tmp_path / "l2")})
    marker = Path(once.marker_path("line one", env))
    assert marker.parent == tmp_path / f"nvcc-plus-budget-{os.geteuid()}" and marker.is_file()
    assert oct(marker.parent.stat().st_mode & 0o777) == "0o700"
    old = marker.stat().st_mtime - 2 * once.STALE_S
    os.utime(marker, (old, old))
    assert once.first_time("line one", env) and not once.first_time("line one", env)
    monkeypatch.setattr(once, "private_folder", lambda env: (_ for _ in ()).throw(OSError("unsafe")))
    assert once.first_time("line one", env) and once.first_time("line one", env)


def test_the_pgid_build_id_names_the_group_and_its_leader():
    from nvcc_plus import once
    bid = once.build_id({})
    assert bid.startswith(f"pgid-{os.getpgrp()}")
    if Path(f"/proc/{os.getpgrp()}/stat").exists():
        assert bid.count("-") == 2                       # the leader's start time is part of it


@needs_nvcc
def test_a_gpu_less_locked_build_imports_no_numpy_networkx_or_pass(tmp_path):
    """The default build without a GPU applies stored decisions only: no pass, numpy or networkx
    is imported (they cost a build 0.5 s of CPU per file once). Run in a Python that lists its
    modules at exit."""
    proj = _project(tmp_path)
    # something in the cache (another module's entry): with nothing stored at all the driver
    # would run nvcc alone (tests/driver/test_nothing_stored.py) and the optimizer never start
    other = tmp_path / "cache" / "decisions" / "ab"
    other.mkdir(parents=True)
    (other / ("ab" + "0" * 62 + ".json")).write_text("{}")
    listing = tmp_path / "modules.txt"
    code = ("import atexit, runpy, sys\n"
            f"atexit.register(lambda: open({str(listing)!r}, 'w').write('\\n'.join(sorted(sys.modules))))\n"
            "sys.argv = ['nvcc-plus'] + sys.argv[1:]\n"
            "runpy.run_module('nvcc_plus', run_name='__main__')\n")
    env = _gpu_less(tmp_path)
    res = run([sys.executable, "-c", code, "-c", "a.cu", "-o", "a.o"], proj, env)
    assert res.returncode == 0, res.stderr.decode()
    assert [ln for ln in plus_lines(res.stderr) if ln.startswith(NO_GPU_LINE)], "not the GPU-less path"
    mods = listing.read_text().split()
    assert "superopt.optimize" in mods                    # the optimizer did run
    # what this Python imports before any of ours (site hooks may bring some of these along)
    bare = set(subprocess.run([sys.executable, "-c", "import sys; print('\\n'.join(sys.modules))"], env=env,
                              capture_output=True, text=True, check=True).stdout.split())
    heavy = [m for m in mods if m not in bare and (
        m.split(".")[0] in ("numpy", "networkx", "cxxfilt")
        or (m.startswith("superopt.passes.") and m != "superopt.passes")
        or m in ("importlib.metadata", "socket"))]
    assert heavy == []


@needs_nvcc
def test_a_bad_setting_is_a_configuration_error_said_once(tmp_path):
    proj = _project(tmp_path)
    env = _gpu_less(tmp_path, NVCC_PLUS_NO_GPU="estimat", NVCC_PLUS_BUILD_LEDGER=str(tmp_path / "b.ledger"))
    first = plus(["-c", "a.cu", "-o", "a.o"], proj, env)
    second = plus(["-c", "b.cu", "-o", "b.o"], proj, env)
    (line,) = plus_lines(first.stderr)
    assert line.startswith("nvcc-plus: configuration error: no_gpu (NVCC_PLUS_NO_GPU) must be locked or "
                           "estimate, not 'estimat'")
    assert "did you mean 'estimate'?" in line and "optimizer raised" not in line
    assert plus_lines(second.stderr) == [] and second.returncode == 0 and (proj / "b.o").exists()


@needs_nvcc
def test_a_mistyped_plus_flag_gets_did_you_mean(tmp_path):
    proj = _project(tmp_path)
    res = plus(["--plus-mod=off", "-c", "a.cu", "-o", "a.o"], proj, _gpu_less(tmp_path))
    assert "nvcc-plus: unknown option --plus-mod=off ignored (did you mean --plus-mode?)" in plus_lines(res.stderr)
    bad = plus(["-c", "a.cu", "-o", "a.o", "--plus-mode=optimise"], proj, _gpu_less(tmp_path))
    assert any("did you mean 'optimize'?" in ln for ln in plus_lines(bad.stderr))


def test_did_you_mean_helper():
    from superopt.config.settings import did_you_mean
    assert did_you_mean("estimat", ("locked", "estimate")) == " (did you mean 'estimate'?)"
    assert did_you_mean("zzz", ("locked", "estimate")) == ""


@needs_nvcc
def test_plus_help_names_plus_version_and_version_stays_nvccs(tmp_path):
    first = plus(["--plus-help"], tmp_path).stdout.decode().splitlines()[:4]
    assert any("--plus-version" in ln for ln in first)
    ours = plus(["--version"], tmp_path).stdout
    assert ours == subprocess.run([REAL_NVCC, "--version"], capture_output=True).stdout
    assert b"nvcc: NVIDIA (R) Cuda compiler driver" in ours


@needs_nvcc
def test_an_incomplete_kernels_table_is_one_warning_per_build(tmp_path):
    proj = _project(tmp_path)
    (proj / "nvcc-plus.toml").write_text('[kernels."saxpy"]\nblock = [256, 1, 1]\n')
    env = _gpu_less(tmp_path, NVCC_PLUS_BUILD_LEDGER=str(tmp_path / "t.ledger"))
    first = plus(["-c", "a.cu", "-o", "a.o"], proj, env)
    again = plus(["-c", "a.cu", "-o", "a2.o"], proj, env)
    table = [ln for ln in plus_lines(first.stderr) if "[kernels." in ln]
    assert table == [f'nvcc-plus: {proj / "nvcc-plus.toml"}: [kernels."saxpy"] for kernel saxpy(int, float, '
                     f"float const*, float*): launch spec for 'saxpy': missing 'grid'; the table is not used: "
                     f"the kernel's spec comes from its // nvcc-plus: comment or inference (docs/launch-specs.md)"]
    assert not [ln for ln in plus_lines(again.stderr) if "[kernels." in ln]
    # grid and block but no params: it parses, and it does not fit the kernel
    (proj / "nvcc-plus.toml").write_text('[kernels."saxpy"]\ngrid = [1, 1, 1]\nblock = [256, 1, 1]\n')
    other = plus(["-c", "a.cu", "-o", "a.o"], proj, _gpu_less(tmp_path))
    (line,) = [ln for ln in plus_lines(other.stderr) if "[kernels." in ln]
    assert "it gives 0 params (missing 'params'), the kernel has 4" in line and "not verifiable" in line


@needs_nvcc
def test_another_kernels_bad_table_does_not_hide_this_kernels_table(tmp_path):
    import ptx_ir
    from superopt.specs.inference import explicit_specs
    from superopt.specs.launch_spec import SpecError
    (tmp_path / "a.cu").write_text(SAXPY_CU)
    subprocess.run([REAL_NVCC, "-ptx", "a.cu", "-o", "a.ptx"], cwd=tmp_path, check=True)
    fn = ptx_ir.parse((tmp_path / "a.ptx").read_text()).kernels[0]
    good = {"grid": [1, 1, 1], "block": [32, 1, 1], "params": [
        {"name": "n", "kind": "scalar", "type": "s32", "value": 32},
        {"name": "a", "kind": "scalar", "type": "f32", "value": 1.5},
        {"name": "x", "kind": "buffer", "type": "f32", "length": "n", "direction": "in"},
        {"name": "y", "kind": "buffer", "type": "f32", "length": "n", "direction": "inout"}]}
    specs, origin = explicit_specs({"kernels": {"saxpy": good, "other": {"block": [1]}}}, fn)
    assert specs[0].block == (32, 1, 1)
    with pytest.raises(SpecError, match=r"\[kernels.\"saxpy\"\]: launch spec for 'saxpy': missing 'grid'"):
        explicit_specs({"kernels": {"saxpy": {"block": [1]}}}, fn)
    with pytest.raises(SpecError, match="not a table"):
        explicit_specs({"kernels": {"saxpy": 5}}, fn)


# ---- launch blocks from the preprocessed unit ---------------------------------------------

def _threads_project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "t.cu").write_text(THREADS_CU)
    (tmp_path / "launch.h").write_text(LAUNCH_H)
    return tmp_path


@needs_nvcc
def test_the_plan_names_the_preprocessed_unit_and_its_user_lines_expand_macros(tmp_path):
    from nvcc_plus import plan as planmod
    from superopt.specs.source_launches import launch_blocks, unit_launch_text
    proj = _threads_project(tmp_path)
    keep = tmp_path / "keep"
    keep.mkdir()
    subprocess.run([REAL_NVCC, "-c", "t.cu", "-o", "t.o", "-DTHREADS=512", "--keep", "--keep-dir", str(keep)],
                   cwd=proj, check=True, capture_output=True)
    rc, p = planmod.run_dryrun(REAL_NVCC, ["-c", "t.cu", "-o", "t.o", "-DTHREADS=512"], str(keep), base_env())
    assert rc == 0 and p.host_unit and p.host_unit.endswith(".cpp4.ii") and os.path.isfile(p.host_unit)
    text = unit_launch_text(p.host_unit)
    assert "scale<<<(n + 512 - 1) / 512, 512>>>" in text
    assert "cudaMalloc" not in text and "__device_builtin__" not in text      # the toolkit's headers are left out
    assert launch_blocks(text)["scale"].blocks == ((512, 1, 1),)
    assert launch_blocks(THREADS_CU)["scale"].blocks == ((256, 1, 1),)       # what the raw source said


def _judged_blocks(tmp_path: Path, proj: Path, flags: list[str], name: str) -> list:
    records = tmp_path / f"records-{name}"
    env = _gpu_less(tmp_path, NVCC_PLUS_NO_GPU="estimate", NVCC_PLUS_BUDGET="2",
                    NVCC_PLUS_REPORT_DIR=str(records), NVCC_PLUS_CACHE_DIR=str(tmp_path / f"cache-{name}"))
    env["NVCC_PLUS_BACKEND"] = "emulator"
    plus(["-c", "t.cu", "-o", f"{name}.o", *flags], proj, env)
    (rec,) = [json.loads(p.read_text()) for p in records.glob("*.json")]
    (k,) = rec["kernels"]
    assert k.get("spec_origin") == "inferred", k
    return [tuple(s["block"]) for s in k["spec"]]


@needs_nvcc
def test_dthreads_512_gives_block_512(tmp_path):
    """#ifndef THREADS / #define THREADS 256 in the source, -DTHREADS=512 on the command line:
    the block judged is 512 (read from the unit nvcc preprocessed), and 256 without the flag;
    -DUSE_HEADER_BLOCK takes the #if branch whose block comes from an included header."""
    proj = _threads_project(tmp_path)
    assert _judged_blocks(tmp_path, proj, ["-DTHREADS=512"], "d512")[0] == (512, 1, 1)
    assert _judged_blocks(tmp_path, proj, [], "plain")[0] == (256, 1, 1)
    assert _judged_blocks(tmp_path, proj, ["-DUSE_HEADER_BLOCK=1"], "hdr")[0] == (128, 1, 1)


def test_a_queued_search_keeps_the_launches_of_the_unit(tmp_path, monkeypatch):
    """NVCC_PLUS_SEARCH=deferred: the unit is gone when the runner searches, so the queue entry
    keeps its user lines; another -D is another entry; the runner hands them over as the unit."""
    from superopt.config.resolved import Settings
    from superopt.decide import queue_runner
    from superopt.store.queue import make_entry
    text = "void run(float* y, int n) { scale<<<(n + 512 - 1) / 512, 512>>>(y, n); }"
    a = make_entry("ptx", target="sm_90", source="t.cu", kernels=["k"], settings=Settings(), launches=text)
    b = make_entry("ptx", target="sm_90", source="t.cu", kernels=["k"], settings=Settings(),
                   launches=text.replace("512", "256"))
    plain = make_entry("ptx", target="sm_90", source="t.cu", kernels=["k"], settings=Settings())
    assert a["launches"] == text and "launches" not in plain
    assert len({a["name"], b["name"], plain["name"]}) == 3
    seen = {}

    def fake(ptx, *, mode, source, target, config):
        from superopt.specs.source_launches import launch_blocks, unit_launch_text
        seen["blocks"] = launch_blocks(unit_launch_text(config["preprocessed"]))["scale"].blocks
        from superopt.api import OptimizeOutcome
        return OptimizeOutcome(ptx=ptx, changed=False)
    monkeypatch.setattr("superopt.api.optimize_ptx", fake)
    queue_runner.run_entry(a, tmp_path / "cache", deadline=None)
    assert seen["blocks"] == ((512, 1, 1),)


def test_the_records_version_is_the_distributions():
    import tomllib
    from superopt.store.record import TOOL_VERSION, tool_info
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert TOOL_VERSION == project["version"] == tool_info()["nvcc_plus"]
