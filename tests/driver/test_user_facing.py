"""What users see from the driver: --plus-help/--plus-version, the one-line summary after a
search, live progress only on a terminal, nvcc-plus.toml found from the source's folder
(CMake compiles in the build directory) and unknown keys named with the closest one."""
from __future__ import annotations

import io
import os
import pty
import subprocess

import pytest

from nvcc_plus import config as C
from nvcc_plus.progress_view import ProgressView, wanted
from nvcc_plus.summary import module_summary
from tests.driver.helpers import NVCC_PLUS, base_env, needs_nvcc, opt_env, plus, plus_lines, run


def test_plus_help_exits_0_and_lists_every_setting(tmp_path):
    from superopt.config.settings import SETTINGS
    # A real nvcc that would fail loudly proves --plus-help never reaches nvcc.
    env = base_env(NVCC_PLUS_REAL_NVCC="/bin/false")
    proc = run([*NVCC_PLUS, "--plus-help"], tmp_path, env)
    out = proc.stdout.decode()
    assert proc.returncode == 0 and proc.stderr == b""
    assert "--plus-mode" in out and "--plus-progress" in out
    missing = [s.env for s in SETTINGS if s.env not in out]
    assert missing == []


def test_plus_version_names_the_real_nvcc(tmp_path):
    env = base_env(NVCC_PLUS_REAL_NVCC="/bin/true")
    proc = run([*NVCC_PLUS, "--plus-version", "-c", "nothing.cu"], tmp_path, env)
    assert proc.returncode == 0
    assert proc.stdout.decode().splitlines()[0].startswith("nvcc-plus ")
    assert "real nvcc: /bin/true" in proc.stdout.decode()


def test_summary_counts_searched_kept_and_time():
    records = [{"kernels": [
        {"kernel": "a", "signature": "saxpy(int, float*)", "status": "optimized", "seconds": 3.0,
         "winner": "c2", "decision": "measured", "candidates": [{"id": "c2", "speedup": 1.184}]},
        {"kernel": "b", "status": "kept-baseline", "seconds": 2.0, "candidates": []},
        {"kernel": "c", "status": "not-verifiable", "seconds": 0.1, "reason": "not verifiable: x"},
        {"kernel": "d", "status": "cached", "decision": "cached"},
    ]}]
    line = module_summary(records, 5.25)
    assert line == ("searched 3 kernels in 5.2 s: kept 1 rewrite (saxpy 1.18x), 1 kept nvcc's code, "
                    "1 not verifiable (superopt optimize FILE shows the spec to add)")


def test_no_summary_when_nothing_was_searched():
    assert module_summary([{"kernels": [{"kernel": "d", "status": "locked"}]}], 0.1) is None
    assert module_summary([], 0.0) is None


@needs_nvcc
def test_driver_prints_one_summary_line_per_module_and_no_progress_off_a_terminal(src):
    proc = plus(["-c", "k.cu", "-o", "k.o"], src, opt_env("searcher"))
    lines = plus_lines(proc.stderr)
    assert len(lines) == 1, proc.stderr.decode()
    assert lines[0].startswith("nvcc-plus: k.cu: compute_75: searched 2 kernels in ")
    assert "kept 1 rewrite (saxpy 1.25x), 1 kept nvcc's code" in lines[0]
    # Not a terminal: no progress line, no escape sequences.
    assert b"\x1b[" not in proc.stderr and b"searching" not in proc.stderr


@needs_nvcc
def test_live_progress_on_a_terminal(src):
    """stderr is a pseudo-terminal: the live line shows the kernel being searched."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*NVCC_PLUS, "-c", "k.cu", "-o", "k.o"], cwd=src,
                            env={**opt_env("searcher"), "TERM": "xterm"},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=120)
    os.close(master)
    assert proc.returncode == 0
    assert b"searching saxpy" in seen and b"searched 2 kernels" in seen


def test_progress_view_only_when_wanted():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    assert wanted("auto", Tty()) and not wanted("auto", io.StringIO())
    assert wanted("on", io.StringIO()) and not wanted("off", Tty())
    view = ProgressView("k.cu compute_90", stream=io.StringIO())
    view.kernel_finished("k", "optimized", 1.0)      # before any start: nothing, no error
    view.close()


def test_config_found_from_the_source_folder_when_building_elsewhere(tmp_path):
    """Under CMake the working directory is the build directory: the project's file is
    found from the source's folder, and the working directory's own file comes first."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()
    (project / "nvcc-plus.toml").write_text('mode = "roundtrip"\n')
    build = tmp_path / "build"
    build.mkdir()
    cfg = C.load({}, {}, cwd=str(build), source_dirs=[str(project / "src")])
    assert cfg.mode == "roundtrip" and cfg.config_path == str(project / "nvcc-plus.toml")
    (build / "nvcc-plus.toml").write_text('mode = "off"\n')
    assert C.load({}, {}, cwd=str(build), source_dirs=[str(project / "src")]).mode == "off"


def test_unknown_toml_key_names_file_and_closest_key(tmp_path):
    (tmp_path / "nvcc-plus.toml").write_text('budjet = 5\n[driver]\ntimeot = 3\n[superopt]\nbudget = 3\n')
    cfg = C.load({}, {}, cwd=str(tmp_path))
    path = str(tmp_path / "nvcc-plus.toml")
    assert f"{path}: unknown key 'budjet' ignored (did you mean 'budget'?)" in cfg.problems
    assert f"{path}: unknown key [driver] 'timeot' ignored (did you mean 'timeout'?)" in cfg.problems
    assert any("'superopt'" in p for p in cfg.problems)


@needs_nvcc
def test_unknown_key_warning_reaches_the_user(src):
    (src / "nvcc-plus.toml").write_text('mdoe = "off"\n')
    proc = plus(["-c", "k.cu", "-o", "k.o"], src, opt_env("identity"))
    assert any("unknown key 'mdoe' ignored (did you mean 'mode'?)" in ln for ln in plus_lines(proc.stderr))
