"""One kernel to decide, a search's outcome, and the interface every way of deciding has."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from superopt.store.keys import DecisionKey


@dataclass
class KernelJob:
    """A kernel of the module and what every source needs of it."""
    fn: object                            # the ptx_ir function
    index: int                            # 1-based, among the kernels to decide
    total: int
    kernel_text: str
    key: DecisionKey                      # its cache key (with the explicit specs' identity)
    # filled in by the search's preparation (superopt.decide.searches.prepare):
    choices: list = field(default_factory=list)   # SpecChoices in order of trust
    share: float | None = None            # of the program's captured GPU time
    notes: list = field(default_factory=list)
    why_none: str | None = None           # why there is no spec choice

    @property
    def kernel(self) -> str:
        return self.fn.name

    @property
    def signature(self) -> str | None:
        return self.fn.signature


@dataclass
class SearchOutcome:
    """What a search (here or on a cluster worker) decided for one kernel."""
    record: dict                          # the kernel record (reports' schema)
    plan: list | None                     # the winner's plan, or None: nvcc's code
    chosen: int | None                    # index into job.choices of the spec source used
    tried: list = field(default_factory=list)     # notes on spec sources tried before it
    seconds: float | None = None
    searched_on: str | None = None        # the GPU's name, or the backend
    store: bool = True                    # a decision worth caching (it was measured)
    gpu: str | None = None                # a cluster worker's GPU model: part of the key
    expect_hash: str | None = None        # the PTX hash the worker's plan gave there


class DecisionSource(Protocol):
    """One way to get a kernel's decision; the pipeline asks each in order."""

    name: str

    def decide(self, job: KernelJob) -> bool:
        """Settle ``job`` -- record it in the run and apply what was decided -- and return True;
        or return False and leave it to the next source."""
        ...

    def finish(self) -> None:
        """Settle what this source left pending (a cluster's answers); called once at the end."""
        ...


class SearchSource(DecisionSource, Protocol):
    """The last source of the pipeline: one that searches."""

    def searches(self) -> bool:
        """Whether it will search at all here (then kernels go in order of expected gain)."""
        ...
