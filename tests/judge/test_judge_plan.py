"""The check's input plan (issue 25): the same tails, large set, float scalars and output
poisons for every spec origin; an inferred spec's extra sizes proven by the tracer first; the
limits that keep the extra sets cheap, each made to fire."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import ptx_ir
from superopt.judge import size_proof
from superopt.judge.backends.base import Backend, RunResult
from superopt.judge.backends.emulator import EmulatorBackend
from superopt.judge.backends.gpu import GPU_LARGE, GpuBackend
from superopt.judge.check import ACCEPTED, Policy, check, compare_values, run_baseline
from superopt.judge.inputs import (CPU_LARGE, POISONS, TAIL_MAX_ELEMENTS, TAIL_RESIDUES, LargeTarget, _free_value,
                                   candidate_poison, extra_sizes, free_scalars, generate, inexact_float,
                                   input_plan, is_nan_bits, large_variant, make_rng, tail_variants)
from superopt.specs.inference import infer_specs
from superopt.specs.launch_spec import LaunchSpec, elem_type, load_spec

CHEATS = Path(__file__).resolve().parent / "cheats"
SAXPY_PTX = (CHEATS / "saxpy.ptx").read_text()
BLOCKSUM_PTX = (CHEATS / "blocksum.ptx").read_text()
EXPLICIT = load_spec(str(CHEATS / "saxpy.toml"))


def _inferred(name: str, entry: str):
    res = infer_specs(ptx_ir.parse((CHEATS / f"{name}.ptx").read_text()), entry,
                      source_text=(CHEATS / f"{name}.cu").read_text())
    assert res.specs, res.reason
    return res.specs[0]


INFERRED = _inferred("saxpy", "_Z5saxpyifPKfPf")
INFERRED_SUM = _inferred("blocksum", "_Z8blocksumiPKfPf")


def _sizes(spec, ov, name="n"):
    return int(ov.get(name, spec.param(name).value))


def _largest(spec, ov):
    return max(b.length for b in spec.resolved(ov).buffers)


# ---------------------------------------------------------------- the plan


@pytest.mark.parametrize("spec", [INFERRED, EXPLICIT], ids=["inferred", "explicit"])
def test_every_origin_gets_tails_a_large_set_and_inexact_scalars(spec):
    plan = input_plan(spec, 4, make_rng(1))
    kinds = [p.kind for p in plan.sets]
    assert kinds[:4] == ["main"] * 4
    tails = [p.overrides for p in plan.sets if p.kind == "tail"]
    ns = [_sizes(spec, ov) for ov in tails]
    assert {n % 8 for n in ns} == set(range(8)) and any(n % 16 == 15 for n in ns)
    assert len(tails) == len(TAIL_RESIDUES) and all(n <= 2 * 256 + 16 for n in ns)
    big = [p for p in plan.sets if p.kind == "large"]
    assert len(big) == 1
    n = _sizes(spec, big[0].overrides)
    assert n > (1 << 17) and n % 256 == 0 and n <= CPU_LARGE.elements + 256    # whole blocks, just past 2^17
    # a (the free float scalar) takes -a, 0, -0 in sets 1..3 and full-significand values in every extra set
    a = spec.param("a").value
    main_a = [p.overrides["a"] for p in plan.sets[1:4]]
    assert main_a[0] == -a and main_a[1] == 0.0 and math.copysign(1, main_a[2]) < 0 == main_a[2]
    for p in plan.sets[4:]:
        bits = int(np.array([p.overrides["a"]], np.float32).view(np.uint32)[0])
        assert bits & 1 and np.float32(p.overrides["a"]) == p.overrides["a"]
    if spec.origin == "inferred":
        # its own sizes have no whole-block value: the large set stands for it, the whole-block set is its fallback
        assert [p.kind for p in plan.sets if p.fallback] == ["whole blocks"]


def test_explicit_vary_sizes_false_keeps_its_sizes():
    fixed = replace(EXPLICIT, vary_sizes=False)
    plan = input_plan(fixed, 4, make_rng(1))
    assert [p.kind for p in plan.sets] == ["main"] * 4
    assert all("n" not in p.overrides for p in plan.sets)
    assert plan.sets[1].overrides["a"] == -2.0           # floats still vary


def test_tails_with_several_sizes_stay_small_and_keep_a_multiple():
    spec = LaunchSpec.from_dict({
        "kernel": "k", "grid": ["cdiv(w, 32)", "cdiv(h, 8)", 1], "block": [32, 8, 1], "origin": "inferred",
        "vary_sizes": False,
        "params": [{"name": "out", "kind": "buffer", "type": "f32", "length": "w*h", "direction": "out"},
                   {"name": "w", "kind": "scalar", "type": "s32", "value": 4 * 197, "values": [4 * 131, 4 * 29]},
                   {"name": "h", "kind": "scalar", "type": "s32", "value": 163, "values": [97, 23]}]})
    assert extra_sizes(spec) == {"w": 4, "h": 1}          # inference made w a multiple of 4
    tails = tail_variants(spec)
    assert len(tails) == len(TAIL_RESIDUES)
    for ov, r in zip(tails, TAIL_RESIDUES):
        assert ov["w"] % 4 == 0 and (ov["w"] // 4) % 16 == r and ov["h"] % 16 == r
        assert _largest(spec, ov) <= max(TAIL_MAX_ELEMENTS, 2 * 256 + 16)
    big = large_variant(spec)
    assert big["w"] % math.lcm(32, 16, 4) == 0 and big["h"] % 32 == 0 and _largest(spec, big) > 1 << 17


def test_large_variant_limits():
    assert large_variant(EXPLICIT, replace(CPU_LARGE, max_bytes=1 << 20)) is None            # bytes
    assert large_variant(EXPLICIT, replace(CPU_LARGE, max_threads=1 << 16)) is None          # threads
    assert large_variant(EXPLICIT, replace(CPU_LARGE, max_growth=1.1)) is None               # work
    big = replace(EXPLICIT, params=[replace(p, value=200_000) if p.name == "n" else p for p in EXPLICIT.params])
    assert large_variant(big) is None                   # the spec's own size is past the target already
    u16 = replace(EXPLICIT, params=[replace(p, type="u16", value=50_000) if p.name == "n" else p
                                    for p in EXPLICIT.params])
    assert large_variant(u16) is None                   # 2^17 elements do not fit the size's type
    gpu = large_variant(EXPLICIT, GPU_LARGE)
    assert gpu["n"] > 1 << 20 and gpu["n"] % 256 == 0


@pytest.mark.parametrize("et", ["f16", "bf16", "f32", "f64"])
def test_inexact_float_uses_every_significand_bit(et):
    t = elem_type(et)
    rng = make_rng(7)
    for near in (2.0, -0.0, 1e3, float("inf")):
        for _ in range(50):
            v = inexact_float(t, near, rng)
            ref = abs(near) if near and math.isfinite(near) else 1.5
            assert ref / 8 <= abs(v) <= ref * 8
            if et == "f32":
                assert np.float32(v) == v and int(np.array([v], np.float32).view(np.uint32)[0]) & 1
    if et == "f32":
        # products with it are inexact for most operands (a = 2.0 makes every one exact)
        x = generate("f32", 10_000, "normal", make_rng(3))
        a = np.float32(inexact_float(t, 2.0, rng))
        exact = (x.astype(np.float64) * float(a)) == (x * a).astype(np.float64)
        assert exact.mean() < 0.1
        assert ((x.astype(np.float64) * 2.0) == (x * np.float32(2.0)).astype(np.float64)).all()


def test_free_value_keeps_sign_zero_and_negative_zero_in_sets_1_to_3():
    a = EXPLICIT.param("a")
    for seed in range(20):
        rng = make_rng(seed)
        v = [_free_value(a, i, rng) for i in (1, 2, 3, 4, 5)]
        assert v[0] == -2.0 and v[1] == 0.0 and math.copysign(1, v[1]) > 0
        assert v[2] == 0.0 and math.copysign(1, v[2]) < 0
        assert int(np.array([v[3]], np.float32).view(np.uint32)[0]) & 1 and abs(v[4]) > 50
    assert [s.name for s in free_scalars(INFERRED)] == ["a"]


@pytest.mark.parametrize("et", ["f32", "f16", "s32", "u8"])
def test_candidate_poisons(et):
    t = elem_type(et)
    rng = make_rng(5)
    ref = generate(t, 4000, "specials" if t.is_float else "full", rng)
    for pol in (Policy(), Policy("rel", 0.5)):
        eq = lambda a, b: compare_values(a, b, t, pol)                  # noqa: E731
        for kind in ("nan", "bits"):
            p = candidate_poison(kind, ref, t, rng, equal=eq)
            assert not eq(ref, p).any(), kind
        assert (candidate_poison("baseline", ref, t, rng).view(t.bits_dtype) == ref.view(t.bits_dtype)).all()
    if t.is_float:
        assert is_nan_bits(candidate_poison("nan", ref[~is_nan_bits(ref, t)], t, rng), t).all()
        bits = candidate_poison("bits", ref, t, rng)
        assert (~is_nan_bits(bits, t)).mean() > 0.9          # numbers almost everywhere
    with pytest.raises(ValueError):
        candidate_poison("zeros", ref, t, rng)


# ---------------------------------------------------------------- in the check


def test_check_rotates_candidate_poisons_and_runs_tails_and_large_once():
    v = check(BLOCKSUM_PTX, BLOCKSUM_PTX, INFERRED_SUM, backend="emulator", seed=4)
    assert v.status == ACCEPTED, v.summary()
    ev = v.evidence
    kinds = [s["kind"] for s in ev["sets"]]
    assert kinds[:4] == ["main"] * 4 and kinds.count("tail") == len(TAIL_RESIDUES) and kinds[-1] == "large"
    assert "whole blocks" not in kinds                 # the large set stands for it
    poisons = list(ev["candidate_poisons"].values())
    assert poisons[:3] == [["nan", "bits"], ["bits", "baseline"], ["baseline", "nan"]]
    assert all(p == ["bits"] for p, k in zip(poisons, kinds) if k != "main")
    assert len(ev["candidate_seconds"]) == 2 * 4 + kinds.count("tail") + 1
    assert ev["phase_seconds"]["late_sets"] > 0 and "size_proofs" in ev["phase_seconds"]


def _tampered(spec, length: str):
    return replace(spec, params=[replace(p, length_expr=length, length=None) if p.name == "x" else p
                                 for p in spec.params])


def test_an_unproven_large_set_is_not_run_and_the_whole_block_set_is():
    # x's length is right for the traced sizes but stops at 100000: the large set is not proven
    bad = _tampered(INFERRED, "min(n, 100000)")
    why = size_proof.prove(SAXPY_PTX, bad, large_variant(bad))
    assert why and "'x' has 100000 elements" in why
    assert size_proof.prove(SAXPY_PTX, INFERRED, large_variant(INFERRED)) is None
    v = check(SAXPY_PTX, SAXPY_PTX, bad, backend="emulator", seed=2)
    assert v.status == ACCEPTED, v.summary()
    kinds = [s["kind"] for s in v.evidence["sets"]]
    assert "large" not in kinds and kinds[-1] == "whole blocks"
    assert any("no large set at n=132096" in n and "not proven" in n for n in v.evidence["notes"])


def test_an_unproven_tail_is_not_run():
    # one element short for 501 <= n <= 599 only: the tails there are not proven, the other sets are
    bad = _tampered(INFERRED, "n - min(1, max(0, n - 500)) * min(1, max(0, 600 - n))")
    v = check(SAXPY_PTX, SAXPY_PTX, bad, backend="emulator", seed=3)
    assert v.status == ACCEPTED, v.summary()
    assert not [s for s in v.evidence["sets"] if s["kind"] == "tail"]
    skipped = [n for n in v.evidence["notes"] if n.startswith("no tail set")]
    assert len(skipped) == len(TAIL_RESIDUES) and "touches element" in skipped[0]


def test_the_proof_budget_fires(monkeypatch):
    # enough for the tails (3 blocks), not for ~1e5 threads: the large and whole-block sets are not proven
    monkeypatch.setattr(size_proof, "PROOF_LANE_STEPS", 100_000)
    size_proof.clear_cache()
    try:
        why = size_proof.prove(SAXPY_PTX, INFERRED, large_variant(INFERRED))
        assert why and "budget" in why
        v = check(SAXPY_PTX, SAXPY_PTX, INFERRED, backend="emulator", seed=1)
        kinds = [s["kind"] for s in v.evidence["sets"]]
        assert v.status == ACCEPTED and kinds == ["main"] * 4 + ["tail"] * len(TAIL_RESIDUES)
        assert any(n.startswith("no large set") and "budget" in n for n in v.evidence["notes"])
        assert any(n.startswith("no whole-block set") and "budget" in n for n in v.evidence["notes"])
    finally:
        size_proof.clear_cache()


def test_the_large_set_time_limit_fires(monkeypatch):
    monkeypatch.setattr(EmulatorBackend, "large_target",
                        lambda self: replace(CPU_LARGE, max_seconds=0.0, time_factor=0.0, rest_factor=0.0))
    v = check(SAXPY_PTX, SAXPY_PTX, EXPLICIT, backend=EmulatorBackend(), seed=1)
    assert v.status == ACCEPTED, v.summary()
    assert "large" not in [s["kind"] for s in v.evidence["sets"]]
    assert any("no large set" in n and "would take about" in n for n in v.evidence["notes"])


class Wrapped(Backend):
    """The emulator, with the results of chosen sets replaced (and the timeouts recorded)."""
    name = "wrapped"

    def __init__(self, change, not_chosen=()):
        self.inner = EmulatorBackend()
        self.change = change
        self.timeouts: list = []
        self.not_chosen = tuple(not_chosen)

    def run_many(self, ptx, spec, input_sets, *, timeout=None):
        self.timeouts.append((timeout, [s.kind for s in input_sets]))
        res = self.inner.run_many(ptx, spec, input_sets, timeout=timeout)
        return [self.change(s, r) or r for s, r in zip(input_sets, res)]


@pytest.mark.parametrize("status", ["crash", "timeout", "unsupported"])
def test_nvcc_code_failing_on_an_extra_set_drops_only_that_set(status):
    def change(s, r):
        if s.kind in ("large", "tail") and s.run_tag == "" and r.ok:
            return RunResult(status, error=f"planted {status}")
    be = Wrapped(change)
    runs = run_baseline(SAXPY_PTX, EXPLICIT, backend=be, seed=5)
    assert not hasattr(runs, "status"), runs.summary()
    kinds = [runs.sets[i].kind for i in runs.valid]
    assert kinds == ["main"] * 4
    assert sum(f"baseline {status}" in n and "(set dropped)" in n for n in runs.evidence["notes"]) == len(TAIL_RESIDUES) + 1
    # the large set ran in a call of its own, under a limit from nvcc's own launch times
    (t_large, k_large), = [(t, k) for t, k in be.timeouts if "large" in k]
    assert k_large == ["large", "large"] and 2.0 <= t_large < 60
    v = check(SAXPY_PTX, SAXPY_PTX, EXPLICIT, backend="emulator", baseline=runs)
    assert v.status == ACCEPTED, v.summary()


def test_an_extra_set_where_nvcc_code_reads_farther_is_dropped():
    def change(s, r):
        if s.kind == "tail" and r.ok:
            r.guard_reads = {"x": {"count": 1, "past_end_bytes": 4, "before_start_bytes": 0}}
    runs = run_baseline(SAXPY_PTX, EXPLICIT, backend=Wrapped(change), seed=6)
    assert [runs.sets[i].kind for i in runs.valid] == ["main"] * 4 + ["large"]
    assert any("reads outside buffers ['x']" in n and "farther than on the main sets" in n for n in runs.evidence["notes"])
    assert "x" not in runs.guard_reads                # no allowance widened by them


def test_what_a_backend_cannot_choose_is_in_the_evidence():
    assert any("order" in w and "block" in w for w in GpuBackend.not_chosen)
    assert any("register" in w for w in GpuBackend.not_chosen)
    assert GpuBackend.large_target(GpuBackend.__new__(GpuBackend)).elements > 1 << 20
    be = Wrapped(lambda s, r: None, not_chosen=GpuBackend.not_chosen)
    v = check(SAXPY_PTX, SAXPY_PTX, EXPLICIT, backend=be, seed=1)
    assert v.status == ACCEPTED and v.evidence["not_chosen"] == list(GpuBackend.not_chosen)
    assert any(n.startswith("not chosen by the check on wrapped") for n in v.evidence["notes"])
    assert "not_chosen" not in check(SAXPY_PTX, SAXPY_PTX, EXPLICIT, backend="emulator", seed=1).evidence


@pytest.mark.gpu
@pytest.mark.parametrize("spec", [EXPLICIT, INFERRED], ids=["explicit", "inferred"])
def test_gpu_plan(gpu, spec):
    """On a GPU: the large set past 2^20 for the explicit spec (the inferred one where the tracer
    proves it, else the CPU's 2^17), what the GPU does not let the check choose in the evidence."""
    v = check(SAXPY_PTX, SAXPY_PTX, spec, backend=gpu, seed=11)
    assert v.status == ACCEPTED, v.summary()
    big = [s for s in v.evidence["sets"] if s["kind"] == "large"]
    assert len(big) == 1, v.evidence["notes"]
    n = big[0]["scalars"]["n"]
    assert n > (1 << 20 if spec is EXPLICIT else 1 << 17)
    assert v.evidence["not_chosen"] == list(GpuBackend.not_chosen)
    print(f"\n{spec.origin}: large n={n}, {len(v.evidence['sets'])} sets, {v.evidence['wall_seconds']} s")
