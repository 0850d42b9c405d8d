"""The judge of a generated kernel: the ordinary differential check with the reference as
its baseline.

* numpy reference: the baseline is the *stub* module (the pinned header, body ``ret;``) and
  the backend is :class:`~superopt.generate.reference.NumpyReferenceBackend`, which runs the
  numpy function whenever the check asks for the stub;
* CUDA reference: the baseline is nvcc's PTX of the reference kernel (renamed to the
  signature's name), run on the same backend as the kernel.

Either way :func:`superopt.judge.check.check` decides: fresh inputs with special values,
poisoned outputs, elements the reference leaves alone must stay alone, guard zones, the
static def-use check, the candidate run twice. The reference's runs on one family of inputs
are reused until a rejection (whose evidence shows input values to the model: then new
inputs are drawn, so a kernel cannot be fitted to the values it was shown). The kernel kept
is checked once more on inputs drawn for it alone.
"""
from __future__ import annotations

from superopt.judge.backends.base import BackendUnavailable, get_backend
from superopt.judge.check import BaselineRuns, Policy, Verdict, check, run_baseline

__all__ = ["ReferenceJudge", "JudgeUnavailable", "resolve_backend"]

DEFAULT_LAUNCH_TIMEOUT = {"emulator": 60.0, "gpu": 10.0}


def resolve_backend(name: str) -> str:
    """``auto`` -> ``gpu`` when a GPU is usable, else ``emulator``."""
    if name != "auto":
        return name
    from superopt.judge.judge import BackendJudge
    ok, _ = BackendJudge.gpu_usable()
    return "gpu" if ok else "emulator"


class ReferenceJudge:
    def __init__(self, reference, stub_ptx: str, *, backend: str = "auto", policy: str = "exact",
                 sets: int = 4, launch_timeout: float | None = None):
        from superopt.generate.reference import NumpyReferenceBackend
        self.reference = reference
        self.policy = Policy.parse(policy)
        self.sets = sets
        self.backend_name = resolve_backend(backend)
        self.launch_timeout = launch_timeout or DEFAULT_LAUNCH_TIMEOUT.get(self.backend_name, 30.0)
        try:
            inner = get_backend(self.backend_name)
        except BackendUnavailable as e:
            raise JudgeUnavailable(str(e)) from None
        ok, why = inner.available()
        if not ok:
            raise JudgeUnavailable(f"the {self.backend_name} backend cannot run here: {why}")
        if reference.kind == "numpy":
            self.backend = NumpyReferenceBackend(inner, stub_ptx, reference)
            self.baseline_ptx = stub_ptx
        else:
            self.backend = inner
            self.baseline_ptx = reference.ptx
        self._runs: dict[int, BaselineRuns] = {}

    @property
    def can_time(self) -> bool:
        """Timing needs a GPU and a reference kernel to time against."""
        return self.backend_name == "gpu" and self.reference.kind == "cuda"

    def describe(self) -> dict:
        return {"backend": self.backend_name, "policy": str(self.policy), "sets": self.sets,
                "launch_timeout_s": self.launch_timeout, "reference": self.reference.label}

    def prepare(self, spec, index: int) -> Verdict | None:
        """Run the reference on fresh inputs for launch shape ``index``; a *could not judge*
        verdict when it cannot be used (it raises, is not deterministic, the spec does not fit)."""
        runs = run_baseline(self.baseline_ptx, spec, backend=self.backend, policy=self.policy, sets=self.sets,
                            launch_timeout=self.launch_timeout)
        if isinstance(runs, Verdict):
            return runs
        self._runs[index] = runs
        return None

    def reference_sets(self, index: int) -> list[dict]:
        runs = self._runs.get(index)
        return [runs.sets[i].describe() for i in runs.valid] if runs else []

    def verify(self, cand_ptx: str, spec, index: int, *, fresh: bool = False) -> Verdict:
        """The check of ``cand_ptx`` on launch shape ``index`` (``fresh``: inputs of its own)."""
        if fresh:
            return check(self.baseline_ptx, cand_ptx, spec, backend=self.backend, policy=self.policy,
                         sets=self.sets, launch_timeout=self.launch_timeout)
        runs = self._runs.get(index)
        if runs is None:
            bad = self.prepare(spec, index)
            if bad is not None:
                return bad
            runs = self._runs[index]
        verdict = check(self.baseline_ptx, cand_ptx, spec, backend=self.backend, baseline=runs,
                        launch_timeout=self.launch_timeout)
        if verdict.status != "accepted":
            if verdict.mismatch is not None:
                verdict.evidence["inputs_at_mismatch"] = inputs_at(runs, verdict.mismatch.set_index,
                                                                   verdict.mismatch.index)
            self._runs.pop(index, None)        # its evidence shows inputs: draw new ones next time
        return verdict

    def time(self, cand_ptx: str, spec):
        """The kernel against the reference kernel (GPU, CUDA reference), under the GPU lock."""
        import os
        from superopt.judge.gpu_lock import gpu_lock
        from superopt.judge.timing import time_pair
        device = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
        with gpu_lock(device):
            return time_pair(self.baseline_ptx, cand_ptx, spec, backend="gpu")


def inputs_at(runs: BaselineRuns, set_index: int, index: int) -> dict:
    """The input values at ``index`` of the set's in/inout buffers (feedback for the model)."""
    import numpy as np
    from superopt.judge.check import format_value
    out = {}
    try:
        s = runs.sets[set_index]
    except (IndexError, AttributeError):
        return out
    for b in s.spec.buffers:
        if b.direction != "out" and 0 <= index < int(b.length or 0):
            out[b.name] = format_value(np.asarray(s.data[b.name]), index, b.elem)
    return out


class JudgeUnavailable(RuntimeError):
    """The backend cannot run here (e.g. --backend gpu without a GPU)."""

