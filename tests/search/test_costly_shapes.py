"""Checks at a costly launch shape (a captured, full-size one) wait for the timing: a candidate
that is not faster is never checked there, a faster one always is, and a wrong one is still
rejected by that late check."""
from __future__ import annotations

from dataclasses import dataclass

import ptx_ir
from superopt.judge import Judge
from superopt.judge.cache import spec_key
from superopt.judge.check import Verdict
from superopt.search.candidates import Candidate, Step
from superopt.search.loop import COSTLY_CHECK_BYTES, evaluate
from superopt.specs.launch_spec import LaunchSpec, Scalar
from tests.model.helpers import VADD, VADD_GOOD, test_passes, vadd_spec  # noqa: F401 (a fixture)

BIG_N = COSTLY_CHECK_BYTES // 4          # three float buffers of this length: 3x the threshold


def big_spec() -> LaunchSpec:
    s = vadd_spec()
    s.params[-1] = Scalar("n", "u32", BIG_N)
    return s


@dataclass
class Timing:
    status: str
    faster: bool
    speedup: float
    reason: str = "scripted"
    slower: bool = False

    def to_dict(self):
        return {"status": self.status, "faster": self.faster, "speedup": self.speedup}


class SizeJudge(Judge):
    """Accepts everywhere but at ``wrong_at`` (a spec key); times as told; logs every call."""

    backend = "scripted-gpu"
    policy = "exact"
    can_time = True

    def __init__(self, speedup: float, wrong_at=None):
        self.speedup, self.wrong_at, self.calls = speedup, wrong_at, []
        self.fresh_calls = []           # (spec key, fresh) of every verify

    def verify(self, base_ptx, cand_ptx, spec, *, fresh=False):
        key = spec_key(spec)
        self.calls.append(("verify", key))
        self.fresh_calls.append((key, fresh))
        if key == self.wrong_at:
            return Verdict("rejected", "buffer 'out' element 9000000 differs", "exact", {})
        return Verdict("accepted", "identical", "exact", {})

    def time(self, base_ptx, cand_ptx, spec, *, fresh=True):
        self.calls.append(("time", spec_key(spec)))
        return Timing("ok", self.speedup > 1.02, self.speedup)


def search_big_and_small(judge, big, small):
    """A whole search of vadd at the costly shape and the small one, with the test pass."""
    from superopt.search.loop import search_kernel
    from superopt.search.options import SearchOptions
    return search_kernel(ptx_ir.parse(VADD), "vadd", [big, small], target="sm_90",
                         options=SearchOptions(budget_s=60, passes=["test-nc-loads"], sanitize=()), judge=judge)


def candidate() -> Candidate:
    ptx = VADD[:VADD.index(".visible")] + VADD_GOOD
    return Candidate(kernel="vadd", plan=[Step("test-nc-loads", {})], ptx=ptx, changes=[])


def test_a_candidate_that_is_not_faster_is_not_checked_at_the_costly_shape():
    big, small = big_spec(), vadd_spec()
    judge = SizeJudge(speedup=0.97)
    entry = evaluate(candidate(), VADD, [big, small], judge, "sm_90")
    assert entry["fate"] == "not-faster"
    assert ("verify", spec_key(big)) not in judge.calls
    assert judge.calls == [("verify", spec_key(small)), ("time", spec_key(big))]
    assert entry["launch_shapes_checked"] == 1 and entry["launch_shapes_unchecked"] == 1
    assert "not checked at the 1 large launch shape" in entry["reason"]


def test_a_faster_candidate_is_left_unchecked_at_the_costly_shape_until_it_is_kept():
    from superopt.search.loop import _late_check
    big, small = big_spec(), vadd_spec()
    judge = SizeJudge(speedup=1.3)
    cand = candidate()
    entry = evaluate(cand, VADD, [big, small], judge, "sm_90")
    assert entry["fate"] == "faster" and entry["launch_shapes_unchecked"] == 1
    assert judge.calls == [("verify", spec_key(small)), ("time", spec_key(big))]
    assert _late_check(judge, VADD, cand, [big, small], entry)
    assert judge.calls[-1] == ("verify", spec_key(big))
    assert entry["launch_shapes_checked"] == 2 and "launch_shapes_unchecked" not in entry


def test_a_faster_candidate_wrong_only_at_the_costly_shape_is_never_kept(test_passes):  # noqa: F811
    """Through the whole search: the candidate is faster, right on the small shape, wrong at
    the costly one; the search keeps nvcc's code and says why."""
    big, small = big_spec(), vadd_spec()
    judge = SizeJudge(speedup=1.3, wrong_at=spec_key(big))
    result = search_big_and_small(judge, big, small)
    assert result.winner is None and result.record["status"] == "kept-baseline"
    entries = result.record["candidates"]
    assert entries and all(e["fate"] == "rejected-check" for e in entries), entries
    assert all(e["reason"].startswith("faster, but at the large launch shape: ") for e in entries)
    assert "element 9000000 differs" in entries[0]["reason"]
    assert entries[0]["speedup"] == 1.3          # what the timing said stays in the record


def test_the_kept_candidate_was_checked_at_every_shape(test_passes):  # noqa: F811
    big, small = big_spec(), vadd_spec()
    judge = SizeJudge(speedup=1.3)
    result = search_big_and_small(judge, big, small)
    assert result.winner is not None
    win = next(e for e in result.record["candidates"] if e["fate"] == "winner")
    assert win["launch_shapes_checked"] == 2 and "launch_shapes_unchecked" not in win
    assert ("verify", spec_key(big)) in judge.calls


def test_the_late_check_at_the_costly_shape_is_the_kept_candidates_check_on_fresh_inputs_there(test_passes):  # noqa: F811
    """No verdict at the costly shape chose the candidate: its late check there runs on fresh
    inputs and stands for the check on fresh inputs there (once at the program's real size, not
    on the search's inputs and then on fresh ones); the small shape, where the search's checks
    chose it, still gets its check on fresh inputs."""
    big, small = big_spec(), vadd_spec()
    judge = SizeJudge(speedup=1.3)
    result = search_big_and_small(judge, big, small)
    assert result.winner is not None
    win = next(e for e in result.record["candidates"] if e["fate"] == "winner")
    at_big = [fresh for key, fresh in judge.fresh_calls if key == spec_key(big)]
    assert at_big == [True]
    assert (spec_key(small), True) in judge.fresh_calls
    assert win["fresh_checked_late"] == 1 and win["fresh_verdict"]["status"] == "accepted"


def test_a_candidate_wrong_on_fresh_inputs_at_the_costly_shape_is_rejected_by_the_late_check(test_passes):  # noqa: F811
    """A candidate right on the search's inputs everywhere and wrong only on inputs it was not
    chosen on, at the costly shape: the late check draws those and rejects it."""
    class WrongOnFresh(SizeJudge):
        def verify(self, base_ptx, cand_ptx, spec, *, fresh=False):
            v = super().verify(base_ptx, cand_ptx, spec, fresh=fresh)
            if fresh and spec_key(spec) == spec_key(big) and cand_ptx != base_ptx:
                return Verdict("rejected", "buffer 'out' element 7 differs", "exact", {})
            return v
    big, small = big_spec(), vadd_spec()
    judge = WrongOnFresh(speedup=1.3)
    result = search_big_and_small(judge, big, small)
    assert result.winner is None and result.record["status"] == "kept-baseline"
    assert any("element 7 differs" in e["reason"] for e in result.record["candidates"])


def built_in_candidate() -> Candidate:
    """A candidate of a pass shipped with nvcc-plus (cache-hints: the read-only loads of vadd
    through the non-coherent path)."""
    from superopt.search.candidates import make_candidate
    cand = make_candidate(ptx_ir.parse(VADD), "vadd", [Step("cache-hints", {"mode": "nc"})])
    assert cand is not None and "ld.global.nc" in cand.ptx
    return cand


def test_a_built_in_pass_with_only_costly_shapes_is_timed_first():
    """Nothing cheaper to check first, and the candidate comes from a built-in pass: it is
    timed first, and checked only when faster (a wrong faster one is still rejected)."""
    from superopt.search.loop import _built_in, _late_check
    big = big_spec()
    assert _built_in(built_in_candidate())
    slow = SizeJudge(speedup=0.97, wrong_at=spec_key(big))
    entry = evaluate(built_in_candidate(), VADD, [big], slow, "sm_90")
    assert entry["fate"] == "not-faster" and slow.calls == [("time", spec_key(big))]
    assert entry["launch_shapes_unchecked"] == 1 and "launch_shapes_checked" not in entry
    fast = SizeJudge(speedup=1.3, wrong_at=spec_key(big))
    entry = evaluate(built_in_candidate(), VADD, [big], fast, "sm_90")
    assert entry["fate"] == "faster" and fast.calls == [("time", spec_key(big))]
    assert not _late_check(fast, VADD, built_in_candidate(), [big], entry)
    assert entry["fate"] == "rejected-check" and fast.calls[-1] == ("verify", spec_key(big))


def test_a_model_rewrite_with_only_costly_shapes_is_checked_before_timing():
    """A rewrite no built-in pass made (a model's, a user's pass file) is checked at the costly
    shape before it ever runs there for timing."""
    big = big_spec()
    cand = candidate()
    cand.provenance = {"proposer": "model", "model": "some-model"}
    judge = SizeJudge(speedup=0.97, wrong_at=spec_key(big))
    entry = evaluate(cand, VADD, [big], judge, "sm_90")
    assert entry["fate"] == "rejected-check"
    assert judge.calls == [("verify", spec_key(big))]


def test_a_user_pass_file_with_only_costly_shapes_is_checked_before_timing(test_passes):  # noqa: F811
    from superopt.search.loop import _built_in
    assert not _built_in(candidate())
    big = big_spec()
    judge = SizeJudge(speedup=0.97, wrong_at=spec_key(big))
    entry = evaluate(candidate(), VADD, [big], judge, "sm_90")   # test-nc-loads: source "tests/model"
    assert entry["fate"] == "rejected-check"
    assert judge.calls == [("verify", spec_key(big))]


def test_without_timing_every_shape_is_checked():
    big, small = big_spec(), vadd_spec()
    judge = SizeJudge(speedup=1.0)
    judge.can_time = False
    entry = evaluate(candidate(), VADD, [big, small], judge, "sm_90")
    assert entry["fate"] == "verified"
    assert [c for c in judge.calls if c[0] == "verify"] == [("verify", spec_key(big)), ("verify", spec_key(small))]


def test_the_threshold_splits_on_buffer_bytes():
    from superopt.search.loop import _split_by_cost
    big, small = big_spec(), vadd_spec()
    assert _split_by_cost([big, small]) == ([small], [big])


class UnjudgeableShapeJudge(SizeJudge):
    """nvcc's own code is not deterministic on the launch shape ``bad`` (every verify there
    says so), fine elsewhere; every candidate is faster."""

    def __init__(self, bad):
        super().__init__(speedup=1.3)
        self.bad = spec_key(bad)

    def verify(self, base_ptx, cand_ptx, spec, *, fresh=False):
        if spec_key(spec) == self.bad:
            self.calls.append(("verify", self.bad))
            return Verdict("could_not_judge", "the baseline is not deterministic: buffer 'out' element 3", "exact", {})
        return super().verify(base_ptx, cand_ptx, spec, fresh=fresh)


def captured(spec: LaunchSpec) -> LaunchSpec:
    spec.origin = "captured"
    return spec


def test_an_inferred_shape_beside_a_capture_that_nvcc_code_fails_on_is_dropped(test_passes):  # noqa: F811
    from superopt.search.loop import search_kernel
    from superopt.search.options import SearchOptions
    real, guessed, fine = captured(vadd_spec()), vadd_spec(), vadd_spec()
    guessed.block, guessed.origin = (96, 1, 1), "inferred"
    fine.params[-1], fine.origin = Scalar("n", "u32", 29), "inferred"
    judge = UnjudgeableShapeJudge(bad=guessed)
    result = search_kernel(ptx_ir.parse(VADD), "vadd", [real, guessed, fine], target="sm_90",
                           options=SearchOptions(budget_s=60, passes=["test-nc-loads"]), judge=judge)
    rec = result.record
    assert result.winner is not None and rec["status"] == "optimized", rec
    assert any("dropped: nvcc's own code cannot be judged" in n and "[96, 1, 1]" in n for n in rec["notes"])
    assert len(rec["spec"]) == 2
    # the guessed shape was asked about once (nvcc's code against itself), never per candidate
    assert judge.calls.count(("verify", spec_key(guessed))) == 1


def test_without_a_capture_no_shape_is_dropped(test_passes):  # noqa: F811
    """Inferred specs alone: an unjudgeable one leaves the candidates not judged (and the
    optimizer tries the next source), as before."""
    from superopt.search.loop import search_kernel
    from superopt.search.options import SearchOptions
    first, guessed = vadd_spec(), vadd_spec()
    guessed.block = (96, 1, 1)
    judge = UnjudgeableShapeJudge(bad=guessed)
    result = search_kernel(ptx_ir.parse(VADD), "vadd", [first, guessed], target="sm_90",
                           options=SearchOptions(budget_s=60, passes=["test-nc-loads"]), judge=judge)
    assert result.winner is None
    assert {c["fate"] for c in result.record["candidates"]} == {"not-judged"}


def test_a_capture_nvcc_code_cannot_be_judged_at_sends_the_search_to_the_next_source():
    """Built-in candidates are timed before the captured size is checked; when every one the
    search tried to keep turns out not judgeable there (nvcc's own code), the next spec source
    is searched, as when the check came first."""
    from superopt.search.choices import search_choices
    from superopt.search.options import SearchOptions
    from superopt.specs.sources import SpecChoice
    big, small = big_spec(), vadd_spec()
    big.origin = "captured"
    judge = UnjudgeableShapeJudge(bad=big)
    choices = [SpecChoice([big], "captured"), SpecChoice([small], "inferred")]
    kr, winner, chosen, tried = search_choices(
        ptx_ir.parse(VADD), "vadd", choices, options=SearchOptions(budget_s=60, passes=["cache-hints"], sanitize=()),
        deadline=None, share=None, judge=judge, target="sm_90")
    assert chosen == 1 and winner is not None, (kr["status"], kr["reason"], tried)
    assert tried and "specs from captured could not be judged" in tried[0]
    assert "not deterministic" in tried[0]


class UnconfirmedJudge(SizeJudge):
    """Faster in the search's timing, not when timed again (the confirmation, ``fresh=True``)."""

    def time(self, base_ptx, cand_ptx, spec, *, fresh=True):
        self.calls.append(("time", spec_key(spec), fresh))
        return Timing("ok", not fresh, 1.3 if not fresh else 1.0)


def test_a_candidate_not_confirmed_costs_no_check_at_full_size(test_passes):  # noqa: F811
    """The keeping steps run cheapest first: the confirmation timing drops the candidate before
    the late check at the costly shape and the check on fresh inputs would run."""
    from superopt.search.loop import search_kernel
    from superopt.search.options import SearchOptions
    big, small = big_spec(), vadd_spec()
    judge = UnconfirmedJudge(speedup=1.3)
    result = search_kernel(ptx_ir.parse(VADD), "vadd", [big, small], target="sm_90",
                           options=SearchOptions(budget_s=60, passes=["test-nc-loads"], sanitize=()), judge=judge)
    assert result.winner is None
    entries = result.record["candidates"]
    assert entries and all(e["fate"] == "not-confirmed" for e in entries), entries
    confirmed_at = judge.calls.index(("time", spec_key(big), True))
    assert ("verify", spec_key(big)) not in judge.calls
    assert all(c[0] == "time" for c in judge.calls[confirmed_at:]), judge.calls
    assert not any(e.get("fresh_verdict") for e in entries)


class WaitingJudge(SizeJudge):
    """Its screening of nvcc's own code at an inferred shape waits ``wait`` s for the GPU (other
    compilations hold it), recorded as GPU wait as a real GPU step records it."""

    def __init__(self, speedup: float, wait: float):
        super().__init__(speedup)
        self.wait = wait

    def verify(self, base_ptx, cand_ptx, spec, *, fresh=False):
        if base_ptx == cand_ptx:
            import time as _time
            from superopt.judge.phases import current
            _time.sleep(self.wait)
            current().add("gpu_wait", self.wait)
        return super().verify(base_ptx, cand_ptx, spec, fresh=fresh)


def test_waiting_for_the_gpu_while_screening_shapes_is_not_the_searchs_budget(test_passes):  # noqa: F811
    """A capture's kernel with an inferred shape beside it: screening that shape waits for the GPU
    longer than the whole budget. The wait is not the search's time: its candidates are still
    judged (they were all "skipped-budget" when the budget counted it, the economy bench's
    maps:gather, 2026-12-04)."""
    from dataclasses import replace

    from superopt.judge.phases import recording
    from superopt.search.loop import search_kernel
    from superopt.search.options import SearchOptions
    big, small = replace(big_spec(), origin="captured"), replace(vadd_spec(), origin="inferred")
    judge = WaitingJudge(speedup=1.3, wait=0.6)
    with recording():
        result = search_kernel(ptx_ir.parse(VADD), "vadd", [big, small], target="sm_90",
                               options=SearchOptions(budget_s=0.5, passes=["test-nc-loads"], sanitize=()),
                               judge=judge)
    fates = [e["fate"] for e in result.record["candidates"]]
    assert fates and "skipped-budget" not in fates[:1], fates
    assert result.winner is not None
