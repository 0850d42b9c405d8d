"""Configuration, finding the real nvcc, the swap of one PTX file, the GPU lock (no compiling)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nvcc_plus import config as C
from nvcc_plus import real_nvcc as rn, swap
from superopt.judge import gpu_lock

from tests.driver import fake_optimizers as F
from tests.driver.helpers import REAL_NVCC, needs_nvcc, write_wrapper

# ---- configuration ------------------------------------------------------------------------


def test_defaults(tmp_path):
    cfg = C.load({}, {}, cwd=str(tmp_path))
    assert cfg.mode == "optimize" and cfg.config_path is None and not cfg.problems


def test_toml_found_upward_and_precedence(tmp_path):
    (tmp_path / "nvcc-plus.toml").write_text(
        'mode = "roundtrip"\nbudget = 3\n[driver]\ntimeout = 12\nreport_dir = "rec"\nreal_nvcc = "bin/nvcc"\n')
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    cfg = C.load({}, {}, cwd=str(deep))
    assert cfg.mode == "roundtrip" and cfg.timeout == 12
    assert cfg.report_dir == str(tmp_path / "rec")
    # A discovered file may not name a program to run (issue 12); a named one may.
    assert cfg.real_nvcc is None and any("real_nvcc ignored" in p for p in cfg.problems)
    named = C.load({}, {"NVCC_PLUS_CONFIG": str(tmp_path / "nvcc-plus.toml")}, cwd=str(deep))
    assert named.real_nvcc == str(tmp_path / "bin" / "nvcc")
    assert cfg.optimizer_config()["budget"] == 3
    assert cfg.optimizer_config()["config_path"] == str(tmp_path / "nvcc-plus.toml")
    assert C.load({}, {"NVCC_PLUS_MODE": "off"}, cwd=str(deep)).mode == "off"
    assert C.load({"mode": "optimize"}, {"NVCC_PLUS_MODE": "off"}, cwd=str(deep)).mode == "optimize"


def test_bad_mode_means_off(tmp_path):
    cfg = C.load({}, {"NVCC_PLUS_MODE": "turbo"}, cwd=str(tmp_path))
    assert cfg.mode == "off" and "turbo" in cfg.problems[0]


def test_broken_toml_is_reported_not_fatal(tmp_path):
    (tmp_path / "nvcc-plus.toml").write_text("mode = \n")
    cfg = C.load({}, {}, cwd=str(tmp_path))
    assert cfg.mode == "optimize" and len(cfg.problems) == 1


def test_explicit_config_and_timeout(tmp_path):
    p = tmp_path / "elsewhere.toml"
    p.write_text('[driver]\nverbose = true\ntimeout = 0\n')
    cfg = C.load({"config": str(p)}, {}, cwd="/")
    assert cfg.verbose and cfg.timeout is None
    assert C.load({"timeout": "x"}, {}, cwd=str(tmp_path)).problems

# ---- the real nvcc -------------------------------------------------------------------------


def test_wrapper_is_self(tmp_path):
    w = write_wrapper(tmp_path / "bin", "nvcc")
    assert rn.is_self(str(w))
    if REAL_NVCC:
        assert not rn.is_self(REAL_NVCC)


@needs_nvcc
def test_find_skips_self_on_path(tmp_path):
    w = write_wrapper(tmp_path / "bin", "nvcc")
    env = {"PATH": f"{w.parent}{os.pathsep}{os.environ['PATH']}"}
    found = rn.find(None, env)
    assert not rn.is_self(found) and os.path.basename(found) == "nvcc"
    assert rn.find(REAL_NVCC, env) == REAL_NVCC


def test_find_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(rn, "_pip_candidates", lambda: [])
    monkeypatch.setattr(rn, "candidates", lambda c, e: [(str(tmp_path / "none"), "x")])
    with pytest.raises(rn.NotFound):
        rn.find(None, {"PATH": str(tmp_path)})


@needs_nvcc
def test_launcher_detection(tmp_path):
    assert rn.launcher_compiler([REAL_NVCC, "-c", "a.cu"]) == REAL_NVCC
    assert rn.launcher_compiler(["-c", "a.cu"]) is None
    assert rn.launcher_compiler(["a.cu", "-c"]) is None
    assert rn.launcher_compiler(["nvcc", "-c", "a.cu"]) is not None


def test_depth_guard(tmp_path):
    env = dict(os.environ, NVCC_PLUS_DEPTH=str(rn.MAX_DEPTH), PYTHONPATH=str(Path(__file__).parents[2]))
    proc = subprocess.run([sys.executable, "-m", "nvcc_plus", "--version"], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "calling itself" in proc.stderr

# ---- swapping one file ---------------------------------------------------------------------


PTX = """//
.version 9.0
.target sm_75
.address_size 64
.global .align 4 .u32 counter;
.visible .func (.param .b32 r) _Z3fooi(.param .b32 p)
{
\tret;
}
.func helper()
{
\tret;
}
.visible .entry _Z1kPf(
\t.param .u64 _Z1kPf_param_0
)
{
\tadd.rn.f32 \t%f2, %f1, %f1;
\tret;
}
"""


def test_interface():
    assert swap.interface(PTX) == [("entry", "_Z1kPf", ".visible"), ("func", "_Z3fooi", ".visible"),
                                   ("global", "counter", "")]


def _swap(tmp_path, fn, timeout=None):
    p = tmp_path / "m.ptx"
    p.write_text(PTX)
    return p, swap.swap_file(str(p), optimizer=fn, mode="optimize", source="m.cu",
                             target="compute_75", config={}, timeout=timeout)


def test_swap_unchanged(tmp_path):
    p, res = _swap(tmp_path, F.identity)
    assert not res.changed and res.error is None and p.read_text() == PTX


def test_swap_changed(tmp_path):
    p, res = _swap(tmp_path, F.round_to_zero)
    assert res.changed and res.original == PTX.encode() and "add.rz.f32" in p.read_text()
    swap.restore(str(p), res.original)
    assert p.read_text() == PTX


@pytest.mark.parametrize("fn,why", [
    (F.crash, "optimizer raised RuntimeError: deliberate optimizer crash"),
    (F.not_text, "optimizer returned int without PTX text"),
])
def test_swap_errors_keep_nvcc_ptx(tmp_path, fn, why):
    p, res = _swap(tmp_path, fn)
    assert res.error == why and not res.changed and p.read_text() == PTX


def test_swap_rejects_interface_change(tmp_path):
    def drop_helper_and_rename(ptx, **kw):
        return F.OptimizeOutcome(ptx=ptx.replace("_Z3fooi", "_Z3bari"), changed=True)

    p, res = _swap(tmp_path, drop_helper_and_rename)
    assert "visible symbols" in res.error and p.read_text() == PTX


def test_swap_allows_private_function_removal(tmp_path):
    def drop_private(ptx, **kw):
        return F.OptimizeOutcome(ptx=ptx.replace(".func helper()\n{\n\tret;\n}\n", ""), changed=True)

    p, res = _swap(tmp_path, drop_private)
    assert res.changed and "helper" not in p.read_text()


def test_swap_timeout(tmp_path):
    t0 = time.monotonic()
    p, res = _swap(tmp_path, F.slow, timeout=0.3)
    assert res.error == "optimizer timed out after 0.3 s" and time.monotonic() - t0 < 5


def test_resolve_optimizer():
    assert swap.resolve_optimizer("tests.driver.fake_optimizers:identity") is F.identity
    from superopt.api import optimize_ptx
    assert swap.resolve_optimizer(None) is optimize_ptx
    with pytest.raises(ValueError):
        swap.resolve_optimizer("nocolon")


# ---- the GPU lock --------------------------------------------------------------------------


def test_gpu_lock_is_exclusive_across_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_LOCK_DIR", str(tmp_path))
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\nfrom superopt.judge.gpu_lock import gpu_lock\n"
         "with gpu_lock('GPU-1'):\n    print('held', flush=True)\n    time.sleep(30)\n"],
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2])),
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(gpu_lock.LockTimeout):
            with gpu_lock.gpu_lock("GPU-1", timeout=0.2):
                pass
        with gpu_lock.gpu_lock("GPU-2", timeout=0):      # another GPU is free
            pass
    finally:
        holder.kill()
        holder.wait()
    with gpu_lock.gpu_lock("GPU-1", timeout=5):          # released when the holder died
        pass
