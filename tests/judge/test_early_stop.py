"""Timings that stop once the candidate is clearly not faster, or clearly faster when asked
(superopt.judge.early_stop): the rules against decide() on synthetic timings, and the plumbing
from the judge to the worker."""
from __future__ import annotations

import numpy as np
import pytest

from superopt.judge import early_stop
from superopt.judge.early_stop import FASTER, NOT_FASTER, clearly_faster, clearly_not_faster, should_stop
from superopt.judge.timing import decide, time_pair
from superopt.specs.launch_spec import load_spec
from tests.judge.planted import KERNELS

SIGMA = 0.01


def _pair(rng, gain_in_spreads: float, n: int, tail: bool = False):
    """Paired timings (ms) of equal spread; B's median lower by ``gain_in_spreads`` spreads
    (spread = IQR = 1.349 sigma). ``tail``: 5% slow outliers on both sides."""
    a = rng.normal(1.0, SIGMA, n)
    b = rng.normal(1.0, SIGMA, n) - gain_in_spreads * 1.349 * SIGMA
    if tail:
        for x in (a, b):
            k = rng.random(n) < 0.05
            x[k] += rng.exponential(10 * SIGMA, k.sum())
    return a, b


@pytest.mark.parametrize("tail", [False, True])
def test_equal_candidates_mostly_stop_at_the_first_look(tail):
    rng = np.random.default_rng(1)
    stops = sum(clearly_not_faster(*_pair(rng, 0.0, early_stop.FIRST, tail)) for _ in range(1000))
    assert stops > 550              # at 20 rounds about 63%; the looks every 5 rounds stop the rest


def test_equal_candidates_run_about_a_third_more_than_the_first_look():
    rng = np.random.default_rng(8)
    rule = {"first": early_stop.FIRST, "every": early_stop.EVERY, "z": early_stop.Z, "faster": True}
    rounds = []
    for _ in range(300):
        a, b = _pair(rng, 0.0, 60)
        rounds.append(next((k for k in range(1, 60) if should_stop(k, a[:k], b[:k], rule)), 60))
    assert np.mean(rounds) < 30 and np.mean(np.array(rounds) == 60) < 0.02


@pytest.mark.parametrize("tail", [False, True])
def test_a_gain_of_the_spread_is_almost_never_stopped(tail):
    rng = np.random.default_rng(2)
    stops = sum(clearly_not_faster(*_pair(rng, 1.0, early_stop.FIRST, tail)) for _ in range(2000))
    assert stops <= 10                                    # z = 3: about 0.1%
    assert not any(clearly_not_faster(*_pair(rng, 1.5, early_stop.FIRST, tail)) for _ in range(2000))


def test_a_stopped_timing_is_never_decided_faster():
    rng = np.random.default_rng(3)
    for _ in range(500):
        a, b = _pair(rng, rng.uniform(0, 1.2), early_stop.FIRST)
        if clearly_not_faster(a, b):
            assert not decide(a, b)[0]


@pytest.mark.parametrize("tail", [False, True])
def test_an_equal_candidate_is_almost_never_stopped_as_faster(tail):
    rng = np.random.default_rng(5)
    assert sum(clearly_faster(*_pair(rng, 0.0, early_stop.FIRST, tail)) for _ in range(2000)) <= 2
    # a gain of one spread is not "clearly" beyond it: mostly it runs on
    assert sum(clearly_faster(*_pair(rng, 1.0, early_stop.FIRST, tail)) for _ in range(1000)) < 100


def test_a_clear_win_stops_at_the_first_look_and_decide_still_says_faster():
    rng = np.random.default_rng(6)
    for _ in range(300):
        a, b = _pair(rng, 4.0, early_stop.FIRST)
        assert clearly_faster(a, b) and not clearly_not_faster(a, b)
        assert decide(a, b)[0]


def test_should_stop_asks_only_at_its_rounds():
    a, b = np.ones(100), np.ones(100) * 1.5             # the candidate is plainly slower
    rule = {"first": 30, "every": 10, "z": 3.0}
    assert [k for k in range(1, 100) if should_stop(k, a[:k], b[:k], rule)] == [30, 40, 50, 60, 70, 80, 90]
    assert should_stop(30, a, b, rule) == NOT_FASTER
    assert should_stop(30, a, b, None) is None
    rng = np.random.default_rng(7)
    a, b = _pair(rng, 5.0, 40)                          # plainly faster
    assert should_stop(20, a[:20], b[:20], {"first": 20, "every": 5}) is None     # not asked to stop on a win
    assert should_stop(20, a[:20], b[:20], {"first": 20, "every": 5, "faster": True}) == FASTER
    assert should_stop(22, a[:22], b[:22], {"first": 20, "every": 5, "faster": True}) is None


class _Recorder:
    """A timing backend that records the request and answers with the rounds it would stop at."""
    name = "recorder"

    def __init__(self, gain):
        self.gain, self.seen = gain, []

    def available(self):
        return True, "fake"

    def describe(self):
        return {"backend": "recorder"}

    def peak_bandwidth(self):
        return {}

    def time_pair(self, ptx_a, ptx_b, spec, inputs, *, reps, warmup, flush_l2, max_seconds, stop_early=None):
        self.seen.append(stop_early)
        rng = np.random.default_rng(4)
        a, b = [], []
        for i in range(reps):
            a.append(float(rng.normal(1.0, SIGMA)))
            b.append(float(rng.normal(1.0, SIGMA)) - self.gain)
            why = should_stop(i + 1, a, b, stop_early) if i + 1 < reps else None
            if why:
                return {"a_ms": a, "b_ms": b, "stopped": i + 1, "stopped_as": why}
        return {"a_ms": a, "b_ms": b}


def test_time_pair_passes_the_rule_only_when_asked_and_says_it_stopped():
    spec = load_spec(str(KERNELS / "judge.toml")).resolved({"n": 1000})
    be = _Recorder(gain=0.0)
    full = time_pair("a", "b", spec, backend=be, reps=100)
    early = time_pair("a", "b", spec, backend=be, reps=100, stop_not_faster=True)
    assert be.seen[0] is None
    assert be.seen[1] == {"first": early_stop.FIRST, "every": early_stop.EVERY, "z": early_stop.Z, "faster": False}
    assert full.reps == 100 and full.stopped_early is None
    assert early.stopped_early is not None and early.reps == early.stopped_early < 100 and not early.faster
    assert early.stopped_as == NOT_FASTER and "clearly not faster" in early.reason
    fast = time_pair("a", "b", spec, backend=_Recorder(gain=5 * SIGMA), reps=100, stop_not_faster=True)
    assert fast.reps == 100 and fast.faster and fast.stopped_early is None
    quick_be = _Recorder(gain=5 * SIGMA)
    quick = time_pair("a", "b", spec, backend=quick_be, reps=100, stop_not_faster=True, stop_faster=True)
    assert quick_be.seen[0]["faster"] is True
    assert quick.faster and quick.stopped_as == FASTER and quick.reps == quick.stopped_early == early_stop.FIRST
    assert "clearly faster" in quick.reason and "timed again in full" in quick.reason


class _JudgeRecorder(_Recorder):
    keeps_timing_inputs = False


def test_a_search_s_first_timing_may_stop_either_way_and_a_confirmation_never(monkeypatch):
    """BackendJudge.time: fresh=False (a search's first timing of a candidate) asks the worker
    to stop on a clear loss or a clear win; fresh=True (the confirmation of the win to keep)
    runs every round."""
    from superopt.judge import BackendJudge
    from superopt.judge import timing as timing_mod
    be = _JudgeRecorder(gain=5 * SIGMA)
    real = timing_mod.time_pair
    monkeypatch.setattr(timing_mod, "time_pair", lambda *a, **kw: real(*a, **{**kw, "backend": be}))
    spec = load_spec(str(KERNELS / "judge.toml")).resolved({"n": 1000})
    judge = BackendJudge("emulator", "exact", 3, 60)
    first = judge.time("a", "b", spec, fresh=False)
    again = judge.time("a", "b", spec, fresh=True)
    assert be.seen[0]["faster"] is True and be.seen[1] is None
    assert first.stopped_as == FASTER and first.reps < 60
    assert again.stopped_early is None and again.reps == 60 and again.faster
