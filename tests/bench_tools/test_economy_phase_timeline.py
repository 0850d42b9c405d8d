"""bench/economy/phase_timeline.py: what each compilation did over a build, and while the GPU idled."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.economy.phase_timeline import build_timeline, read_phases


def span(pid, phase, start, end, kernel="k"):
    return {"pid": pid, "thread": 1, "kernel": kernel, "phase": phase, "start": start, "end": end}


def step(kind, asked, got, released, pid):
    return {"gpu": "GPU-x", "kind": kind, "pid": pid, "thread": 1, "asked": asked, "got": got, "released": released}


def test_each_cell_is_the_innermost_thing_and_idle_time_says_what_compilations_did():
    phases = [span(1, "compilation", 0.0, 10.0, "a.cu"), span(2, "compilation", 2.0, 6.0, "b.cu"),
              span(1, "check", 1.0, 5.0), span(1, "ptxas", 1.0, 2.0),        # ptxas inside the check
              span(2, "sanitize", 3.0, 6.0)]
    steps = [step("check", 2.0, 2.5, 4.0, pid=1), step("sanitize", 4.0, 4.0, 5.0, pid=2)]
    t = build_timeline(phases, steps)
    assert t["compilations"] == 2 and t["span_s"] == pytest.approx(10.0)
    a = t["by_label_s"]
    assert a["ptxas"] == pytest.approx(1.0, abs=0.02)
    assert a["gpu_wait"] == pytest.approx(0.5, abs=0.02) and a["gpu:check"] == pytest.approx(1.5, abs=0.02)
    assert a["check"] == pytest.approx(1.0, abs=0.03)          # 1..5 less ptxas, the wait, the hold
    assert a["sanitize"] == pytest.approx(2.0, abs=0.02) and a["gpu:sanitize"] == pytest.approx(1.0, abs=0.02)
    assert a["driver"] == pytest.approx(1.0 + 5.0 + 1.0, abs=0.03)   # a: 0..1, 5..10; b: 2..3
    assert sum(a.values()) == pytest.approx(10.0 + 4.0, abs=0.05)
    idle = t["idle"]                 # nobody held or waited: 0..2 and 5..10
    assert idle["s"] == pytest.approx(7.0, abs=0.03)
    assert idle["by_label_s"]["sanitize"] == pytest.approx(1.0, abs=0.02)   # b's 5..6
    assert idle["by_label_s"]["ptxas"] == pytest.approx(1.0, abs=0.02)
    assert t["running_s"]["2"] == pytest.approx(4.0, abs=0.02) and t["running_s"]["1"] == pytest.approx(6.0, abs=0.02)
    assert t["last"]["source"] == "a.cu" and t["last"]["end_s"] == pytest.approx(10.0)
    assert [c["source"] for c in t["per_compilation"]] == ["a.cu", "b.cu"]


def test_read_phases_skips_torn_lines_and_no_compilation_is_no_timeline(tmp_path):
    p = tmp_path / "phases.jsonl"
    p.write_text(json.dumps(span(1, "ptxas", 0, 1)) + "\n{torn\n" + json.dumps(span(1, "x", 2, 1)) + "\n")
    assert [r["phase"] for r in read_phases(p)] == ["ptxas"]
    assert build_timeline(read_phases(p), []) == {"compilations": 0}
    assert read_phases(tmp_path / "missing") == []


def test_a_searchs_phases_write_the_log_with_its_kernel(tmp_path, monkeypatch):
    from superopt.judge.phases import Phases, phase, recording
    log = tmp_path / "phases.jsonl"
    monkeypatch.setenv("SUPEROPT_PHASE_LOG", str(log))
    with recording(Phases("_Z3fooPf")):
        with phase("check"):
            with phase("ptxas"):
                pass
    with phase("spec"):              # outside a search: nothing recorded, nothing logged
        pass
    rows = read_phases(log)
    assert [(r["phase"], r["kernel"], r["pid"]) for r in rows] == [("ptxas", "_Z3fooPf", os.getpid()),
                                                                  ("check", "_Z3fooPf", os.getpid())]
    assert rows[1]["start"] <= rows[0]["start"] <= rows[0]["end"] <= rows[1]["end"]


def test_the_bench_wrapper_logs_each_compilations_span(tmp_path):
    """The economy bench's nvcc-plus wrapper writes the compilation's span around nvcc_plus's main
    (here a stand-in nvcc_plus package that exits with 3: the span is written, the status kept)."""
    from bench.economy.run import wrapper
    tree = tmp_path / "tree"
    (tree / "nvcc_plus").mkdir(parents=True)
    (tree / "nvcc_plus" / "__init__.py").write_text("")
    (tree / "nvcc_plus" / "__main__.py").write_text("import sys\nsys.exit(3)\n")
    compiler = wrapper(tmp_path, tree, "after")
    log = tmp_path / "phases.jsonl"
    env = dict(os.environ, SUPEROPT_PHASE_LOG=str(log))
    r = subprocess.run([compiler, "-c", "src/k.cu", "-o", "k.o"], env=env, cwd=tmp_path)
    assert r.returncode == 3
    (row,) = read_phases(log)
    assert row["phase"] == "compilation" and row["kernel"] == "k.cu" and row["start"] <= row["end"]
    assert Path(sys.executable).exists()


def test_the_profiled_wrapper_profiles_every_thread_of_a_compilation(tmp_path):
    """The searches run in threads: a profile of the main thread alone misses them."""
    from bench.economy.run import wrapper
    from bench.economy.worker_profile import summarize
    tree = tmp_path / "code"
    (tree / "nvcc_plus").mkdir(parents=True)
    (tree / "nvcc_plus" / "__init__.py").write_text("")
    (tree / "nvcc_plus" / "__main__.py").write_text(
        "import threading\n"
        "def searched_in_a_thread():\n    sum(range(1000))\n"
        "t = threading.Thread(target=searched_in_a_thread)\nt.start()\nt.join()\n")
    prof = tmp_path / "prof"
    compiler = wrapper(tmp_path, tree, "tune", prof)
    r = subprocess.run([compiler, "-c", "src/k.cu"], cwd=tmp_path)
    assert r.returncode == 0
    main_thread = [p for p in prof.glob("tune-*.prof") if "-t" not in p.name]
    threads = list(prof.glob("tune-*-t*.prof"))
    # from Python 3.12 the main thread's profile sees every thread (one profiler at a time)
    assert len(main_thread) == 1 and len(threads) == (0 if sys.version_info >= (3, 12) else 1)
    table = summarize(prof, pattern="tune-*.prof")
    assert table["workers"] == 1 + len(threads)
    assert any("searched_in_a_thread" in row["function"] for row in table["by_cumulative"])
