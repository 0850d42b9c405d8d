"""The queue runner (superopt.decide.queue_runner): each of its limits fires (budget, the hard stop
behind it, idle exit), a killed runner loses nothing and its slot and entry are taken over, and a
drained queue's decisions are what the next deferred compilation applies."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from superopt.config.resolved import Settings
from superopt.decide import queue_runner as qr
from superopt.optimize import optimize_module
from superopt.store import queue as q
from tests.deferred.conftest import KERNELS, PTX, ROOT, SRC


def fill(qu: q.Queue, n: int) -> list[str]:
    names = []
    for i in range(n):
        entry = q.make_entry(PTX + f"\n// {i}\n", target="sm_90", source=SRC, kernels=KERNELS, settings=Settings({}))
        names.append(qu.add(entry, q.QueueLimits()).name)
    return names


class Spender:
    """A stand-in for the pipeline: spends ``seconds`` per entry (past the deadline if told to)."""

    def __init__(self, seconds: float, honour_deadline: bool = True):
        self.seconds, self.honour, self.calls = seconds, honour_deadline, []

    def __call__(self, doc, deadline):
        self.calls.append((doc["ptx"], deadline))
        end = time.time() + self.seconds
        if self.honour and deadline is not None:
            end = min(end, deadline)
        while time.time() < end:
            time.sleep(0.02)
        return {"kernels": [{"status": "kept-baseline"}], "messages": []}


def test_the_budget_stops_the_runner_and_the_rest_waits(env):
    qu = q.Queue(env / "cache")
    names = fill(qu, 3)
    spend = Spender(1.5)
    runner = qr.Runner(qu, q.QueueLimits(budget_s=3.0, idle_exit_s=30), process=spend)
    t0, wall0 = time.monotonic(), time.time()
    reason = runner.run()
    assert "queue budget is spent" in reason and "NVCC_PLUS_QUEUE_BUDGET" in reason
    assert len(spend.calls) == 1 and time.monotonic() - t0 < 3.0 + 2
    # the first entry got the budget as its deadline, the others wait for the next runner
    assert abs(spend.calls[0][1] - (wall0 + 3.0)) < 0.5
    assert [e.name for e in qu.listing()] == names[1:]
    assert qu.done_at(names[0]) is not None


def test_an_entry_running_past_the_budget_is_stopped_and_kept(env):
    qu = q.Queue(env / "cache")
    (name,) = fill(qu, 1)
    spend = Spender(30, honour_deadline=False)      # a search that ignores the deadline
    runner = qr.Runner(qu, q.QueueLimits(budget_s=3.0, idle_exit_s=0), process=spend)
    t0 = time.monotonic()
    reason = runner.run()
    took = time.monotonic() - t0
    assert 3.0 <= took < 3.0 + 1.0 + 1.5, took       # the hard stop: budget + grace (1 s at this budget)
    assert "budget is spent" in reason
    assert [e.name for e in qu.listing()] == [name]  # the entry stays: its remaining kernels still need a search
    assert (qu.attempts_dir / name).read_text().strip() == "0"   # a limit is not the entry's fault


def test_the_runner_exits_when_idle(env):
    qu = q.Queue(env / "cache")
    runner = qr.Runner(qu, q.QueueLimits(idle_exit_s=0.5), process=Spender(0))
    t0 = time.monotonic()
    reason = runner.run()
    assert "idle for 0.5 s" in reason and "NVCC_PLUS_QUEUE_IDLE_EXIT" in reason
    assert 0.5 <= time.monotonic() - t0 < 2.0
    assert qu.read_state(0)["state"] == "idle"


def test_an_old_entry_is_dropped_unrun(env):
    qu = q.Queue(env / "cache")
    old, new = fill(qu, 2)
    t = time.time() - 3 * 86400
    os.utime(qu.path(old), (t, t))
    spend = Spender(0)
    qr.Runner(qu, q.QueueLimits(max_age_days=2, idle_exit_s=0), process=spend).run()
    assert len(spend.calls) == 1 and spend.calls[0][0].endswith("// 1\n")
    assert qu.listing() == [] and qu.done_at(old) is None


def test_an_entry_that_keeps_killing_its_runner_is_dropped(env):
    qu = q.Queue(env / "cache")
    (name,) = fill(qu, 1)
    qu.set_attempts(name, q.MAX_ATTEMPTS)            # three runs began and never ended
    spend = Spender(0)
    qr.Runner(qu, q.QueueLimits(idle_exit_s=0), process=spend).run()
    assert spend.calls == [] and qu.listing() == []


def compile_deferred():
    return optimize_module(PTX, source=SRC, target="sm_90", settings=Settings({"search": "deferred"}))


def test_drained_decisions_are_applied_by_the_next_build(dry_run, monkeypatch):
    monkeypatch.setattr(q, "start_runner", lambda *a, **k: None)
    monkeypatch.setenv("NVCC_PLUS_LOCK", "write")
    first = compile_deferred()
    assert [k["status"] for k in first.records["kernels"]] == ["kept-baseline"] * 2
    # the entry runs with the compilation's settings, whatever this process's environment says
    monkeypatch.delenv("NVCC_PLUS_JUDGE")
    monkeypatch.delenv("NVCC_PLUS_LOCK")
    qu = q.Queue(dry_run / "cache")
    code, why = qr.drain(qu, q.QueueLimits(idle_exit_s=0, runners=1))
    assert code == 0 and why == "the queue is empty"
    assert qu.listing() == [] and qu.read_state(0)["done"] == 1
    monkeypatch.setenv("NVCC_PLUS_JUDGE", "bench.scale.dryrun:judge")
    second = compile_deferred()
    # NVCC_PLUS_LOCK=write travelled with the entry: the lockfile has them, and so does the cache
    assert second.changed and [k["status"] for k in second.records["kernels"]] == ["locked", "locked"]
    assert len(json.loads((dry_run / "nvcc-plus.lock").read_text())["decisions"]) == 2
    monkeypatch.setenv("NVCC_PLUS_LOCKFILE", str(dry_run / "none.lock"))
    third = compile_deferred()
    assert third.ptx == second.ptx and [k["status"] for k in third.records["kernels"]] == ["cached", "cached"]
    assert queue_is_empty(qu)


def queue_is_empty(qu) -> bool:
    return qu.size() == (0, 0)


def runner_cmd(env_dir, *extra) -> list[str]:
    return [sys.executable, "-m", "superopt.decide.queue_runner", "--cache-dir", str(env_dir / "cache"),
            "--runners", "1", "--idle-exit", "0", *extra]


def test_a_killed_runner_loses_nothing_and_is_taken_over(dry_run, monkeypatch):
    monkeypatch.setattr(q, "start_runner", lambda *a, **k: None)
    compile_deferred()
    qu = q.Queue(dry_run / "cache")
    (entry,) = qu.listing()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(runner_cmd(dry_run), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        end = time.monotonic() + 60
        while qu.read_state(0).get("state") != "busy":
            assert proc.poll() is None and time.monotonic() < end, proc.stderr.read().decode()
            time.sleep(0.1)
        time.sleep(0.5)                       # into the search (the entry's run takes 5 s and more here)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert [e.name for e in qu.listing()] == [entry.name]          # still queued
    status = qu.status()
    assert status["runners"][0]["running"] is False and "killed?" in status["runners"][0]["reason"]
    assert (qu.attempts_dir / entry.name).read_text().strip() == "1"
    # the next runner takes the dead one's slot and the entry
    code, why = qr.drain(qu, q.QueueLimits(idle_exit_s=0, runners=1))
    assert qu.listing() == [] and qu.read_state(0)["done"] == 1
    again = compile_deferred()
    assert [k["status"] for k in again.records["kernels"]] == ["cached", "cached"]


def test_one_runner_per_slot(env):
    qu = q.Queue(env / "cache")
    fd = qu.take_slot(0)
    try:
        assert qu.slot_running(0)
        assert q.start_runner(qu, q.QueueLimits()) is None          # a live runner: none started
        code, why = qr.drain(qu, q.QueueLimits(idle_exit_s=0))
        assert code == 0 and "has a live runner" in why
    finally:
        os.close(fd)
    assert not qu.slot_running(0)


def test_cache_wait_exit_codes(dry_run, monkeypatch):
    from click.testing import CliRunner
    from superopt.store.cache_cli import cache_group
    monkeypatch.setattr(q, "start_runner", lambda *a, **k: None)
    cli = CliRunner()
    assert cli.invoke(cache_group, ["wait", "--timeout", "5"]).exit_code == 0      # empty
    compile_deferred()
    stats = json.loads(cli.invoke(cache_group, ["stats", "--json"]).output)
    assert stats["queue"]["entries"] == 1 and stats["queue"]["bytes"] > len(PTX)
    r = cli.invoke(cache_group, ["wait", "--no-start", "--timeout", "5"])
    assert r.exit_code == 2 and "no runner works on them" in r.output
    qu = q.Queue(dry_run / "cache")
    fd = qu.take_slot(0)                  # a runner that holds its slot and says it is busy
    try:
        qu.write_state(0, pid=os.getpid(), state="busy", entry="x")
        t0 = time.monotonic()
        r = cli.invoke(cache_group, ["wait", "--timeout", "1"])
        assert r.exit_code == 1 and "after 1 s" in r.output and time.monotonic() - t0 < 4
        text = cli.invoke(cache_group, ["stats"]).output
        assert "queued searches            1" in text and "running (pid" in text and "busy with x" in text
    finally:
        os.close(fd)
    monkeypatch.undo()


def test_compilations_starting_at_once_start_one_runner(env):
    qu = q.Queue(env / "cache")
    limits = q.QueueLimits(idle_exit_s=0.5, runners=1)
    first = q.start_runner(qu, limits)
    second = q.start_runner(qu, limits)          # before the first holds its slot: the start lock says no
    assert first is not None and second is None
    assert first.wait(60) == 0
    log = qu.log_path.read_text()
    assert log.count("] started (budget") == 1 and "stopped: idle for 0.5 s" in log
    assert not qu.slot_running(0) and qu.read_state(0)["state"] == "stopped"
