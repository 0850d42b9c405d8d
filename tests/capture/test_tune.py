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
if [ -n "${NVCC_PLUS_REPORT_DIR:-}" ] && [ -z "${NO_RECORD:-}" ]; then
  if [ -n "${RECORD:-}" ]; then cp "$RECORD" "$NVCC_PLUS_REPORT_DIR/app.cu.json"; else echo '{}' > "$NVCC_PLUS_REPORT_DIR/app.cu.json"; fi
fi
exit ${BUILD_RC:-0}
"""


def _capture_doc(times: dict):
    return {"format": "nvcc-plus-capture", "version": 1, "program": ["./app"], "exit_code": 0,
            "total_ms": sum(times.values()), "errors": [],
            "kernels": {k: {"launches": 1, "total_ms": ms, "shapes": []} for k, ms in times.items()}}


def _phase(out: str) -> str:
    """Which run a capture path is: the data capture, a plain one for the spread, the tuned, the
    reverted."""
    for tag in ("before-", "tuned", "reverted"):
        if tag in Path(out).name:
            return tag.rstrip("-")
    return "data"


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
    # kernel -> ms per run: the data capture, the plain ones (in turn), the tuned, the reverted
    times = {"data": [{"_Z1kv": 10.5}], "before": [{"_Z1kv": 10.0}, {"_Z1kv": 10.0}],
             "tuned": [{"_Z1kv": 8.0}], "reverted": [{"_Z1kv": 8.0}]}

    def fake_run_capture(argv, out, data=False, cap_bytes=0, **kw):
        phase = _phase(str(out))
        runs.append({"argv": list(argv), "out": str(out), "data": data, "phase": phase})
        done = sum(r["phase"] == phase for r in runs) - 1
        Path(out).write_text(json.dumps(_capture_doc(times[phase][min(done, len(times[phase]) - 1)])))
        return exits["first" if phase in ("data", "before") else "tuned"]

    monkeypatch.setattr(runner, "run_capture", fake_run_capture)
    return {"build": str(script), "log": log, "runs": runs, "exits": exits, "tmp": tmp_path, "times": times}


def test_the_loop_builds_plain_captures_rebuilds_with_the_capture_and_checks(setup):
    r = CliRunner().invoke(tune_command, ["--build", setup["build"], "--", "./app", "-n", "3"])
    assert r.exit_code == 0, r.output
    builds = setup["log"].read_text().splitlines()
    cap = str((setup["tmp"] / "nvcc-plus.capture.json").resolve())
    assert builds == ["mode=off capture= lock=", f"mode= capture={cap} lock=write"]
    assert [(x["phase"], x["data"]) for x in setup["runs"]] == [("data", True), ("before", False),
                                                                 ("before", False), ("tuned", False)]
    assert setup["runs"][0]["argv"] == ["./app", "-n", "3"]
    assert "program kernel time 10.000 ms -> 8.000 ms (1.250x)" in r.output and "exits 0 as before" in r.output
    assert "no kernel reverted" in r.output


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


def _stored(tmp, kernels):
    """A lockfile and a cache holding a decision for each kernel, and the rebuild's record
    naming where (as ModuleRun.settle writes ``decision_keys``)."""
    from superopt.store.cache import DecisionCache
    from superopt.store.lockfile import Lockfile
    lock, cache = Lockfile(tmp / "nvcc-plus.lock"), DecisionCache(tmp / "cache")
    record = {"schema": "nvcc-plus/record", "schema_version": 1, "kernels": []}
    for name, changed in kernels.items():
        entry = {"kernel": name, "plan": [{"pass": "unroll", "params": {"factor": 4}}] if changed else [],
                 "ptx_hash": "abc" if changed else None, "status": "optimized" if changed else "kept-baseline",
                 "decision": "measured", "spec_origin": "captured"}
        lock.record(f"lock-{name}", entry)
        cache.put(f"cache-{name}", entry)
        record["kernels"].append({
            "kernel": name, "status": entry["status"], "winner": "unroll(factor=4)" if changed else None,
            "candidates": [{"id": "unroll(factor=4)", "fate": "winner", "plan": entry["plan"]}] if changed else [],
            "decision_keys": {"lock": f"lock-{name}", "lockfile": str(lock.path), "cache": f"cache-{name}",
                              "cache_file": str(cache.path(f"cache-{name}"))}})
    path = tmp / "record.json"
    path.write_text(json.dumps(record))
    return lock, cache, path


def test_a_kernel_slower_in_the_tuned_program_is_reverted_in_the_lock_and_the_cache(setup, monkeypatch):
    from superopt.store.cache import DecisionCache
    from superopt.store.lockfile import Lockfile
    tmp = setup["tmp"]
    lock, cache, record = _stored(tmp, {"_Z4fastv": True, "_Z4slowv": True, "_Z4keptv": False})
    monkeypatch.setenv("RECORD", str(record))
    setup["times"].update(
        data=[{"_Z4fastv": 10.0, "_Z4slowv": 5.0, "_Z4keptv": 2.0}],
        before=[{"_Z4fastv": 10.0, "_Z4slowv": 5.0, "_Z4keptv": 2.0},
                {"_Z4fastv": 10.1, "_Z4slowv": 5.05, "_Z4keptv": 2.0}],
        tuned=[{"_Z4fastv": 8.0, "_Z4slowv": 6.0, "_Z4keptv": 2.5}],
        reverted=[{"_Z4fastv": 8.0, "_Z4slowv": 5.0, "_Z4keptv": 2.0}])
    r = CliRunner().invoke(tune_command, ["--build", setup["build"], "--", "./app"])
    assert r.exit_code == 0, r.output
    # the slower kernel whose code nvcc-plus changed keeps nvcc's code from now on
    for stored in (Lockfile(lock.path).get("lock-_Z4slowv"), DecisionCache(cache.root).get("cache-_Z4slowv")):
        assert stored["plan"] == [] and stored["status"] == "kept-baseline" and stored["spec_origin"] == "captured"
        assert stored["reverted"]["by"] == "superopt tune" and stored["reverted"]["after_ms"] == 6.0
        assert stored["reverted"]["plan"] == [{"pass": "unroll", "params": {"factor": 4}}]
    # the faster one is untouched; the one whose code was nvcc's is only reported
    assert Lockfile(lock.path).get("lock-_Z4fastv")["plan"] and DecisionCache(cache.root).get("cache-_Z4fastv")["plan"]
    assert "_Z4keptv: slower (2.000 -> 2.500 ms) but nvcc-plus kept nvcc's code for it" in r.output
    # rebuilt once more, and the program checked again under a capture
    builds = setup["log"].read_text().splitlines()
    assert len(builds) == 3 and builds[1] == builds[2]
    assert [x["phase"] for x in setup["runs"]] == ["data", "before", "before", "tuned", "reverted"]
    final = r.output.strip().splitlines()[-1]
    assert "program kernel time 17.075 ms -> 15.000 ms" in final
    assert "reverted (slower in the program): _Z4slowv (5.025 -> 6.000 ms)" in final
    assert "_Z4fastv" not in final


def test_a_change_inside_the_spread_is_not_a_slowdown():
    from superopt.specs.capture.tune import MIN_SPREAD, slower_kernels, spread_of
    runs = [_capture_doc({"noisy": 5.0, "steady": 4.0}), _capture_doc({"noisy": 5.5, "steady": 4.0})]
    before, spread = spread_of(runs)
    assert before == {"noisy": 5.25, "steady": 4.0}
    assert spread["noisy"] == pytest.approx(0.5 / 5.25) and spread["steady"] == MIN_SPREAD
    slow = slower_kernels(before, spread, {"noisy": 5.7, "steady": 4.03})
    assert slow == []                                     # +8.6% < 9.5% spread; +0.75% < 1%
    slow = slower_kernels(before, spread, {"noisy": 5.8, "steady": 4.1})
    assert [s["kernel"] for s in slow] == ["noisy", "steady"]


def test_the_plain_build_must_exit_the_same_on_every_run(setup):
    """A second plain run exiting otherwise: the spread cannot be measured, tune stops."""
    calls = []
    orig = runner.run_capture

    def flaky(argv, out, data=False, cap_bytes=0, **kw):
        calls.append(out)
        code = orig(argv, out, data=data, cap_bytes=cap_bytes)
        return 3 if "before-2" in str(out) else code

    runner.run_capture = flaky
    try:
        r = CliRunner().invoke(tune_command, ["--build", setup["build"], "--", "./app"])
    finally:
        runner.run_capture = orig
    assert r.exit_code == 2 and "exited differently on a second run" in r.output
