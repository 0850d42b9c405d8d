"""The judge cache keys on (baseline, candidate, spec): a verdict for one launch shape is never
the answer for another, and fresh checks are never cached."""
from __future__ import annotations

import ptx_ir
from superopt.judge import CachingJudge, Judge
from superopt.judge.cache import spec_key
from superopt.judge.check import Verdict
from superopt.search.loop import search_kernel
from superopt.search.options import SearchOptions
from superopt.specs.launch_spec import LaunchSpec
from tests.model.helpers import VADD, test_passes, vadd_spec  # noqa: F401 (a fixture)

SPEC_A = {"kernel": "k", "grid": [1, 1, 1], "block": [128, 1, 1], "params": []}
SPEC_B = {"kernel": "k", "grid": [7, 1, 1], "block": [128, 1, 1], "params": []}


class ShapeJudge(Judge):
    """Accepts every candidate on every launch shape but ``bad``, where it rejects it."""

    backend = "shape"
    policy = "exact"
    can_time = False

    def __init__(self, bad):
        self.bad = spec_key(bad)
        self.calls = []

    def verify(self, base_ptx, cand_ptx, spec, *, fresh=False):
        bad = spec_key(spec) == self.bad
        self.calls.append(("B" if bad else "A", fresh))
        if bad:
            return Verdict("rejected", "output differs on the second launch shape", "exact", {})
        return Verdict("accepted", "identical", "exact", {})

    def time(self, base_ptx, cand_ptx, spec, *, fresh=True):
        raise AssertionError("a judge that cannot time is never asked to")


def test_the_cache_distinguishes_specs():
    inner = ShapeJudge(bad=SPEC_B)
    judge = CachingJudge(inner)
    assert isinstance(judge, Judge) and isinstance(inner, Judge)
    assert judge.verify("base", "cand", SPEC_A).status == "accepted"
    assert judge.verify("base", "cand", SPEC_B).status == "rejected"      # not A's verdict again
    # repeated questions come from the cache; key order in a spec does not matter
    assert judge.verify("base", "cand", dict(reversed(SPEC_B.items()))).status == "rejected"
    assert judge.verify("base", "cand", SPEC_A).status == "accepted"
    assert inner.calls == [("A", False), ("B", False)]
    # a fresh check is never answered from the cache, nor stored in it
    assert judge.verify("base", "cand", SPEC_A, fresh=True).status == "accepted"
    assert judge.verify("base", "cand", SPEC_A, fresh=True).status == "accepted"
    assert inner.calls[2:] == [("A", True), ("A", True)]
    # another candidate or baseline text is another question
    judge.verify("base", "other", SPEC_A)
    judge.verify("other", "cand", SPEC_A)
    assert len(inner.calls) == 6


def test_launch_shapes_checked_is_true_through_the_cache(test_passes):  # noqa: F811
    """A candidate that only the second launch shape shows wrong is rejected through the
    search's cached judge, and the record says both shapes were checked."""
    a = vadd_spec()
    b = LaunchSpec.from_dict({**a.to_dict(), "block": [64, 1, 1]})
    inner = ShapeJudge(bad=b)
    result = search_kernel(ptx_ir.parse(VADD), "vadd", [a, b], target="sm_90",
                           options=SearchOptions(budget_s=60, passes=["test-nc-loads"], no_gpu="estimate"),
                           judge=CachingJudge(inner))
    entries = result.record["candidates"]
    assert entries and all(e["fate"] == "rejected-check" for e in entries), entries
    assert all(e["launch_shapes_checked"] == 2 for e in entries)
    assert "second launch shape" in entries[0]["reason"]
    assert ("B", False) in inner.calls
