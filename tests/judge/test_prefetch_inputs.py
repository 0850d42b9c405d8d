"""Inputs made ahead of the checks before keeping a candidate (BackendJudge.prefetch_inputs): the
baseline's input sets of a check on fresh inputs, made in a thread beside the search, give the
check it would have made on its own (the same sets for a seed, the same verdicts), each set is
used by one check only, and the search asks for them once, when a candidate is first faster with
costly launch shapes left to check. On the emulator (the judge's gate is the GPU's: a test judge
says it can time)."""
from __future__ import annotations

import numpy as np
import pytest

import ptx_ir
from superopt.judge import judge as judge_mod
from superopt.judge.cache import CachingJudge, spec_key
from superopt.judge.check import (ACCEPTED, REJECTED, BaselineInputs, BaselineRuns, check, prepare_baseline_inputs,
                                  run_baseline)
from superopt.judge.judge import BackendJudge
from superopt.search.options import SearchOptions
from tests.judge.planted import KERNELS, judge_spec, ptx
from tests.model.helpers import VADD, test_passes, vadd_spec  # noqa: F401 (a fixture)
from tests.search.test_costly_shapes import SizeJudge, big_spec

pytestmark = pytest.mark.skipif(not (KERNELS / "ptx" / "baseline.ptx").exists(), reason="judge kernels missing")

SPEC = judge_spec(3001)
MADE_AHEAD = "the input sets were made ahead of the check, beside the search"


class EmulatorAsGpu(BackendJudge):
    """The emulator judge with the GPU judge's gate open (prefetch_inputs makes inputs only for a
    judge that times)."""

    can_time = True

    def __init__(self):
        super().__init__("emulator", check_sets=2)


def test_prepared_inputs_are_the_sets_the_baseline_would_draw():
    prepared = prepare_baseline_inputs(ptx("baseline"), SPEC, backend="emulator", policy="exact", sets=2, seed=77)
    assert isinstance(prepared, BaselineInputs) and prepared.seed == 77
    made = len(prepared.base_sets)          # the large set after them depends on measured times
    assert made >= 2 and len(prepared.run2) == made
    ahead = run_baseline(ptx("baseline"), SPEC, backend="emulator", prepared=prepared)
    alone = run_baseline(ptx("baseline"), SPEC, backend="emulator", sets=2, seed=77)
    assert isinstance(ahead, BaselineRuns) and isinstance(alone, BaselineRuns)
    assert ahead.valid[:made] == alone.valid[:made] == list(range(made))
    for a, b in zip(ahead.sets[:made], alone.sets[:made]):
        assert a.label == b.label and a.data.keys() == b.data.keys()
        assert all(np.array_equal(a.data[k].view(np.uint8), b.data[k].view(np.uint8)) for k in a.data)
    for i in range(made):
        a, b = ahead.results[i], alone.results[i]
        assert all(np.array_equal(a.outputs[k].view(np.uint8), b.outputs[k].view(np.uint8)) for k in a.outputs)
    assert MADE_AHEAD in ahead.evidence["notes"] and MADE_AHEAD not in alone.evidence["notes"]


def test_a_check_on_prepared_inputs_judges_as_one_on_its_own():
    base = ptx("baseline")
    for name, want in (("eq_reorder", ACCEPTED), ("ignore_input", REJECTED), ("off_by_one", REJECTED)):
        prepared = prepare_baseline_inputs(base, SPEC, backend="emulator", policy="exact", sets=2)
        v = check(base, ptx(name), SPEC, backend="emulator", prepared=prepared)
        assert v.status == want, (name, v.summary())


def test_prepared_for_another_baseline_is_refused():
    prepared = prepare_baseline_inputs(ptx("baseline"), SPEC, backend="emulator", policy="exact", sets=1)
    with pytest.raises(ValueError):
        run_baseline(ptx("eq_reorder"), SPEC, backend="emulator", prepared=prepared)


def test_the_judge_makes_them_beside_and_one_fresh_check_takes_them():
    judge = EmulatorAsGpu()
    base = ptx("baseline")
    assert judge.prefetch_inputs(base, SPEC, ("check",))
    assert not judge.prefetch_inputs(base, SPEC, ("check",))          # asked for once
    first = judge.verify(base, ptx("eq_reorder"), SPEC, fresh=True)
    assert first.status == ACCEPTED and MADE_AHEAD in first.evidence["notes"]
    second = judge.verify(base, ptx("eq_reorder"), SPEC, fresh=True)   # inputs of its own again
    assert second.status == ACCEPTED and MADE_AHEAD not in second.evidence["notes"]
    assert first.evidence["seed"] != second.evidence["seed"]
    # a check that is not on fresh inputs never takes them
    assert judge.prefetch_inputs(ptx("eq_commute"), SPEC, ("check",))
    cached = judge.verify(ptx("eq_commute"), ptx("eq_reorder"), SPEC)
    assert MADE_AHEAD not in cached.evidence["notes"]
    assert judge._prefetched[(judge_mod.text_digest(ptx("eq_commute")), spec_key(SPEC))].get("check") is not None


def test_a_wrong_candidate_is_rejected_on_inputs_made_ahead():
    judge = EmulatorAsGpu()
    base = ptx("baseline")
    assert judge.prefetch_inputs(base, SPEC, ("check",))
    v = judge.verify(base, ptx("ignore_input"), SPEC, fresh=True)
    assert v.status == REJECTED and MADE_AHEAD in v.evidence["notes"], v.summary()


def test_nothing_is_made_past_the_memory_bound_or_without_a_gpu(monkeypatch):
    monkeypatch.setattr(judge_mod, "PREFETCH_MAX_BYTES", 1024)
    assert not EmulatorAsGpu().prefetch_inputs(ptx("baseline"), SPEC)
    monkeypatch.undo()
    assert not BackendJudge("emulator").prefetch_inputs(ptx("baseline"), SPEC)


def test_a_failure_while_making_them_leaves_the_check_its_own(monkeypatch):
    judge = EmulatorAsGpu()
    base = ptx("baseline")

    def broken(*a, **kw):
        raise MemoryError("no room")
    monkeypatch.setattr("superopt.judge.check.prepare_baseline_inputs", broken)
    assert judge.prefetch_inputs(base, SPEC, ("check",))
    monkeypatch.undo()
    v = judge.verify(base, ptx("eq_reorder"), SPEC, fresh=True)
    assert v.status == ACCEPTED and MADE_AHEAD not in v.evidence["notes"]


class PrefetchLog(SizeJudge):
    def __init__(self, speedup):
        super().__init__(speedup)
        self.prefetches = []

    def prefetch_inputs(self, base_ptx, spec, what=("check", "time")):
        self.prefetches.append((spec_key(spec), tuple(what), len(self.calls)))
        return True


def _search(judge, specs, sanitize=()):
    from superopt.search.loop import search_kernel
    return search_kernel(ptx_ir.parse(VADD), "vadd", specs, target="sm_90",
                         options=SearchOptions(budget_s=60, passes=["test-nc-loads"], sanitize=sanitize), judge=judge)


def test_the_search_asks_once_when_a_candidate_is_first_faster_at_an_unchecked_costly_shape(test_passes):  # noqa: F811
    big, small = big_spec(), vadd_spec()
    judge = PrefetchLog(speedup=1.3)
    result = _search(judge, [big, small])
    assert result.winner is not None
    assert len(judge.prefetches) == 2, judge.prefetches
    # the set candidates are timed on, before anything is checked
    assert judge.prefetches[0] == (spec_key(big), ("timed",), 0)
    key, what, at = judge.prefetches[1]
    assert key == spec_key(big) and what == ("check", "time")      # the timed shape is the costly one
    # asked right after the first timing, before the late check at the costly shape
    assert judge.calls[:at] == [("verify", spec_key(small)), ("time", spec_key(big))]
    assert ("verify", spec_key(big)) in judge.calls[at:]


def test_not_asked_when_nothing_is_faster_or_nothing_costly_is_left(test_passes):  # noqa: F811
    judge = PrefetchLog(speedup=0.97)
    _search(judge, [big_spec(), vadd_spec()])
    assert [w for _, w, _ in judge.prefetches] == [("timed",)]
    judge = PrefetchLog(speedup=1.3)
    _search(judge, [vadd_spec()])
    assert judge.prefetches == []            # nothing costly: drawing is cheap


def test_not_asked_for_a_gain_below_the_least_kept(test_passes):  # noqa: F811
    """Faster beyond noise by 1.5%, under NVCC_PLUS_MIN_GAIN's 2%: never kept, so the checks
    before keeping it never run and their inputs are not made."""
    from tests.search.test_costly_shapes import Timing

    class SmallGain(PrefetchLog):
        def time(self, base_ptx, cand_ptx, spec, *, fresh=True):
            self.calls.append(("time", spec_key(spec)))
            return Timing("ok", True, self.speedup)          # faster beyond noise, by 1.5%
    judge = SmallGain(speedup=1.015)
    result = _search(judge, [big_spec(), vadd_spec()])
    assert result.winner is None
    assert {e["fate"] for e in result.record["candidates"]} == {"below-min-gain"}
    assert [w for _, w, _ in judge.prefetches] == [("timed",)]
    judge = SmallGain(speedup=1.03)                          # the same search, past the least gain
    assert _search(judge, [big_spec(), vadd_spec()]).winner is not None
    assert [w for _, w, _ in judge.prefetches] == [("timed",), ("check", "time")]


def test_not_asked_where_no_candidate_could_be_kept(test_passes, monkeypatch):  # noqa: F811
    """compute-sanitizer's bound keeps nvcc's code whatever is faster: nothing to check."""
    from superopt.search import loop
    monkeypatch.setattr(loop, "SANITIZE_MAX_BYTES", 1024)
    judge = PrefetchLog(speedup=1.3)
    _search(judge, [big_spec(), vadd_spec()], sanitize=("memcheck",))
    assert [w for _, w, _ in judge.prefetches] == [("timed",)]


def test_the_caching_judge_passes_it_on():
    judge = EmulatorAsGpu()
    assert CachingJudge(judge).prefetch_inputs(ptx("baseline"), SPEC, ("check",))
    assert CachingJudge(SizeJudge(1.0)).prefetch_inputs(ptx("baseline"), SPEC) is False


@pytest.fixture()
def timings(monkeypatch):
    """What each timing was asked to time on: (inputs, reused), in order (time_pair replaced)."""
    seen = []

    def fake_time_pair(base, cand, spec, **kw):
        seen.append((kw.get("inputs"), kw.get("reused")))
        return "timed"
    monkeypatch.setattr("superopt.judge.timing.time_pair", fake_time_pair)
    return seen


def test_a_confirmation_times_on_the_set_made_ahead_once_and_does_not_keep_it(timings):
    seen = timings
    judge = EmulatorAsGpu()
    base = ptx("baseline")
    assert judge.prefetch_inputs(base, SPEC, ("time",))
    assert judge.time(base, ptx("eq_reorder"), SPEC, fresh=True) == "timed"
    made, reused = seen[-1]
    assert made is not None and made.spec.kernel == SPEC.kernel and reused is False
    judge.time(base, ptx("eq_reorder"), SPEC, fresh=True)          # the next one draws its own
    assert seen[-1] == (None, False)


class FasterOnTheEmulator(EmulatorAsGpu):
    """Checks on the emulator; every timing says 1.3x faster, and says whether a confirmation
    took a set made ahead."""

    def __init__(self):
        super().__init__()
        self.confirmations, self.first_timings = [], []

    def time(self, base_ptx, cand_ptx, spec, *, fresh=True):
        from tests.search.test_costly_shapes import Timing
        if fresh:
            self.confirmations.append(self._take_prefetched(base_ptx, spec, "time") is not None)
        else:
            self.first_timings.append(self._take_prefetched(base_ptx, spec, "timed") is not None)
        return Timing("ok", True, 1.3)


def test_a_whole_search_keeps_its_candidate_on_inputs_made_ahead(test_passes):  # noqa: F811
    """End to end, recording the search's phases as a build does: the late check at the costly
    shape and the confirmation take what was made beside the search (a phase name the recorder
    did not know once made both fall back, unseen, to drawing their own)."""
    from superopt.judge.phases import Phases, recording
    from superopt.search.loop import search_kernel
    judge = FasterOnTheEmulator()
    phases = Phases("vadd")
    with recording(phases):
        result = search_kernel(ptx_ir.parse(VADD), "vadd", [big_spec(), vadd_spec()], target="sm_90",
                               options=SearchOptions(budget_s=60, passes=["test-nc-loads"], sanitize=()), judge=judge)
    assert result.winner is not None, result.record["reason"]
    win = next(e for e in result.record["candidates"] if e["fate"] == "winner")
    assert MADE_AHEAD in win["verdict"]["evidence"]["notes"]
    assert judge.confirmations == [True]
    assert judge.first_timings[0] is True and not any(judge.first_timings[1:])     # taken once
    assert phases.get("prefetch") > 0


def test_the_candidates_timing_set_is_made_ahead_and_kept_for_the_next_ones(timings):
    seen = timings
    judge = EmulatorAsGpu()
    base = ptx("baseline")
    assert judge.prefetch_inputs(base, SPEC, ("timed",))
    assert not judge.prefetch_inputs(base, SPEC, ("timed",))          # made, not taken yet
    assert judge.prefetch_inputs(base, SPEC, ("check",))              # another kind beside it
    judge.time(base, ptx("eq_reorder"), SPEC, fresh=False)
    judge.time(base, ptx("eq_commute"), SPEC, fresh=False)
    (first, reused1), (second, reused2) = seen
    assert first is not None and second is first and reused1 and reused2
    assert "timed" not in judge._prefetched[(judge_mod.text_digest(base), spec_key(SPEC))]


def test_nothing_is_made_past_a_share_of_the_free_host_memory(monkeypatch):
    """The sets stay for the rest of a search, and every compilation of a build makes its own:
    not where they would take more than a share of the memory free now."""
    n = judge_mod.spec_bytes(SPEC)
    monkeypatch.setattr(judge_mod, "host_memory_free", lambda: int(n / judge_mod.PREFETCH_FREE_SHARE) - 1)
    assert not EmulatorAsGpu().prefetch_inputs(ptx("baseline"), SPEC, ("timed",))
    monkeypatch.setattr(judge_mod, "host_memory_free", lambda: int(n / judge_mod.PREFETCH_FREE_SHARE) + 1)
    assert EmulatorAsGpu().prefetch_inputs(ptx("baseline"), SPEC, ("timed",))
    monkeypatch.setattr(judge_mod, "host_memory_free", lambda: None)          # unknown: the fixed bound alone
    assert EmulatorAsGpu().prefetch_inputs(ptx("baseline"), SPEC, ("timed",))


def test_the_free_host_memory_is_read():
    import os
    free = judge_mod.host_memory_free()
    if os.path.exists("/proc/meminfo"):
        want = next(int(line.split()[1]) * 1024 for line in open("/proc/meminfo") if line.startswith("MemAvailable:"))
        assert free is not None and abs(free - want) < max(want, 1) * 0.5
    else:
        assert free is None or free > 0
