"""Timings that stop once the candidate is clearly not faster (superopt.judge.early_stop): the
rule against decide() on synthetic timings, and the plumbing from the judge to the worker."""
from __future__ import annotations

import numpy as np
import pytest

from superopt.judge import early_stop
from superopt.judge.early_stop import clearly_not_faster, should_stop
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
    assert stops > 700


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


def test_should_stop_asks_only_at_its_rounds():
    a, b = np.ones(100), np.ones(100) * 1.5             # the candidate is plainly slower
    rule = {"first": 30, "every": 10, "z": 3.0}
    assert [k for k in range(1, 100) if should_stop(k, a[:k], b[:k], rule)] == [30, 40, 50, 60, 70, 80, 90]
    assert not should_stop(30, a, b, None)


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

    def time_pair(self, ptx_a, ptx_b, spec, inputs, *, reps, warmup, flush_l2, max_seconds, stop_not_faster=None):
        self.seen.append(stop_not_faster)
        rng = np.random.default_rng(4)
        a, b = [], []
        for i in range(reps):
            a.append(float(rng.normal(1.0, SIGMA)))
            b.append(float(rng.normal(1.0, SIGMA)) - self.gain)
            if i + 1 < reps and should_stop(i + 1, a, b, stop_not_faster):
                return {"a_ms": a, "b_ms": b, "stopped_not_faster": i + 1}
        return {"a_ms": a, "b_ms": b}


def test_time_pair_passes_the_rule_only_when_asked_and_says_it_stopped():
    spec = load_spec(str(KERNELS / "judge.toml")).resolved({"n": 1000})
    be = _Recorder(gain=0.0)
    full = time_pair("a", "b", spec, backend=be, reps=100)
    early = time_pair("a", "b", spec, backend=be, reps=100, stop_not_faster=True)
    assert be.seen[0] is None and be.seen[1] == {"first": early_stop.FIRST, "every": early_stop.EVERY, "z": early_stop.Z}
    assert full.reps == 100 and full.stopped_early is None
    assert early.stopped_early is not None and early.reps == early.stopped_early < 100 and not early.faster
    assert "stopped after" in early.reason
    fast = time_pair("a", "b", spec, backend=_Recorder(gain=5 * SIGMA), reps=100, stop_not_faster=True)
    assert fast.reps == 100 and fast.faster and fast.stopped_early is None
