"""The two ways to search a kernel that no stored decision settled: here (on a leased GPU, or
the emulator) and on a Dask cluster's GPU workers. Both first prepare the kernel: the time
left, its launch-spec sources, and whether the capture says it is worth searching."""
from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass

from superopt.decide.job import KernelJob, SearchOutcome
from superopt.decide.run import ModuleRun, plan_of
from superopt.search.choices import MIN_SEARCH_S, search_choices, time_left
from superopt.store.record import Status

NO_GPU_LOCKED = ("no GPU and no locked or cached decision: nvcc's code kept "
                 "(NVCC_PLUS_NO_GPU=estimate searches with the emulator and a static estimate)")
# Said once per build (not per file, not per kernel) when there is no lockfile either; the
# driver says the same line when it runs nvcc alone (nothing stored at all: nvcc_plus.nothing_stored)
NO_GPU_NO_LOCKFILE = ("no GPU and no nvcc-plus.lock: this build uses nvcc's code (and decisions cached "
                      "here before). To optimize GPU-less builds, tune once on a GPU and commit the lockfile "
                      "(superopt tune --build \"make -B NVCC=nvcc-plus\" -- ./app writes nvcc-plus.lock), or set "
                      "NVCC_PLUS_NO_GPU=estimate to search on the CPU emulator (verified, chosen by a static "
                      "estimate)")


def prepare(run: ModuleRun, job: KernelJob, spec_for=None) -> bool:
    """Fill in the job's spec choices; False when the kernel was settled instead (no time left,
    or the capture shows it too minor to search)."""
    from superopt.judge.phases import phase
    with phase("spec"):
        return _prepare(run, job, spec_for)


def _prepare(run: ModuleRun, job: KernelJob, spec_for) -> bool:
    left = time_left(run.deadline)
    if left is not None and left < MIN_SEARCH_S:
        run.timed_out.append(job.kernel)
        run.skip(job, "not searched: the optimizer's time limit (NVCC_PLUS_TIMEOUT / build budget) was reached")
        return False
    if spec_for is not None:
        specs, origin_or_reason = spec_for(run.module, job.kernel)
        if specs:
            from superopt.specs.sources import SpecChoice
            job.choices = [SpecChoice(list(specs), origin_or_reason)]
        else:
            job.why_none = origin_or_reason
        return True
    from superopt.specs.sources import candidates_in_order
    found = candidates_in_order(run.module, job.kernel, source=run.source, unit=run.unit, settings=run.settings,
                                capture=run.capture, search_minor=run.settings.flag("NVCC_PLUS_SEARCH_MINOR"),
                                deadline=run.deadline)
    job.choices, job.share, job.notes, job.why_none = found.choices, found.share, list(found.notes), found.reason
    if found.skip:
        run.skip(job, found.skip, capture_share=found.share, notes=job.notes)
        return False
    return True


@dataclass
class _Pending:
    """A kernel searched in a thread of its own, until its outcome is applied in job order."""
    job: KernelJob
    slot: int                         # its place among the module's records
    phases: object                    # superopt.judge.phases.Phases
    started: float
    result: tuple | None = None       # what _search returned, or ("raised", exc)
    seconds: float = 0.0
    done: bool = False


# NVCC_PLUS_KERNEL_SEARCHES=auto: at most this many kernels of a compilation at once, each past
# the first only while fewer than AUTO_GPU_SEARCHES searches per GPU run on this host
# (superopt.judge.search_census: every searching compilation counts, and each extra search)
AUTO_SEARCHES = 2
AUTO_GPU_SEARCHES = 6
ROOM_POLL_S = 0.25


def kernel_searches_auto(settings) -> bool:
    raw = settings.raw("NVCC_PLUS_KERNEL_SEARCHES")
    return raw is None or str(raw).strip().lower() in ("", "auto")


class LocalSearch:
    """A search in this process: on the GPU (each GPU step held only while it runs:
    superopt.judge.devices), a free one of those visible (waiting for one is bounded by the
    deadline), or the emulator.

    On the GPU, up to ``NVCC_PLUS_KERNEL_SEARCHES`` (1 by default) kernels of the module are
    searched at once, each in a daemon thread with its judge and GPU worker of its own (backend slots:
    superopt.judge.backends.base.backend_slot). A compilation's kernels otherwise take turns, and
    on the economy bench the compilations with several costly kernels (a scan's four, an
    equalisation's two) were the build's last minute. Their outcomes are applied in the jobs'
    order (the records' order and the module's text do not depend on which search ends first);
    one that ends early waits for those before it. Daemon threads: the driver's time limit,
    raised in this thread while it waits, neither waits for them nor keeps the process alive."""

    name = "local"

    def __init__(self, run: ModuleRun, judge=None, spec_for=None):
        self.run, self._judge, self.spec_for = run, judge, spec_for
        self._injected = judge is not None
        self._warming: dict[int, object] = {}   # slot -> the thread starting its GPU worker (_prewarm)
        self._judges: dict[int, object] = {}    # slot -> its judge (slot 0: self.judge)
        self._pending: list[_Pending] = []      # in job order, not applied yet
        self._free: list[int] | None = None     # slots no search thread uses now
        self._census = None                     # this compilation counted among the searching ones
        self._cond = threading.Condition()

    @property
    def judge(self):
        if self._judge is None:
            self._judge = self._new_judge()
        return self._judge

    def _new_judge(self):
        from superopt.judge import BackendJudge
        o = self.run.options
        return BackendJudge(o.backend, o.policy, o.check_sets, o.timing_reps)

    def _judge_for(self, slot: int):
        if slot == 0:
            return self.judge
        if slot not in self._judges:
            self._judges[slot] = self._new_judge()
        return self._judges[slot]

    def searches(self) -> bool:
        """Whether this source will search at all (a GPU, or NVCC_PLUS_NO_GPU=estimate)."""
        return self.run.options.no_gpu == "estimate" or self.can_time()

    def can_time(self) -> bool:
        if self._judge is not None:
            return self._judge.can_time
        o = self.run.options
        if o.backend == "gpu":
            return True
        from superopt.judge.devices import driver_present
        if o.backend != "auto" or not driver_present():
            return False                        # decided without loading the judge
        from superopt.judge import BackendJudge
        return BackendJudge.gpu_usable()[0]

    def at_once(self) -> int:
        """How many of the module's kernels are searched at once, at most: ``NVCC_PLUS_KERNEL_SEARCHES``
        with the GPU judges this source makes (``auto``: :data:`AUTO_SEARCHES`, each past the
        first only while the GPU has room, :meth:`_room_on_gpu`); 1 with a judge given to it (a
        test's, a cluster worker's), on the emulator (the GIL, not a GPU, would pace it) and
        under a whole-search lease (the second search would wait for the first's)."""
        if self._injected or getattr(self.judge, "backend", None) != "gpu" or len(self.run.todo) < 2:
            return 1
        from superopt.judge.devices import lease_mode
        if lease_mode() == "search":
            return 1
        if self.adaptive:
            return AUTO_SEARCHES
        return int(self.run.settings.number("NVCC_PLUS_KERNEL_SEARCHES", 1, minimum=1, integer=True))

    @property
    def adaptive(self) -> bool:
        """``NVCC_PLUS_KERNEL_SEARCHES=auto`` (the default)."""
        return kernel_searches_auto(self.run.settings)

    def _room_on_gpu(self) -> bool:
        """Whether fewer than :data:`AUTO_GPU_SEARCHES` searches per GPU it may use run on this
        host (every searching compilation counts, and each search beside a compilation's
        first): the build's tail, where its last compilations' kernels would otherwise take
        turns on a GPU left mostly idle."""
        from superopt.judge import devices, search_census
        try:
            gpus = devices.allowed_devices()
        except (OSError, devices.NoDevice, ValueError):
            return False
        return bool(gpus) and search_census.running() < AUTO_GPU_SEARCHES * len(gpus)

    def _count_this_compilation(self) -> None:
        """From its first search on the GPU to :meth:`finish`, this compilation is counted among
        the host's searching ones (superopt.judge.search_census), whatever its own setting."""
        if self._census is None and getattr(self.judge, "backend", None) == "gpu":
            from superopt.judge import search_census
            self._census = search_census.register() or False

    def _uncount(self) -> None:
        if self._census:
            self._census.close()
        self._census = None

    def decide(self, job: KernelJob) -> bool:
        from superopt.judge.phases import Phases, recording
        run = self.run
        if not self.searches():
            # Nothing stored could be applied: do not spend a build's time searching.
            run.skip(job, NO_GPU_LOCKED)
            if run.lock_path is None:
                run.note_for_build(NO_GPU_NO_LOCKFILE)
            return True
        self._count_this_compilation()
        many = self.at_once()
        with recording(Phases(job.kernel)) as phases:
            self._prewarm(0)
            if not prepare(run, job, self.spec_for):
                return True
            # the kernel's module facts (the restrict-compiled variant: a cicc run) before the GPU is
            # held, and only for a kernel that can be judged
            options = run.options_for(job.kernel) if job.choices else run.options
            if not job.choices:
                many = 1                # nothing to judge with: no thread or GPU worker for it
            if many <= 1:
                run.notify("kernel_started", job.signature or job.kernel, job.index, job.total, run.options.budget_s)
                started = time.monotonic()
                got = self._search(job, self.judge, options)
                seconds = time.monotonic() - started
        if many <= 1:
            self._apply(job, run.add(None), got, phases, seconds)
            return True
        place = run.add(None)
        slot = self._take_slot(many)
        judge = self._judge_for(slot)
        self._prewarm(slot)
        run.notify("kernel_started", job.signature or job.kernel, job.index, job.total, run.options.budget_s)
        pending = _Pending(job, place, phases, time.monotonic())
        self._pending.append(pending)
        run.searching.add(job.kernel)
        threading.Thread(target=self._search_in_thread, args=(pending, slot, judge, options),
                         name=f"superopt-search-{slot}", daemon=True).start()
        return True

    def _search(self, job: KernelJob, judge, options) -> tuple:
        """Search one kernel (in this thread): ("searched", record, winner, chosen, tried,
        judge), ("busy",) when no GPU became free in time, or ("no device", exc)."""
        from superopt.judge.devices import GpuBusy, NoDevice
        run = self.run
        hold = getattr(judge, "hold", None)
        try:
            with (hold(_gpu_wait_deadline(run.deadline)) if hold else nullcontext()) as device:
                kr, winner, chosen, tried = search_choices(
                    run.module, job.kernel, job.choices, options=options, deadline=run.deadline,
                    share=job.share, judge=judge, target=run.target)
                if device is not None:
                    kr["device"] = {"name": device.name, "uuid": device.uuid, "ordinal": device.ordinal}
        except GpuBusy:
            return ("busy",)
        except NoDevice as exc:
            return ("no device", exc)
        return ("searched", kr, winner, chosen, tried, judge)

    def _search_in_thread(self, pending: _Pending, slot: int, judge, options) -> None:
        from superopt.judge.backends.base import backend_slot
        from superopt.judge.phases import recording
        from superopt.judge import search_census
        extra = search_census.register() if slot > 0 else None     # a search beside the compilation's first
        try:
            with backend_slot(slot), recording(pending.phases):
                pending.result = self._search(pending.job, judge, options)
        except BaseException as exc:  # noqa: BLE001 - raised in the compilation's thread when applied
            pending.result = ("raised", exc)
        finally:
            if extra is not None:
                extra.close()
            pending.seconds = time.monotonic() - pending.started
            with self._cond:
                pending.done = True
                self._free.append(slot)
                self._cond.notify_all()

    def _take_slot(self, many: int) -> int:
        """A backend slot no search thread uses, applying finished outcomes while it waits.
        Adaptive (``auto``): a slot past the first only while the GPU has room for one more
        search (asked again every :data:`ROOM_POLL_S` while it waits)."""
        while True:
            self._apply_finished()
            with self._cond:
                if self._free is None:
                    self._free = list(range(many))
                if self._free:
                    self._free.sort()
                    if self._free[0] == 0 or not self.adaptive or self._room_on_gpu():
                        return self._free.pop(0)
                self._cond.wait(ROOM_POLL_S if self.adaptive else 0.5)

    def _apply_finished(self, *, skipping: bool = False) -> None:
        """Apply the outcomes of the finished searches at the front of the queue, in job order;
        ``skipping``: also those behind a search still running (an interruption's salvage)."""
        for pending in list(self._pending):
            if not pending.done:
                if not skipping:
                    break
                continue
            self._pending.remove(pending)
            self.run.searching.discard(pending.job.kernel)
            self._apply(pending.job, pending.slot, pending.result, pending.phases, pending.seconds)

    def _apply(self, job: KernelJob, slot: int, got: tuple, phases, seconds: float) -> None:
        run = self.run
        how = got[0]
        if how == "raised":
            raise got[1]
        if how == "busy":
            run.no_free_gpu.append(job.kernel)
            # the GPU work done before the wait that timed out is part of the build's
            # (bench/economy adds up the records' phases)
            run.skip(job, "not searched: no GPU became free before the optimizer's time limit",
                     phases=phases.to_dict(), slot=slot)
            return
        if how == "no device":
            exc = got[1]
            run.skip(job, f"not searched: {exc}", slot=slot)
            if f"{exc}; nvcc's code kept" not in run.messages:
                run.messages.append(f"{exc}; nvcc's code kept")
            return
        _, kr, winner, chosen, tried, judge = got
        kr["phases"] = phases.to_dict()
        run.stats["searches"] += 1
        run.stats["search_s"] += seconds
        run.notify("kernel_finished", job.signature or job.kernel, str(kr.get("status")), seconds)
        run.settle(job, SearchOutcome(kr, winner.plan if winner is not None else None, chosen, tried,
                                      seconds=seconds, searched_on=_searched_on(kr, judge), store=judge.can_time),
                   slot)

    def _prewarm(self, slot: int) -> None:
        """Start the GPU worker of backend slot ``slot`` (a process and a CUDA context, about a
        second) in the background while the kernel's specs are resolved and its candidates
        made: off the GPU's critical path, and never holding the GPU."""
        if slot in self._warming or getattr(self._judge_for(slot), "backend", None) != "gpu":
            return

        from superopt.judge.phases import in_context

        def warm():
            from superopt.judge import devices
            from superopt.judge.backends.base import BackendUnavailable, backend_slot, get_backend
            try:
                with devices.assign(), backend_slot(slot):
                    get_backend("gpu").available()
            except (devices.NoDevice, BackendUnavailable, ValueError):
                pass                    # the search's own first GPU step says why

        self._warming[slot] = threading.Thread(target=in_context(warm), name=f"superopt-gpu-warm-{slot}", daemon=True)
        self._warming[slot].start()

    def finish(self) -> None:
        """Wait for the searches still running and apply their outcomes, in job order."""
        while self._pending:
            self._apply_finished()
            with self._cond:
                if self._pending and not self._pending[0].done:
                    self._cond.wait(0.5)
        self._uncount()

    def salvage(self) -> None:
        """After an interruption: apply what the finished searches decided (in job order), so
        the partial result keeps it; the searches still running are left to end with the process."""
        self._uncount()
        self._apply_finished(skipping=True)


class ClusterSearches:
    """Searches sent to the cluster's GPU workers (:mod:`superopt.search.cluster`): each is
    submitted as the kernel comes, and the answers are settled together at the end."""

    name = "cluster"

    def __init__(self, run: ModuleRun, cluster, spec_for=None):
        self.run, self.cluster, self.spec_for = run, cluster, spec_for
        self.sent: list = []                   # (Submitted, KernelJob, slot)

    def searches(self) -> bool:
        return True

    def decide(self, job: KernelJob) -> bool:
        run = self.run
        if not prepare(run, job, self.spec_for):
            return True
        if not job.choices:
            # nothing to judge with: the record says so without a trip to the cluster
            run.skip(job, f"not verifiable: {job.why_none}", status=Status.NOT_VERIFIABLE, notes=job.notes)
            return True
        payload = {"ptx": run.ptx, "kernel": job.kernel, "target": run.target, "choices": job.choices,
                   "share": job.share, "options": run.options_for(job.kernel)}
        sub = self.cluster.submit(payload, self.cluster.limit_for(run.options, run.deadline))
        self.sent.append((sub, job, run.add(None)))       # its place, filled when the answer comes
        return True

    def finish(self) -> None:
        if not self.sent:
            return
        run, failed = self.run, []
        outcomes = self.cluster.gather([s for s, _, _ in self.sent])
        for (sub, job, slot), outcome in zip(self.sent, outcomes):
            ans = outcome.answer
            kr = ans.get("record") if isinstance(ans, dict) else None
            if not (isinstance(kr, dict) and kr.get("kernel") == job.kernel and "status" in kr):
                why = outcome.failure or "the worker's answer does not match this kernel"
                failed.append((job.kernel, why))
                run.records["kernels"][slot] = {
                    "kernel": job.kernel, "signature": job.signature, "status": Status.KEPT_BASELINE,
                    "decision": None, "reason": f"cluster search failed, nvcc's code kept: {why}",
                    "candidates": [], "notes": list(job.notes)}
                continue
            kr["cluster"] = {"address": self.cluster.address, "worker": ans.get("worker"), "gpu": ans.get("gpu"),
                             "seconds": ans.get("seconds")}
            idx = ans.get("chosen")
            chosen = idx if isinstance(idx, int) and 0 <= idx < len(job.choices) else None
            ok = run.settle(job, SearchOutcome(kr, plan_of(ans.get("plan")), chosen, list(ans.get("tried") or []),
                                               seconds=ans.get("seconds"), searched_on=ans.get("gpu"),
                                               store=bool(ans.get("can_time")), gpu=ans.get("gpu") or "",
                                               expect_hash=ans.get("ptx_hash")), slot)
            if not ok:
                failed.append((job.kernel, "its plan gives other PTX here than on the worker "
                                           "(another nvcc-plus version?)"))
        self.sent = []
        if failed:
            names = ", ".join(k for k, _ in failed[:3]) + (", ..." if len(failed) > 3 else "")
            run.messages.append(f"{failed[0][1]}; {len(failed)} kernel(s) keep nvcc's code ({names})")


def _gpu_wait_deadline(deadline) -> float | None:
    """Until when a kernel may wait for a free GPU: while a search could still start."""
    return None if deadline is None else float(deadline) - MIN_SEARCH_S


def _searched_on(kr: dict, judge) -> str | None:
    """The GPU the decision was measured on (its name, from the timings), else the backend."""
    for c in kr.get("candidates", []):
        name = ((c.get("timing") or {}).get("device") or {}).get("name")
        if name:
            return str(name)
    return getattr(judge, "backend", None)
