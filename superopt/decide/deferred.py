"""Searches after the build (``NVCC_PLUS_SEARCH=deferred``): the decision source that takes the
place of the search sources, so a compilation never waits for a search.

Every kernel that no locked or cached decision settled keeps nvcc's code in this build and is
recorded "queued for a search after the build"; at the end of the module one queue entry is
written (:mod:`superopt.store.queue`) and a runner is started if none is running
(:mod:`superopt.decide.queue_runner`, a detached process). The runner runs the ordinary
pipeline on the entry, which stores the decisions in the cache (and the lockfile under
``NVCC_PLUS_LOCK=write``); the next build applies them as cached decisions.

Nothing here judges, infers a launch spec, or contacts a GPU or a cluster: the cost is the
cost of writing one file. Without a way to measure after the build (no GPU device here, the
emulator backend, no cluster) nothing is queued: a search on the emulator decides by a static
estimate, and estimates are not stored, so the next build could not apply it.
"""
from __future__ import annotations

from superopt.decide.job import KernelJob
from superopt.decide.run import ModuleRun
from superopt.store.record import Status

QUEUED_REASON = ("queued for a search after the build (NVCC_PLUS_SEARCH=deferred): nvcc's code is used "
                 "until a later build applies the decision")


def runner_can_measure(run: ModuleRun) -> bool:
    """Whether a runner started from here could measure, so that its decisions are stored:
    a cluster, the developer's judge hook, or a GPU (the cheap test: a device node, as
    :meth:`superopt.judge.BackendJudge.gpu_usable` makes first; no CUDA is started here)."""
    s = run.settings
    if s.text("NVCC_PLUS_CLUSTER") or s.text("NVCC_PLUS_JUDGE"):
        return True
    backend = run.options.backend
    if backend == "emulator":
        return False
    if backend == "gpu":
        return True
    from superopt.judge.devices import driver_present
    return driver_present()


class DeferredSearches:
    """Queue the kernels left to search; keep nvcc's code for them in this build."""

    name = "deferred"

    def __init__(self, run: ModuleRun):
        from superopt.store.queue import Queue, limits_from
        self.run = run
        self.limits = limits_from(run.settings)       # a bad limit is a SettingError now, not in the runner
        self.queue = Queue(run.cache.root)
        self.measurable = runner_can_measure(run)
        self.pending: list[tuple[KernelJob, int]] = []

    def searches(self) -> bool:
        """Nothing is searched in this build (the order of its kernels does not matter)."""
        return False

    def can_time(self) -> bool:
        """What :class:`~superopt.decide.stored.LockedDecisions` asks: with a capture, an entry made
        at guessed sizes is passed over when the search (here: the one after the build) can time."""
        return self.measurable

    def decide(self, job: KernelJob) -> bool:
        run = self.run
        if not self.measurable:
            if run.options.no_gpu == "locked":
                from superopt.decide.searches import NO_GPU_LOCKED
                run.skip(job, NO_GPU_LOCKED)
            else:
                run.skip(job, "not queued: a search after the build stores only measured decisions, and there is "
                              "no GPU here (nor NVCC_PLUS_CLUSTER); nvcc's code kept (NVCC_PLUS_SEARCH=now "
                              "searches it in the build, with the emulator's estimate)")
            return True
        self.pending.append((job, run.add(None)))      # its place, filled in finish()
        return True

    def finish(self) -> None:
        if not self.pending:
            return
        from superopt.specs.source_launches import unit_launch_text
        from superopt.store.queue import make_entry, start_runner
        run = self.run
        entry = make_entry(run.ptx, target=run.target, source=run.source,
                           kernels=[job.kernel for job, _ in self.pending], settings=run.settings,
                           launches=unit_launch_text(run.unit))
        try:
            added = self.queue.add(entry, self.limits)
        except OSError as exc:
            why = f"{exc.filename or self.queue.root}: {exc.strerror or exc}"
            run.messages.append(f"search not queued ({why}); nvcc's code kept")
            self._record(None, f"not queued ({why}); nvcc's code kept")
            return
        if added.status == "full":
            run.messages.append(added.message)
            self._record(None, "not queued: " + added.message.removeprefix("search not queued: "))
            return
        if added.status == "run before":
            import datetime as dt
            when = dt.datetime.fromtimestamp(added.done_at).isoformat(timespec="seconds")
            self._record(None, f"not queued: a search after an earlier build ({when}) ran on this module and stored "
                               f"no decision for this kernel; nvcc's code kept (the runner's records and "
                               f"{self.queue.log_path} say why; superopt cache clear forgets it)")
            return
        self._record(added, QUEUED_REASON)
        try:
            proc = start_runner(self.queue, self.limits)
        except OSError as exc:
            run.messages.append(f"search queued in {added.path}, but no runner could be started ({exc}); "
                                f"superopt cache wait starts one")
            return
        if proc is not None and run.verbose:
            run.messages.append(f"started a queue runner (pid {proc.pid}); its log: {self.queue.log_path}")

    def _record(self, added, reason: str) -> None:
        run = self.run
        for job, slot in self.pending:
            kr = {"kernel": job.kernel, "signature": job.signature, "status": Status.KEPT_BASELINE,
                  "decision": None, "reason": reason, "candidates": [], "notes": []}
            if added is not None:
                kr["queued"] = {"entry": added.name, "path": str(added.path), "status": added.status}
                kr["notes"].append(f"queued ({added.status}) in {added.path}")
            run.records["kernels"][slot] = kr
        self.pending = []
