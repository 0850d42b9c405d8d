"""Where a kernel's search spends its time: seconds per phase, recorded in the kernel's record.

A search opens a :class:`Phases` for its kernel (:func:`recording`); every step below it that
knows what it is doing adds its time with ``with phase("ptxas"):`` -- the spec sources, the
proposers, ptxas, the static check, the differential check and the GPU's share of it, timing,
compute-sanitizer, the emulator's shadow check, waiting for a GPU, starting the GPU worker.
A step outside any search records nothing (``phase`` is then free).

Phases nest (a GPU check is part of a check) and steps in a thread pool add up (four ptxas
runs of one second in parallel are 4 s of ``ptxas``), so the sum of the phases is not the
search's wall time; ``lease`` (holding a GPU's lock) and ``gpu_busy`` (the GPU steps inside
it) are what the GPU's economy is judged by.
"""
from __future__ import annotations

import contextvars
import threading
import time
from contextlib import contextmanager

#: phase -> what it covers (the record's ``phases`` keys, each ``<name>_s``)
PHASES = {
    "spec": "launch specs: the sources in order, inference",
    "propose": "proposers making candidates (passes applied, a model asked)",
    "ptxas": "ptxas on every candidate (parallel runs add up)",
    "static": "the static def-use check",
    "check": "differential checks, whole (inputs made, runs, comparison)",
    "gpu_check": "the GPU's part of the checks (the runs, holding the GPU)",
    "emulator": "runs on the CPU emulator (checks and the shadow check)",
    "shadow": "the emulator's shadow check of the candidate to keep",
    "alias_confirm": "the CPU emulator running nvcc's code on an aliased layout where a GPU's check rejected a "
                     "candidate (whether its threads race there: superopt.judge.alias_check.emulator_race)",
    "timing": "timings, whole",
    "gpu_time": "the GPU's part of the timings (holding the GPU alone)",
    "sanitize": "compute-sanitizer on the candidate to keep (its launches hold the GPU as checks do)",
    "prefetch": "input sets of the checks before keeping a candidate, made beside the search (no GPU)",
    "gpu_wait": "waiting for the GPU (another compilation held it)",
    "worker_start": "starting the GPU worker process (CUDA context)",
    "lease": "holding a GPU's lock",
    # inside gpu_check: where the GPU worker's time went (its own clock, per run request)
    "gpu_load": "GPU worker: loading the module's machine code (ptxas's cubin)",
    "gpu_jit": "GPU worker: loading a module from its PTX (the driver compiles it: no cubin was at hand)",
    "gpu_fill": "GPU worker: allocating the buffers and filling them (inputs, poison, guards), scrubbing shared memory",
    "gpu_launch": "GPU worker: the launches, until they completed",
    "gpu_readback": "GPU worker: reading the buffers back and comparing the inputs with what they were",
    "gpu_free": "GPU worker: scrubbing and freeing the buffers",
    "gpu_keep": "GPU worker: reading the request's blobs, keeping inputs on the GPU and checking the kept copies "
                "(superopt.judge.backends.resident)",
    "gpu_reply": "GPU worker: writing the changed buffers for the reply",
    "gpu_worker": "GPU worker: its whole run requests (the rest of gpu_check is the requests' and replies' transport)",
    # the worker's parts of its timing requests: inside gpu_time, or inside gpu_check for the
    # part before the rounds when it ran apart under a shared step (GpuBackend.time_pair)
    "gpu_time_keep": "GPU worker, timing: reading the set's blobs, keeping inputs on the GPU and checking the kept copies",
    "gpu_time_load": "GPU worker, timing: loading both modules",
    "gpu_time_fill": "GPU worker, timing: allocating and filling the two copies of the input set",
    "gpu_time_runs": "GPU worker, timing: warm-up and timed rounds (L2 flushes included)",
    "gpu_time_free": "GPU worker, timing: freeing the copies, unloading the modules",
    "gpu_time_worker": "GPU worker, timing: its whole timing requests",
    "window_host": "a timing window's hold of the GPU alone outside its timing requests (the host's work between "
                   "them: every other compilation waits meanwhile)",
}
#: the worker's parts of gpu_check: its reply's ``spent`` key -> phase
WORKER_PARTS = {"load": "gpu_load", "jit": "gpu_jit", "fill": "gpu_fill", "launch": "gpu_launch", "readback": "gpu_readback",
                "free": "gpu_free", "keep": "gpu_keep",
                "reply": "gpu_reply", "total": "gpu_worker"}
#: the worker's parts of gpu_time: its timing reply's ``spent`` key -> phase
TIMING_PARTS = {"keep": "gpu_time_keep", "load": "gpu_time_load", "fill": "gpu_time_fill", "runs": "gpu_time_runs",
                "free": "gpu_time_free", "total": "gpu_time_worker"}
GPU_BUSY = ("gpu_check", "gpu_time")

_CURRENT: contextvars.ContextVar["Phases | None"] = contextvars.ContextVar("superopt_phases", default=None)


class Phases:
    """Seconds per phase of one kernel's search (thread safe: pool threads add to it). ``label``
    (the kernel) names its lines in SUPEROPT_PHASE_LOG."""

    def __init__(self, label: str = ""):
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.label = label
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float) -> None:
        if name not in PHASES:
            raise KeyError(f"unknown phase {name!r} (known: {', '.join(PHASES)})")
        with self._lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            self.counts[name] = self.counts.get(name, 0) + 1

    def get(self, name: str) -> float:
        return self.seconds.get(name, 0.0)

    def to_dict(self) -> dict:
        """The record's ``phases``: ``<name>_s`` for each phase that ran, ``gpu_busy_s`` and
        ``gpu_busy_fraction`` (GPU steps ÷ time holding the GPU) when a GPU was held."""
        with self._lock:
            out = {f"{k}_s": round(v, 4) for k, v in sorted(self.seconds.items())}
            out.update({f"{k}_n": n for k, n in sorted(self.counts.items())})
        busy = sum(self.get(k) for k in GPU_BUSY)
        if busy or self.get("lease"):
            out["gpu_busy_s"] = round(busy, 4)
        if self.get("lease") > 0:
            out["gpu_busy_fraction"] = round(min(1.0, busy / self.get("lease")), 4)
        return out


def current() -> Phases | None:
    return _CURRENT.get()


@contextmanager
def recording(phases: Phases | None = None):
    """Make ``phases`` (a new one by default) the one steps in this context add to; yields it."""
    phases = phases if phases is not None else Phases()
    token = _CURRENT.set(phases)
    try:
        yield phases
    finally:
        _CURRENT.reset(token)


@contextmanager
def phase(name: str):
    """Add the block's wall time to ``name`` of the current search's phases (if any)."""
    phases = _CURRENT.get()
    if phases is None:
        yield
        return
    t0 = time.perf_counter()
    began = time.time()
    try:
        yield
    finally:
        phases.add(name, time.perf_counter() - t0)
        log_span(name, began, time.time(), phases.label)


def log_span(name: str, start: float, end: float, label: str = "") -> None:
    """One JSON line per phase in SUPEROPT_PHASE_LOG (a developer setting: the economy bench
    lays the build's compilations out in time with it, bench.economy.phase_timeline). Wall-clock
    times, as SUPEROPT_GPU_STEP_LOG's; one short O_APPEND write, so processes never interleave."""
    from superopt.config.settings import env_value
    path = env_value("SUPEROPT_PHASE_LOG")
    if not path:
        return
    import json
    import os
    line = json.dumps({"pid": os.getpid(), "thread": threading.get_ident(), "kernel": label, "phase": name,
                       "start": round(start, 6), "end": round(end, 6)})
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass                          # a diagnostic: never a search's failure


def add(name: str, seconds: float) -> None:
    """Add ``seconds`` measured elsewhere (the GPU worker's own clock) to ``name`` of the current
    search's phases (if any)."""
    phases = _CURRENT.get()
    if phases is not None:
        phases.add(name, float(seconds))


def add_worker_parts(spent: dict | None) -> None:
    """A GPU worker reply's ``spent`` (seconds per part of its run request) as phases."""
    for part, seconds in (spent or {}).items():
        if part in WORKER_PARTS:
            add(WORKER_PARTS[part], seconds)


def add_timing_parts(spent: dict | None) -> None:
    """A GPU worker timing reply's ``spent`` as phases."""
    for part, seconds in (spent or {}).items():
        if part in TIMING_PARTS:
            add(TIMING_PARTS[part], seconds)


def measured(name: str):
    """Decorator: every call adds its wall time to phase ``name``."""
    import functools

    def wrap(fn):
        @functools.wraps(fn)
        def run(*a, **kw):
            with phase(name):
                return fn(*a, **kw)
        return run
    return wrap


def in_context(fn):
    """``fn`` recording into the caller's phases, for a thread pool (context variables do not
    follow work submitted to other threads on their own)."""
    phases = _CURRENT.get()

    def run(*a, **kw):
        with recording(phases) if phases is not None else _nothing():
            return fn(*a, **kw)
    return run


@contextmanager
def _nothing():
    yield
