"""A judge for running the scale benchmark's logic, and the cluster tests, on a CPU.

``NVCC_PLUS_JUDGE=bench.scale.dryrun:judge`` (the developer hook of superopt.optimize and of
cluster workers) makes every search check candidates for real on the CPU emulator, then "time"
them with a stand-in figure derived from the candidate's text (deterministic, so two builds
make the same decisions; clearly not a measurement, and records say so), while holding one of
the fake GPUs that ``SUPEROPT_FAKE_GPUS`` declares for ``SUPEROPT_DRYRUN_TIME_S`` seconds per
timing (0.05; ``SUPEROPT_DRYRUN_CHECK_S``: seconds before each check, 0), so that the GPU lease, the waiting for a free GPU and the cluster path run as
they would on GPUs.
"""
from __future__ import annotations

import hashlib
import os
import time
from contextlib import contextmanager

from superopt.judge import devices
from superopt.judge.judge import BackendJudge
from superopt.judge.timing import TimingResult

REASON = "dry run: a stand-in figure derived from the candidate's text, not a measurement"


class DryRunJudge(BackendJudge):
    def __init__(self, options):
        super().__init__("emulator", options.policy, options.check_sets, options.timing_reps)
        self.sim_seconds = float(os.environ.get("SUPEROPT_DRYRUN_TIME_S", "0.05"))
        # seconds each check waits first (0): a search that surely outlives a short limit, whatever
        # path it takes (the cluster's timeout test: under load a search ended by its own deadline
        # before its first timing answered in time)
        self.check_seconds = float(os.environ.get("SUPEROPT_DRYRUN_CHECK_S", "0"))

    @property
    def can_time(self) -> bool:
        return True

    @contextmanager
    def hold(self, deadline: float | None = None):
        if not os.environ.get("SUPEROPT_FAKE_GPUS"):
            yield None
            return
        with devices.lease(deadline=deadline) as dev:
            yield dev

    def device_name(self) -> str:
        dev = devices.current()
        if dev is None and os.environ.get("SUPEROPT_FAKE_GPUS"):
            with self.hold() as dev:
                return dev.name
        return dev.name if dev is not None else "dry-run"

    def verify(self, base_ptx: str, cand_ptx: str, spec, **kw):
        if self.check_seconds:
            time.sleep(self.check_seconds)
        return super().verify(base_ptx, cand_ptx, spec, **kw)

    def time(self, base_ptx: str, cand_ptx: str, spec, *, fresh: bool = True):
        with self.hold():
            time.sleep(self.sim_seconds)
        h = int(hashlib.sha256(cand_ptx.encode()).hexdigest()[:8], 16) / 2 ** 32
        speedup = 0.9 + 0.35 * h
        return TimingResult(status="ok", faster=speedup > 1.1, reason=REASON, speedup=speedup)


def judge(options) -> DryRunJudge:
    return DryRunJudge(options)
