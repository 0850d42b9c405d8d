"""The differential check's logic on a CPU fake backend (no GPU needed)."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.judge.judge_fake_backend import FakeBackend, fake_ptx
from superopt.judge.backends.base import register_backend
from superopt.judge.inputs import TAIL_RESIDUES
from superopt.judge.check import (ACCEPTED, COULD_NOT_JUDGE, REJECTED, Policy, check, compare_values, diff_stats,
                            entry_params, resolve_kernel)
from superopt.specs.launch_spec import elem_type, load_spec

SPEC = replace(load_spec(str(Path(__file__).parent / "kernels" / "judge.toml")))
SPEC = replace(SPEC, params=[replace(p, value=5000) if p.name == "n" else p for p in SPEC.params])
BASE = fake_ptx("baseline")


@pytest.fixture
def fake():
    return FakeBackend()


def judge(cand, fake, **kw):
    return check(BASE, fake_ptx(cand), SPEC, backend=fake, **kw)


# ---------------------------------------------------------------- comparisons

def test_nan_equals_nan_but_not_numbers():
    et = elem_type("f32")
    b = np.array([np.nan, 1.0, np.nan, 0.0, np.inf], np.float32)
    c = np.array([0, 0, 0, 0, 0], np.uint32).view(np.float32).copy()
    c[:] = [np.nan, 1.0, 2.0, -0.0, np.inf]
    c[0] = np.array([0xFFC00001], np.uint32).view(np.float32)[0]        # another NaN payload, negative
    eq = compare_values(b, c, et)
    assert eq.tolist() == [True, True, False, False, True]               # -0.0 != +0.0 bitwise


def test_policies():
    et = elem_type("f32")
    one = np.float32(1.0)
    b = np.array([1.0, 1.0, 1e-30, np.inf, 3.0], np.float32)
    c = np.array([np.nextafter(one, np.float32(2)), 1.001, 2e-30, np.float32(3.4e38), np.nan], np.float32)
    assert compare_values(b, c, et).tolist() == [False] * 5
    assert compare_values(b, c, et, Policy.parse("ulp:1")).tolist() == [True, False, False, False, False]
    assert compare_values(b, c, et, Policy.parse("rel:1e-2")).tolist() == [True, True, False, False, False]
    assert str(Policy.parse("rel:1e-2")) == "rel:0.01" and Policy.parse(None).exact
    with pytest.raises(ValueError):
        Policy.parse("loose")


def test_diff_stats_and_ints():
    et = elem_type("f64")
    b = np.array([1.0, 2.0, np.nan])
    c = np.array([1.0, 2.5, np.nan])
    st = diff_stats(b, c, et)
    assert st["max_abs_diff"] == 0.5 and st["max_ulp_diff"] > 0
    et = elem_type("u8")
    assert diff_stats(np.array([0, 255], np.uint8), np.array([255, 0], np.uint8), et)["max_abs_diff"] == 255


def test_entry_params_parsing():
    ptx = (Path(__file__).parent / "kernels" / "ptx" / "baseline.ptx").read_text()
    ps = entry_params(ptx, "judge_kernel")
    assert [(t, s) for _, t, s in ps] == [("u64", 8), ("u64", 8), ("u64", 8), ("f32", 4), ("u32", 4)]
    assert entry_params(ptx, "nope") is None
    assert resolve_kernel(ptx, "judge") == "judge_kernel"
    arr = ".entry k(\n .param .align 8 .b8 k_param_0[24],\n .param .u32 k_param_1\n)\n{ ret; }"
    assert [(t, s) for _, t, s in entry_params(arr, "k")] == [("b8", 24), ("u32", 4)]
    assert entry_params(".entry e\n{\nret;\n}", "e") == []


# ---------------------------------------------------------------- verdicts

@pytest.mark.parametrize("variant", ["baseline", "nan_payload"])
def test_equivalent_accepted(fake, variant):
    v = judge(variant, fake)
    assert v.status == ACCEPTED, v.summary()
    assert v.exit_code == 0 and v.accepted
    ev = v.evidence
    # 4 main sets, the small tail sets (every residue mod 8, and 15 mod 16), then one large set
    # of whole blocks with indices past 2^17
    kinds = [s["kind"] for s in ev["sets"]]
    assert kinds == ["main"] * 4 + ["tail"] * len(TAIL_RESIDUES) + ["large"]
    ns = [s["scalars"]["n"] for s in ev["sets"]]
    assert ns[0] == 5000
    assert any(n % 256 for n in ns) and any(n % 256 == 0 for n in ns)   # tails and exact multiples
    assert {n % 8 for n in ns} == set(range(8)) and any(n % 16 == 15 for n in ns)
    assert ns[-1] > 1 << 17 and ns[-1] % 256 == 0
    a_values = {s["scalars"]["a"] for s in ev["sets"]}
    assert {1.7, -1.7, 0.0} <= a_values                # the free scalar a is varied
    assert any("specials" in s["distributions"].values() for s in ev["sets"])
    assert ev["max_diff"]["out"]["max_ulp_diff"] == 0
    # module loads: the baseline's main and tail sets, its large set (a call of its own, after the
    # others' times said it is affordable), the candidate once
    assert fake.calls == 3


@pytest.mark.parametrize("variant,expect", [
    ("noop", "not written"),
    ("block0", "not written"),
    ("off_by_one", "outside buffer 'out'"),
    ("ignore_input", "differs"),
    ("fma", "differs"),
    ("last_lane", "differs"),
    ("cache", "not written"),
    ("writes_input", "writes its input buffer 'x'"),
    ("hang", "timed out"),
    ("crash", "crashed"),
])
def test_cheats_rejected(fake, variant, expect):
    v = judge(variant, fake)
    assert v.status == REJECTED, v.summary()
    assert v.exit_code == 1
    assert expect in v.reason, v.reason
    if v.mismatch:
        assert v.mismatch.buffer in ("out", "x")
        assert v.mismatch.baseline and v.mismatch.candidate


def test_cache_rejected_on_second_launch(fake):
    v = judge("cache", fake)
    assert v.mismatch is not None
    assert (v.mismatch.set_index, v.mismatch.run) != (0, 1)       # first launch was right


def test_nondeterministic_baseline_not_judgeable(fake):
    v = check(fake_ptx("noisy"), fake_ptx("noisy"), SPEC, backend=fake)
    assert v.status == COULD_NOT_JUDGE and "not deterministic" in v.reason
    assert v.exit_code == 2


def test_tolerance_policy_absorbs_tiny_noise(fake):
    exact = check(fake_ptx("tiny_noise"), fake_ptx("tiny_noise"), SPEC, backend=fake)
    assert exact.status in (COULD_NOT_JUDGE, REJECTED)
    v = check(fake_ptx("tiny_noise"), fake_ptx("tiny_noise"), SPEC, backend=fake, policy="ulp:1")
    assert v.status == ACCEPTED, v.summary()
    assert v.policy == "ulp:1"
    assert v.evidence["max_diff"]["out"]["max_ulp_diff"] <= 1


def test_tolerance_still_rejects_fma_beyond_bound(fake):
    v = judge("ignore_input", fake, policy="rel:1e-6")
    assert v.status == REJECTED


def test_output_read_before_written_is_not_judgeable(fake):
    v = check(fake_ptx("accumulate"), fake_ptx("accumulate"), SPEC, backend=fake)
    assert v.status == COULD_NOT_JUDGE and "inout" in v.reason


def test_backend_unavailable(fake):
    v = check(BASE, BASE, SPEC, backend=FakeBackend(available=False))
    assert v.status == COULD_NOT_JUDGE and "switched off" in v.reason


def test_registry_is_pluggable(fake):
    register_backend("fake-for-test", lambda: fake)
    v = check(BASE, fake_ptx("noop"), SPEC, backend="fake-for-test")
    assert v.status == REJECTED


def test_signature_change_rejected(fake):
    sig = ".visible .entry judge_kernel(\n .param .u64 p0,\n .param .u64 p1,\n .param .u64 p2,\n .param .f32 p3\n)\n"
    v = check(BASE, fake_ptx("baseline", sig), SPEC, backend=fake)
    assert v.status == REJECTED and "parameters" in v.reason


def test_spec_not_fitting_kernel(fake):
    from superopt.specs.launch_spec import Scalar
    spec = replace(SPEC, params=SPEC.params[:-1] + [Scalar("n", "s64", 5000)])
    v = check(BASE, BASE, spec, backend=fake)
    assert v.status == COULD_NOT_JUDGE and "does not fit" in v.reason


def test_missing_kernel(fake):
    v = check(BASE, BASE, replace(SPEC, kernel="other"), backend=fake)
    assert v.status == COULD_NOT_JUDGE


def test_seed_reproduces_inputs(fake):
    v1 = check(BASE, BASE, SPEC, backend=fake, seed=77)
    v2 = check(BASE, BASE, SPEC, backend=fake, seed=77)
    assert v1.evidence["sets"] == v2.evidence["sets"]
    v3 = check(BASE, BASE, SPEC, backend=fake)
    assert v3.evidence["seed"] != 77


def test_verdict_json_round(fake):
    import json
    v = judge("fma", fake)
    d = json.loads(json.dumps(v.to_dict(), default=str))
    assert d["status"] == "rejected" and d["mismatch"]["buffer"] == "out"
    assert "first difference" in v.summary()


# ---------------------------------------------------------------- reused baseline runs

def test_reused_baseline_runs_judge_like_fresh_ones(fake):
    from superopt.judge.check import BaselineRuns, run_baseline
    runs = run_baseline(BASE, SPEC, backend=fake)
    assert isinstance(runs, BaselineRuns) and fake.calls == 2       # the large set in a call of its own
    ok = check(BASE, fake_ptx("nan_payload"), SPEC, backend=fake, baseline=runs)
    assert ok.status == ACCEPTED, ok.summary()
    assert fake.calls == 3                                  # the baseline did not run again
    assert any("reused" in n for n in ok.evidence["notes"])
    for variant, expect in [("noop", "not written"), ("fma", "differs"), ("cache", "not written"),
                            ("writes_input", "writes its input"), ("off_by_one", "outside buffer")]:
        v = check(BASE, fake_ptx(variant), SPEC, backend=fake, baseline=runs)
        assert v.status == REJECTED and expect in v.reason, (variant, v.reason)
    assert fake.calls == 8 and runs.uses == 6
    sig = ".visible .entry judge_kernel(\n .param .u64 p0,\n .param .u64 p1,\n .param .u64 p2,\n .param .f32 p3\n)\n"
    assert "parameters" in check(BASE, fake_ptx("baseline", sig), SPEC, backend=fake, baseline=runs).reason
    with pytest.raises(ValueError):
        check(fake_ptx("nan_payload"), BASE, SPEC, backend=fake, baseline=runs)


def test_reused_runs_reuse_the_candidate_sets_a_fresh_check_draws_its_own(fake):
    """The candidates' input sets (output poisons, guards) are made once per baseline runs, like
    the inputs (a candidate never sees them); a check of its own (what the search does before
    keeping a candidate) draws new ones."""
    from superopt.judge.check import run_baseline
    runs = run_baseline(BASE, SPEC, backend=fake)
    seen = []
    orig = fake.run_many

    def spy(ptx, spec, sets, **kw):
        if sets[0].run_tag.startswith("candidate"):
            seen.append((bytes(sets[0].data["out"][:64].view(np.uint8)), sets[0].guards["out"]))
        return orig(ptx, spec, sets, **kw)
    fake.run_many = spy
    verdicts = [check(BASE, BASE, SPEC, backend=fake, baseline=runs) for _ in range(2)]
    assert all(v.status == ACCEPTED for v in verdicts)
    assert any("candidate input sets reused" in n for n in verdicts[1].evidence["notes"])
    assert check(BASE, BASE, SPEC, backend=fake).status == ACCEPTED       # fresh: baseline runs of its own
    assert len(seen) == 3 and seen[0] == seen[1] and seen[2][0] != seen[0][0] and seen[2][1] != seen[0][1]


def test_a_wrong_candidate_after_right_ones_on_reused_sets_is_rejected(fake):
    """Reused candidate sets judge a later candidate as fresh ones would: an unwritten output or
    an off-by-one write is seen after accepted candidates used the same sets."""
    from superopt.judge.check import run_baseline
    runs = run_baseline(BASE, SPEC, backend=fake)
    assert check(BASE, fake_ptx("nan_payload"), SPEC, backend=fake, baseline=runs).status == ACCEPTED
    for variant, expect in [("noop", "not written"), ("off_by_one", "outside buffer"), ("fma", "differs")]:
        v = check(BASE, fake_ptx(variant), SPEC, backend=fake, baseline=runs)
        assert v.status == REJECTED and expect in v.reason, (variant, v.reason)
        assert any("candidate input sets reused" in n for n in v.evidence["notes"])


def test_baseline_that_cannot_be_judged_returns_a_verdict(fake):
    from superopt.judge.check import run_baseline
    v = run_baseline(fake_ptx("noisy"), SPEC, backend=fake)
    assert v.status == COULD_NOT_JUDGE and "not deterministic" in v.reason


def test_a_backend_that_compares_outputs_itself_is_told_nvccs_results(fake):
    """A backend that compares outputs where they ran (the GPU: compares_expected) gets, per
    candidate launch, nvcc's result for every buffer the kernel writes, and is told the
    candidate sets will run again; the verdicts are those of a backend that is told nothing."""
    from superopt.judge.check import run_baseline
    runs = run_baseline(BASE, SPEC, backend=fake)
    told = []
    orig = fake.run_many

    def spy(ptx, spec, sets, expect=None, reused=None, **kw):
        told.append((sets, expect, reused))
        return orig(ptx, spec, sets, **kw)
    fake.run_many = spy
    fake.compares_expected = True
    assert check(BASE, fake_ptx("nan_payload"), SPEC, backend=fake, baseline=runs).status == ACCEPTED
    assert check(BASE, fake_ptx("noop"), SPEC, backend=fake, baseline=runs).status == REJECTED
    sets, expect, reused = told[0]
    assert len(expect) == len(reused) <= len(sets) and all(reused)
    for s, want in zip(sets, expect):
        assert set(want) == {"out"}                                  # x and y are inputs
        assert want["out"] is runs.results[s.index].outputs["out"]
