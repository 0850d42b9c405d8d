"""The judge on a real GPU: planted cheats must be rejected, equivalent rewrites accepted.

Kernels: tests/judge/kernels/judge.cu (variants, PTX committed under kernels/ptx/, rebuilt
by kernels/build_ptx.py). Spec: kernels/judge.toml (n = 100000, not a multiple of 256)."""
import pytest

from superopt.judge.check import ACCEPTED, COULD_NOT_JUDGE, REJECTED, check
from superopt.specs.launch_spec import load_spec
from superopt.judge import early_stop
from superopt.judge.timing import time_pair
from tests.judge.planted import CHEATS, EQUIVALENT, KERNELS, judge_spec, ptx, with_n

pytestmark = pytest.mark.gpu

SPEC = judge_spec()
KP = KERNELS / "ptx"


def test_device_info(gpu):
    info = gpu.info()
    print(info)
    assert info["cc"][0] >= 7 and info["sm_count"] > 0 and info["l2_bytes"] > 0


def test_run_roundtrip(gpu):
    from superopt.judge.inputs import make_input_set
    import numpy as np
    s = make_input_set(SPEC, seed=3, scalars={"n": 1000})
    r = gpu.run(ptx("baseline"), SPEC, s)
    assert r.status == "ok", r.error
    assert all(r.guards_intact.values()) and r.inputs_unchanged["x"] and r.inputs_unchanged["y"]
    x, y = s.data["x"], s.data["y"]
    a = np.float32(1.7)
    i = np.arange(1000)
    j = (i // 256) * 256 + 255 - i % 256
    v = np.where(j < 1000, x[np.minimum(j, 999)], np.float32(0))
    with np.errstate(all="ignore"):
        want = a * v + y
    assert np.array_equal(r.outputs["out"].view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
    assert r.elapsed is not None and r.elapsed > 0


@pytest.mark.parametrize("name", EQUIVALENT)
def test_equivalent_rewrites_accepted(gpu, name):
    v = check(ptx("baseline"), ptx(name), SPEC, backend=gpu)
    assert v.status == ACCEPTED, v.summary()
    assert v.evidence["backend"]["backend"] == "gpu"


@pytest.mark.parametrize("name", list(CHEATS))
def test_planted_cheats_rejected(gpu, name):
    v = check(ptx("baseline"), ptx(name), SPEC, backend=gpu)
    assert v.status == REJECTED, v.summary()
    assert CHEATS[name] in v.reason, v.summary()


def test_recovers_after_hang_and_crash(gpu):
    for bad in ("hang", "crash"):
        assert check(ptx("baseline"), ptx(bad), SPEC, backend=gpu).status == REJECTED
        v = check(ptx("baseline"), ptx("eq_commute"), SPEC, backend=gpu)
        assert v.status == ACCEPTED, v.summary()


def test_uninitialised_shared_read_makes_baseline_unjudgeable(gpu):
    # the worker fills shared memory with fresh random words before every launch
    v = check(ptx("uninit_shared"), ptx("uninit_shared"), SPEC, backend=gpu)
    assert v.status == COULD_NOT_JUDGE and "not deterministic" in v.reason, v.summary()


def test_atomic_float_sum(gpu):
    spec = load_spec(str(KERNELS / "atomic_sum.toml"))
    v = check(ptx("atomic_sum"), ptx("atomic_sum"), spec, backend=gpu)
    # float atomic adds are judged by their contributions (superopt.judge.atomic_judge), so
    # nvcc's code is judgeable against itself however the blocks' adds were ordered
    assert v.status == ACCEPTED, v.summary()
    assert "atomic_log" in v.evidence, v.summary()
    v = check(ptx("atomic_sum"), ptx("atomic_sum"), spec, backend=gpu, policy="rel:1e-3")
    assert v.status == ACCEPTED, v.summary()
    assert v.policy == "rel:0.001"


def test_verify_command_on_gpu(tmp_path):
    from click.testing import CliRunner
    from superopt.cli import main
    spec = str(KERNELS / "judge.toml")
    r = CliRunner().invoke(main, ["verify", str(KP / "baseline.ptx"), str(KP / "eq_commute.ptx"),
                                  "--kernel", "judge_kernel", "--spec", spec])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["verify", str(KP / "baseline.ptx"), str(KP / "last_lane.ptx"),
                                  "--kernel", "judge_kernel", "--spec", spec])
    assert r.exit_code == 1, r.output
    assert "element" in r.output and "baseline" in r.output


def test_timing(gpu):
    spec = with_n(SPEC, 1 << 24)
    peak = gpu.peak_bandwidth()
    print("peak", peak)
    assert peak["bytes_per_s"] > 1e11
    slow_first = time_pair(ptx("slow"), ptx("baseline"), spec, backend=gpu, reps=30, warmup=3, max_seconds=5)
    print(slow_first.summary())
    assert slow_first.status == "ok" and slow_first.faster and slow_first.speedup > 1.2
    assert slow_first.flush_bytes >= 2 * gpu.info()["l2_bytes"]
    slow_second = time_pair(ptx("baseline"), ptx("slow"), spec, backend=gpu, reps=30, warmup=3, max_seconds=5)
    print(slow_second.summary())
    assert not slow_second.faster
    same = time_pair(ptx("baseline"), ptx("eq_commute"), spec, backend=gpu, reps=50, warmup=5, max_seconds=5)
    print(same.summary())
    assert same.status == "ok" and not same.faster
    # a search's first timing stops once the candidate is clearly not faster (early_stop), and
    # when it is faster only if asked to (stop_faster)
    early = time_pair(ptx("baseline"), ptx("slow"), spec, backend=gpu, reps=100, warmup=3, max_seconds=10,
                      stop_not_faster=True)
    print(early.summary())
    assert early.status == "ok" and not early.faster and early.reps == early.stopped_early == early_stop.FIRST
    assert early.stopped_as == early_stop.NOT_FASTER
    win = time_pair(ptx("slow"), ptx("baseline"), spec, backend=gpu, reps=60, warmup=3, max_seconds=10,
                    stop_not_faster=True)
    assert win.faster and win.stopped_early is None and win.reps == 60
    quick = time_pair(ptx("slow"), ptx("baseline"), spec, backend=gpu, reps=60, warmup=3, max_seconds=10,
                      stop_not_faster=True, stop_faster=True)
    print(quick.summary())
    assert quick.faster and quick.stopped_as == early_stop.FASTER and quick.reps == quick.stopped_early == early_stop.FIRST
    # the warm-up: at least two pairs, more only while under WARMUP_S, never more than asked
    assert 2 <= win.warmup_pairs <= 3 and 2 <= quick.warmup_pairs <= 3
    assert same.implied_bytes_per_s["baseline"] < 1.1 * peak["bytes_per_s"]
