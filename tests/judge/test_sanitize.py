"""superopt.judge.sanitize on the CPU: log parsing, and the decision with a stand-in sanitizer."""
import sys
from pathlib import Path

import pytest

from superopt.judge.sanitize import parse_log, sanitize_pair
from tests.judge.judge_fake_backend import fake_ptx
from tests.judge.planted import judge_spec, ptx

HERE = Path(__file__).parent
SPEC = judge_spec(3000)
BASE = fake_ptx("baseline")


@pytest.fixture
def fake_sanitizer(tmp_path, monkeypatch):
    """A 'compute-sanitizer' executable that runs tests/judge/fake_sanitizer.py."""
    exe = tmp_path / "compute-sanitizer"
    root = HERE.parent.parent
    exe.write_text(f"#!/bin/sh\nPYTHONPATH={root} exec {sys.executable} {HERE / 'fake_sanitizer.py'} \"$@\"\n")
    exe.chmod(0o755)
    return str(exe)


def test_parse_real_summaries():
    mem = ("========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 16 bytes\n"
           "=========     at vadd+0x1b0\n========= ERROR SUMMARY: 1 error\n")
    assert (parse_log(mem, "memcheck").errors, parse_log(mem, "memcheck").status) == (1, "ok")
    assert parse_log(mem, "memcheck").detail.startswith("Invalid __global__ read of size 16")
    race = ("========= Error: Race reported between Write access at k+0x40\n"
            "========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)\n")
    assert parse_log(race, "racecheck").errors == 1
    assert parse_log("========= ERROR SUMMARY: 0 errors\n", "memcheck").errors == 0
    # a kernel that faults under memcheck ends the worker before the summary: count the reports
    cut = ("========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 4 bytes\n"
           "=========     at judge_kernel+0x1b0\n=========     Address 0x7f00 is out of bounds\n"
           "========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) on CUDA API call to cuEventQuery.\n")
    got = parse_log(cut, "memcheck")
    assert got.status == "ok" and got.errors == 2 and got.detail.startswith("Invalid __global__ read")
    nothing = parse_log("========= COMPUTE-SANITIZER\n=========\n", "memcheck")
    assert nothing.status == "not-run" and "no summary" in nothing.detail


def test_clean_candidate(fake_sanitizer):
    r = sanitize_pair(BASE, fake_ptx("nan_payload"), SPEC, sanitizer=fake_sanitizer, timeout=30)
    assert r.status == "clean", r.reason
    assert set(r.runs) == {"memcheck", "racecheck"}
    assert all(run["candidate"].errors == 0 for run in r.runs.values())


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_candidate_with_errors_the_baseline_lacks_is_rejected(fake_sanitizer, tool):
    r = sanitize_pair(BASE, fake_ptx("baseline") + f"\n// plant: {tool}\n", SPEC, sanitizer=fake_sanitizer,
                      timeout=30)
    assert r.rejected and r.reason.startswith(f"compute-sanitizer {tool}: 1 error(s) in the candidate, 0 in nvcc's")
    assert r.to_dict()["runs"][tool]["candidate"]["errors"] == 1


def test_errors_nvcc_code_has_too_are_not_the_candidates(fake_sanitizer):
    racy = fake_ptx("baseline") + "\n// plant: racecheck\n"
    r = sanitize_pair(racy, racy + "// rewritten\n", SPEC, sanitizer=fake_sanitizer, timeout=30)
    assert r.status == "clean" and "racecheck: nvcc's code has 1" in r.reason


def test_sanitizer_that_cannot_attach_rejects_nothing(fake_sanitizer, monkeypatch):
    monkeypatch.setenv("FAKE_SANITIZER_FAIL", "1")
    r = sanitize_pair(BASE, fake_ptx("baseline") + "\n// plant: memcheck\n", SPEC, sanitizer=fake_sanitizer,
                      timeout=30)
    assert r.status == "unavailable" and not r.rejected


def test_no_sanitizer_installed(monkeypatch):
    import superopt.judge.sanitize as san
    monkeypatch.setattr(san, "find_sanitizer", lambda: None)
    r = sanitize_pair(BASE, BASE, SPEC)
    assert r.status == "unavailable" and "not installed" in r.reason


# ---------------------------------------------------------------- on a GPU, with the real tool

def _planted():
    import re
    base = ptx("baseline")
    # an extra volatile read of y[i + 1]: the last thread reads 4 bytes past the end of y;
    # the result is unchanged, so only memcheck can see it
    oob, k = re.subn(r"(ld\.global\.nc\.f32\s+%f7, \[%rd9\];)", r"\1\n\tld.volatile.global.f32 \t%f5, [%rd9+4];", base)
    # no barrier between the shared-memory writes and the mirrored reads: a race
    race, k2 = re.subn(r"\n\s*bar\.sync\s+0;", "", base)
    assert k == 1 and k2 == 1
    return base, oob, race


@pytest.mark.gpu
def test_real_sanitizer_finds_a_planted_overrun_and_race():
    from superopt.judge.sanitize import find_sanitizer
    if find_sanitizer() is None:
        pytest.skip("compute-sanitizer is not installed")
    base, oob, race = _planted()
    clean = sanitize_pair(base, base, SPEC)
    if clean.status == "unavailable":
        pytest.skip(f"compute-sanitizer cannot run here: {clean.reason}")
    assert clean.status == "clean", clean.reason
    r = sanitize_pair(base, oob, SPEC, tools=("memcheck",))
    assert r.rejected and "memcheck" in r.reason, r.to_dict()
    r = sanitize_pair(base, race, SPEC, tools=("racecheck",))
    assert r.rejected and "racecheck" in r.reason, r.to_dict()


def test_a_clean_candidate_spares_nvcc_codes_run(fake_sanitizer, monkeypatch):
    """The candidate runs first; with no error in it nvcc's code cannot have fewer, so its run
    (a second process under the tool) is skipped and the record says so."""
    import superopt.judge.sanitize as san
    ran = []
    real = san.run_under

    def counting(tool, ptx_text, *a, **kw):
        ran.append((tool, "candidate" if ptx_text != BASE else "baseline"))
        return real(tool, ptx_text, *a, **kw)

    monkeypatch.setattr(san, "run_under", counting)
    r = sanitize_pair(BASE, fake_ptx("nan_payload"), SPEC, sanitizer=fake_sanitizer, timeout=30)
    # the tools' candidate runs at once (sanitize.candidate_runs): in either order
    assert r.status == "clean" and sorted(ran) == [("memcheck", "candidate"), ("racecheck", "candidate")]
    assert r.runs["memcheck"]["baseline"].status == "not-run" and "not needed" in r.runs["memcheck"]["baseline"].detail
    ran.clear()
    r = sanitize_pair(BASE, fake_ptx("baseline") + "\n// plant: memcheck\n", SPEC, sanitizer=fake_sanitizer,
                      timeout=30)
    assert r.rejected and sorted(ran[:2]) == [("memcheck", "candidate"), ("racecheck", "candidate")]
    assert ran[2:] == [("memcheck", "baseline")]                  # nvcc's code only where the candidate erred


def test_sanitizer_runs_are_sanitize_steps_not_checks(fake_sanitizer, monkeypatch, tmp_path):
    """A run under compute-sanitizer holds the GPU as a ``sanitize`` step: shared with checks even
    when NVCC_PLUS_GPU_CHECKS=serial makes checks take turns (its seconds of instrumented loading
    would stop every other compilation's checks), never with a timing."""
    from contextlib import contextmanager

    from superopt.judge import devices
    kinds = []
    real = devices.gpu_step

    @contextmanager
    def recording(gpu, kind):
        kinds.append(kind)
        with real(gpu, kind):
            yield

    monkeypatch.setenv("NVCC_PLUS_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr(devices, "gpu_step", recording)
    r = sanitize_pair(BASE, fake_ptx("nan_payload"), SPEC, sanitizer=fake_sanitizer, timeout=30)
    assert r.status == "clean", r.reason
    assert kinds and set(kinds) == {"sanitize"}


def test_the_candidates_tool_runs_run_at_once_and_a_failure_reaches_the_caller(monkeypatch, tmp_path):
    """sanitize.candidate_runs: one process per tool at the same time (each is mostly the
    sanitizer's start-up), results per tool; an exception in one (a GpuBusy at the deadline)
    is raised in the caller's thread."""
    import threading
    import time as _time

    from superopt.judge import devices, sanitize
    monkeypatch.setenv("NVCC_PLUS_LOCK_DIR", str(tmp_path / "locks"))
    spans, lock = {}, threading.Lock()

    def fake_run_under(tool, ptx, spec, inputs, *, sanitizer, timeout=120.0):
        t0 = _time.monotonic()
        _time.sleep(0.3)
        with lock:
            spans[tool] = (t0, _time.monotonic(), devices.current())
        return sanitize.ToolRun("ok", 0, f"{tool} clean")
    monkeypatch.setattr(sanitize, "run_under", fake_run_under)
    dev = devices.Device(0, "GPU-aaaaaaaa-1111-2222-3333-444444444444", "NVIDIA H200")
    with devices.assign(devices=[dev]):
        got = sanitize.candidate_runs(("memcheck", "racecheck"), "ptx", None, None, sanitizer="cs", timeout=5)
    assert {t: r.detail for t, r in got.items()} == {"memcheck": "memcheck clean", "racecheck": "racecheck clean"}
    (a0, a1, da), (b0, b1, db) = spans["memcheck"], spans["racecheck"]
    assert a0 < b1 and b0 < a1                       # they overlapped
    assert da == db == dev                           # on the caller's GPU

    def busy(tool, *a, **kw):
        if tool == "racecheck":
            raise devices.GpuBusy("no GPU became free in time")
        return sanitize.ToolRun("ok", 0, "clean")
    monkeypatch.setattr(sanitize, "run_under", busy)
    with pytest.raises(devices.GpuBusy):
        sanitize.candidate_runs(("memcheck", "racecheck"), "ptx", None, None, sanitizer="cs", timeout=5)
