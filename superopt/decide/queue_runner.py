"""The queue runner: runs the searches deferred compilations queued (:mod:`superopt.store.queue`).

``python -m superopt.decide.queue_runner --cache-dir DIR --slot N ...`` is what a deferred
compilation (and ``superopt cache wait``) starts, detached, when the slot has no live runner;
``superopt cache drain`` runs the same loop in the foreground. One runner per slot (the slot's
lock file decides); slot 0 starts the others (``NVCC_PLUS_QUEUE_RUNNERS``: a number, or one per
GPU searches may use). Each runner takes the oldest entry no other holds, and runs it as the
compilation would have: :func:`superopt.api.optimize_ptx` (the pipeline,
:func:`superopt.optimize.optimize_module`) with the entry's settings, in the entry's working
directory, with ``NVCC_PLUS_SEARCH=now``. Kernel searches lease GPUs the ordinary way
(:mod:`superopt.judge.devices`), so a runner and a build's searches never time on one GPU at once.

The runner is a caller of the pipeline like the driver and ``superopt optimize``; nothing in the
pipeline imports it.

Limits, each of which ends the loop or the entry, never silently:

* the budget (``--budget``, NVCC_PLUS_QUEUE_BUDGET): seconds this runner may spend on entries in
  its lifetime; each entry's run gets what is left as its deadline (no search starts after it)
  and an alarm a little after it (:class:`QueueStop`, a BaseException no ``except Exception``
  swallows); with less than a search's minimum left the runner stops and the entries stay;
* the entry's own NVCC_PLUS_TIMEOUT, as the compilation would have had it;
* the idle exit (``--idle-exit``): with nothing to do that long the runner exits;
* entry age (``--max-age`` days): older entries are dropped unrun.

An entry is removed only after its run returned (every decision made is stored by then). A run
stopped by a limit leaves the entry for the next runner (what was decided is cached, so the next
run resumes); an entry whose runs killed the runner :data:`~superopt.store.queue.MAX_ATTEMPTS`
times is dropped.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
import signal
import sys
import threading
import time

from superopt.store.queue import MAX_ATTEMPTS, Claim, Queue, QueueLimits, start_runner

STOP_GRACE_S = 30.0        # an entry's run is stopped this long after its soft deadline
POLL_MAX_S = 1.0


class QueueStop(BaseException):
    """An entry's run outlived the runner's budget or the entry's time limit (a BaseException on
    purpose, like nvcc_plus.swap.OptimizerTimeout: the search contains failures per candidate
    with ``except Exception``, which must not swallow a limit)."""


def log(msg: str, slot: int | None = None) -> None:
    stamp = _dt.datetime.now().isoformat(timespec="seconds")
    where = f"runner {slot} " if slot is not None else ""
    print(f"{stamp} [{where}pid {os.getpid()}] {msg}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _alarm(seconds: float | None, why: str):
    """Raise :class:`QueueStop` in this block after ``seconds`` (main thread; elsewhere the soft
    deadline alone limits)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum, frame):
        raise QueueStop(why)

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(1e-3, seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def entry_environment(doc: dict, cache_root):
    """The environment and working directory of the compilation that queued ``doc``, as far as
    nvcc-plus's settings go (settings read from the environment where they are used -- the
    lockfile, the GPUs, tool paths -- see the compilation's values, not this runner's), restored
    after."""
    from superopt.config.settings import SETTINGS
    snap = doc.get("settings") or {}
    saved = dict(os.environ)
    cwd = os.getcwd()
    try:
        for s in SETTINGS:
            os.environ.pop(s.env, None)
        os.environ.update({str(k): str(v) for k, v in (snap.get("extra_env") or {}).items()})
        os.environ.update({str(k): str(v) for k, v in (snap.get("env") or {}).items()})
        if saved.get("NVCC_PLUS_LLM_API_KEY"):
            os.environ["NVCC_PLUS_LLM_API_KEY"] = saved["NVCC_PLUS_LLM_API_KEY"]
        os.environ["NVCC_PLUS_CACHE_DIR"] = str(cache_root)
        if doc.get("cwd") and os.path.isdir(doc["cwd"]):
            os.chdir(doc["cwd"])
        yield
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)


def run_entry(doc: dict, cache_root, *, deadline: float | None) -> dict:
    """Run one queued module through the pipeline; what happened, for the log."""
    from superopt.api import optimize_ptx
    snap = doc.get("settings") or {}
    config = {**(snap.get("document") or {}), "overrides": {**(snap.get("flags") or {}), "search": "now"}}
    if deadline is not None:
        config["deadline"] = deadline
    import tempfile
    with tempfile.TemporaryDirectory(prefix="nvcc-plus-entry-") as tmp, entry_environment(doc, cache_root):
        if isinstance(doc.get("launches"), str):
            # the launches as the build preprocessed them (its unit is gone): read as the unit
            unit = os.path.join(tmp, "unit.ii")
            with open(unit, "w", encoding="utf-8") as f:
                f.write(doc["launches"])
            config["preprocessed"] = unit
        out = optimize_ptx(doc["ptx"], mode="optimize", source=doc.get("source"), target=doc.get("target"),
                           config=config)
    kernels = [k for rec in out.records for k in rec.get("kernels", [])]
    return {"kernels": kernels, "messages": out.messages, "records": out.record_paths}


class Runner:
    """One slot's loop over the queue. ``process(doc, deadline)`` runs an entry (the pipeline by
    default; the tests give a stand-in to make each limit fire on time)."""

    def __init__(self, queue: Queue, limits: QueueLimits, *, slot: int = 0, process=None, poll: float | None = None,
                 timeout_of=None):
        self.queue, self.limits, self.slot = queue, limits, slot
        self.process = process or (lambda doc, deadline: run_entry(doc, queue.cache_root, deadline=deadline))
        self.poll = poll if poll is not None else min(POLL_MAX_S, max(0.05, limits.idle_exit_s / 5))
        self.timeout_of = timeout_of or _entry_timeout
        self.spent = 0.0
        self.done = 0

    def _state(self, state: str, **extra) -> None:
        try:
            self.queue.write_state(self.slot, pid=os.getpid(), state=state, spent_s=round(self.spent, 2),
                                   budget_s=self.limits.budget_s, done=self.done, **extra)
        except OSError as exc:
            log(f"cannot write the runner's state ({exc})", self.slot)

    def run(self) -> str:
        """Work until a limit stops it; why it stopped."""
        from superopt.search.choices import MIN_SEARCH_S
        idle_since = time.monotonic()
        self._state("idle")
        while True:
            for name in self.queue.drop_old(self.limits.max_age_days):
                log(f"dropped queue entry {name}: older than {self.limits.max_age_days:g} days "
                    f"(NVCC_PLUS_QUEUE_MAX_AGE); its kernels keep nvcc's code until a build queues them again",
                    self.slot)
            left = None if self.limits.budget_s is None else self.limits.budget_s - self.spent
            claim = self.queue.claim_next()
            if claim is None:
                if not self.limits.idle_exit_s:
                    return "the queue is empty"
                if time.monotonic() - idle_since >= self.limits.idle_exit_s:
                    return f"idle for {self.limits.idle_exit_s:g} s (NVCC_PLUS_QUEUE_IDLE_EXIT)"
                time.sleep(self.poll)
                continue
            with claim:
                if left is not None and left < MIN_SEARCH_S:
                    return (f"the queue budget is spent ({self.spent:.1f} of {self.limits.budget_s:g} s, "
                            f"NVCC_PLUS_QUEUE_BUDGET); {self.queue.size()[0]} entries wait for the next runner")
                try:
                    self._one(claim, left)
                finally:
                    self._state("idle")
            idle_since = time.monotonic()

    def _one(self, claim: Claim, left: float | None) -> None:
        doc = claim.doc
        what = f"{doc.get('source') or 'module'} {doc.get('target') or ''} ({len(doc.get('kernels') or [])} " \
               f"kernel(s), entry {claim.name})"
        attempt = self.queue.begin_attempt(claim.name)
        if attempt > MAX_ATTEMPTS:
            log(f"dropped {what}: {MAX_ATTEMPTS} runs on it ended without finishing (a runner killed, or a crash; "
                f"see above); its kernels keep nvcc's code", self.slot)
            self.queue.finish(claim, done=True)
            return
        timeout = self.timeout_of(doc)
        now = time.time()
        soft = [now + left] if left is not None else []
        hard = [left + min(STOP_GRACE_S, max(1.0, 0.2 * left))] if left is not None else []
        if timeout:
            soft.append(now + 0.8 * timeout)
            hard.append(timeout)
        deadline = min(soft) if soft else None
        hard_s = min(hard) if hard else None
        self._state("busy", entry=claim.name, source=doc.get("source"), started=now)
        log(f"searching {what}" + (f", until {_clock(deadline)}" if deadline else ""), self.slot)
        t0 = time.monotonic()
        try:
            with _alarm(hard_s, f"the queue runner's time for this entry ran out ({hard_s:.0f} s)"
                        if hard_s else ""):
                info = self.process(doc, deadline)
        except QueueStop as exc:
            self.spent += time.monotonic() - t0
            log(f"stopped {what}: {exc}; the decisions made before are stored, the entry stays for the next "
                f"runner", self.slot)
            self.queue.set_attempts(claim.name, attempt - 1)     # a limit, not the entry's fault
            return
        except Exception as exc:  # noqa: BLE001 - an entry that fails must not stop the queue; it is logged
            self.spent += time.monotonic() - t0
            log(f"failed on {what}: {type(exc).__name__}: {exc} (attempt {attempt} of {MAX_ATTEMPTS})", self.slot)
            if attempt >= MAX_ATTEMPTS:
                self.queue.finish(claim, done=True)
            return
        seconds = time.monotonic() - t0
        self.spent += seconds
        if deadline is not None and time.time() >= deadline:
            log(f"time ran out in {what} after {seconds:.1f} s; the decisions made are stored, the entry stays "
                f"for the next runner", self.slot)
            self.queue.set_attempts(claim.name, attempt - 1)
            return
        self.done += 1
        self.queue.finish(claim, done=True)
        log(f"done {what} in {seconds:.1f} s: {_tally(info)}", self.slot)
        for m in (info or {}).get("messages", []):
            log(f"  {m}", self.slot)

    def start_siblings(self) -> None:
        """Slot 0 starts the other slots' runners (one per GPU by default)."""
        n = self.limits.runners or _gpu_count()
        for slot in range(1, n):
            try:
                proc = start_runner(self.queue, self.limits, slot=slot)
            except OSError as exc:
                log(f"cannot start runner {slot}: {exc}", self.slot)
                continue
            if proc is not None:
                log(f"started runner {slot} (pid {proc.pid})", self.slot)


def _entry_timeout(doc: dict) -> float | None:
    """The entry's NVCC_PLUS_TIMEOUT (seconds per module, 0: none), as its compilation had it."""
    snap = doc.get("settings") or {}
    raw = (snap.get("env") or {}).get("NVCC_PLUS_TIMEOUT")
    if raw is None:
        doc_ = snap.get("document") or {}
        raw = (doc_.get("driver") or {}).get("timeout", doc_.get("timeout")) if isinstance(doc_, dict) else None
    try:
        t = float(600 if raw is None else raw)
    except (TypeError, ValueError):
        t = 600.0
    return t if t > 0 else None


def _gpu_count() -> int:
    try:
        from superopt.judge.devices import allowed_devices
        return max(1, len(allowed_devices()))
    except Exception:  # noqa: BLE001 - no GPU, no driver: one runner (it may use a cluster)
        return 1


def _tally(info) -> str:
    kernels = (info or {}).get("kernels", [])
    by: dict[str, int] = {}
    for k in kernels:
        by[str(k.get("status"))] = by.get(str(k.get("status")), 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(by.items())) or "no kernel"


def _clock(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts).isoformat(timespec="seconds")


def drain(queue: Queue, limits: QueueLimits, *, slot: int = 0, siblings: bool = True,
          start_lock_fd: int | None = None) -> tuple[int, str]:
    """Take slot ``slot`` and work the queue until a limit stops it: (exit code, why). Exit 0
    when it ran (or another runner holds the slot: nothing to do here), the reason logged.
    ``start_lock_fd``: the starter's lock (superopt.store.queue.start_runner), let go of once the
    slot is decided."""
    try:
        fd = queue.take_slot(slot)
    finally:
        if start_lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(start_lock_fd)
    if fd is None:
        st = queue.read_state(slot)
        return 0, f"slot {slot} has a live runner (pid {st.get('pid', '?')}); nothing to do"
    try:
        runner = Runner(queue, limits, slot=slot)
        log(f"started (budget {limits.budget_s or 0:g} s, idle exit {limits.idle_exit_s:g} s, entries older than "
            f"{limits.max_age_days:g} days dropped); queue {queue.root}", slot)
        if siblings and slot == 0:
            runner.start_siblings()
        reason = "interrupted"
        try:
            reason = runner.run()
        except (KeyboardInterrupt, SystemExit) as exc:
            reason = f"interrupted ({exc or 'SIGINT'}); an entry in progress stays queued"
            raise
        finally:
            runner._state("stopped", reason=reason)
            log(f"stopped: {reason}; {runner.done} entr{'y' if runner.done == 1 else 'ies'} done, "
                f"{runner.spent:.1f} s spent", slot)
        return 0, reason
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m superopt.decide.queue_runner",
                                description="Run the searches that deferred compilations queued.")
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--slot", type=int, default=0)
    p.add_argument("--budget", type=float, default=3600.0, help="seconds for this runner's life (0 = no limit)")
    p.add_argument("--max-age", type=float, default=7.0, help="days; older entries are dropped")
    p.add_argument("--idle-exit", type=float, default=60.0, help="seconds with nothing to do before it exits")
    p.add_argument("--runners", default="gpus", help="runners at once: a number, or gpus")
    p.add_argument("--start-lock-fd", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    limits = QueueLimits(budget_s=a.budget or None, max_bytes=0, max_age_days=a.max_age, idle_exit_s=a.idle_exit,
                         runners=None if a.runners == "gpus" else max(1, int(a.runners)))
    os.environ["NVCC_PLUS_CACHE_DIR"] = a.cache_dir
    with contextlib.suppress(OSError):
        os.nice(10)                      # the build it runs beside comes first
    signal.signal(signal.SIGTERM, _terminate)
    code, why = drain(Queue(a.cache_dir), limits, slot=a.slot, start_lock_fd=a.start_lock_fd)
    if why.startswith("slot "):
        log(why, a.slot)
    return code


def _terminate(signum, frame):
    raise SystemExit(f"terminated (signal {signum})")


if __name__ == "__main__":
    sys.exit(main())
