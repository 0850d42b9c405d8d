"""The sanitizer of the candidate to keep runs beside its last checks (the late check at the
costly shape, the check on fresh inputs), not after them, and its verdict counts as before."""
from __future__ import annotations

import threading

import ptx_ir
import pytest
from superopt.judge.cache import spec_key
from superopt.judge.check import Verdict
from superopt.judge.devices import GpuBusy
from superopt.search.loop import search_kernel
from superopt.search.options import SearchOptions
from tests.model.helpers import VADD, test_passes  # noqa: F401 (a fixture)
from tests.search.test_costly_shapes import SizeJudge, big_spec, vadd_spec


class Sanitized:
    """What superopt.judge.sanitize.SanitizerResult says (status, reason, rejected)."""

    def __init__(self, rejected: bool, reason: str):
        self.rejected, self.reason = rejected, reason
        self.status = "rejected" if rejected else "clean"

    def to_dict(self):
        return {"status": self.status, "reason": self.reason}


class SanitizingJudge(SizeJudge):
    """The late check at the big shape waits (at most 20 s) for the sanitizer to have started:
    in turn, it would wait in vain."""

    def __init__(self, speedup, *, sanitize_says=None, wrong_at=None):
        super().__init__(speedup, wrong_at=wrong_at)
        self.sanitizing = threading.Event()
        self.met = None
        self.sanitize_says = sanitize_says or (lambda: Sanitized(False, "clean"))
        self.sanitized_in = []

    def verify(self, base_ptx, cand_ptx, spec, *, fresh=False):
        if fresh and spec_key(spec) == spec_key(self.big) and cand_ptx != base_ptx and self.met is None:
            self.met = self.sanitizing.wait(20)
        return super().verify(base_ptx, cand_ptx, spec, fresh=fresh)

    def sanitize(self, base_ptx, cand_ptx, spec, tools):
        self.sanitized_in.append(threading.current_thread().name)
        self.sanitizing.set()
        return self.sanitize_says()


def search(judge):
    big, small = judge.big, vadd_spec()
    return search_kernel(ptx_ir.parse(VADD), "vadd", [big, small], target="sm_90",
                         options=SearchOptions(budget_s=60, passes=["test-nc-loads"], sanitize=("memcheck",)),
                         judge=judge)


def make(speedup=1.3, **kw):
    j = SanitizingJudge(speedup, **kw)
    j.big = big_spec()
    return j


def test_the_sanitizer_runs_while_the_late_check_does(test_passes):  # noqa: F811
    judge = make()
    result = search(judge)
    assert judge.met is True, "the late check ran without the sanitizer running beside it"
    assert judge.sanitized_in == ["superopt-sanitize-beside"]
    assert result.winner is not None
    win = next(e for e in result.record["candidates"] if e["fate"] == "winner")
    assert win["sanitizer"]["status"] == "clean"


def test_a_sanitizer_rejection_beside_the_checks_still_rejects(test_passes):  # noqa: F811
    judge = make(sanitize_says=lambda: Sanitized(True, "compute-sanitizer memcheck: 3 error(s) in the candidate"))
    result = search(judge)
    assert result.winner is None and result.record["status"] == "kept-baseline"
    assert any(e["fate"] == "rejected-check" and "memcheck: 3 error" in e["reason"]
               for e in result.record["candidates"])


def test_when_the_checks_reject_the_sanitizers_failure_is_not_the_verdict(test_passes):  # noqa: F811
    def broken():
        raise RuntimeError("the sanitizer broke")
    judge = make(sanitize_says=broken)
    judge.wrong_at = spec_key(judge.big)
    result = search(judge)
    assert result.winner is None
    assert all(e["reason"].startswith("faster, but at the large launch shape: ") for e in result.record["candidates"])


def test_a_limit_raised_in_the_sanitizers_thread_stops_the_search(test_passes):  # noqa: F811
    def busy():
        raise GpuBusy("no GPU became free before the deadline")
    judge = make(sanitize_says=busy)
    with pytest.raises(GpuBusy):
        search(judge)
    judge = make(sanitize_says=busy)
    judge.wrong_at = spec_key(judge.big)        # also when the checks' verdict is a rejection
    with pytest.raises(GpuBusy):
        search(judge)


class NotJudged(Sanitized):
    def __init__(self):
        super().__init__(False, "memcheck could not run the candidate: the launch under memcheck did not complete")
        self.status = "not-judged"


class Unavailable(NotJudged):
    def __init__(self):
        super().__init__()
        self.status, self.reason = "unavailable", "compute-sanitizer is not installed here (not run)"


def test_a_candidate_the_sanitizer_could_not_run_while_it_ran_nvccs_code_is_not_kept(test_passes):  # noqa: F811
    judge = make(sanitize_says=NotJudged)
    result = search(judge)
    assert result.winner is None and result.record["status"] == "kept-baseline"
    assert any(e["fate"] == "not-judged" and e["reason"].startswith("not kept without compute-sanitizer's verdict")
               for e in result.record["candidates"])


def test_where_the_sanitizer_cannot_run_at_all_the_candidate_is_kept(test_passes):  # noqa: F811
    judge = make(sanitize_says=Unavailable)
    result = search(judge)
    assert result.winner is not None
    win = next(e for e in result.record["candidates"] if e["fate"] == "winner")
    assert win["sanitizer"]["status"] == "unavailable"


def test_where_the_sanitizer_would_be_too_costly_nothing_is_kept_and_it_never_runs(test_passes, monkeypatch):  # noqa: F811
    """A kernel whose smallest launch shape is over the sanitizer's bound keeps nvcc's code: no
    candidate is kept without its verdict, and it is not run (nor the checks at full size that
    would only have come before it)."""
    import superopt.search.loop as loop
    monkeypatch.setattr(loop, "SANITIZE_MAX_BYTES", 64)
    judge = make()
    late = []
    verify = judge.verify

    def spy(base, cand, spec, *, fresh=False):
        if fresh:
            late.append(spec_key(spec))
        return verify(base, cand, spec, fresh=fresh)
    judge.verify = spy
    judge.sanitizing.set()              # nothing waits for a sanitizer here
    result = search(judge)
    assert result.winner is None and result.record["status"] == "kept-baseline"
    assert "compute-sanitizer's verdict" in result.record["reason"] and "MiB" in result.record["reason"]
    assert judge.sanitized_in == [] and late == []
    assert any(e["fate"] == "not-judged" and "NVCC_PLUS_SANITIZE=off" in e["reason"]
               for e in result.record["candidates"])


def test_the_sanitizers_bound_holds_only_where_it_runs():
    from superopt.search.loop import SANITIZE_MAX_BYTES, _sanitizer_too_costly
    big = big_spec()
    big.params[-1].value = SANITIZE_MAX_BYTES          # three float buffers of that many elements
    assert _sanitizer_too_costly(SearchOptions(sanitize=("memcheck",)), big)
    assert _sanitizer_too_costly(SearchOptions(sanitize=()), big) is None
    assert _sanitizer_too_costly(SearchOptions(sanitize=("memcheck",)), vadd_spec()) is None
