"""Where a versioned candidate's fast body would run at the program's captured launches
(superopt.search.fast_path): the check's own instructions evaluated on each captured shape's
parameters, the answer per shape and the totals in the candidate's record entry.

The candidate is matvec_rows with nvcc's restrict-compiled body behind the footprint analysis'
check (tests/search/alias_capture.py): tmp (written, n floats) against A (n*n floats) and x (n).
"""
from __future__ import annotations

import copy

import pytest

import ptx_ir
from superopt.search.fast_path import NO_CAPTURE, in_capture, shape_outcome
from superopt.search.loop import candidate_entry
from superopt.specs.program_launches import ProgramLaunches, from_capture
from tests.search import alias_capture as ac

P = [f"{ac.KERNEL}_param_{i}" for i in range(4)]          # A, x, tmp, n


@pytest.fixture(scope="module")
def fast_path():
    return ac.candidate().fast_paths[0]


def test_the_restrict_body_candidate_carries_its_check_into_the_record_entry():
    cand = ac.candidate()
    (check,) = candidate_entry(cand)["alias_checks"]
    assert check["written"] == [P[2]]
    assert sorted(check["compared"]) == sorted(P[:3])
    assert set(check["ranges"]) == set(P[:3]) and "(written)" in check["ranges"][P[2]]
    assert check["instructions"] == len(cand.fast_paths[0].check.instructions) > 0
    assert check["body"] == "restrict-compiled body from nvcc (cicc -kernel-params-are-restrict)"
    assert check["capture"] is None and check["capture_note"] == NO_CAPTURE


def test_a_candidate_without_a_check_has_no_alias_checks_field():
    from superopt.search.candidates import Step, make_candidate
    cand = make_candidate(ac.BASE, ac.KERNEL, [Step("unroll", {"factor": 2})])
    assert cand is not None
    assert cand.fast_paths == [] and "alias_checks" not in candidate_entry(cand)


def test_disjoint_buffers_take_the_fast_body(fast_path):
    row = shape_outcome(fast_path, ac.shape(tmp="own"))
    assert row["fast_path"] is True and row["reason"] is None
    # the checked ranges are the kernel's exact footprints at this launch: n*n and n floats
    assert row["ranges"][P[0]] == {"allocation": P[0], "from": 0, "to": 4 * ac.N * ac.N, "extent": 4 * ac.N * ac.N}
    assert row["ranges"][P[2]] == {"allocation": P[2], "from": 0, "to": 4 * ac.N, "extent": 4 * ac.N}


def test_tmp_inside_a_takes_nvccs_code_and_says_which_pair_overlaps(fast_path):
    row = shape_outcome(fast_path, ac.shape(tmp="in-A"))
    assert row["fast_path"] is False
    assert row["overlaps"] == [[P[2], P[0]]]
    assert row["ranges"][P[2]] == {"allocation": P[0], "from": 1024, "to": 1024 + 4 * ac.N,
                                   "extent": 4 * ac.N * ac.N}


def test_one_allocation_holding_both_buffers_apart_takes_the_fast_body(fast_path):
    """Sharing an allocation is not overlapping: tmp right after A's n*n floats."""
    row = shape_outcome(fast_path, ac.shape(tmp="after-A"))
    assert row["fast_path"] is True
    assert row["ranges"][P[2]]["allocation"] == P[0] and row["ranges"][P[2]]["from"] == 4 * ac.N * ac.N


def test_the_answer_follows_the_captured_scalars(fast_path):
    """n and the grid are read from the capture: tmp's range is min(threads, n) floats (rows
    past the grid are never written), A's n*n."""
    wide = shape_outcome(fast_path, ac.shape(tmp="own", n=512, grid=(4, 1, 1)))
    assert wide["ranges"][P[2]]["to"] == 4 * 512 and wide["ranges"][P[0]]["to"] == 4 * 512 * 512
    narrow = shape_outcome(fast_path, ac.shape(tmp="own", n=512, grid=(2, 1, 1)))
    assert narrow["ranges"][P[2]]["to"] == 4 * 256
    assert shape_outcome(fast_path, ac.shape(tmp="in-A", n=512))["fast_path"] is False


def test_a_range_leaving_its_allocation_is_not_known_with_the_reason(fast_path):
    """tmp's range (1 KiB) reaches past its 512-byte allocation: whether it meets x or A depends
    on where the allocator put them, which one launch's addresses do not tell for the others."""
    row = shape_outcome(fast_path, ac.shape(tmp="own", tmp_extent=512))
    assert row["fast_path"] is None
    assert "leaves the allocation's 512 bytes" in row["reason"] and "allocator" in row["reason"]
    assert "the check chose the fast body" in row["reason"]


def test_uncaptured_bytes_and_host_pointers_are_not_known(fast_path):
    s = ac.shape()
    s["params"][3]["bytes"] = None
    row = shape_outcome(fast_path, s)
    assert row["fast_path"] is None and row["reason"] == f"parameter 3 ({P[3]}): its bytes were not captured"
    s = ac.shape()
    s["params"][1]["pointer"] = None
    row = shape_outcome(fast_path, s)
    assert row["fast_path"] is None and row["reason"].startswith(f"{P[1]} is not in a device allocation")


def test_a_capture_of_another_build_is_not_known(fast_path):
    s = ac.shape()
    s["params"] = s["params"][:3]
    assert shape_outcome(fast_path, s)["reason"].startswith("the capture has 3 parameters, the kernel 4")


def test_totals_count_launches_and_time_on_the_fast_body(fast_path):
    k = ac.kernel_capture(ac.shape(tmp="own", count=5, ms=3.0), ac.shape(tmp="in-A", count=2, ms=1.0),
                          untracked=(4, 1.0))
    cap = in_capture(fast_path, k)
    assert cap["captured_launches"] == 11
    assert (cap["fast_path_launches"], cap["nvcc_path_launches"], cap["unknown_launches"]) == (5, 2, 4)
    assert cap["fast_path_ms"] == 3.0 and cap["captured_ms"] == 5.0 and cap["fast_path_share"] == 0.6
    assert cap["unknown"] == [{"reason": "launched without a launch callback (a CUDA graph replay): its "
                                         "parameters were not captured", "launches": 4}]
    assert [s["fast_path"] for s in cap["shapes"]] == [True, False]


def test_without_launch_times_the_share_is_not_invented(fast_path):
    cap = in_capture(fast_path, ac.kernel_capture(ac.shape(ms=0.0)))
    assert cap["fast_path_launches"] == 3 and cap["fast_path_share"] is None


def test_many_shapes_are_all_counted_and_some_listed(fast_path):
    from superopt.search import fast_path as fp_mod
    shapes = [ac.shape(grid=(g, 1, 1), count=1) for g in range(1, fp_mod.MAX_SHAPES_LISTED + 4)]
    cap = in_capture(fast_path, ac.kernel_capture(*shapes))
    assert len(cap["shapes"]) == fp_mod.MAX_SHAPES_LISTED and cap["shapes_not_listed"] == 3
    assert cap["captured_launches"] == cap["fast_path_launches"] == len(shapes)


def test_a_capture_reaches_the_entry_through_the_spec_source():
    """captured_specs keeps the kernel's captured launches; from_capture hands them to the search
    (options.launches), and the record entry says where the fast body runs."""
    from superopt.specs.capture.specs import captured_specs
    capture = ac.capture(ac.shape(tmp="own", count=5, ms=3.0), ac.shape(tmp="in-A", count=2, ms=1.0))
    cs = captured_specs(capture, ptx_ir.emit(ac.BASE), ac.KERNEL)
    assert cs.specs, cs.reason
    launches = from_capture(cs)
    assert "snapshot" not in launches.capture["shapes"][0]
    (check,) = candidate_entry(ac.candidate(), launches)["alias_checks"]
    cap = check["capture"]
    assert (cap["captured_launches"], cap["fast_path_launches"], cap["nvcc_path_launches"]) == (7, 5, 2)
    assert cap["fast_path_share"] == 0.75


def test_a_malformed_capture_is_said_not_known_and_the_entry_is_still_made():
    bad = ProgramLaunches("captured", capture={"launches": 1, "total_ms": 1.0, "shapes": [{"count": "many"}]})
    (check,) = candidate_entry(ac.candidate(), bad)["alias_checks"]
    assert check["capture"] is None and check["capture_note"].startswith("not known: the check could not be evaluated")


def test_the_check_is_what_decides_not_a_copy_of_its_formulas(fast_path, monkeypatch):
    """The evaluation runs the check's instructions: a check that always fails (its predicate
    forced false) gives nvcc's code on disjoint buffers, with the failed condition as the reason."""
    from ptx_ir.nodes import Reg
    from superopt.passes._loop_tools import I
    broken = copy.copy(fast_path)
    broken.check = copy.copy(fast_path.check)
    p = fast_path.check.predicate
    broken.check.instructions = list(fast_path.check.instructions) + [I("and", ".pred", Reg(p), Reg(p), 0)]
    row = shape_outcome(broken, ac.shape(tmp="own"))
    assert row["fast_path"] is False and row["overlaps"] == []
    assert "run-time conditions failed" in row["reason"]


def test_promote_accumulators_carries_its_check_too():
    from tests.passes.test_alias_footprint import PTX
    from superopt.search.candidates import Step, make_candidate
    module = ptx_ir.parse(PTX)
    cand = make_candidate(module, "mvt_row", [Step("promote-accumulators", {})])
    assert cand is not None
    (check,) = candidate_entry(cand)["alias_checks"]
    assert check["body"].startswith("global accumulators kept in registers")
    assert check["written"] == ["mvt_row_param_2"]
