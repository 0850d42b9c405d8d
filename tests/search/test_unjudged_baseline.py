"""When nvcc's own code cannot be judged at a launch shape (it faults on random index arrays at a
captured size, ...), the search learns it once and stops spending on it: a captured shape
whose index arrays are drawn at random is asked about first (before the budget is spent), and a
late check that fails on nvcc's code ends the tries of the other winners (each would meet the
same baseline). The next spec source is then tried (superopt.search.choices)."""
from __future__ import annotations

from dataclasses import replace

import ptx_ir
from superopt.judge import Judge
from superopt.judge.cache import spec_key
from superopt.judge.check import BASELINE_UNJUDGED, Verdict, baseline_unjudged
from superopt.search.choices import baseline_unjudgeable, search_choices
from superopt.search.options import SearchOptions
from superopt.specs.sources import SpecChoice
from tests.model.helpers import VADD, test_passes, vadd_spec  # noqa: F401 (a fixture)
from tests.search.test_costly_shapes import Timing, big_spec

FAULT = "baseline crash on set 0: kernel: CUDA_ERROR_ILLEGAL_ADDRESS"


class BaselineFaultsJudge(Judge):
    """Times every candidate 1.3x faster; nvcc's own code cannot be judged at ``faults_at`` (a
    spec key): every check there answers as run_baseline does for a fault. Logs its calls."""

    backend = "scripted-gpu"
    policy = "exact"
    can_time = True

    def __init__(self, faults_at=None):
        self.faults_at, self.calls = faults_at, []

    def verify(self, base_ptx, cand_ptx, spec, *, fresh=False):
        key = spec_key(spec)
        self.calls.append(("verify", key, cand_ptx == base_ptx, fresh))
        if key == self.faults_at:
            return Verdict("could_not_judge", FAULT, "exact", {BASELINE_UNJUDGED: True})
        return Verdict("accepted", "identical", "exact", {})

    def time(self, base_ptx, cand_ptx, spec, *, fresh=True):
        self.calls.append(("time", spec_key(spec), cand_ptx == base_ptx, fresh))
        return Timing("ok", True, 1.3)


def _search(judge, specs, budget=60.0):
    from superopt.search.loop import search_kernel
    return search_kernel(ptx_ir.parse(VADD), "vadd", specs, target="sm_90",
                         options=SearchOptions(budget_s=budget, passes=["test-nc-loads"], sanitize=()), judge=judge)


def _random_layout(spec):
    return replace(spec, origin="captured", random_layout=("a",))


def test_the_verdict_marks_a_failure_of_nvccs_code():
    assert baseline_unjudged(Verdict("could_not_judge", FAULT, "exact", {BASELINE_UNJUDGED: True}))
    assert baseline_unjudged({"status": "could_not_judge", "evidence": {BASELINE_UNJUDGED: True}})
    assert not baseline_unjudged(Verdict("could_not_judge", "the candidate hangs", "exact", {}))
    assert not baseline_unjudged({"status": "rejected", "evidence": {}})


def test_run_baseline_marks_its_could_not_judge_verdicts():
    """A spec that does not fit the kernel is one of run_baseline's failures: no candidate can be
    judged with it, and the verdict says so."""
    from superopt.judge.check import run_baseline
    bad = vadd_spec()
    bad.params.pop(0)               # a parameter short
    got = run_baseline(VADD, bad, backend="emulator", sets=1)
    assert isinstance(got, Verdict) and got.status == "could_not_judge"
    assert baseline_unjudged(got), got.evidence


def test_a_late_check_that_fails_on_nvccs_code_ends_the_tries(test_passes):  # noqa: F811
    """Two candidates are faster; the first one's late check at the costly shape fails on nvcc's
    own code. The second is not confirmed, checked or sanitized for nothing."""
    big, small = big_spec(), vadd_spec()
    judge = BaselineFaultsJudge(faults_at=spec_key(big))
    result = _search(judge, [big, small])
    rec = result.record
    assert result.winner is None and rec["status"] == "kept-baseline"
    faster = [e for e in rec["candidates"] if e.get("speedup") == 1.3]
    assert len(faster) >= 2, rec["candidates"]           # two winners to try
    late = [c for c in judge.calls if c[0] == "verify" and c[1] == spec_key(big)]
    assert len(late) == 1, judge.calls                   # one late check at the costly shape
    confirmations = [c for c in judge.calls if c[0] == "time" and c[3]]
    assert len(confirmations) == 1, judge.calls
    tried = [e for e in rec["candidates"] if e["fate"] == "not-judged"]
    assert len(tried) == 1 and FAULT in tried[0]["reason"]
    assert "(1 tried)" in rec["reason"], rec["reason"]
    # the spec source could not judge nvcc's code: the next one is for that
    assert baseline_unjudgeable(rec) and FAULT in baseline_unjudgeable(rec)


def test_a_captured_shape_with_random_index_arrays_is_asked_about_first(test_passes):  # noqa: F811
    """nvcc's code faults at the captured shape: nothing is proposed, checked or timed, and the
    record says why (and what would let it be judged)."""
    big = _random_layout(big_spec())
    judge = BaselineFaultsJudge(faults_at=spec_key(big))
    result = _search(judge, [big, vadd_spec()])
    rec = result.record
    assert judge.calls == [("verify", spec_key(big), True, False)]
    assert result.winner is None and rec["status"] == "kept-baseline" and rec["candidates"] == []
    assert FAULT in rec["reason"] and "--data" in rec["reason"] and "a hold random contents" in rec["reason"]
    assert baseline_unjudgeable(rec) == rec["baseline_unjudged"]


def test_the_screen_passes_where_nvccs_code_runs_and_its_runs_are_the_searchs(test_passes):  # noqa: F811
    big = _random_layout(big_spec())
    judge = BaselineFaultsJudge()
    result = _search(judge, [big, vadd_spec()])
    assert judge.calls[0] == ("verify", spec_key(big), True, False)
    assert result.winner is not None and result.record["status"] == "optimized"
    assert "baseline_unjudged" not in result.record


def test_no_screen_without_random_index_arrays(test_passes):  # noqa: F811
    big = replace(big_spec(), origin="captured")
    judge = BaselineFaultsJudge()
    _search(judge, [big, vadd_spec()])
    assert ("verify", spec_key(big), True, False) not in judge.calls


def test_the_next_spec_source_is_searched_at_once(test_passes):  # noqa: F811
    """Captured specs whose index arrays fault nvcc's code, then inferred ones: the kernel is
    searched with the inferred ones, and the sources tried are noted."""
    big = _random_layout(big_spec())
    judge = BaselineFaultsJudge(faults_at=spec_key(big))
    choices = [SpecChoice([big], "captured"), SpecChoice([vadd_spec()], "inferred")]
    kr, winner, chosen, tried = search_choices(
        ptx_ir.parse(VADD), "vadd", choices, options=SearchOptions(budget_s=60, passes=["test-nc-loads"], sanitize=()),
        deadline=None, share=None, judge=judge, target="sm_90")
    assert chosen == 1 and winner is not None
    assert len(tried) == 1 and "specs from captured could not be judged" in tried[0] and FAULT in tried[0]
    at_big = [c for c in judge.calls if c[1] == spec_key(big)]
    assert at_big == [("verify", spec_key(big), True, False)]
