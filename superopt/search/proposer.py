"""What the search asks for candidates: the :class:`Proposer` interface and the
:class:`ProposalContext` the loop hands it.

Proposers only propose; they never decide. The loop (:func:`superopt.search.loop.search_kernel`)
asks each proposer in turn, judges every candidate it yields, and chooses among all of them.
The rule passes (:class:`superopt.search.rules.RuleProposer`) and the model
(:class:`superopt.model.proposer.ModelProposer`) are both proposers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Protocol, runtime_checkable

if TYPE_CHECKING:
    import ptx_ir
    from superopt.search.candidates import Candidate


@runtime_checkable
class Proposer(Protocol):
    """A source of candidates for one kernel."""

    #: a short name for notes ("rules", "model")
    name: str
    #: False: the loop judges this proposer's candidates within the search budget (past the
    #: singles' share it defers them, and judges them last while the budget lasts).
    #: True: the proposer keeps its own budget; every candidate it yields is judged at once,
    #: so that it can read the verdict (:meth:`ProposalContext.judged`) before proposing more.
    own_budget: bool

    def propose(self, module: "ptx_ir.Module", kernel: str, context: "ProposalContext") -> Iterable["Candidate"]:
        """Candidates for ``kernel`` of ``module`` (whole-module texts, each with its plan and
        provenance). May be a generator: the loop judges each candidate as it is yielded (at
        once for an ``own_budget`` proposer) and the proposer reads the record entry the loop
        made for it with ``context.judged(candidate)`` -- its fate, reason, verdict, timing --
        to build repair rounds. Must not raise for a bad idea of its own; whatever it raises is
        caught by the loop and noted, and the other proposers' results stand."""
        ...


@dataclass
class ProposalContext:
    """What a proposer may read of the search so far, and where it may write."""

    target: str
    options: Any                      # superopt.search.loop.SearchOptions
    specs: list                       # the launch shapes every candidate is checked on
    baseline_ptx: str
    #: the record as it stands when the proposer is asked: the baseline's resources, every
    #: candidate judged so far, and the choice among them so far (status, winner). Read only.
    record: dict
    #: the record's notes (a proposer may add lines)
    notes: list[str] = field(default_factory=list)
    #: sections a proposer adds to the kernel's record (the model: ``"model"``, its rounds)
    sections: dict = field(default_factory=dict)
    _judged: dict = field(default_factory=dict, repr=False)

    def judged(self, candidate: "Candidate") -> dict | None:
        """The record entry of ``candidate`` (by its text), once the loop has judged it."""
        return self._judged.get(candidate.hash)

    def remember(self, candidate: "Candidate", entry: dict) -> None:
        """The loop: ``entry`` is what became of ``candidate``."""
        self._judged[candidate.hash] = entry
