"""bench/economy/timeline.py: the split of a build's wall time by what held the GPU."""
from __future__ import annotations

import json

import pytest

from bench.economy.timeline import read_steps, timeline


def step(kind, asked, got, released, pid=1):
    return {"gpu": "GPU-x", "kind": kind, "pid": pid, "thread": 1, "asked": asked, "got": got, "released": released}


def test_the_split_adds_up_to_the_span_and_each_part_is_what_held_the_gpu():
    rows = [step("check", 0.0, 0.0, 2.0), step("check", 1.0, 1.0, 3.0, pid=2),      # overlapping checks 0..3
            step("time", 2.5, 3.5, 4.5, pid=3),          # waits 2.5..3.5 (3..3.5 nobody holds)
            step("sanitize", 5.0, 5.0, 7.0), step("check", 6.0, 6.0, 6.5, pid=2)]
    t = timeline(rows, 0.0, 10.0)
    assert t["check_s"] == pytest.approx(3.0 + 0.5)
    assert t["time_s"] == pytest.approx(1.0)
    assert t["idle_waited_s"] == pytest.approx(0.5)
    assert t["sanitize_only_s"] == pytest.approx(1.5)
    assert t["idle_s"] == pytest.approx(10.0 - 3.5 - 1.0 - 0.5 - 1.5)
    assert sum(t[k] for k in ("time_s", "check_s", "sanitize_only_s", "idle_waited_s", "idle_s")) == \
        pytest.approx(10.0)
    assert t["checks_overlapping_s"] == pytest.approx(1.0)
    assert t["mean_waiting"] == pytest.approx(1.0 / 10.0)
    assert t["by_kind"]["time"] == {"steps": 1, "held_s": 1.0, "waited_s": 1.0, "longest_wait_s": 1.0}


def test_a_timing_counts_as_timing_even_under_a_shared_step_logged_at_the_same_instant():
    rows = [step("check", 0.0, 0.0, 1.0), step("time", 0.5, 1.0, 2.0)]
    t = timeline(rows)
    assert t["span_s"] == 2.0 and t["time_s"] == 1.0 and t["check_s"] == 1.0 and t["idle_waited_s"] == 0.0


def test_read_steps_skips_torn_or_impossible_lines(tmp_path):
    p = tmp_path / "steps.jsonl"
    p.write_text(json.dumps(step("check", 0, 1, 2)) + "\n{not json\n" + json.dumps(step("time", 3, 2, 4)) + "\n"
                 + json.dumps(step("other", 0, 0, 1)) + "\n")
    assert [r["kind"] for r in read_steps(p)] == ["check"]
    assert read_steps(tmp_path / "missing") == [] and timeline([]) == {"steps": 0}


def test_gpu_steps_write_the_log_the_timeline_reads(tmp_path, monkeypatch):
    from superopt.judge import devices
    monkeypatch.setenv("NVCC_PLUS_LOCK_DIR", str(tmp_path / "locks"))
    log = tmp_path / "steps.jsonl"
    monkeypatch.setenv("SUPEROPT_GPU_STEP_LOG", str(log))
    for kind in ("check", "time", "sanitize"):
        with devices.gpu_step("GPU-fake", kind):
            pass
    rows = read_steps(log)
    assert [r["kind"] for r in rows] == ["check", "time", "sanitize"]
    assert all(r["gpu"] == "GPU-fake" and r["asked"] <= r["got"] <= r["released"] for r in rows)
