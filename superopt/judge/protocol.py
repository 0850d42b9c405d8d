"""The judge's interface: what the search asks of whoever decides "right?" and "faster?".

:class:`Judge` is a :class:`typing.Protocol`; its docstrings are the contract. The judge behind
a real backend is :class:`superopt.judge.judge.BackendJudge`; the caching wrapper the search
puts in front of it is :class:`superopt.judge.cache.CachingJudge`; tests bring scripted ones.
A class may satisfy the Protocol structurally, or subclass it to inherit the default
:meth:`Judge.sanitize` (no compute-sanitizer).

Every method judges ONE launch shape (``spec``): the search calls :meth:`Judge.verify` once per
shape of its ``specs`` list and records how many it checked (``launch_shapes_checked``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Protocol, runtime_checkable

if TYPE_CHECKING:
    from superopt.judge.check import Verdict
    from superopt.judge.sanitize import SanitizerResult
    from superopt.judge.timing import TimingResult


@runtime_checkable
class Judge(Protocol):
    """Decides, for a candidate against the baseline (both whole PTX modules), whether it is
    right (:meth:`verify`), how fast it is (:meth:`time`) and whether compute-sanitizer finds
    errors nvcc's code does not have (:meth:`sanitize`). It never chooses: the search does."""

    #: the backend that runs kernels ("gpu", "emulator", or a test's name); goes into records
    backend: str
    #: the comparison policy ("exact", "ulp:2", ...); goes into records
    policy: str
    #: True when :meth:`time` measures real speed (a GPU). Without it the search never times,
    #: and chooses only under ``no_gpu="estimate"``.
    can_time: bool

    def verify(self, base_ptx: str, cand_ptx: str, spec: Any, *, fresh: bool = False) -> "Verdict":
        """The differential check of ``cand_ptx`` against ``base_ptx`` on one launch shape.

        Returns a verdict whose ``status`` is ``accepted``, ``rejected`` or ``could_not_judge``,
        with a ``reason`` and ``to_dict()``. The same (baseline, candidate, spec) may be answered
        from a cache unless ``fresh``: then the check runs on inputs drawn for this call alone
        (the search does that once more before keeping a candidate) and is never cached."""
        ...

    def time(self, base_ptx: str, cand_ptx: str, spec: Any, *, fresh: bool = True) -> "TimingResult":
        """Baseline and candidate timed on one launch shape. The result has ``status`` ("ok" or
        why not), ``faster`` and ``slower`` (each beyond the measured noise:
        :func:`superopt.judge.timing.slower_than`), ``speedup``, ``reason`` and ``to_dict()``. ``fresh=True`` asks for a new measurement (a confirmation); ``False``
        allows a cached one. Only called when :attr:`can_time`."""
        ...

    def timing_window(self):
        """A context in which several :meth:`time` calls share one hold of the GPU alone, so that
        other compilations' checks drain once for all of them instead of once each. The default
        (judges without a shared GPU) does nothing."""
        from contextlib import nullcontext
        return nullcontext()

    def prefetch_inputs(self, base_ptx: str, spec: Any, what: tuple = ("check", "time")) -> bool:
        """Start making, beside the caller, input sets later calls at ``spec`` for ``base_ptx``
        will use, so that they need not draw them (``what``: ``check``, the next :meth:`verify`
        with ``fresh``; ``time``, the next :meth:`time` with ``fresh``; ``timed``, the set
        :meth:`time` times candidates on); True when something was started. A hint: the
        default does nothing."""
        return False

    def sanitize(self, base_ptx: str, cand_ptx: str, spec: Any, tools: Iterable[str]) -> "SanitizerResult":
        """compute-sanitizer ``tools`` on baseline and candidate for one launch shape; the result's
        ``rejected`` is True only when the candidate has errors nvcc's code does not have.
        The default (for judges that cannot run it) answers ``unavailable``."""
        from superopt.judge.sanitize import SanitizerResult
        return SanitizerResult("unavailable", f"the {self.backend} judge cannot run compute-sanitizer")
