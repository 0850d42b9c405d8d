"""Which GPU a search runs on, and when it holds it.

A kernel's search is *assigned* a GPU (:func:`assign`: the one this process used last, its warm
worker process is there; else one from a place that depends on the process id, so that
concurrent compilations spread) and holds it only for each GPU step (:func:`gpu_step`): a
differential check or a compute-sanitizer run shares the GPU with other compilations' checks,
a timing holds it alone. Proposing candidates, ptxas, spec inference and the emulator run
without it, so ``make -j8`` on one GPU interleaves eight searches at the granularity of their
GPU steps instead of queueing whole searches. The shared/exclusive lock is a pair of ``flock``
files per GPU: a turnstile every step passes, and the GPU's lock (shared for checks,
exclusive for timing); a timing waiting at the GPU's lock keeps the turnstile, so new checks
queue behind it and a timing is never starved.

``NVCC_PLUS_GPU_LEASE=search`` restores the old economy: the search *leases* a GPU for its
whole duration (:func:`lease`: every allowed GPU tried without waiting, then the first to free
up). A cluster worker's search leases its GPU the same way.

The locks are :mod:`superopt.judge.gpu_lock`'s files, named by the GPU's UUID (``GPU-…`` as
``cuDeviceGetUuid`` gives it and nvidia-smi prints it): two builds with different
``CUDA_VISIBLE_DEVICES`` orders, or a cluster worker pinned to one GPU beside a local build,
still exclude each other on the same physical GPU.

GPUs are enumerated in this process through the CUDA driver (cuda-python: ``cuInit``,
``cuDeviceGetCount``, ``cuDeviceGetUuid``, ``cuDeviceGetName``; no context is created, so no
GPU memory is taken), in CUDA's own ordinal order under this process's
``CUDA_VISIBLE_DEVICES``; the GPU worker process inherits the same environment, is started on
the leased ordinal and reports the UUID it bound to, which must be the leased one.

``NVCC_PLUS_GPUS`` (comma-separated ordinals as CUDA numbers them here, or UUIDs, or UUID
prefixes of at least 8 characters as nvidia-smi shows them) restricts the set.

Test hook: ``SUPEROPT_FAKE_GPUS=N`` (or a comma-separated list of ``UUID=NAME``) replaces the
enumeration by N fake GPUs; only judges that do not start the GPU worker can use them (the CPU
tests of this module and the dry run of ``bench/scale``).
"""
from __future__ import annotations

import fcntl
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

from superopt.judge.gpu_lock import lock_path
from superopt.store.safe_files import open_regular


@dataclass(frozen=True)
class Device:
    ordinal: int            # CUDA's ordinal in this process's view (CUDA_VISIBLE_DEVICES applied)
    uuid: str               # "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
    name: str               # the model, e.g. "NVIDIA H200"


class NoDevice(RuntimeError):
    """No GPU can be used here (none visible, the driver is missing, NVCC_PLUS_GPUS names none)."""


class GpuBusy(BaseException):
    """The GPU stayed taken until the deadline (every allowed GPU, for a whole-search lease; the
    assigned one, for a GPU step). A BaseException on purpose, like the driver's
    OptimizerTimeout: no ``except Exception`` between the step and the search may turn the
    time limit into one candidate's failure; the search catches it (superopt.decide.searches)."""


class GpusSettingError(ValueError):
    """NVCC_PLUS_GPUS names a GPU that is not visible here; the message says which ones are."""


def format_uuid(raw) -> str:
    """nvidia-smi's form of a CUuuid's 16 bytes."""
    b = raw.encode("latin-1") if isinstance(raw, str) else bytes(raw)
    h = b.hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


_ENUM_LOCK = threading.Lock()
_ENUMERATED: list[Device] | None = None
_ENUM_ERROR: str | None = None


def _fake_devices(spec: str) -> list[Device]:
    spec = spec.strip()
    if spec.isdigit():
        return [Device(i, f"GPU-fake{i:04d}-0000-0000-0000-000000000000", "Fake GPU") for i in range(int(spec))]
    out = []
    for i, item in enumerate(x for x in spec.split(",") if x.strip()):
        uuid, _, name = item.strip().partition("=")
        out.append(Device(i, uuid, name or "Fake GPU"))
    return out


def _cuda_devices() -> list[Device]:
    from cuda.bindings import driver as cu

    def chk(res, what):
        err, *rest = res if isinstance(res, tuple) else (res,)
        if int(err) != 0:
            raise NoDevice(f"{what} failed ({err})")
        return rest[0] if len(rest) == 1 else rest

    chk(cu.cuInit(0), "cuInit")
    n = int(chk(cu.cuDeviceGetCount(), "cuDeviceGetCount"))
    out = []
    for i in range(n):
        dev = chk(cu.cuDeviceGet(i), "cuDeviceGet")
        uuid = chk(cu.cuDeviceGetUuid(dev), "cuDeviceGetUuid")
        name = chk(cu.cuDeviceGetName(256, dev), "cuDeviceGetName")
        out.append(Device(i, format_uuid(uuid.bytes),
                          bytes(name).split(b"\0")[0].decode(errors="replace")))
    return out


def visible_devices(*, refresh: bool = False) -> list[Device]:
    """Every GPU CUDA shows this process, in ordinal order (cached per process).
    Raises :class:`NoDevice` with the reason when there is none."""
    global _ENUMERATED, _ENUM_ERROR
    from superopt.config.settings import env_value
    fake = env_value("SUPEROPT_FAKE_GPUS")
    if fake:
        return _fake_devices(fake)
    with _ENUM_LOCK:
        if _ENUMERATED is None and (_ENUM_ERROR is None or refresh):
            try:
                _ENUMERATED, _ENUM_ERROR = _cuda_devices(), None
            except NoDevice as exc:
                _ENUM_ERROR = str(exc)
            except Exception as exc:  # noqa: BLE001 - no driver, no cuda-python: no GPU
                _ENUM_ERROR = f"{type(exc).__name__}: {exc}"
        if _ENUM_ERROR is not None:
            raise NoDevice(f"no GPU: {_ENUM_ERROR}")
        if not _ENUMERATED:
            raise NoDevice("no GPU: CUDA shows no device to this process"
                           + (f" (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r})"
                              if "CUDA_VISIBLE_DEVICES" in os.environ else ""))
        return list(_ENUMERATED)


def select(devices: list[Device], setting: str | None) -> list[Device]:
    """The devices ``setting`` (NVCC_PLUS_GPUS: ordinals, UUIDs or UUID prefixes) names, in its
    order; all of them when it is empty."""
    if not setting or not setting.strip():
        return list(devices)
    out: list[Device] = []
    for item in (x.strip() for x in setting.split(",")):
        if not item:
            continue
        if item.isdigit():
            found = [d for d in devices if d.ordinal == int(item)]
        else:
            key = item.lower()
            key = key if key.startswith(("gpu-", "mig-")) else "gpu-" + key
            found = [d for d in devices if d.uuid.lower() == key] or \
                    ([d for d in devices if d.uuid.lower().startswith(key)] if len(key) >= 12 else [])
        if len(found) != 1:
            shown = ", ".join(f"{d.ordinal} {d.uuid}" for d in devices)
            raise GpusSettingError(f"NVCC_PLUS_GPUS: {item!r} names "
                                   f"{'no' if not found else 'more than one'} visible GPU (visible: {shown})")
        if found[0] not in out:
            out.append(found[0])
    return out


def driver_present() -> bool:
    """Whether this machine can have a GPU at all (the NVIDIA driver's device node, or the
    test hook): the first, free question a build without a GPU asks (no CUDA process started)."""
    from superopt.config.settings import env_value
    return bool(env_value("SUPEROPT_FAKE_GPUS")) or os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg")


def allowed_devices() -> list[Device]:
    """The GPUs searches may use here: the visible ones, restricted by NVCC_PLUS_GPUS."""
    from superopt.config.settings import env_value
    devs = select(visible_devices(), env_value("NVCC_PLUS_GPUS"))
    if not devs:
        raise NoDevice("no GPU: NVCC_PLUS_GPUS names none")
    return devs


# --------------------------------------------------------------------------- taking one

def _try(dev: Device) -> int | None:
    """The fd holding ``dev``'s lock, or None when another holder has it."""
    fd = open_regular(lock_path(dev.uuid), os.O_RDWR | os.O_CREAT)    # no symlink, no FIFO
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    except OSError:
        pass
    return fd


def order(devices: list[Device], prefer: Device | None = None, pid: int | None = None) -> list[Device]:
    """The order in which a process tries the GPUs: the one it used last, then the others
    starting at a place given by its pid (concurrent compilations start on different GPUs)."""
    if not devices:
        return []
    k = (os.getpid() if pid is None else pid) % len(devices)
    rot = devices[k:] + devices[:k]
    if prefer is not None and prefer in rot:
        rot.remove(prefer)
        rot.insert(0, prefer)
    return rot


def acquire(devices: list[Device], *, deadline: float | None = None, prefer: Device | None = None,
            poll: float = 0.05) -> tuple[Device, int]:
    """Take a free GPU of ``devices``: (device, fd holding its lock). Tries each without
    waiting, then polls all of them until one is free (the first to free up wins, instead of
    queueing behind one whose search may be long). ``deadline`` (time.time()) None waits for
    ever; past it :class:`GpuBusy`."""
    if not devices:
        raise NoDevice("no GPU to take")
    tries = order(devices, prefer)
    while True:
        for dev in tries:
            fd = _try(dev)
            if fd is not None:
                return dev, fd
        if deadline is not None and time.time() >= deadline:
            raise GpuBusy(f"every GPU ({len(devices)}) stayed busy until the time limit")
        time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.time())))


def _flock_until(fd: int, how: int, deadline: float | None, poll: float = 0.002) -> None:
    """flock ``fd`` (LOCK_SH or LOCK_EX), waiting until ``deadline`` (time.time(); None: for
    ever); :class:`GpuBusy` past it."""
    if deadline is None:
        fcntl.flock(fd, how)
        return
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.time()
            if left <= 0:
                raise GpuBusy("the GPU stayed busy until the time limit") from None
            time.sleep(min(poll, left))
            poll = min(poll * 2, 0.02)


def release(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


_local = threading.local()
_LAST: Device | None = None          # the GPU this process leased last (its worker is warm there)
_HELD: dict[int, int] = {}           # ordinal -> leases held in this process (all threads)
_HELD_LOCK = threading.Lock()


def current() -> Device | None:
    """The GPU this thread's search runs on (leased or assigned), if any."""
    return getattr(_local, "device", None)


def lease_mode() -> str:
    """``step`` (hold the GPU per GPU step; the default) or ``search`` (NVCC_PLUS_GPU_LEASE)."""
    from superopt.config.settings import SettingError, env_value
    mode = (env_value("NVCC_PLUS_GPU_LEASE") or "step").strip().lower()
    if mode not in ("step", "search"):
        from superopt.config.settings import did_you_mean
        raise SettingError(f"NVCC_PLUS_GPU_LEASE={mode!r} is not one of step, search"
                           + did_you_mean(mode, ("step", "search")))
    return mode


@contextmanager
def assign(*, deadline: float | None = None, devices: list[Device] | None = None):
    """Choose the GPU this thread's search runs on, without holding it: each GPU step holds it
    (:func:`gpu_step`), waiting at most until ``deadline``. Yields the :class:`Device`.
    Raises :class:`NoDevice` when there is none."""
    held = current()
    if held is not None:
        yield held
        return
    devs = devices if devices is not None else allowed_devices()
    if not devs:
        raise NoDevice("no GPU to take")
    with _using(order(devs, _LAST)[0], deadline=deadline) as dev:
        yield dev


@contextmanager
def _using(dev: Device, *, deadline: float | None = None, leased: bool = False):
    """This thread's search runs on ``dev`` for the block (what assign and lease share): the
    process's count of its users, and when the process moves to another GPU, the workers left
    idle on the old one are closed."""
    global _LAST
    _local.device, _local.deadline = dev, deadline
    _local.leased_uuid = dev.uuid if leased else None
    with _HELD_LOCK:
        _HELD[dev.ordinal] = _HELD.get(dev.ordinal, 0) + 1
    switched = _LAST is not None and _LAST != dev
    _LAST = dev
    try:
        if switched:
            _close_idle_workers()
        yield dev
    finally:
        _local.device = _local.deadline = _local.leased_uuid = None
        with _HELD_LOCK:
            _HELD[dev.ordinal] -= 1


def in_thread(fn):
    """``fn`` for another thread, on this thread's GPU: the same device, deadline and lease, so
    that its GPU steps wait no longer than this thread's would (:class:`GpuBusy` at the same
    deadline) and a whole-search lease covers them too. None while this thread holds a GPU step
    or a timing window: a step of another thread would wait for it, so ``fn`` must run here."""
    if getattr(_local, "step", None) is not None or getattr(_local, "window", None) is not None:
        return None
    dev = current()
    if dev is None:
        return fn
    deadline = getattr(_local, "deadline", None)
    leased = getattr(_local, "leased_uuid", None) == dev.uuid
    from superopt.judge.backends.base import backend_slot, current_slot
    slot = current_slot()           # and the same GPU worker (a search thread's own)

    def run(*a, **kw):
        with _using(dev, deadline=deadline, leased=leased), backend_slot(slot):
            return fn(*a, **kw)
    return run


STEP_KINDS = {"check": fcntl.LOCK_SH, "sanitize": fcntl.LOCK_SH, "time": fcntl.LOCK_EX}


def checks_mode() -> str:
    """``shared`` (compilations' checks overlap on a GPU; the default) or ``serial`` (one check at
    a time: a third lock, ``<uuid>-checks``, taken after the GPU's shared lock).

    Why serial exists: without MPS, kernels and copies of different processes do not run at
    once; the driver time-slices their contexts, and every synchronous call of one worker
    (a pageable copy, cuMemFree, an event wait) waits for the others' slices. Eight
    overlapping checks can each take far longer than eight checks in turn."""
    from superopt.config.settings import SettingError, env_value
    mode = (env_value("NVCC_PLUS_GPU_CHECKS") or "shared").strip().lower()
    if mode not in ("shared", "serial"):
        from superopt.config.settings import did_you_mean
        raise SettingError(f"NVCC_PLUS_GPU_CHECKS={mode!r} is not one of shared, serial"
                           + did_you_mean(mode, ("shared", "serial")))
    return mode


@contextmanager
def gpu_step(gpu: str, kind: str):
    """Hold GPU ``gpu`` (its UUID) for one step: ``check`` and ``sanitize`` share it with other
    compilations' checks, ``time`` holds it alone. A no-op inside another step of this thread
    or under a whole-search lease of that GPU. Waits until the search's deadline (:func:`assign`);
    the wait and the holding are recorded (superopt.judge.phases: ``gpu_wait``, ``lease``).

    Yields a function that lets the GPU go before the block ends (a run request's reply is
    host work: :meth:`superopt.judge.backends.gpu.GpuBackend._send`); a no-op where this step
    does not hold the GPU itself (inside another step, a window or a lease)."""
    from superopt.judge.phases import phase
    how = STEP_KINDS[kind]
    window = getattr(_local, "window", None)
    if window is not None and window["gpu"] != gpu:
        window = None
    if getattr(_local, "step", None) is not None or getattr(_local, "leased_uuid", None) == gpu:
        if how == fcntl.LOCK_EX and getattr(_local, "step", None) == fcntl.LOCK_SH:
            raise RuntimeError(f"a {kind} step inside a shared GPU step would deadlock")
        yield _held_elsewhere
        return
    deadline = getattr(_local, "deadline", None)
    serial = kind == "check" and checks_mode() == "serial"
    asked = time.time()
    alone = None
    with phase("gpu_wait"):
        turn = open_regular(lock_path(f"{gpu}-turnstile"), os.O_RDWR | os.O_CREAT)     # no symlink, no FIFO
        try:
            main = open_regular(lock_path(gpu), os.O_RDWR | os.O_CREAT)
            try:
                _flock_until(turn, fcntl.LOCK_EX, deadline)
                _flock_until(main, how, deadline)
            except BaseException:
                os.close(main)
                raise
        finally:
            os.close(turn)            # closing drops the turnstile: the next step may queue
        if serial:
            # after the GPU's lock and the turnstile: a timing queued at the turnstile still
            # waits only for the checks already past it
            try:
                alone = open_regular(lock_path(f"{gpu}-checks"), os.O_RDWR | os.O_CREAT)
                _flock_until(alone, fcntl.LOCK_EX, deadline)
            except BaseException:
                if alone is not None:
                    os.close(alone)
                release(main)
                raise
    _local.step = how
    got = time.time()
    if window is not None and how == fcntl.LOCK_EX:
        # the window's first timing: the GPU stays held alone until the window ends, and the
        # steps inside it are no-ops (superopt.judge.devices.exclusive_window)
        window.update(main=main, asked=asked, got=got)
        yield _held_elsewhere         # the window adds its whole hold to the lease phase
        return
    released: list[float] = []

    def let_go() -> None:
        if released:
            return
        if alone is not None:
            release(alone)
        release(main)
        released.append(time.time())

    try:
        yield let_go
    finally:
        _local.step = None
        let_go()
        from superopt.judge.phases import add as add_phase
        add_phase("lease", released[0] - got)
        _log_step(gpu, kind, asked, got, released[0])


def _held_elsewhere() -> None:
    """:func:`gpu_step`'s early release where the step does not hold the GPU itself."""


def holds_alone(gpu: str) -> bool:
    """Whether this thread holds GPU ``gpu`` alone now: a timing window that has taken it, a
    whole-search lease, or a ``time`` step it is inside."""
    window = getattr(_local, "window", None)
    if window is not None and window["gpu"] == gpu and window["main"] is not None:
        return True
    return getattr(_local, "leased_uuid", None) == gpu or getattr(_local, "step", None) == fcntl.LOCK_EX


@contextmanager
def exclusive_window(gpu: str):
    """Several timings of this thread in one hold of GPU ``gpu`` alone: other compilations'
    checks drain once for the window, not once per timing. The GPU is taken at the window's
    first ``time`` step, not on entry, so the CPU work before it (a kernel's first timing makes
    its input set: at captured sizes a second or more) holds nothing; from then on it is held
    until the window ends, and every step inside is a no-op. A no-op inside a step or a
    whole-search lease. Checks before the first timing take the GPU as usual."""
    if getattr(_local, "step", None) is not None or getattr(_local, "leased_uuid", None) == gpu \
            or getattr(_local, "window", None) is not None:
        yield
        return
    from superopt.judge.phases import current as phases
    window = {"gpu": gpu, "main": None, "asked": None, "got": None}
    timed_before = phases().get("gpu_time") if phases() is not None else 0.0
    _local.window = window
    try:
        yield
    finally:
        _local.window = None
        if window["main"] is not None:
            _local.step = None
            release(window["main"])
            released = time.time()
            _log_step(gpu, "time", window["asked"], window["got"], released)
            if phases() is not None:
                held = released - window["got"]
                phases().add("lease", held)
                # every timing request of the window ran after its first took the GPU
                phases().add("window_host", max(0.0, held - (phases().get("gpu_time") - timed_before)))


def _log_step(gpu: str, kind: str, asked: float, got: float, released: float) -> None:
    """One JSON line per GPU step in SUPEROPT_GPU_STEP_LOG (a developer setting: the economy
    bench turns it into a timeline of who held and who waited for the GPU). One short
    O_APPEND write, so concurrent compilations' lines never interleave."""
    from superopt.config.settings import env_value
    path = env_value("SUPEROPT_GPU_STEP_LOG")
    if not path:
        return
    import json
    line = json.dumps({"gpu": gpu, "kind": kind, "pid": os.getpid(), "thread": threading.get_ident(),
                       "asked": round(asked, 6), "got": round(got, 6), "released": round(released, 6)})
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass                          # a diagnostic: never a search's failure


@contextmanager
def lease(*, deadline: float | None = None, devices: list[Device] | None = None):
    """Hold one free GPU for a block (re-entrant within a thread): yields the :class:`Device`.
    Raises :class:`NoDevice` when there is none and :class:`GpuBusy` past ``deadline``."""
    held = current()
    if held is not None:
        yield held
        return
    devs = devices if devices is not None else allowed_devices()
    with _lease_phase():
        dev, fd = acquire(devs, deadline=deadline, prefer=_LAST)
    held_since = time.perf_counter()
    try:
        with _using(dev, leased=True):
            yield dev
    finally:
        release(fd)
        from superopt.judge.phases import current as phases
        if phases() is not None:
            phases().add("lease", time.perf_counter() - held_since)


def _lease_phase():
    from superopt.judge.phases import phase
    return phase("gpu_wait")


def held_ordinals() -> set[int]:
    with _HELD_LOCK:
        return {o for o, n in _HELD.items() if n > 0}


def _close_idle_workers() -> None:
    """One warm GPU worker per process is enough: close those on GPUs no thread holds now
    (each keeps a CUDA context, some hundreds of MB of GPU memory)."""
    try:
        from superopt.judge.backends.base import close_idle_gpu_backends
        close_idle_gpu_backends(held_ordinals())
    except Exception:  # noqa: BLE001 - tidying up must not fail a search
        pass


def default_ordinal() -> int:
    """The ordinal the GPU backend uses: the lease's, else SUPEROPT_GPU_DEVICE, else 0."""
    dev = current()
    if dev is not None:
        return dev.ordinal
    from superopt.config.settings import env_number
    return env_number("SUPEROPT_GPU_DEVICE", 0, minimum=0, integer=True)
