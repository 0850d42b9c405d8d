"""On the GPU the candidate to keep is also checked on the CPU emulator, whose poisoned registers
and memory and taint bit see a branch or store on never-written data that a GPU run cannot (its
garbage happens to match). Here a judge that says "gpu" stands in for the GPU backend."""
from __future__ import annotations

from types import SimpleNamespace

from superopt.search.candidates import Candidate
from superopt.search.loop import SearchOptions, _emulator_shadow, _smallest_spec
from tests.judge.test_cheat_corpus import base_ptx, spec_of, variant_ptx

GPU = SimpleNamespace(backend="gpu")


def _cand(name):
    return Candidate(kernel="saxpy", plan=[], ptx=variant_ptx(name), changes=[], provenance={"proposer": "test"})


def test_a_branch_on_never_written_local_memory_is_rejected_by_the_shadow_check():
    entry = {"fate": "faster"}
    ok = _emulator_shadow(GPU, SearchOptions(), base_ptx("saxpy"), _cand("saxpy_branch_unwritten_local"),
                          [spec_of("saxpy", "explicit")], entry)
    assert not ok and entry["fate"] == "rejected-check"
    assert "never-written" in entry["reason"] and entry["emulator_verdict"]["status"] == "rejected"


def test_an_equivalent_rewrite_passes_and_other_backends_are_not_checked_twice():
    entry = {"fate": "faster"}
    assert _emulator_shadow(GPU, SearchOptions(), base_ptx("saxpy"), _cand("saxpy_eq_reorder"),
                            [spec_of("saxpy", "explicit")], entry)
    assert entry["emulator_verdict"]["status"] == "accepted"
    other = {"fate": "faster"}
    assert _emulator_shadow(SimpleNamespace(backend="emulator"), SearchOptions(), base_ptx("saxpy"),
                            _cand("saxpy_branch_unwritten_local"), [spec_of("saxpy", "explicit")], other)
    assert "emulator_verdict" not in other


def test_the_smallest_launch_is_the_one_checked():
    from dataclasses import replace
    spec = spec_of("saxpy", "explicit").resolved()
    n = spec.scalars[0].name
    big = replace(spec_of("saxpy", "explicit"))
    small = spec_of("saxpy", "explicit").resolved({n: 100})
    assert _smallest_spec([big, small]) is small
