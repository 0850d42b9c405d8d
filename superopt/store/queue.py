"""The queue of searches after the build (``NVCC_PLUS_SEARCH=deferred``), on disk.

A deferred compilation applies locked and cached decisions, keeps nvcc's code for the other
kernels and writes one *entry* per PTX module here: the module's text, its source, target and
working directory, the kernels left to search, and the settings that shape their decisions.
A *runner* (:mod:`superopt.decide.queue_runner`, a detached process) takes entries one at a
time, runs the ordinary pipeline on them -- so the decisions land in the cache, and in the
lockfile under ``NVCC_PLUS_LOCK=write`` -- and removes an entry only after that run returned:
a runner killed in the middle loses nothing the build needed (the build already used nvcc's
code) and nothing stored (each kernel's decision is stored as soon as it is made).

Layout, under ``<cache dir>/queue/`` (owner-only, :mod:`superopt.store.private_dir`)::

    entries/<name>.json     one per module; <name> hashes what decides its kernels, so a
                            module queued twice (make clean; make) is one entry
    done/<name>             the entry was run; while it is younger than the entry age limit the
                            same module is not queued again (a kernel that a search could not
                            decide -- no launch spec -- would otherwise be searched after every build)
    attempts/<name>         runs begun on the entry: one that killed its runner three times is dropped
    runner.<slot>.lock      held (flock) by the runner of that slot for its whole life: the kernel
                            releases it when the process dies, so a dead runner's slot is free
    runner.<slot>.json      what that runner is doing (pid, busy or idle, seconds spent, why it stopped)
    runner.log              the runners' log

Limits: the queue's disk (``NVCC_PLUS_QUEUE_MAX_SIZE``: a compilation that would pass it queues
nothing and says so in one line), entry age (``NVCC_PLUS_QUEUE_MAX_AGE`` days), and, in the
runner, the budget (``NVCC_PLUS_QUEUE_BUDGET`` seconds per runner) and the idle exit
(``NVCC_PLUS_QUEUE_IDLE_EXIT``).
"""
from __future__ import annotations

import datetime as _dt
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from superopt.config.settings import SETTINGS
from superopt.store.cache import atomic_write_text, parse_size
from superopt.store.private_dir import open_private, private_dir

QUEUE_DIR = "queue"
ENTRY_VERSION = 1
MAX_ATTEMPTS = 3             # runs begun on one entry before it is dropped (each killed its runner)
SLOT_RETRY_S = 1.0           # a starting runner retries its slot lock this long (a status check holds it briefly)
LOG_ROTATE_BYTES = 1 << 20   # runner.log is moved to runner.log.1 past this when a runner starts
RUNNER_MODULE = "superopt.decide.queue_runner"

# Settings a queued search does not carry: the driver's own, the queue's (the runner's), one that
# would write a secret to disk (the runner uses its own environment's API key), and the mode
# (the runner searches now).
NOT_CARRIED = frozenset({
    "NVCC_PLUS_MODE", "NVCC_PLUS_REAL_NVCC", "NVCC_PLUS_CONFIG", "NVCC_PLUS_BUILD_BUDGET",
    "NVCC_PLUS_BUILD_LEDGER", "NVCC_PLUS_PROGRESS", "NVCC_PLUS_OPTIMIZER", "NVCC_PLUS_SEARCH",
    "NVCC_PLUS_QUEUE_BUDGET", "NVCC_PLUS_QUEUE_MAX_SIZE", "NVCC_PLUS_QUEUE_MAX_AGE",
    "NVCC_PLUS_QUEUE_IDLE_EXIT", "NVCC_PLUS_QUEUE_RUNNERS", "NVCC_PLUS_LLM_API_KEY", "NVCC_PLUS_DEPTH",
})
# Carried, but not part of what names an entry: where records go and how chatty it is (a tune
# makes a fresh records folder per run; the same module is still the same search).
NOT_IDENTITY = frozenset({"NVCC_PLUS_REPORT_DIR", "NVCC_PLUS_VERBOSE"})
# Variables outside the table that change a search's result or key: the tools found on PATH
# (ptxas's version is part of the key), the GPUs visible.
CARRIED_ENV = ("PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")


# --------------------------------------------------------------------------- limits

@dataclass(frozen=True)
class QueueLimits:
    budget_s: float | None = 3600.0      # per runner lifetime; None: no limit
    max_bytes: int = 256 << 20           # 0: no limit
    max_age_days: float = 7.0
    idle_exit_s: float = 60.0
    runners: int | None = None           # None: one per GPU searches may use

    def argv(self) -> list[str]:
        """The runner's command-line form of these limits."""
        return ["--budget", f"{self.budget_s or 0:g}", "--max-age", f"{self.max_age_days:g}",
                "--idle-exit", f"{self.idle_exit_s:g}", "--runners", str(self.runners or "gpus")]


def limits_from(settings) -> QueueLimits:
    """The queue's limits from a run's :class:`~superopt.config.resolved.Settings`; a bad value is
    a :class:`SettingError` naming the setting and where it came from."""
    budget = settings.number("NVCC_PLUS_QUEUE_BUDGET", 3600.0, minimum=0)
    raw = settings.raw("NVCC_PLUS_QUEUE_MAX_SIZE")
    try:
        max_bytes = parse_size("256M" if raw is None or str(raw).strip() == "" else raw)
    except ValueError as exc:
        raise settings.error("NVCC_PLUS_QUEUE_MAX_SIZE", f"must be a size such as 256M or 1G ({exc})") from None
    runners_raw = settings.text("NVCC_PLUS_QUEUE_RUNNERS", "gpus")
    runners = None
    if runners_raw != "gpus":
        if not (runners_raw.isdigit() and int(runners_raw) >= 1):
            raise settings.error("NVCC_PLUS_QUEUE_RUNNERS", "must be a whole number >= 1 or gpus")
        runners = int(runners_raw)
    return QueueLimits(budget_s=budget or None, max_bytes=max_bytes,
                       max_age_days=settings.number("NVCC_PLUS_QUEUE_MAX_AGE", 7.0, minimum=0),
                       idle_exit_s=settings.number("NVCC_PLUS_QUEUE_IDLE_EXIT", 60.0, minimum=0),
                       runners=runners)


SEARCH_MODES = ("now", "deferred")


def search_mode(settings) -> str:
    """``now`` or ``deferred`` (NVCC_PLUS_SEARCH, toml ``search``); anything else is a SettingError."""
    return settings.choice("NVCC_PLUS_SEARCH", SEARCH_MODES, "now")


# --------------------------------------------------------------------------- entries

def settings_snapshot(settings) -> dict:
    """What a queued search needs of the compilation's settings, as data: the nvcc-plus.toml
    document, the values given by flags (by toml key) and by the environment (by variable).
    The runner rebuilds the same settings from it, whatever its own environment says."""
    flags, env = {}, {}
    for s in SETTINGS:
        if s.alias_of or s.env in NOT_CARRIED or s.group == "internal":
            continue
        raw, origin = settings.raw(s.env), settings.origin(s.env)
        if raw is None:
            continue
        if origin.startswith("--") and s.toml:
            flags[s.toml] = raw
        elif origin.startswith("env "):
            env[s.env] = str(raw)
    doc = json.loads(json.dumps(dict(settings.document), default=str))
    extra = {k: os.environ[k] for k in CARRIED_ENV if os.environ.get(k)}
    return {"document": doc, "flags": flags, "env": env, "extra_env": extra}


def entry_name(ptx: str, target: str, source: str | None, snapshot: dict, launches: str | None = None) -> str:
    """The entry's name: a hash of what decides its kernels' searches (the launches as the build
    preprocessed them among it, when the driver had them: another -DTHREADS is another search)."""
    ident = {"document": {k: v for k, v in snapshot["document"].items() if k != "verbose"},
             "flags": {k: v for k, v in snapshot["flags"].items() if k != "verbose"},
             "env": {k: v for k, v in snapshot["env"].items() if k not in NOT_IDENTITY},
             "extra_env": snapshot["extra_env"]}
    h = hashlib.sha256()
    parts = [f"v{ENTRY_VERSION}", ptx, target, os.path.abspath(source) if source else "",
             json.dumps(ident, sort_keys=True)] + ([launches] if launches else [])
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def make_entry(ptx: str, *, target: str, source: str | None, kernels: list[str], settings,
               launches: str | None = None) -> dict:
    """``launches``: the user's lines of the unit the build preprocessed
    (superopt.specs.source_launches.unit_launch_text), kept for the runner: the unit itself is
    gone by the time it runs."""
    snap = settings_snapshot(settings)
    now = time.time()
    entry = {"version": ENTRY_VERSION, "name": entry_name(ptx, target, source, snap, launches),
             "created": _dt.datetime.fromtimestamp(now, _dt.timezone.utc).isoformat(timespec="seconds"),
             "created_ts": now, "source": source, "target": target, "cwd": os.getcwd(),
             "kernels": list(kernels), "settings": snap, "ptx": ptx}
    if launches:
        entry["launches"] = launches
    return entry


@dataclass
class Added:
    """What became of a compilation's entry."""
    status: str                 # queued | already queued | run before | full
    name: str
    path: Path
    message: str = ""           # for "full": the one line the compilation prints
    done_at: float | None = None


@dataclass
class Listed:
    name: str
    path: Path
    mtime: float
    size: int


class Claim:
    """An entry a runner holds (an flock on the entry's file): no other runner takes it meanwhile;
    when the runner dies the kernel releases it and another takes it."""

    def __init__(self, queue: "Queue", name: str, path: Path, fd: int, doc: dict):
        self.queue, self.name, self.path, self.fd, self.doc = queue, name, path, fd, doc

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


class Queue:
    def __init__(self, cache_root):
        self.cache_root = Path(cache_root)
        self.root = self.cache_root / QUEUE_DIR
        self.entries_dir = self.root / "entries"
        self.done_dir = self.root / "done"
        self.attempts_dir = self.root / "attempts"
        self.log_path = self.root / "runner.log"

    def ensure(self) -> "Queue":
        """Create the folders, owner-only (an entry holds the user's code and settings)."""
        self.cache_root.mkdir(parents=True, exist_ok=True)
        for d in (self.root, self.entries_dir, self.done_dir, self.attempts_dir):
            private_dir(str(d))
        return self

    # ---- the entries -------------------------------------------------------------------
    def listing(self) -> list[Listed]:
        """The entries, oldest first (by the time they were written: an entry is written once)."""
        out = []
        try:
            names = os.listdir(self.entries_dir)
        except OSError:
            return []
        for n in names:
            if n.startswith(".") or not n.endswith(".json"):
                continue
            p = self.entries_dir / n
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out.append(Listed(n[:-5], p, st.st_mtime, st.st_size))
        return sorted(out, key=lambda e: (e.mtime, e.name))

    def size(self) -> tuple[int, int]:
        """(entries, bytes)."""
        ls = self.listing()
        return len(ls), sum(e.size for e in ls)

    def path(self, name: str) -> Path:
        return self.entries_dir / f"{name}.json"

    def add(self, entry: dict, limits: QueueLimits) -> Added:
        """Write ``entry`` unless the same module is queued already, was run lately, or the queue
        would pass its disk limit (then nothing is written and ``message`` says so). Raises
        OSError when the folder cannot be written (the caller keeps nvcc's code and says so)."""
        self.ensure()
        name = entry["name"]
        path = self.path(name)
        done = self.done_at(name)
        if done is not None and (limits.max_age_days <= 0 or time.time() - done < limits.max_age_days * 86400):
            return Added("run before", name, path, done_at=done)
        text = json.dumps(entry, sort_keys=True)
        fd = open_private(str(self.root / ".write.lck"), os.O_RDWR | os.O_CREAT)
        try:
            # Compilations of one make -j serialize their check-and-write here (milliseconds);
            # runners never take this lock, so a compilation never waits for a search.
            fcntl.flock(fd, fcntl.LOCK_EX)
            if path.exists():
                return Added("already queued", name, path)
            self.drop_old(limits.max_age_days)
            if limits.max_bytes:
                n, used = self.size()
                if used + len(text) > limits.max_bytes:
                    return Added("full", name, path, message=(
                        f"search not queued: the queue ({self.entries_dir}) holds {n} entries, {_mib(used)}, "
                        f"and this one ({_mib(len(text))}) would pass its limit of {_mib(limits.max_bytes)} "
                        f"(NVCC_PLUS_QUEUE_MAX_SIZE); nvcc's code kept"))
            atomic_write_text(path, text)
            os.chmod(path, 0o600)
        finally:
            os.close(fd)
        return Added("queued", name, path)

    def drop_old(self, max_age_days: float) -> list[str]:
        """Remove entries written more than ``max_age_days`` ago (not a runner's held one); their names."""
        if max_age_days <= 0:
            return []
        cutoff = time.time() - max_age_days * 86400
        dropped = []
        for e in self.listing():
            if e.mtime >= cutoff:
                continue
            claim = self._try_claim(e)
            if claim is None:
                continue
            with claim:
                self._remove(e.name)
            dropped.append(e.name)
        return dropped

    def _try_claim(self, e: Listed) -> Claim | None:
        try:
            fd = open_private(str(e.path), os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # the entry may have been removed (and the name written again) between listing and lock
            if os.fstat(fd).st_ino != os.stat(e.path).st_ino:
                raise FileNotFoundError(e.path)
        except OSError:
            os.close(fd)
            return None
        return Claim(self, e.name, e.path, fd, {})

    def claim_next(self) -> Claim | None:
        """The oldest entry no other runner holds, held and read; None when there is none.
        An entry that cannot be read (truncated by a full disk, another version) is removed."""
        for e in self.listing():
            claim = self._try_claim(e)
            if claim is None:
                continue
            try:
                with os.fdopen(os.dup(claim.fd), encoding="utf-8") as f:
                    doc = json.load(f)
                if not isinstance(doc, dict) or doc.get("version") != ENTRY_VERSION or "ptx" not in doc:
                    raise ValueError(f"not a version {ENTRY_VERSION} queue entry")
            except (OSError, ValueError, UnicodeDecodeError) as exc:
                self._remove(e.name)
                claim.release()
                _log_line(f"{e.path}: unreadable queue entry removed ({exc})")
                continue
            claim.doc = doc
            return claim
        return None

    def _remove(self, name: str) -> None:
        for p in (self.path(name), self.attempts_dir / name):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def finish(self, claim: Claim, *, done: bool = True) -> None:
        """The entry was run (``done``) or given up: remove it (while still held) and remember it."""
        if done:
            self.mark_done(claim.name)
        self._remove(claim.name)
        claim.release()

    # ---- run before, attempts ------------------------------------------------------------
    def mark_done(self, name: str) -> None:
        p = self.done_dir / name
        fd = open_private(str(p), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.close(fd)
        os.utime(p)

    def done_at(self, name: str) -> float | None:
        try:
            return os.lstat(self.done_dir / name).st_mtime
        except OSError:
            return None

    def forget_done(self) -> int:
        """Forget which modules were run (``superopt cache clear``): they are queued again."""
        n = 0
        for p in self.done_dir.glob("*"):
            p.unlink(missing_ok=True)
            n += 1
        return n

    def begin_attempt(self, name: str) -> int:
        """Count a run begun on the entry (before it starts: a run that kills its runner counts)."""
        p = self.attempts_dir / name
        try:
            n = int(p.read_text().strip() or 0)
        except (OSError, ValueError):
            n = 0
        self.set_attempts(name, n + 1)
        return n + 1

    def set_attempts(self, name: str, n: int) -> None:
        fd = open_private(str(self.attempts_dir / name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w") as f:
            f.write(f"{n}\n")

    # ---- runners -------------------------------------------------------------------------
    def slot_lock(self, slot: int) -> Path:
        return self.root / f"runner.{slot}.lock"

    def state_path(self, slot: int) -> Path:
        return self.root / f"runner.{slot}.json"

    def take_slot(self, slot: int, retry_s: float = SLOT_RETRY_S) -> int | None:
        """The fd holding slot ``slot``'s runner lock, or None when a live runner holds it."""
        self.ensure()
        fd = open_private(str(self.slot_lock(slot)), os.O_RDWR | os.O_CREAT)
        end = time.monotonic() + retry_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= end:
                    os.close(fd)
                    return None
                time.sleep(0.05)

    def slot_running(self, slot: int) -> bool:
        """Whether a live runner holds the slot (asked with a shared lock, held for microseconds)."""
        try:
            fd = open_private(str(self.slot_lock(slot)), os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    def slots(self) -> list[int]:
        out = set()
        for p in self.root.glob("runner.*.lock"):
            mid = p.name[len("runner."):-len(".lock")]
            if mid.isdigit():
                out.add(int(mid))
        return sorted(out)

    def write_state(self, slot: int, **state) -> None:
        state = {**state, "updated": time.time()}
        atomic_write_text(self.state_path(slot), json.dumps(state, sort_keys=True))

    def read_state(self, slot: int) -> dict:
        try:
            data = json.loads(self.state_path(slot).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def status(self) -> dict:
        """Entries, bytes, the oldest entry's age and each runner slot's state, for ``cache stats``
        and ``cache wait``: a slot is ``running`` while a live process holds its lock."""
        ls = self.listing()
        runners = []
        for slot in self.slots():
            st = self.read_state(slot)
            running = self.slot_running(slot)
            state = st.get("state") if running else "stopped"
            if not running and st.get("state") in ("busy", "idle", "starting"):
                st = {**st, "reason": f"pid {st.get('pid')} ended without saying why (killed?)"}
            runners.append({"slot": slot, "running": running, "state": state, "pid": st.get("pid"),
                            "entry": st.get("entry") if running else None, "spent_s": st.get("spent_s"),
                            "budget_s": st.get("budget_s"), "reason": None if running else st.get("reason"),
                            "done": st.get("done", 0)})
        return {"queue_dir": str(self.root), "entries": len(ls), "bytes": sum(e.size for e in ls),
                "oldest_s": (time.time() - ls[0].mtime) if ls else None, "runners": runners,
                "log": str(self.log_path)}


# --------------------------------------------------------------------------- starting a runner

def start_runner(queue: Queue, limits: QueueLimits, *, slot: int = 0) -> subprocess.Popen | None:
    """Start the runner of ``slot`` unless a live one holds it; never waits for it.

    The runner is a new session (``start_new_session``): the build's Ctrl-C, make's process
    group and the compilation's exit do not stop it; its stdin is /dev/null and its output goes
    to ``runner.log``, so it holds none of the build's pipes open (a CI log or ``$(shell ...)``
    reading the compilation's output ends when the compilation does). It runs at a lower CPU
    priority than the build (nice 10)."""
    queue.ensure()
    if queue.slot_running(slot):
        return None
    # One starter at a time per slot: the compilations of a make -j that queue at once start one
    # runner, not one each. The lock passes to the runner, which lets go of it once it holds its
    # slot (or found it held); the kernel drops it if the runner dies first.
    start_fd = open_private(str(queue.root / f"runner.{slot}.start"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(start_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(start_fd)
        return None
    if queue.slot_running(slot):
        os.close(start_fd)
        return None
    try:
        return _spawn(queue, limits, slot, start_fd)
    finally:
        os.close(start_fd)


def _spawn(queue: Queue, limits: QueueLimits, slot: int, start_fd: int) -> subprocess.Popen:
    log = queue.log_path
    try:
        if log.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(log, log.with_name(log.name + ".1"))
    except OSError:
        pass
    fd = open_private(str(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        env = runner_environment(queue)
        argv = [sys.executable, "-m", RUNNER_MODULE, "--cache-dir", str(queue.cache_root), "--slot", str(slot),
                "--start-lock-fd", str(start_fd), *limits.argv()]
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=env,
                                close_fds=True, pass_fds=(start_fd,), start_new_session=True, cwd="/")
    finally:
        os.close(fd)


def runner_environment(queue: Queue) -> dict:
    """The compilation's environment for its runner, with PYTHONPATH made absolute (the runner
    starts in /, holding no build folder) and this superopt's folder on it when it was imported
    from neither PYTHONPATH nor site-packages (``python -m nvcc_plus`` in a checkout): the runner
    imports the same nvcc-plus as the compilation that queued the search."""
    import site
    env = dict(os.environ, NVCC_PLUS_CACHE_DIR=str(queue.cache_root))
    parts = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    root = str(Path(__file__).resolve().parents[2])
    known = {os.path.realpath(p) for p in parts} | {os.path.realpath(p) for p in site.getsitepackages()}
    if os.path.realpath(root) not in known:
        parts.append(root)
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


# --------------------------------------------------------------------------- waiting for it

WAIT_DONE, WAIT_TIMEOUT, WAIT_STUCK = 0, 1, 2


def wait_for_queue(queue: Queue, limits: QueueLimits, *, timeout: float | None = None, start: bool = True,
                   poll: float = 0.5, echo=None) -> tuple[int, str]:
    """Wait until no entry is queued and no runner is busy: ``(WAIT_DONE, message)``. With
    entries waiting and no runner, one is started (``start``), once. ``(WAIT_TIMEOUT, ...)`` when
    ``timeout`` seconds passed first; ``(WAIT_STUCK, ...)`` when entries remain and no runner works
    on them (it stopped: its budget was spent, it failed; or ``start`` is off)."""
    t0 = time.monotonic()
    proc = None
    tried = False
    said = None
    while True:
        st = queue.status()
        busy = [r for r in st["runners"] if r["running"] and r["state"] == "busy"]
        running = [r for r in st["runners"] if r["running"]]
        if st["entries"] == 0 and not busy:
            return WAIT_DONE, "the search queue is empty" + (
                f" ({queue.root})" if st["runners"] else "")
        if st["entries"] and not running and not (proc is not None and proc.poll() is None):
            if start and not tried:
                tried = True
                proc = start_runner(queue, limits)
                if echo and proc is not None:
                    echo(f"started a queue runner (pid {proc.pid}; log {queue.log_path})")
                time.sleep(min(poll, 0.2))
                continue
            last = next((r["reason"] for r in st["runners"] if r.get("reason")), None)
            return WAIT_STUCK, (f"{st['entries']} queued search(es) wait in {queue.entries_dir} but no runner works "
                                f"on them" + (f" (the last runner stopped: {last})" if last else "")
                                + f"; superopt cache wait starts one, superopt cache drain runs them here")
        if timeout is not None and time.monotonic() - t0 >= timeout:
            return WAIT_TIMEOUT, (f"still {st['entries']} queued search(es) and {len(busy)} busy runner(s) after "
                                  f"{timeout:g} s (log: {queue.log_path})")
        line = f"waiting: {st['entries']} queued, {len(busy)} runner(s) busy"
        if echo and line != said:
            echo(line)
            said = line
        time.sleep(poll)


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _log_line(msg: str) -> None:
    stamp = _dt.datetime.now().isoformat(timespec="seconds")
    print(f"{stamp} [{os.getpid()}] {msg}", file=sys.stderr, flush=True)


__all__ = ["Queue", "QueueLimits", "Added", "Claim", "limits_from", "search_mode", "make_entry",
           "settings_snapshot", "start_runner", "wait_for_queue"]
