"""The two ways to search a kernel that no stored decision settled: here (on a leased GPU, or
the emulator) and on a Dask cluster's GPU workers. Both first prepare the kernel: the time
left, its launch-spec sources, and whether the capture says it is worth searching."""
from __future__ import annotations

import time
from contextlib import nullcontext

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


class LocalSearch:
    """A search in this process: one GPU leased for the kernel's whole search (a free one of
    those visible; waiting for one is bounded by the deadline), or the emulator."""

    name = "local"

    def __init__(self, run: ModuleRun, judge=None, spec_for=None):
        self.run, self._judge, self.spec_for = run, judge, spec_for
        self._warming = None            # the thread starting the GPU worker (_prewarm)

    @property
    def judge(self):
        if self._judge is None:
            from superopt.judge import BackendJudge
            o = self.run.options
            self._judge = BackendJudge(o.backend, o.policy, o.check_sets, o.timing_reps)
        return self._judge

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

    def decide(self, job: KernelJob) -> bool:
        from superopt.judge.devices import GpuBusy, NoDevice
        from superopt.judge.phases import recording
        run = self.run
        if not self.searches():
            # Nothing stored could be applied: do not spend a build's time searching.
            run.skip(job, NO_GPU_LOCKED)
            if run.lock_path is None:
                run.note_for_build(NO_GPU_NO_LOCKFILE)
            return True
        judge = self.judge
        with recording() as phases:
            self._prewarm()
            if not prepare(run, job, self.spec_for):
                return True
            # the kernel's module facts (the restrict-compiled variant: a cicc run) before the GPU is
            # held, and only for a kernel that can be judged
            options = run.options_for(job.kernel) if job.choices else run.options
            hold = getattr(judge, "hold", None)
            run.notify("kernel_started", job.signature or job.kernel, job.index, job.total, run.options.budget_s)
            started = time.monotonic()
            try:
                with (hold(_gpu_wait_deadline(run.deadline)) if hold else nullcontext()) as device:
                    kr, winner, chosen, tried = search_choices(
                        run.module, job.kernel, job.choices, options=options, deadline=run.deadline,
                        share=job.share, judge=judge, target=run.target)
                    if device is not None:
                        kr["device"] = {"name": device.name, "uuid": device.uuid, "ordinal": device.ordinal}
            except GpuBusy:
                run.no_free_gpu.append(job.kernel)
                # the GPU work done before the wait that timed out is part of the build's
                # (bench/economy adds up the records' phases)
                run.skip(job, "not searched: no GPU became free before the optimizer's time limit",
                         phases=phases.to_dict())
                return True
            except NoDevice as exc:
                run.skip(job, f"not searched: {exc}")
                if f"{exc}; nvcc's code kept" not in run.messages:
                    run.messages.append(f"{exc}; nvcc's code kept")
                return True
        seconds = time.monotonic() - started
        kr["phases"] = phases.to_dict()
        run.stats["searches"] += 1
        run.stats["search_s"] += seconds
        run.notify("kernel_finished", job.signature or job.kernel, str(kr.get("status")), seconds)
        run.settle(job, SearchOutcome(kr, winner.plan if winner is not None else None, chosen, tried,
                                      seconds=seconds, searched_on=_searched_on(kr, judge), store=judge.can_time),
                   run.add(None))
        return True

    def _prewarm(self) -> None:
        """Start the GPU worker (a process and a CUDA context, about a second) in the background
        while the first kernel's specs are resolved and its candidates made: off the GPU's
        critical path, and never holding the GPU."""
        if self._warming is not None or getattr(self.judge, "backend", None) != "gpu":
            return
        import threading

        from superopt.judge.phases import in_context

        def warm():
            from superopt.judge import devices
            from superopt.judge.backends.base import BackendUnavailable, get_backend
            try:
                with devices.assign():
                    get_backend("gpu").available()
            except (devices.NoDevice, BackendUnavailable, ValueError):
                pass                    # the search's own first GPU step says why

        self._warming = threading.Thread(target=in_context(warm), name="superopt-gpu-warm", daemon=True)
        self._warming.start()

    def finish(self) -> None:
        pass


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
