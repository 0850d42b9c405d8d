"""Input generation: distributions, specials, never-all-zero, fresh seeds, poison (CPU only)."""
import math

import numpy as np
import pytest

from superopt.judge.inputs import (FLOAT_DISTS, INT_DISTS, complement_poison, float_specials, fresh_seed, generate,
                             is_nan_bits, make_input_set, make_rng, poison, poison_unlike, size_variants,
                             tail_variants)
from superopt.specs.launch_spec import ELEM_TYPES, LaunchSpec, elem_type, load_spec
from pathlib import Path

SPEC = load_spec(str(Path(__file__).parent / "kernels" / "judge.toml"))
FLOATS = [t for t in ELEM_TYPES.values() if t.is_float]
INTS = [t for t in ELEM_TYPES.values() if not t.is_float]


def test_fresh_seeds_differ():
    seeds = {fresh_seed() for _ in range(20)}
    assert len(seeds) == 20
    a = make_input_set(SPEC)
    b = make_input_set(SPEC)
    assert a.seed != b.seed
    assert not np.array_equal(a.data["x"], b.data["x"])


def test_seeded_is_reproducible():
    a = make_input_set(SPEC, seed=123, index=2)
    b = make_input_set(SPEC, seed=123, index=2)
    for k in a.data:
        assert a.data[k].tobytes() == b.data[k].tobytes()
    assert a.guards == b.guards


@pytest.mark.parametrize("et", FLOATS, ids=lambda t: t.name)
def test_specials_present(et):
    rng = make_rng(1)
    a = generate(et, 1000, "specials", rng)
    sp = float_specials(et)
    bits = a.view(et.bits_dtype)
    for s in sp.view(et.bits_dtype):
        assert s in bits, hex(int(s))
    assert is_nan_bits(a, et).any()
    f = a.astype(np.float64) if et.name != "bf16" else None
    if f is not None:
        assert np.isinf(f).any() and (np.signbit(f) & (f == 0)).any()


@pytest.mark.parametrize("et", FLOATS + INTS, ids=lambda t: t.name)
@pytest.mark.parametrize("n", [1, 2, 7, 1000])
def test_never_all_zero(et, n):
    dists = FLOAT_DISTS if et.is_float else INT_DISTS
    for d in dists:
        for seed in range(5):
            a = generate(et, n, d, make_rng(seed))
            assert a.size == n
            assert a.view(et.bits_dtype).any(), (et.name, d, n)


def test_uniform_small_int_single_element_zero_is_fixed():
    # many seeds so that some draw a zero for n=1
    for seed in range(200):
        a = generate("s32", 1, "uniform_small", make_rng(seed))
        assert a[0] != 0


def test_index_distribution_bounds():
    a = generate("s32", 5000, "index:0..n", make_rng(3), {"n": 37})
    assert a.min() >= 0 and a.max() < 37 and len(np.unique(a)) == 37
    b = generate("u32", 100, "index:n-4..n", make_rng(3), {"n": 10})
    assert set(b.tolist()) <= {6, 7, 8, 9}
    with pytest.raises(Exception):
        generate("s32", 10, "index:5..5", make_rng(1))
    with pytest.raises(Exception):
        generate("f32", 10, "index:0..5", make_rng(1))


def test_int_near_bounds_hits_extremes():
    et = elem_type("s16")
    a = generate(et, 2000, "near_bounds", make_rng(5))
    assert a.min() == -32768 and a.max() == 32767 and (a == -1).any()


@pytest.mark.parametrize("et", FLOATS + INTS, ids=lambda t: t.name)
def test_poisons_differ_everywhere(et):
    rng = make_rng(9)
    p1 = poison(et, 4096, rng)
    p2 = complement_poison(p1, et, rng)
    assert (p1.view(et.bits_dtype) != p2.view(et.bits_dtype)).all()
    if et.is_float:
        assert is_nan_bits(p1, et).all() and not is_nan_bits(p2, et).any()
    p3 = poison(et, 4096, rng)
    assert (p1.view(et.bits_dtype) != p3.view(et.bits_dtype)).any()      # differs between runs


@pytest.mark.parametrize("et", FLOATS + INTS, ids=lambda t: t.name)
def test_poison_unlike_reference(et):
    from superopt.judge.check import compare_values, Policy
    rng = make_rng(11)
    ref = generate(et, 3000, "specials" if et.is_float else "full", rng)
    if not et.is_float:
        ref[:100] = 0
    p = poison_unlike(ref, et, rng)
    for pol in (Policy(), Policy("ulp", 1e9), Policy("rel", 0.5)):
        assert not compare_values(ref, p, et, pol).any()


def test_input_set_contents():
    s = make_input_set(SPEC, seed=5, index=1, scalars={"n": 1000})
    assert s.spec.grid == (4, 1, 1)
    assert s.data["x"].size == 1000 and s.data["out"].size == 1000
    assert is_nan_bits(s.data["out"], elem_type("f32")).all()           # poisoned output
    assert s.distributions["out"] == "poison" and s.distributions["x"] == "specials"
    for front, back in s.guards.values():
        assert len(front) == 256 and len(back) == 256 and front != back


def test_size_variants_multiples_and_not_multiples_of_block():
    vs = size_variants(SPEC, 6, make_rng(2))
    assert vs[0] == {}
    ns = [v["n"] for v in vs[1:]]
    assert all(1 <= n < 100000 for n in ns)
    assert any(n % 256 == 0 and n % 16 == 0 for n in ns)      # wrong only on exact multiples
    assert any(n % 256 != 0 for n in ns)                      # and tails
    fixed = LaunchSpec.from_dict({**SPEC.to_dict(), "vary_sizes": False})
    # sizes stay; the float scalar a (no length depends on it) still varies
    assert all(set(v) <= {"a"} for v in size_variants(fixed, 3, make_rng(2)))


def test_free_scalars_get_signs_zero_and_magnitudes_unless_pinned():
    vs = size_variants(SPEC, 6, make_rng(3))
    a = [v["a"] for v in vs[1:]]
    assert -1.7 in a and 0.0 in a and any(abs(x) > 50 for x in a)
    assert any(x == 0 and math.copysign(1, x) < 0 for x in a)          # -0.0
    d = SPEC.to_dict()
    d["params"] = [{**p, "pinned": True} if p["name"] == "a" else p for p in d["params"]]
    pinned = LaunchSpec.from_dict(d)
    assert all("a" not in v for v in size_variants(pinned, 6, make_rng(3)))
    assert pinned.to_dict()["params"][3]["pinned"] is True


def test_tail_sets_cover_every_residue():
    tails = tail_variants(SPEC, make_rng(4))
    ns = [v["n"] for v in tails]
    assert {n % 8 for n in ns} == set(range(8)) and any(n % 16 == 15 for n in ns)
    assert all(1 <= n <= 100000 for n in ns)
