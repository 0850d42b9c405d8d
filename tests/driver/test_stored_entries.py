"""Lockfile entries through the real driver (issue 12): a tampered ``occupancy`` entry whose
``.maxntid`` cannot launch the program's block is refused with one line and nvcc's PTX is used;
an honest one is applied and, under NVCC_PLUS_VERBOSE, announced with where it came from."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import ptx_ir
from superopt.decide.run import globals_text as _globals_text
from superopt.search.candidates import Step, apply_plan, text_hash
from superopt.store.cache import decision_key
from tests.driver.helpers import base_env, needs_nvcc, nvcc, plus, plus_lines

CHEATS = Path(__file__).resolve().parents[1] / "judge" / "cheats"
SAXPY = "_Z5saxpyifPKfPf"
TOML = f"""
[kernels."{SAXPY}"]
grid = ["cdiv(n, 256)", 1, 1]
block = [256, 1, 1]
params = [
  {{name = "n", kind = "scalar", type = "s32", value = 100000}},
  {{name = "a", kind = "scalar", type = "f32", value = 2.0}},
  {{name = "x", kind = "buffer", type = "f32", length = "n", direction = "in"}},
  {{name = "y", kind = "buffer", type = "f32", length = "n", direction = "inout"}},
]
"""


def _project(tmp_path: Path) -> tuple[Path, str]:
    """A project (a .git folder bounds the lookup) with saxpy.cu and its launch contract;
    nvcc's own PTX of it."""
    (tmp_path / ".git").mkdir()
    shutil.copy(CHEATS / "saxpy.cu", tmp_path / "saxpy.cu")
    (tmp_path / "nvcc-plus.toml").write_text(TOML)
    nvcc(["-arch=sm_90", "-ptx", "saxpy.cu", "-o", "ref.ptx"], tmp_path)
    return tmp_path, (tmp_path / "ref.ptx").read_text()


def _write_lock(project: Path, ref: str, plan: list[dict], **extra) -> Path:
    module = ptx_ir.parse(ref)
    new, _ = apply_plan(module, SAXPY, [Step.from_dict(s) for s in plan])
    key = decision_key(kernel_text=ptx_ir.printer.emit_function(module.function(SAXPY)),
                       globals_text=_globals_text(module), target="compute_90", tool="", policy="exact",
                       passes=["occupancy"])
    lock = project / "nvcc-plus.lock"
    lock.write_text(json.dumps({"version": 1, "decisions": {key: {
        "kernel": SAXPY, "plan": plan, "status": "optimized", "decision": "measured",
        "ptx_hash": text_hash(ptx_ir.printer.emit_function(new.function(SAXPY))), **extra}}}))
    return lock


def _env(tmp_path: Path, **extra) -> dict:
    return base_env(NVCC_PLUS_PASSES="occupancy", NVCC_PLUS_CACHE_DIR=str(tmp_path / "cache"), **extra)


@needs_nvcc
def test_tampered_maxntid_lock_entry_is_refused_by_the_driver(tmp_path):
    project, ref = _project(tmp_path)
    lock = _write_lock(project, ref, [{"pass": "occupancy", "params": {"block": [32], "minnctapersm": 2}}])
    res = plus(["-arch=sm_90", "-ptx", "saxpy.cu", "-o", "out.ptx"], project, _env(tmp_path))
    assert res.returncode == 0
    assert (project / "out.ptx").read_text() == ref           # nvcc's own PTX, byte for byte
    (line,) = plus_lines(res.stderr)
    assert f"{lock}: {SAXPY}: locked decision not applied: sets .maxntid 32" in line
    assert "256 threads" in line


@needs_nvcc
def test_honest_lock_entry_is_applied_and_announced_when_verbose(tmp_path):
    project, ref = _project(tmp_path)
    lock = _write_lock(project, ref, [{"pass": "occupancy", "params": {"block": [256], "minnctapersm": 2}}],
                       searched_on="NVIDIA H200", spec_origin="captured")
    args = ["-arch=sm_90", "-ptx", "saxpy.cu", "-o", "out.ptx"]
    quiet = plus(args, project, _env(tmp_path))
    assert not plus_lines(quiet.stderr)
    out = (project / "out.ptx").read_text()
    assert ".maxntid 256" in out and ".minnctapersm 2" in out
    for env in (_env(tmp_path, NVCC_PLUS_VERBOSE="1"), _env(tmp_path)):
        loud = plus(args + (["--plus-verbose"] if "NVCC_PLUS_VERBOSE" not in env else []), project, env)
        assert (project / "out.ptx").read_text() == out
        (line,) = [ln for ln in plus_lines(loud.stderr) if "applied the" in ln]
        assert line.endswith(f"{lock}: {SAXPY}: applied the locked entry: plan occupancy(block=[256], "
                             f"minnctapersm=2); searched on NVIDIA H200, at the program's captured launches")
