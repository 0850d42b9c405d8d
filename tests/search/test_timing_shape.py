"""Without a capture, candidates are timed at the inferred launch scaled up (superopt.specs.scaled):
the family's formulas evaluated at larger sizes, checked for nvcc's own code first, used as a
costly shape (checked only for the candidate to keep)."""
from __future__ import annotations

import math
from dataclasses import replace

import ptx_ir
from superopt.judge.cache import spec_key
from superopt.judge.check import Verdict
from superopt.search.loop import COSTLY_CHECK_BYTES, _with_timing_shape, search_kernel
from superopt.search.options import SearchOptions
from superopt.specs.launch_spec import Buffer, LaunchSpec, Scalar
from superopt.specs.scaled import MAX_BYTES, TARGET_BYTES, TARGET_THREADS, timing_shape
from tests.model.helpers import VADD, test_passes, vadd_spec  # noqa: F401 (a fixture)
from tests.search.test_costly_shapes import SizeJudge


class CandidateWrongAt(SizeJudge):
    """nvcc's code is judged everywhere; a candidate is wrong at ``wrong_at``."""

    def verify(self, base_ptx, cand_ptx, spec, *, fresh=False):
        if cand_ptx == base_ptx:
            self.calls.append(("verify", spec_key(spec)))
            return Verdict("accepted", "identical", "exact", {})
        return super().verify(base_ptx, cand_ptx, spec, fresh=fresh)


def inferred(spec: LaunchSpec) -> LaunchSpec:
    return replace(spec, origin="inferred", vary_sizes=False)


def gemm_spec(m=101, n=83, k=127) -> LaunchSpec:
    return inferred(LaunchSpec("gemm", grid=("cdiv(N, 16)", "cdiv(M, 16)", 1), block=(16, 16, 1), params=[
        Scalar("M", "s32", m, values=[m, 97]), Scalar("N", "s32", n, values=[n, 79]),
        Scalar("K", "s32", k, values=[k, 113]), Scalar("alpha", "f32", 1.5),
        Buffer("A", "f32", "M*K"), Buffer("B", "f32", "K*N"), Buffer("C", "f32", "M*N", "inout")]))


def measure(spec):
    rs = spec.resolved()
    return math.prod(rs.grid) * math.prod(rs.block), sum(b.nbytes for b in rs.buffers), rs


def test_a_1d_family_is_scaled_until_it_fills_the_gpu():
    small = inferred(vadd_spec())                     # 3 float buffers of n, as inferred: n ~ 1e5
    small.params[-1] = Scalar("n", "u32", 98317, values=[98317, 81589])
    big = timing_shape(small)
    threads, nbytes, rs = measure(big)
    n = big.param("n").value
    assert n % 98317 == 0 and (n // 98317) & (n // 98317 - 1) == 0     # n times a power of two
    assert threads >= TARGET_THREADS or nbytes >= TARGET_BYTES
    assert measure(replace(big, params=[*big.params[:-1], Scalar("n", "u32", n // 2)]))[0] < TARGET_THREADS
    assert rs.grid == (-(-n // 128), 1, 1) and all(b.length == n for b in rs.buffers)
    assert big.param("n").values is None and not big.vary_sizes
    assert big.origin == "inferred, scaled for timing"
    assert nbytes > COSTLY_CHECK_BYTES                # the search treats it as a costly shape


def test_every_size_of_a_2d_family_scales_by_one_factor_and_the_rest_stays():
    small = gemm_spec()
    big = timing_shape(small)
    f = big.param("M").value // 101
    assert f >= 4 and big.param("N").value == 83 * f and big.param("K").value == 127 * f
    assert big.param("alpha").value == 1.5
    threads, nbytes, rs = measure(big)
    assert rs.grid == (-(-83 * f // 16), -(-101 * f // 16), 1)
    assert nbytes <= MAX_BYTES


def test_limits_stop_the_scaling():
    # a 32-bit size cannot pass 2^31 - 1: n = 6e8 cannot even be doubled twice
    s = inferred(LaunchSpec("k", grid=("cdiv(n, 65536)", 1, 1), block=(256, 1, 1), params=[
        Buffer("x", "f32", 4096, "inout"), Scalar("n", "s32", 600_000_000)]))
    assert timing_shape(s) is None
    # n = 2^27 grows to 2^30 (one full wave); 2^31 would not fit
    s = inferred(LaunchSpec("k", grid=("cdiv(n, 1048576)", 1, 1), block=(256, 1, 1), params=[
        Buffer("x", "f32", 4096, "inout"), Scalar("n", "s32", 1 << 27)]))
    assert timing_shape(s).param("n").value == 1 << 30
    # one buffer may not pass 2^31 bytes (32-bit byte offsets): a huge per-element length
    s = inferred(LaunchSpec("k", grid=(4, 1, 1), block=(256, 1, 1), params=[
        Buffer("x", "f64", "n*n", "inout"), Scalar("n", "s32", 4000)]))
    big = timing_shape(s)
    assert big is None or measure(big)[2].buffers[0].nbytes < 1 << 31


def test_nothing_to_scale():
    fixed = inferred(LaunchSpec("k", grid=(13, 1, 1), block=(256, 1, 1), params=[
        Buffer("x", "f32", 4096, "inout"), Scalar("mode", "s32", 8)]))
    assert timing_shape(fixed) is None                # no size parameter
    looping = inferred(LaunchSpec("k", grid=(13, 1, 1), block=(256, 1, 1), params=[
        Buffer("x", "f32", 4096, "inout"), Scalar("iters", "s32", 8)]))
    assert timing_shape(looping) is None
    # one block per row, but no length is a multiple of the 13 blocks: nothing says what grows
    # with them, and longer rows would only make 13 blocks run longer
    rows = inferred(LaunchSpec("k", grid=(13, 1, 1), block=(256, 1, 1), params=[
        Buffer("x", "f32", "12*cols", "in"), Buffer("y", "f32", "cols + 7", "out"),
        Scalar("cols", "s32", 1543)]))
    assert timing_shape(rows) is None


def test_the_search_times_at_the_scaled_shape_once_nvcc_code_is_judged_there():
    small = inferred(vadd_spec())
    judge = SizeJudge(speedup=1.3)
    specs, notes = _with_timing_shape(judge, VADD, [small])
    assert len(specs) == 2 and specs[1] is small
    big = specs[0]
    assert judge.calls == [("verify", spec_key(big))]
    assert "timed at the inferred launch scaled up (n=" in notes[0]


def test_a_scaled_shape_nvcc_code_cannot_be_judged_at_is_dropped_with_a_note():
    small = inferred(vadd_spec())
    big = timing_shape(small)
    judge = SizeJudge(speedup=1.3, wrong_at=spec_key(big))
    specs, notes = _with_timing_shape(judge, VADD, [small])
    assert specs == [small]
    assert "nvcc's own code cannot be judged there" in notes[0]


def test_specs_a_person_wrote_or_captured_are_not_scaled():
    judge = SizeJudge(speedup=1.3)
    for origin in ("toml:nvcc-plus.toml", "comment", "captured"):
        spec = replace(vadd_spec(), origin=origin)
        assert _with_timing_shape(judge, VADD, [spec]) == ([spec], [])
    # mixed: a capture with inferred shapes beside it keeps the capture's sizes
    cap = replace(vadd_spec(), origin="captured")
    assert _with_timing_shape(judge, VADD, [cap, inferred(vadd_spec())])[0][0] is cap
    assert judge.calls == []


def test_without_a_gpu_nothing_is_scaled():
    judge = SizeJudge(speedup=1.3)
    judge.can_time = False
    spec = inferred(vadd_spec())
    assert _with_timing_shape(judge, VADD, [spec]) == ([spec], [])


def test_the_whole_search_times_at_the_scaled_shape_and_checks_it_before_keeping(test_passes):  # noqa: F811
    small = inferred(vadd_spec())
    big = timing_shape(small)
    judge = SizeJudge(speedup=1.3)
    result = search_kernel(ptx_ir.parse(VADD), "vadd", [small], target="sm_90",
                           options=SearchOptions(budget_s=60, passes=["test-nc-loads"], sanitize=()), judge=judge)
    assert result.winner is not None
    assert ("time", spec_key(big)) in judge.calls and ("time", spec_key(small)) not in judge.calls
    win = next(e for e in result.record["candidates"] if e["fate"] == "winner")
    assert win["launch_shapes_checked"] == 2
    assert result.record["spec"][0]["origin"] == "inferred, scaled for timing"
    assert any("scaled up" in n for n in result.record["notes"])
    # wrong only at the scaled size: never kept
    judge = CandidateWrongAt(speedup=1.3, wrong_at=spec_key(big))
    result = search_kernel(ptx_ir.parse(VADD), "vadd", [small], target="sm_90",
                           options=SearchOptions(budget_s=60, passes=["test-nc-loads"], sanitize=()), judge=judge)
    assert result.winner is None and result.record["status"] == "kept-baseline"
    assert all(e["reason"].startswith("faster, but at the large launch shape: ")
               for e in result.record["candidates"])


def test_a_scaled_shape_is_checked_on_as_few_input_sets_as_a_captured_one(monkeypatch):
    """Its sizes are fixed (the variation is on the small shapes beside it), and each set costs
    tens of MB of inputs: like a capture, it gets CAPTURED_SETS sets, an inferred one all."""
    import superopt.judge.check as check_mod
    from superopt.judge.judge import CAPTURED_SETS, BackendJudge
    seen = []

    def fake_run_baseline(base_ptx, spec, *, backend, policy, sets):
        seen.append((spec.origin, sets))
        return Verdict("could not judge", "stop here", "exact", {})

    monkeypatch.setattr(check_mod, "run_baseline", fake_run_baseline)
    judge = BackendJudge("emulator", check_sets=5)
    small = inferred(vadd_spec())
    small.params[-1] = Scalar("n", "u32", 98317)
    for spec in (small, timing_shape(small), replace(small, origin="captured")):
        judge.verify(VADD, VADD, spec)
    assert seen == [("inferred", 5), ("inferred, scaled for timing", CAPTURED_SETS), ("captured", CAPTURED_SETS)]


class SlowAtSize(SizeJudge):
    """nvcc's launch takes 1e-13 * n^2 seconds (an all-pairs loop)."""

    def verify(self, base_ptx, cand_ptx, spec, *, fresh=False):
        v = super().verify(base_ptx, cand_ptx, spec, fresh=fresh)
        n = spec.param("n").value
        return Verdict(v.status, v.reason, "exact", {"baseline_seconds": [1e-13 * n * n, None]})


def test_a_scaled_shape_where_nvcc_code_is_slow_is_retried_at_a_quarter_of_the_factor():
    from superopt.specs.scaled import MAX_TIMED_LAUNCH_S, scale_factor
    small = inferred(vadd_spec())
    small.params[-1] = Scalar("n", "u32", 193)                  # as inferred for an n-body step
    first = timing_shape(small)
    assert 1e-13 * first.param("n").value ** 2 > MAX_TIMED_LAUNCH_S
    judge = SlowAtSize(speedup=1.3)
    specs, notes = _with_timing_shape(judge, VADD, [small])
    assert len(specs) == 2, notes
    n = specs[0].param("n").value
    assert 1e-13 * n * n <= MAX_TIMED_LAUNCH_S
    assert scale_factor(small, specs[0]) in (scale_factor(small, first) // 4, scale_factor(small, first) // 16)
    assert len(judge.calls) >= 2 and "scaled up (n=" in notes[0]
    # always too slow: no scaled shape, and a note says why
    judge = SlowAtSize(speedup=1.3)
    judge.verify = lambda b, c, spec, fresh=False: Verdict("accepted", "ok", "exact", {"baseline_seconds": [1.0]})
    specs, notes = _with_timing_shape(judge, VADD, [small])
    assert specs == [small] and "takes over 10 ms" in notes[0]


def test_nvcc_code_against_itself_is_answered_from_the_baseline_runs(monkeypatch):
    """Screening a shape asks whether nvcc's code can be judged there: its two runs per set are
    the answer, so no candidate launches are made (at a scaled or captured size they cost as
    much again)."""
    import superopt.judge.check as check_mod
    from superopt.judge.judge import BackendJudge
    calls = []
    real_check = check_mod.check
    monkeypatch.setattr(check_mod, "check", lambda *a, **k: calls.append(1) or real_check(*a, **k))
    judge = BackendJudge("emulator", check_sets=2)
    spec = vadd_spec()
    v = judge.verify(VADD, VADD, spec)
    assert v.status == "accepted" and "two runs agree" in v.reason and calls == []
    assert v.evidence.get("baseline_seconds")
    from tests.model.helpers import VADD_GOOD
    cand = VADD[:VADD.index(".visible")] + VADD_GOOD
    assert judge.verify(VADD, cand, spec).status == "accepted" and calls == [1]
