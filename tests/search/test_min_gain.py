"""The least gain a rewrite is kept for (NVCC_PLUS_MIN_GAIN): a candidate faster beyond noise by
less than it is not confirmed, checked at full size nor sanitized; two small gains that combine
into one worth keeping are kept; the confirmation and, with a capture, the gain weighed by the
captured shapes must reach it too. A scripted judge whose speed depends on the candidate's text."""
from __future__ import annotations

from dataclasses import replace

import pytest

import ptx_ir
from superopt.config.resolved import Settings
from superopt.config.settings import SettingError
from superopt.judge import Judge
from superopt.judge.check import Verdict
from superopt.passes import _REGISTRY, Change, register
from superopt.search.loop import search_kernel
from superopt.search.options import SearchOptions, search_options
from superopt.store.record import Fate
from tests.model.helpers import VADD, test_passes, vadd_spec  # noqa: F401 (a fixture)
from tests.search.test_never_slower import BlockJudge, Timing, capture_search, captured, winner_or_best


def _hinted(opcode: str, hint: str):
    """A test pass adding ``hint`` to every global ``opcode`` (ld .nc, st .cs)."""
    def rewrite(fn):
        out = []
        for inst in list(fn.instructions):
            if inst.opcode == opcode and inst.space == ".global" and hint not in inst.modifiers:
                fn.replace(inst, inst.with_(modifiers=(".global", hint, *inst.modifiers[1:])))
                out.append(Change(f"{opcode}.global -> {opcode}.global{hint}", inst))
        return out
    return rewrite


PASSES = {"test-gain-nc": _hinted("ld", ".nc"), "test-gain-cs": _hinted("st", ".cs")}


@pytest.fixture
def gain_passes():
    for name, fn in PASSES.items():
        register(name=name, summary="a test rewrite", assumes="nothing", params={}, source="tests")(fn)
    try:
        yield
    finally:
        for name in PASSES:
            _REGISTRY.pop(name, None)


class GainJudge(Judge):
    """Accepts everything; a candidate's speed is the product of ``gain[what]`` over the rewrites
    its text carries (``.nc`` loads, ``.cs`` stores); its second timing (``fresh``) multiplies
    ``again`` in. Faster beyond noise above 1.005x. Records every call."""

    backend = "scripted-gpu"
    policy = "exact"
    can_time = True

    def __init__(self, gain: dict, again: float = 1.0):
        self.gain, self.again = gain, again
        self.timed: list[tuple[str, bool]] = []
        self.checked: list[bool] = []
        self.sanitized = 0

    def _speed(self, cand: str) -> float:
        s = 1.0
        if "ld.global.nc" in cand:
            s *= self.gain.get("nc", 1.0)
        if "st.global.cs" in cand:
            s *= self.gain.get("cs", 1.0)
        return s

    def verify(self, base, cand, spec, *, fresh=False):
        self.checked.append(fresh)
        return Verdict("accepted", "identical", "exact", {})

    def time(self, base, cand, spec, *, fresh=True):
        s = self._speed(cand) * (self.again if fresh else 1.0)
        self.timed.append((cand, fresh))
        return Timing("ok", s > 1.005, s)

    def sanitize(self, ptx, spec, tools):
        self.sanitized += 1
        raise AssertionError("not reached: no sanitizer asked for in these options")


OPTS = SearchOptions(budget_s=60, passes=list(PASSES), sanitize=())


def run(judge, opts=OPTS):
    return search_kernel(ptx_ir.parse(VADD), "vadd", [vadd_spec()], target="sm_90", options=opts, judge=judge)


def fates(result) -> dict:
    return {e["id"]: e["fate"] for e in result.record["candidates"]}


def test_a_gain_below_the_minimum_is_not_kept_nor_timed_again(gain_passes):
    judge = GainJudge({"nc": 1.015})
    result = run(judge, replace(OPTS, passes=["test-gain-nc"]))
    assert result.winner is None and result.record["status"] == "kept-baseline"
    assert fates(result) == {"test-gain-nc": Fate.BELOW_MIN_GAIN}
    e = result.record["candidates"][0]
    assert "1.015x" in e["reason"] and "NVCC_PLUS_MIN_GAIN" in e["reason"] and "2%" in e["reason"]
    assert "gained the 2% a rewrite is kept for" in result.record["reason"] and "1.015x" in result.record["reason"]
    assert not any(fresh for _, fresh in judge.timed)       # no confirmation timing
    assert not any(judge.checked)                           # no check on fresh inputs


def test_without_a_minimum_the_same_gain_is_kept(gain_passes):
    result = run(GainJudge({"nc": 1.015}), replace(OPTS, passes=["test-gain-nc"], min_gain=0.0))
    assert result.winner is not None and fates(result) == {"test-gain-nc": Fate.WINNER}


def test_two_small_gains_that_combine_past_the_minimum_are_kept(gain_passes):
    judge = GainJudge({"nc": 1.015, "cs": 1.012})
    result = run(judge)
    assert result.winner is not None
    got = fates(result)
    assert got["test-gain-nc"] == got["test-gain-cs"] == Fate.BELOW_MIN_GAIN
    winner = next(e for e in result.record["candidates"] if e["fate"] == Fate.WINNER)
    assert [s["pass"] for s in winner["plan"]] == ["test-gain-nc", "test-gain-cs"]
    assert winner["speedup"] == pytest.approx(1.015 * 1.012)


def test_a_confirmation_below_the_minimum_is_not_kept(gain_passes):
    """Faster enough in the search (1.03x), faster beyond noise when timed again but by 1.5%."""
    result = run(GainJudge({"nc": 1.03}, again=1.015 / 1.03), replace(OPTS, passes=["test-gain-nc"]))
    assert result.winner is None
    e = result.record["candidates"][0]
    assert e["fate"] == Fate.NOT_CONFIRMED
    assert "1.030x in the search, 1.015x when timed again" in e["reason"] and "NVCC_PLUS_MIN_GAIN" in e["reason"]


def test_a_gain_at_the_minimum_is_kept(gain_passes):
    result = run(GainJudge({"nc": 1.05}), replace(OPTS, passes=["test-gain-nc"], min_gain=0.05))
    assert result.winner is not None


def test_the_gain_weighed_by_the_captured_shapes_must_reach_the_minimum(test_passes):  # noqa: F811
    """1.03x at the main captured shape, 0.99x (within noise) at the other: 1.009x weighed by
    their GPU time, faster than nvcc in the program but by less than 2%."""
    main, other = captured(1 << 20), captured(1 << 16, block=512)
    result = capture_search(BlockJudge({128: 1.03, 512: 0.99}), [(main, 0.7), (other, 0.3)])
    assert result.winner is None
    e = winner_or_best(result)
    assert e["fate"] == Fate.BELOW_MIN_GAIN and 1.0 < e["weighted_speedup"] < 1.02
    assert "weighed by the 2 captured shapes' GPU time" in e["reason"] and "NVCC_PLUS_MIN_GAIN" in e["reason"]


@pytest.mark.parametrize("value, want", [("2%", 0.02), ("2", 0.02), (5, 0.05), ("0", 0.0), (" 0.5 % ", 0.005)])
def test_the_setting_is_a_percentage(value, want):
    assert search_options(Settings.from_config({"min_gain": value})).min_gain == pytest.approx(want)


def test_the_default_is_two_percent():
    assert search_options(Settings.from_config({})).min_gain == pytest.approx(0.02)


@pytest.mark.parametrize("value", ["abc", "-1", "100", "nan", "2x"])
def test_a_wrong_setting_is_refused_with_its_name(value):
    with pytest.raises(SettingError, match=r"min_gain \(NVCC_PLUS_MIN_GAIN\) must be a percentage"):
        search_options(Settings.from_config({"min_gain": value}))
