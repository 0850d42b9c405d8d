"""``superopt tune``: the build / capture / rebuild / check loop, on the CPU with the capture
replaced by a stand-in (the real capture is tested on a GPU in test_capture_native.py) and a
build command that is a real shell script recording the environment of each build."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from superopt.specs.capture import runner
from superopt.specs.capture.tune import tune_command

BUILD = """#!/bin/sh
echo "mode=${NVCC_PLUS_MODE:-} capture=${NVCC_PLUS_CAPTURE:-} lock=${NVCC_PLUS_LOCK:-}" >> "$LOG"
if [ -n "${NVCC_PLUS_REPORT_DIR:-}" ] && [ -z "${NO_RECORD:-}" ]; then echo '{}' > "$NVCC_PLUS_REPORT_DIR/app.cu.json"; fi
exit ${BUILD_RC:-0}
"""


def _capture_doc(ms):
    return {"format": "nvcc-plus-capture", "version": 1, "program": ["./app"], "exit_code": 0, "total_ms": ms,
            "errors": [], "kernels": {"_Z1kv": {"launches": 1, "total_ms": ms, "shapes": []}}}


@pytest.fixture
def setup(tmp_path, monkeypatch):
    script = tmp_path / "build.sh"
    script.write_text(BUILD)
    script.chmod(0o755)
    log = tmp_path / "log"
    monkeypatch.setenv("LOG", str(log))
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NVCC_PLUS_SEARCH", raising=False)
    monkeypatch.chdir(tmp_path)
    runs = []
    exits = {"first": 0, "tuned": 0}

    def fake_run_capture(argv, out, data=False, cap_bytes=0, **kw):
        runs.append({"argv": list(argv), "out": str(out), "data": data})
        tuned = len(runs) > 1
        Path(out).write_text(json.dumps(_capture_doc(8.0 if tuned else 10.0)))
        return exits["tuned" if tuned else "first"]

    monkeypatch.setattr(runner, "run_capture", fake_run_capture)
    return {"build": str(script), "log": log, "runs": runs, "exits": exits, "tmp": tmp_path}


def test_the_loop_builds_plain_captures_rebuilds_with_the_capture_and_checks(setup):
    r = CliRunner().invoke(tune_command, ["--build", setup["build"], "--", "./app", "-n", "3"])
    assert r.exit_code == 0, r.output
    builds = setup["log"].read_text().splitlines()
    cap = str((setup["tmp"] / "nvcc-plus.capture.json").resolve())
    assert builds == ["mode=off capture= lock=", f"mode= capture={cap} lock=write"]
    assert [x["data"] for x in setup["runs"]] == [True, False]
    assert setup["runs"][0]["argv"] == ["./app", "-n", "3"]
    assert "10.000 ms -> 8.000 ms (1.250x)" in r.output and "exits 0 as before" in r.output


def test_a_changed_exit_code_fails_the_tune(setup):
    setup["exits"]["tuned"] = 1
    r = CliRunner().invoke(tune_command, ["--build", setup["build"], "--", "./app"])
    assert r.exit_code == 1 and "exited 1, the captured run 0" in r.output, r.output


@pytest.mark.parametrize("what, env, message", [
    ("failing build", {"BUILD_RC": "3"}, "exited 3"),
    ("build compiling nothing", {"NO_RECORD": "1"}, "compiled nothing through nvcc-plus"),
])
def test_failing_steps_are_named(setup, monkeypatch, what, env, message):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    r = CliRunner().invoke(tune_command, ["--build", setup["build"], "--no-lock", "--", "./app"])
    assert r.exit_code == 2 and message in r.output, (what, r.output)


def test_a_program_failing_under_capture_tunes_nothing(setup):
    setup["exits"]["first"] = 4
    r = CliRunner().invoke(tune_command, ["--build", setup["build"], "--", "./app"])
    assert r.exit_code == 2 and "exited 4 under the capture" in r.output
    assert len(setup["log"].read_text().splitlines()) == 1      # no rebuild


@pytest.mark.parametrize("search, builds_at_waits", [("now", [1]), ("deferred", [1, 2])])
def test_tune_waits_for_the_queue_before_it_rebuilds(setup, monkeypatch, search, builds_at_waits):
    """Searches queued by earlier deferred builds are waited for before the rebuild; in deferred
    mode the rebuild only queues its own, so tune waits for them and builds once more."""
    from superopt.specs.capture import tune as tune_mod
    monkeypatch.setenv("NVCC_PLUS_SEARCH", search)
    waits = []
    monkeypatch.setattr(tune_mod, "_wait_for_queue",
                        lambda echo: waits.append(len(setup["log"].read_text().splitlines())))
    r = CliRunner().invoke(tune_command, ["--build", setup["build"], "--", "./app"])
    assert r.exit_code == 0, r.output
    builds = setup["log"].read_text().splitlines()
    assert waits == builds_at_waits
    assert len(builds) == 1 + len(builds_at_waits) and len(set(builds[1:])) == 1      # the rebuilds' settings
    if search == "deferred":
        assert "applying the searches queued by the rebuild" in r.output


def test_tune_really_waits_for_a_queued_search(setup, monkeypatch):
    from superopt.config.resolved import Settings
    from superopt.specs.capture import tune as tune_mod
    from superopt.store import queue as q
    qu = q.Queue(setup["tmp"] / "cache")
    qu.add(q.make_entry("// ptx", target="sm_90", source=None, kernels=["k"], settings=Settings({})), q.QueueLimits())
    started = []
    monkeypatch.setattr(q, "start_runner", lambda queue, limits, **kw: started.append(1) or None)
    lines = []
    tune_mod._wait_for_queue(lines.append)
    # no runner could start: tune says so and goes on (it does not hang)
    assert started == [1] and any("no runner works on them" in m for m in lines), lines
