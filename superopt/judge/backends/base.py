"""The interface both backends (GPU, CPU emulator) implement, and the backend registry.

A backend runs one kernel of a PTX module on concrete inputs and gives back the final
contents of every buffer. It never judges: the differential check (superopt.judge.check) does.

Contract of :meth:`Backend.run_many`: the module is loaded ONCE and the input sets are
launched one after another in that module (so state a kernel keeps between launches, such
as a ``__device__`` flag, persists across sets, as it would in a user's program); every set
gets its own fresh allocations, each buffer laid out as ``[front guard][data][back guard]``
with the guard bytes and initial contents taken from the :class:`~superopt.judge.inputs.InputSet`.
A backend must never raise for a misbehaving kernel: compile errors, launch errors, crashes
and hangs come back as a :class:`RunResult` status.
"""
from __future__ import annotations

import hashlib
import importlib
import threading
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = [
    "RunResult", "Backend", "BackendUnavailable", "STATUSES", "register_backend", "get_backend",
    "backend_names", "check_guards", "digest",
]

# ok: ran to completion. timeout: exceeded its time limit (killed). crash: the kernel
# faulted at run time (illegal address, trap, ...), or the runner process died.
# launch_error: the module did not compile/load, the kernel was not found, or the launch
# was refused (too many resources). unsupported: the backend cannot run this kernel
# (e.g. an instruction the emulator does not implement). not_run: an earlier set of the
# same run_many call ended the run.
STATUSES = ("ok", "timeout", "crash", "unsupported", "launch_error", "not_run")


@dataclass
class RunResult:
    status: str
    # final contents of every buffer (name -> array of the buffer's element storage type)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    # per buffer: both guard zones still hold their canary bytes
    guards_intact: dict[str, bool] = field(default_factory=dict)
    # per damaged buffer: where ("back guard bytes 0..3")
    guard_damage: dict[str, str] = field(default_factory=dict)
    # per buffer: final contents equal the initial contents (meaningful for in/inout)
    inputs_unchanged: dict[str, bool] = field(default_factory=dict)
    # per buffer read outside its extent (guard zones, padding): {"count": loads,
    # "past_end_bytes": farthest byte past the end, "before_start_bytes": ...}; only
    # backends that can see reads fill it (the emulator; on a GPU it is memcheck's job)
    guard_reads: dict[str, dict] = field(default_factory=dict)
    # sinks reached with a value derived from something never written (a register, shared or
    # local memory): {"store"|"branch": {"count", "lanes", "first": instruction}}; only
    # backends with a taint bit fill it (the emulator)
    taint: dict[str, dict] = field(default_factory=dict)
    elapsed: float | None = None       # kernel time in seconds (device events), if known
    error: str | None = None           # error name/message for non-ok statuses
    log: str = ""                      # JIT / compiler log, if any

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class BackendUnavailable(RuntimeError):
    """The backend cannot run at all here (no GPU, not implemented yet, ...)."""


class Backend(ABC):
    name: str = "?"
    # What the check's input plan cannot choose on this backend (the hardware's), for the
    # verdict's evidence: e.g. the order blocks run in, register contents at launch.
    not_chosen: tuple = ()
    # Whether it lays out an aliased input set (``InputSet.alias``: one buffer's view inside
    # another's allocation, superopt.judge.inputs.aliased_set); the check runs aliased layouts only
    # on backends that do (the emulator and the GPU), none on others (test fakes).
    aliasing: bool = False

    def large_target(self):
        """How large the check's one large input set is here
        (:class:`superopt.judge.inputs.LargeTarget`; None: no large set)."""
        from superopt.judge.inputs import CPU_LARGE
        return CPU_LARGE

    def available(self) -> tuple[bool, str]:
        """(True, description) when runs are possible, else (False, why not)."""
        return True, self.name

    def describe(self) -> dict:
        """What runs the kernels (device name, versions) for the verdict's evidence."""
        return {"backend": self.name}

    def lanes_in_step(self) -> "Backend | None":
        """This backend with the lanes of every warp kept in step, where it can also run them
        out of step (the emulator); None where it cannot choose (a GPU: the hardware's)."""
        return None

    @abstractmethod
    def run_many(self, ptx: str, spec, input_sets: list, *, timeout: float | None = None) -> list[RunResult]:
        """Load ``ptx`` once, launch ``spec.kernel`` on every input set in order.

        ``spec`` is the LaunchSpec (param order and types); each InputSet carries its own
        resolved launch shape, scalar values, initial buffer contents and guards.
        ``timeout`` bounds each launch in seconds. Returns one result per set.
        """

    def run(self, ptx: str, spec, inputs, *, timeout: float | None = None) -> RunResult:
        return self.run_many(ptx, spec, [inputs], timeout=timeout)[0]

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def digest(a) -> str:
    return hashlib.blake2b(memoryview(np.ascontiguousarray(a)).cast("B"), digest_size=16).hexdigest()


def check_guards(front: bytes, back: bytes, got_front: bytes, got_back: bytes) -> tuple[bool, str]:
    """Compare guard zones; (intact, description of the first damage)."""
    msgs = []
    for side, want, got in (("front", front, got_front), ("back", back, got_back)):
        if want != got:
            w = np.frombuffer(want, np.uint8)
            g = np.frombuffer(got, np.uint8)
            bad = np.nonzero(w != g)[0]
            # offsets: front guard counted back from the buffer start, back guard from its end
            if side == "front":
                msgs.append(f"front guard: {len(bad)} bytes changed, nearest at buffer-{len(w) - int(bad[-1])}")
            else:
                msgs.append(f"back guard: {len(bad)} bytes changed, first at end+{int(bad[0])}")
    return (not msgs), "; ".join(msgs)


# --------------------------------------------------------------------------- registry

_FACTORIES: dict[str, Callable[[], Backend] | str] = {
    "gpu": "superopt.judge.backends.gpu:GpuBackend",
    "emulator": "superopt.judge.backends.emulator:EmulatorBackend",
}
_INSTANCES: dict[str, Backend] = {}
_LOCK = threading.Lock()


def register_backend(name: str, factory: Callable[[], Backend] | str) -> None:
    """Register a backend factory (a callable, or "module:attr" imported lazily)."""
    with _LOCK:
        _FACTORIES[name] = factory
        for k in [k for k in _INSTANCES if k == name or k.startswith(name + ":")]:
            _INSTANCES.pop(k)


def backend_names() -> list[str]:
    return sorted(_FACTORIES)


_SLOT = threading.local()


@contextmanager
def backend_slot(slot: int):
    """The GPU backends this thread gets are slot ``slot``'s: a compilation searching two
    kernels at once (superopt.decide.searches) gives each search thread a GPU worker of its own.
    One shared worker would deadlock them: a request holds the backend's lock while it waits
    for the GPU, and a timing window of the other thread holds the GPU across its requests."""
    before = getattr(_SLOT, "slot", 0)
    _SLOT.slot = int(slot)
    try:
        yield
    finally:
        _SLOT.slot = before


def current_slot() -> int:
    """This thread's backend slot (0 unless :func:`backend_slot` says otherwise)."""
    return getattr(_SLOT, "slot", 0)


def get_backend(name: str, *, fresh: bool = False) -> Backend:
    """The (per-process shared) backend instance for ``name``.

    Raises BackendUnavailable when the backend does not exist (e.g. the emulator before it
    is written) or cannot be constructed.
    """
    # The GPU backend has one instance per device and slot: its worker process is bound to one
    # GPU, and a search runs on the GPU its thread has leased (superopt.judge.devices).
    key = name
    if name == "gpu":
        from superopt.judge.devices import default_ordinal
        key = f"gpu:{default_ordinal()}"
        if current_slot():
            key += f"/{current_slot()}"
    with _LOCK:
        if not fresh and key in _INSTANCES:
            return _INSTANCES[key]
        if name not in _FACTORIES:
            raise BackendUnavailable(f"unknown backend {name!r} (known: {', '.join(sorted(_FACTORIES))})")
        factory = _FACTORIES[name]
        if isinstance(factory, str):
            mod, _, attr = factory.partition(":")
            try:
                factory = getattr(importlib.import_module(mod), attr)
            except (ImportError, AttributeError) as e:
                raise BackendUnavailable(f"{name} backend not available ({e})") from None
        try:
            inst = factory()
        except BackendUnavailable:
            raise
        except Exception as e:  # noqa: BLE001 - a broken backend is "unavailable", not a crash
            raise BackendUnavailable(f"{name} backend could not start: {type(e).__name__}: {e}") from None
        if not fresh:
            _INSTANCES[key] = inst
        return inst


def close_idle_gpu_backends(busy: set[int]) -> None:
    """Close the shared GPU backends whose device is not in ``busy`` (ordinals in use)."""
    with _LOCK:
        idle = [k for k in _INSTANCES if k.startswith("gpu:") and int(k[4:].partition("/")[0]) not in busy]
        closing = [_INSTANCES.pop(k) for k in idle]
    for inst in closing:
        inst.close()
