"""The emulator as the judge's backend: the same planted cheats and equivalent rewrites
as the GPU judge tests (tests/judge/kernels), checked on the CPU; and the memory model's
batched atomics against one-lane-at-a-time application."""
from __future__ import annotations

import numpy as np
import pytest

from superopt.judge.backends.base import get_backend
from superopt.judge.check import ACCEPTED, COULD_NOT_JUDGE, REJECTED, check
from superopt.judge.emulator import memory as M
from superopt.judge.inputs import make_input_set
from tests.judge.planted import CHEATS, EQUIVALENT, KERNELS, judge_spec, ptx

SPEC = judge_spec(10007)

pytestmark = pytest.mark.skipif(not (KERNELS / "ptx" / "baseline.ptx").exists(), reason="judge kernels missing")


def test_registered_and_available():
    be = get_backend("emulator")
    assert be.name == "emulator" and be.available()[0]
    assert be.describe()["backend"] == "emulator"


def test_run_reports_buffers_guards_and_inputs():
    be = get_backend("emulator")
    s = make_input_set(SPEC, seed=3, scalars={"n": 1000})
    r = be.run(ptx("baseline"), SPEC, s)
    assert r.status == "ok", r.error
    assert all(r.guards_intact.values()) and r.inputs_unchanged["x"] and r.inputs_unchanged["y"]
    assert not r.inputs_unchanged["out"] and r.elapsed is not None
    x, y = s.data["x"], s.data["y"]
    i = np.arange(1000)
    j = (i // 256) * 256 + 255 - i % 256
    v = np.where(j < 1000, x[np.minimum(j, 999)], np.float32(0))
    with np.errstate(all="ignore"):
        want = np.float32(1.7) * v + y          # mul.rn.f32 then add.rn.f32
    ok = ~np.isnan(want)
    assert np.array_equal(r.outputs["out"].view(np.uint32)[ok], want.view(np.uint32)[ok])


@pytest.mark.parametrize("name", EQUIVALENT)
def test_equivalent_rewrites_accepted(name):
    v = check(ptx("baseline"), ptx(name), SPEC, backend="emulator")
    assert v.status == ACCEPTED, v.summary()
    assert v.evidence["backend"]["backend"] == "emulator"


@pytest.mark.parametrize("name", list(CHEATS))
def test_planted_cheats_rejected(name):
    v = check(ptx("baseline"), ptx(name), SPEC, backend="emulator")
    assert v.status == REJECTED, v.summary()
    assert CHEATS[name] in v.reason, v.summary()


def test_uninitialised_shared_read_makes_baseline_unjudgeable():
    v = check(ptx("uninit_shared"), ptx("uninit_shared"), SPEC, backend="emulator")
    assert v.status == COULD_NOT_JUDGE and "not deterministic" in v.reason, v.summary()


def test_unsupported_instruction_cannot_be_judged():
    lines = ptx("baseline").split("\n")
    k = next(i for i, line in enumerate(lines) if "mul.rn.f32" in line)
    dst, src = (w.rstrip(",;") for w in lines[k].split()[1:3])
    # ex2 of the mul's first operand (of itself, the destination would be read unwritten,
    # which the static def-use check rejects before the emulator is asked)
    lines[k] = f"\tex2.approx.ftz.f32 {dst}, {src};"
    v = check(ptx("baseline"), "\n".join(lines), SPEC, backend="emulator")
    assert v.status == COULD_NOT_JUDGE and "ex2.approx.ftz.f32" in v.reason, v.summary()


def test_timeout_ends_the_run():
    be = get_backend("emulator", fresh=True)
    sets = [make_input_set(SPEC, seed=5, index=i, scalars={"n": 1000}) for i in range(3)]
    rs = be.run_many(ptx("hang"), SPEC, sets, timeout=0.3)
    assert [r.status for r in rs] == ["timeout", "not_run", "not_run"]


@pytest.mark.parametrize("seed", range(20))
def test_batched_atomics_equal_sequential_application(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 80)), int(rng.integers(1, 8))
    ix = rng.integers(0, m, n)
    u = np.uint32
    for uf, dt in ((np.add, np.uint32), (np.minimum, np.int32), (np.maximum, np.uint32),
                   (np.bitwise_and, np.uint32), (np.bitwise_or, np.uint32), (np.bitwise_xor, np.uint32)):
        mem0 = rng.integers(0, 2**32, m, dtype=np.uint64).astype(u)
        vals = rng.integers(0, 2**32, n, dtype=np.uint64).astype(u)
        op = lambda o, v, uf=uf, dt=dt: uf(o.view(dt), np.asarray(v).view(dt)).astype(dt).view(u)  # noqa: E731
        a = mem0.copy()
        olds = M.atomic_apply(a, ix, op, vals, None, ("assoc", uf, np.dtype(dt)), True)
        b, ref = mem0.copy(), np.empty(n, u)
        for i in range(n):
            ref[i] = b[ix[i]]
            b[ix[i]] = op(b[ix[i]:ix[i] + 1], vals[i:i + 1])[0]
        assert np.array_equal(a, b) and np.array_equal(olds, ref)
        c = mem0.copy()
        M.atomic_apply(c, ix, op, vals, None, ("assoc", uf, np.dtype(dt)), False)
        assert np.array_equal(c, b)
    for uniform in (True, False):
        mem0 = rng.integers(0, 3, m).astype(u)
        cmpv = np.zeros(n, u) if uniform else rng.integers(0, 3, n).astype(u)
        vals = np.ones(n, u) if uniform else rng.integers(0, 3, n).astype(u)
        op = lambda o, v, c: np.where(o == c, v, o).astype(u)  # noqa: E731
        a = mem0.copy()
        olds = M.atomic_apply(a, ix, op, vals, cmpv, ("cas",), True)
        b, ref = mem0.copy(), np.empty(n, u)
        for i in range(n):
            ref[i] = b[ix[i]]
            if b[ix[i]] == cmpv[i]:
                b[ix[i]] = vals[i]
        assert np.array_equal(a, b) and np.array_equal(olds, ref)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_batched_float_atomic_add_equals_sequential_application(dt):
    from ptx_ir.semantics import fp
    rng = np.random.default_rng(1)
    ut = np.uint32 if dt == np.float32 else np.uint64
    if dt == np.float32:
        op = lambda o, v: fp.f32_add(o.view(np.float32), np.asarray(v, ut).view(np.float32), "rn", True).view(ut)  # noqa: E731
    else:
        op = lambda o, v: fp.f64_add(o.view(np.float64), np.asarray(v, ut).view(np.float64)).view(ut)  # noqa: E731
    for trial in range(30):
        n, m = int(rng.integers(2, 300)), int(rng.integers(1, 4))
        ix = rng.integers(0, m, n)
        vals = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dt)
        if trial % 7 == 0:
            vals[3 % n] = np.nan
        mem0 = rng.standard_normal(m).astype(dt)
        a = mem0.view(ut).copy()
        olds = M.atomic_apply(a, ix, op, vals.view(ut), None, ("fadd", np.dtype(dt), dt == np.float32), True)
        b, ref = mem0.view(ut).copy(), np.empty(n, ut)
        for i in range(n):
            ref[i] = b[ix[i]]
            b[ix[i]] = op(b[ix[i]:ix[i] + 1], vals.view(ut)[i:i + 1])[0]
        assert np.array_equal(a, b) and np.array_equal(olds, ref)
