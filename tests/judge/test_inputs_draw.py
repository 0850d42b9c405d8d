"""Large buffers are drawn in their own width (superopt.judge.inputs.NARROW_DRAW_ELEMENTS): the
same distributions, in range; smaller ones keep the stream inputs were recorded from."""
from __future__ import annotations

import numpy as np
import pytest

from superopt.judge import inputs
from superopt.judge.inputs import NARROW_DRAW_ELEMENTS, generate

N = NARROW_DRAW_ELEMENTS


@pytest.mark.parametrize("et,dist,lo,hi", [("s32", "uniform_small", -8, 7), ("u32", "uniform_small", 0, 15),
                                           ("s32", "index:0..1000", 0, 999), ("u16", "uniform:3..9", 3, 8),
                                           ("f32", "uniform", -1.0, 1.0), ("f32", "uniform:2..3", 2.0, 3.0)])
def test_a_large_buffer_keeps_its_distributions_range(et, dist, lo, hi):
    a = generate(et, N, dist, np.random.default_rng(1))
    assert a.dtype == inputs.elem_type(et).dtype and a.size == N
    assert a.min() >= lo and a.max() <= hi
    if et == "f32":
        assert a.max() < hi                                   # [lo, hi)
        assert abs(float(a.mean()) - (lo + hi) / 2) < 0.01 * (hi - lo)
    else:
        assert set(np.unique(a)) == set(range(lo, hi + 1))    # every value of the range drawn


def test_positive_floats_stay_positive_and_finite_at_large_sizes():
    a = generate("f32", N, "positive", np.random.default_rng(2))
    assert (a > 0).all() and np.isfinite(a).all()


def test_a_small_buffer_keeps_the_recorded_stream():
    n = NARROW_DRAW_ELEMENTS - 1
    a = generate("s32", n, "uniform_small", np.random.default_rng(7))
    want = np.random.default_rng(7).integers(-8, 8, size=n, dtype=np.int64).astype(np.int32)
    assert np.array_equal(a, want)
    f = generate("f32", 1000, "uniform", np.random.default_rng(8))
    assert np.array_equal(f, np.random.default_rng(8).uniform(-1.0, 1.0, 1000).astype(np.float32))


def test_input_sets_made_in_parallel_are_the_sequential_ones(monkeypatch):
    """check._make_sets_at_once: the same sets, values and labels as one by one (each set has its
    generator of its own), for every buffer; below the size bound it leaves them to the loop."""
    from superopt.judge import check
    from superopt.judge.inputs import input_plan, make_input_set, make_rng
    from superopt.specs.launch_spec import load_spec
    from pathlib import Path
    spec = load_spec(str(Path(__file__).parent / "kernels" / "judge.toml"))
    plan = input_plan(spec, 4, make_rng(3, 0x5E7))
    todo = [p for p in plan.sets if not (p.kind == "large" or p.fallback)]
    assert len(todo) >= 2
    assert check._make_sets_at_once(spec, 3, todo) is None                 # 100000 floats: below the bound
    monkeypatch.setattr(check, "PARALLEL_INPUT_BYTES", 1)
    got = check._make_sets_at_once(spec, 3, todo)
    want = [make_input_set(spec, 3, i, scalars=p.overrides, kind=p.kind, rotation=p.rotation(i))
            for i, p in enumerate(todo)]
    assert [s.label for s in got] == [s.label for s in want]
    for g, w in zip(got, want):
        assert g.data.keys() == w.data.keys() and g.guards == w.guards
        for name in w.data:
            assert g.data[name].tobytes() == w.data[name].tobytes(), (g.label, name)


def _old_poison(et, n, rng):
    """The poison as it was drawn before 2026-12-04 (the stream small buffers keep)."""
    et = inputs.elem_type(et)
    raw = np.frombuffer(rng.bytes(n * et.size), dtype=et.bits_dtype).copy()
    if et.is_float:
        sign, exp_mask, man_mask, quiet = inputs._float_layout(et)
        t = et.bits_dtype.type
        raw = (raw & t(sign | man_mask)) | t(exp_mask | quiet)
    return raw.view(et.dtype)


@pytest.mark.parametrize("et", ["f32", "f64", "f16", "s32", "u8"])
def test_poisons_of_small_buffers_keep_the_recorded_stream(et):
    got = inputs.poison(et, 1000, np.random.default_rng(4))
    assert got.tobytes() == _old_poison(et, 1000, np.random.default_rng(4)).tobytes()
    p = inputs.poison(et, 999, np.random.default_rng(5))
    c = inputs.complement_poison(p, et, np.random.default_rng(6))
    if inputs.elem_type(et).is_float:
        info = inputs.elem_type(et)
        sign, exp_mask, man_mask, _ = inputs._float_layout(info)
        t = info.bits_dtype.type
        bias = (1 << (info.exp_bits - 1)) - 1
        r = np.frombuffer(np.random.default_rng(6).bytes(999 * info.size), dtype=info.bits_dtype)
        e = (r >> t(info.man_bits)) & t(7)
        want = ((r & t(sign | man_mask)) | ((e + t(bias - 4)) << t(info.man_bits))).astype(info.bits_dtype)
        assert c.view(info.bits_dtype).tobytes() == want.tobytes()


@pytest.mark.parametrize("et", ["f32", "f64", "s32", "u16"])
def test_poisons_of_large_buffers_are_drawn_as_words_and_stay_poisons(et):
    info = inputs.elem_type(et)
    p = inputs.poison(et, N, np.random.default_rng(9))
    assert p.dtype == info.dtype and p.size == N and p.flags.writeable
    bits = p.view(info.bits_dtype)
    if info.is_float:
        assert np.isnan(p).all()                                   # quiet NaNs ...
        assert len(np.unique(bits[:4096])) > 4000                  # ... with random payloads
        c = inputs.complement_poison(p, et, np.random.default_rng(10))
        assert np.isfinite(c).all() and (np.abs(c) >= 2.0 ** -4).all() and (np.abs(c) < 16).all()
        assert (c < 0).any() and (c > 0).any()
    else:
        assert len(np.unique(bits[:4096])) > (200 if info.size < 4 else 4000)
        c = inputs.complement_poison(p, et)
        assert (c.view(info.bits_dtype) == ~bits).all()
