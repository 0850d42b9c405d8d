"""Kernel searches on a Dask distributed cluster of GPU workers (``NVCC_PLUS_CLUSTER``).

A builder without a GPU (or any builder pointed at a cluster) sends each kernel's whole search
as one Dask task that needs one GPU (``resources={"GPU": 1}``), waits for the decision, and
caches and locks it as if it had searched locally. Workers are plain Dask workers on the GPU
hosts, one per GPU::

    dask scheduler --port 8786
    CUDA_VISIBLE_DEVICES=0 dask worker tcp://sched:8786 --nthreads 1 --resources GPU=1
    CUDA_VISIBLE_DEVICES=1 dask worker tcp://sched:8786 --nthreads 1 --resources GPU=1
    NVCC_PLUS_CLUSTER=tcp://sched:8786 make -j32 NVCC=nvcc-plus        # on the builder

The worker's Python must import this package (same version: the builder re-applies the
decision's plan and checks the PTX hash the worker reports).

Granularity: one task per kernel search, because the search is sequential and adaptive (each
candidate's fate steers the greedy combination; the baseline's runs are reused across
candidates; a winner is confirmed and timed again against the baseline on the same GPU), a
search takes seconds to minutes so Dask's per-task cost (milliseconds) is nothing, the inputs
are generated on the worker instead of shipped, and a failure costs exactly one kernel, which
keeps nvcc's code. Scheduling, transport, retries on a dead worker (``allowed-failures``) are
Dask's; nothing here schedules or speaks a protocol of its own.

Failure behaviour: an unreachable cluster, no GPU worker, a task that errs (a worker killed
under it more than ``allowed-failures`` times: KilledWorker) or that does not answer in time
leaves the kernel with nvcc's code, and the compilation says so in one line. Every wait is
bounded by our own clock; calls into the client library are bounded in addition by an alarm
that raises :class:`ClusterTimeout`, a BaseException, so no ``except Exception`` on the way
can swallow it (in the main thread; elsewhere the library's own timeouts apply). A cluster
found unreachable is remembered for ``NVCC_PLUS_CLUSTER_RETRY`` seconds (60) in the private
lock folder, so the other compilations of a ``make -j`` do not each wait for it.

Settings: ``NVCC_PLUS_CLUSTER`` (toml ``cluster``): the scheduler's address;
``NVCC_PLUS_CLUSTER_CONNECT_TIMEOUT`` (10 s); ``NVCC_PLUS_CLUSTER_TIMEOUT``: seconds per
kernel from submission to answer (default 4 × budget + 120, and never past the compilation's
deadline); ``NVCC_PLUS_CLUSTER_GRACE``: how long the cluster may have no GPU worker before the
waiting kernels give up (30 s). Developer hook on workers: ``NVCC_PLUS_JUDGE=module:function``
(a function of the SearchOptions returning a Judge), which the CPU tests use.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_GRACE = 30.0
DEFAULT_RETRY = 60.0


def _hostname() -> str:
    # socket (and uuid, which imports platform) are imported where used: a build that applies
    # stored decisions imports this module and must not pay for them
    import socket
    return socket.gethostname()


class ClusterTimeout(BaseException):
    """A call into the cluster client outlived its limit. A BaseException on purpose (like
    nvcc_plus.swap.OptimizerTimeout): nothing between the alarm and us may swallow it."""


class ClusterUnavailable(RuntimeError):
    """The cluster cannot be used (not installed, unreachable, no GPU worker)."""


def address_from(settings) -> str | None:
    """The scheduler's address (NVCC_PLUS_CLUSTER, toml ``cluster``), or None."""
    return settings.text("NVCC_PLUS_CLUSTER")


def _seconds(name: str, default: float | None) -> float | None:
    from superopt.config.settings import env_number
    return env_number(name, default, minimum=0)


@contextmanager
def bounded(seconds: float, what: str):
    """Raise :class:`ClusterTimeout` in this block after ``seconds`` (main thread only),
    without disturbing an outer alarm (the driver's hard limit): if that one fires first it is
    left to fire; otherwise it is re-armed with what was left of it."""
    usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
              and seconds > 0)
    if not usable:
        yield
        return
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    if outer_left and outer_left <= seconds:
        yield                              # the outer limit comes first and will fire
        return

    def _fire(signum, frame):
        raise ClusterTimeout(f"{what}: no answer within {seconds:g} s")

    old = signal.signal(signal.SIGALRM, _fire)
    t0 = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, outer_left - (time.monotonic() - t0)))


# --------------------------------------------------------------------------- the worker side

_WORKER_MODEL: str | None = None


def worker_judge(options):
    """The judge a cluster worker searches with: NVCC_PLUS_JUDGE=module:function (a developer
    hook), else the backend the worker's environment names (NVCC_PLUS_BACKEND), else the
    builder's option (auto: the GPU when this worker has one)."""
    from superopt.config.settings import env_value
    hook = env_value("NVCC_PLUS_JUDGE")
    if hook:
        import importlib
        mod, _, fn = hook.partition(":")
        return getattr(importlib.import_module(mod), fn)(options)
    from superopt.judge import BackendJudge
    backend = env_value("NVCC_PLUS_BACKEND") or options.backend
    return BackendJudge(backend, options.policy, options.check_sets, options.timing_reps)


def judge_model(judge) -> str:
    """The GPU model a judge measures on (part of a cluster decision's key)."""
    name = getattr(judge, "device_name", None)
    return name() if callable(name) else str(getattr(judge, "backend", "?"))


def worker_gpu_model() -> str:
    """Run on a worker (client.run): the model of the GPU its searches use."""
    global _WORKER_MODEL
    if _WORKER_MODEL is None:
        from superopt.search.options import SearchOptions
        _WORKER_MODEL = judge_model(worker_judge(SearchOptions()))
    return _WORKER_MODEL


def run_search(payload: dict) -> dict:
    """One kernel's search on a worker (a Dask task). Returns the record, the winning plan and
    what the builder needs to check and store it; never writes a cache or a lockfile."""
    import ptx_ir
    from superopt.search.choices import search_choices
    from superopt.search.candidates import text_hash
    t0 = time.time()
    options = payload["options"]
    left = payload.get("seconds_left")
    deadline = None if left is None else t0 + float(left)
    judge = worker_judge(options)
    module = ptx_ir.parse(payload["ptx"])
    kernel = payload["kernel"]
    hold = getattr(judge, "hold", None)
    from superopt.judge.phases import Phases, recording
    with recording(Phases(kernel)) as phases, (hold(deadline) if hold else _nothing()) as device:
        model = judge_model(judge)
        kr, winner, chosen_index, tried = search_choices(
            module, kernel, payload["choices"], options=options, deadline=deadline, share=payload.get("share"),
            judge=judge, target=payload["target"])
        if device is not None:
            kr["device"] = {"name": device.name, "uuid": device.uuid, "ordinal": device.ordinal}
    kr["phases"] = phases.to_dict()
    plan = ptx_hash = None
    if winner is not None:
        from superopt.search.candidates import apply_plan
        new_module, _ = apply_plan(module, kernel, winner.plan)
        plan = [s.to_dict() for s in winner.plan]
        ptx_hash = text_hash(ptx_ir.printer.emit_function(new_module.function(kernel)))
    return {"record": kr, "plan": plan, "ptx_hash": ptx_hash, "chosen": chosen_index, "tried": tried,
            "gpu": model, "can_time": bool(judge.can_time),
            "worker": f"{_hostname()}:{os.getpid()}", "seconds": round(time.time() - t0, 3)}


@contextmanager
def _nothing():
    yield None


# --------------------------------------------------------------------------- the builder side

class RememberedModels:
    """The GPU models a cluster's workers had, as :meth:`ClusterSearch.models` remembered them on
    disk, without contacting the cluster: what a deferred build (superopt.decide.deferred) looks
    cached decisions up under; it must not wait for the network."""

    def __init__(self, address: str, *, cache_root=None):
        self.address = address
        self._search = ClusterSearch(address, cache_root=cache_root)

    def models(self) -> list[str]:
        try:
            data = json.loads(self._search._models_path().read_text())
        except (OSError, ValueError):
            return []
        return sorted(str(m) for m in data.get("models", [])) if isinstance(data, dict) else []


@dataclass
class Outcome:
    """What came back for one kernel: the worker's answer, or why there is none."""
    answer: dict | None = None
    failure: str | None = None


@dataclass
class Submitted:
    kernel: str
    future: object = None
    failure: str | None = None
    submitted_at: float = field(default_factory=time.monotonic)
    limit: float = 0.0                       # seconds from submission


_SHARED: dict[str, "ClusterSearch"] = {}
_SHARED_LOCK = threading.Lock()


def shared(address: str) -> "ClusterSearch":
    """This process's handle on the cluster at ``address``: the PTX modules of one compilation
    (one per -gencode) share its connection, and what it found out (down, and why: the driver
    then says it once)."""
    with _SHARED_LOCK:
        c = _SHARED.get(address)
        if c is None:
            c = _SHARED[address] = ClusterSearch(address)
            if len(_SHARED) == 1:
                import atexit
                atexit.register(close_all)
        return c


def close_all() -> None:
    with _SHARED_LOCK:
        handles = list(_SHARED.values())
        _SHARED.clear()
    for c in handles:
        c.close()


class ClusterSearch:
    """The builder's handle on the cluster (connects on first use)."""

    def __init__(self, address: str, *, cache_root=None):
        self.address = address
        self.connect_timeout = _seconds("NVCC_PLUS_CLUSTER_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT)
        self.task_timeout = _seconds("NVCC_PLUS_CLUSTER_TIMEOUT", None)
        self.grace = _seconds("NVCC_PLUS_CLUSTER_GRACE", DEFAULT_GRACE)
        self.retry = _seconds("NVCC_PLUS_CLUSTER_RETRY", DEFAULT_RETRY)
        self.cache_root = cache_root
        self.client = None
        self.down: str | None = None          # why the cluster is not used (once set, for good)
        self._models: list[str] | None = None

    # ---- connection ----------------------------------------------------------------
    def _marker(self) -> str:
        from superopt.judge.gpu_lock import lock_dir
        h = hashlib.sha256(self.address.encode()).hexdigest()[:16]
        return os.path.join(lock_dir(), f"cluster-{h}.down")

    def _recently_down(self) -> str | None:
        try:
            path = self._marker()
            st = os.lstat(path)
            if time.time() - st.st_mtime < (self.retry or 0):
                from superopt.store.safe_files import STATS_LIMIT, read_text
                why = read_text(path, STATS_LIMIT, errors="replace").strip()   # no symlink, no FIFO
                return f"{why} (found {time.time() - st.st_mtime:.0f} s ago by another compilation)"
        except OSError:
            pass
        return None

    def _mark_down(self, why: str) -> None:
        self.down = why
        try:
            from superopt.store.private_dir import open_private
            path = self._marker()
            tmp = f"{path}.{os.getpid()}"
            fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            with os.fdopen(fd, "w") as f:
                f.write(why)
            os.replace(tmp, path)
        except OSError:
            pass

    def _clear_marker(self) -> None:
        try:
            os.unlink(self._marker())
        except OSError:
            pass

    def connect(self):
        """The Dask client, or None (then ``self.down`` says why)."""
        if self.client is not None or self.down:
            return self.client
        recent = self._recently_down()
        if recent:
            self.down = recent
            return None
        try:
            from distributed import Client
        except ImportError as exc:
            self.down = f"Dask distributed is not installed ({exc}); pip install 'nvcc-plus[cluster]'"
            return None
        try:
            with bounded(self.connect_timeout + 5, f"connecting to {self.address}"):
                self.client = Client(self.address, timeout=self.connect_timeout, set_as_default=False)
        except (Exception, ClusterTimeout) as exc:  # noqa: BLE001 - any failure: nvcc's code
            self._mark_down(f"cluster {self.address} unreachable ({_short(exc)})")
            return None
        self._clear_marker()
        return self.client

    def close(self) -> None:
        c, self.client = self.client, None
        if c is None:
            return
        try:
            with bounded(5, "closing the cluster client"):
                c.close(timeout=3)
        except (Exception, ClusterTimeout):  # noqa: BLE001
            pass

    def _gpu_workers(self) -> list[str]:
        info = self.client.scheduler_info()
        return [w for w, d in (info.get("workers") or {}).items()
                if (d.get("resources") or {}).get("GPU", 0) >= 1]

    # ---- GPU models (part of the decision key) ----------------------------------------
    def _models_path(self):
        from pathlib import Path
        from superopt.store.cache import default_cache_dir
        root = Path(self.cache_root) if self.cache_root else default_cache_dir()
        return root / "clusters" / (hashlib.sha256(self.address.encode()).hexdigest()[:16] + ".json")

    def models(self) -> list[str]:
        """The GPU models of the cluster's GPU workers, asked once (and remembered on disk, so
        a builder whose cluster is down still finds the decisions cached for it)."""
        if self._models is not None:
            return self._models
        remembered: list[str] = []
        path = self._models_path()
        try:
            from superopt.store.safe_files import STATS_LIMIT, loads_json, read_bytes
            data = loads_json(read_bytes(path, STATS_LIMIT))        # a cache file: no symlink, no FIFO
            remembered = [str(m) for m in data.get("models", [])] if isinstance(data, dict) else []
        except (OSError, ValueError, TypeError):
            pass
        found: list[str] = []
        if self.connect() is not None:
            try:
                with bounded(self.connect_timeout + 5, "asking the workers' GPU models"):
                    workers = self._gpu_workers()
                    if workers:
                        answers = self.client.run(worker_gpu_model, workers=workers)
                        found = sorted({str(v) for v in answers.values()})
            except (Exception, ClusterTimeout):  # noqa: BLE001 - no models: no cache lookup, searches still run
                found = []
        models = sorted(set(found) | set(remembered))
        if found and set(found) - set(remembered):
            try:
                from superopt.store.cache import atomic_write_text
                atomic_write_text(path, json.dumps({"address": self.address, "models": models}))
            except OSError:
                pass
        self._models = models
        return models

    # ---- searches ----------------------------------------------------------------------
    def limit_for(self, options, deadline: float | None) -> float:
        limit = self.task_timeout if self.task_timeout is not None else 4 * options.budget_s + 120
        if deadline is not None:
            limit = min(limit, deadline - time.time())
        return max(0.0, limit)

    def submit(self, payload: dict, limit: float) -> Submitted:
        kernel = payload["kernel"]
        sub = Submitted(kernel, limit=limit)
        if self.connect() is None:
            sub.failure = self.down
            return sub
        payload = {**payload, "seconds_left": limit}
        key = f"nvcc-plus-search-{kernel[:60]}-{os.urandom(6).hex()}"
        try:
            with bounded(self.connect_timeout + 5, "submitting a search"):
                sub.future = self.client.submit(run_search, payload, resources={"GPU": 1}, pure=False, key=key)
        except (Exception, ClusterTimeout) as exc:  # noqa: BLE001
            sub.failure = f"cluster {self.address}: submitting failed ({_short(exc)})"
        return sub

    def gather(self, subs: list[Submitted], poll: float = 0.2) -> list[Outcome]:
        """Wait for every submitted search, each until its own limit; never longer."""
        out: dict[int, Outcome] = {i: Outcome(failure=s.failure) for i, s in enumerate(subs) if s.failure}
        waiting = {i: s for i, s in enumerate(subs) if i not in out}
        no_worker_since: float | None = None
        last_check = 0.0
        while waiting:
            now = time.monotonic()
            for i, s in list(waiting.items()):
                status = getattr(s.future, "status", "lost")
                if status == "finished":
                    out[i] = self._result(s)
                elif status in ("error", "cancelled", "lost"):
                    out[i] = Outcome(failure=self._error(s, status))
                elif now - s.submitted_at >= s.limit:
                    out[i] = Outcome(failure=f"cluster {self.address}: no answer within {s.limit:.0f} s "
                                             f"(NVCC_PLUS_CLUSTER_TIMEOUT)")
                    self._cancel(s)
                else:
                    continue
                del waiting[i]
            if not waiting:
                break
            if now - last_check >= 1.0:
                last_check = now
                try:
                    with bounded(10, "asking the scheduler for its workers"):
                        has_gpu = bool(self._gpu_workers())
                except (Exception, ClusterTimeout):  # noqa: BLE001
                    has_gpu = False
                if has_gpu:
                    no_worker_since = None
                elif no_worker_since is None:
                    no_worker_since = now
                elif now - no_worker_since >= (self.grace or 0):
                    for i, s in waiting.items():
                        out[i] = Outcome(failure=f"cluster {self.address}: no GPU worker for "
                                                 f"{now - no_worker_since:.0f} s (a worker died or none runs "
                                                 f"with --resources GPU=1)")
                        self._cancel(s)
                    break
            time.sleep(poll)
        return [out[i] for i in range(len(subs))]

    def _result(self, s: Submitted) -> Outcome:
        try:
            with bounded(60, "fetching a search's result"):
                ans = s.future.result(timeout=50)
        except (Exception, ClusterTimeout) as exc:  # noqa: BLE001
            return Outcome(failure=f"cluster {self.address}: fetching the result failed ({_short(exc)})")
        if not isinstance(ans, dict) or "record" not in ans:
            return Outcome(failure=f"cluster {self.address}: the worker answered {type(ans).__name__}")
        return Outcome(answer=ans)

    def _error(self, s: Submitted, status: str) -> str:
        if status != "error":
            return f"cluster {self.address}: the search was {status}"
        try:
            with bounded(30, "fetching a search's error"):
                exc = s.future.exception(timeout=20)
        except (Exception, ClusterTimeout) as e:  # noqa: BLE001
            exc = e
        name = type(exc).__name__
        if name == "KilledWorker":
            return f"cluster {self.address}: the worker running the search died ({_short(exc)})"
        return f"cluster {self.address}: the search raised {name}: {_short(exc)}"

    def _cancel(self, s: Submitted) -> None:
        try:
            with bounded(10, "cancelling a search"):
                s.future.cancel()
        except (Exception, ClusterTimeout):  # noqa: BLE001
            pass


def _short(exc: BaseException, limit: int = 160) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
