"""Inputs kept on the GPU (superopt.judge.backends.resident) on a real GPU: the worker's
device-side compare and checksum against numpy, the same results with and without kept inputs
(an input the kernel writes included), and a kept copy that changed under a request fails it."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from superopt.judge.backends.gpu import GpuBackend
from superopt.judge.inputs import make_input_set
from superopt.judge.phases import recording
from superopt.specs.launch_spec import load_spec

pytestmark = pytest.mark.gpu

HERE = Path(__file__).parent
SPEC = load_spec(str(HERE / "kernels" / "judge.toml")).resolved({"n": 300_001})     # 1.2 MB per buffer, odd
PTX = HERE / "kernels" / "ptx"
ROOT = HERE.parents[1]


def _backend(monkeypatch, resident: str) -> GpuBackend:
    monkeypatch.setenv("SUPEROPT_GPU_RESIDENT_BYTES", resident)
    b = GpuBackend()
    ok, why = b.available()
    if not ok:
        pytest.skip(why)
    return b


def _same_result(a, b) -> None:
    assert a.status == b.status == "ok", (a.error, b.error)
    for name in ("x", "y", "out"):
        assert a.outputs[name].tobytes() == b.outputs[name].tobytes(), name
        assert a.inputs_unchanged[name] == b.inputs_unchanged[name], name
        assert a.guards_intact[name] and b.guards_intact[name], name


@pytest.mark.parametrize("kernel", ["baseline", "writes_input"])
def test_kept_inputs_give_the_results_of_sent_inputs(monkeypatch, kernel):
    """Each kernel twice on the same inputs (the second time they are kept on the GPU): the
    results are those of a worker that keeps nothing, bit for bit; an input the kernel writes
    is seen as written both times."""
    ptx = (PTX / f"{kernel}.ptx").read_text()
    s = make_input_set(SPEC, seed=11)
    again = s.with_outputs({"out": np.full(SPEC.param("out").length, np.nan, np.float32)}, np.random.default_rng(2))
    on, off = _backend(monkeypatch, str(1 << 30)), _backend(monkeypatch, "0")
    try:
        with recording() as phases:
            got = [on.run_many(ptx, SPEC, [st], timeout=5)[0] for st in (s, again)]
        want = [off.run_many(ptx, SPEC, [st], timeout=5)[0] for st in (s, again)]
        assert on._resident.bytes >= 2 * 1_200_000 and off._resident.bytes == 0
    finally:
        on.close()
        off.close()
    for g, w in zip(got, want):
        _same_result(g, w)
    if kernel == "writes_input":
        assert not got[1].inputs_unchanged["x"] or not got[1].inputs_unchanged["y"]
    else:
        assert got[1].inputs_unchanged["x"] and got[1].inputs_unchanged["y"]
    assert phases.get("gpu_keep") > 0 and phases.get("gpu_launch") > 0 and phases.get("gpu_readback") > 0


def test_an_output_equal_to_the_expected_one_stays_on_the_device(monkeypatch):
    """A check that expects nvcc's result: the worker compares the output with it on the device;
    equal, the result is the expected array itself; a candidate that leaves the output alone
    (noop) comes back as it is. Both are what a worker that expects nothing reads back, bit for
    bit. One that writes past the end (off by one; its output is nvcc's) still shows the damage."""
    base, wrong, past_end = ((PTX / f"{k}.ptx").read_text() for k in ("baseline", "noop", "off_by_one"))
    s = make_input_set(SPEC, seed=12)
    cand_set = s.with_outputs({"out": np.full(SPEC.param("out").length, np.nan, np.float32)}, np.random.default_rng(3))
    on, off = _backend(monkeypatch, str(1 << 30)), _backend(monkeypatch, "0")
    try:
        ref = on.run_many(base, SPEC, [s], timeout=5)[0]
        expect = [{"out": ref.outputs["out"]}]
        same = [on.run_many(base, SPEC, [cand_set], timeout=5, expect=expect)[0] for _ in range(2)]
        differs = on.run_many(wrong, SPEC, [cand_set], timeout=5, expect=expect)[0]
        damages = on.run_many(past_end, SPEC, [cand_set], timeout=5, expect=expect)[0]
        plain_same = off.run_many(base, SPEC, [cand_set], timeout=5)[0]
        plain_differs = off.run_many(wrong, SPEC, [cand_set], timeout=5)[0]
        plain_damages = off.run_many(past_end, SPEC, [cand_set], timeout=5)[0]
    finally:
        on.close()
        off.close()
    for r in same:
        _same_result(r, plain_same)
        assert r.outputs["out"] is ref.outputs["out"]
    _same_result(differs, plain_differs)
    assert differs.outputs["out"] is not ref.outputs["out"]
    assert differs.outputs["out"].tobytes() != ref.outputs["out"].tobytes()
    assert damages.status == plain_damages.status == "ok"
    for name in ("x", "y", "out"):
        assert damages.outputs[name].tobytes() == plain_damages.outputs[name].tobytes(), name
    assert damages.guard_damage and damages.guard_damage == plain_damages.guard_damage


_IN_PROCESS = textwrap.dedent('''
    import json, sys
    import numpy as np
    from superopt.judge.backends._gpu_worker import Worker
    from superopt.judge.backends.gpu import pack_sets
    from superopt.judge.backends.resident import ParentTable
    from superopt.judge.inputs import make_input_set
    from superopt.specs.launch_spec import load_spec
    w = Worker(0)
    cu = w.cu
    rng = np.random.default_rng(5)
    out = {"same": [], "checksum": []}
    for n in (1, 7, 8, 9, 4099, (1 << 20) + 3):
        a = rng.integers(0, 256, n, dtype=np.uint8)
        da, db = w._dev_alloc(n), w._dev_alloc(n)
        w._dev_upload(da, a)
        w._dev_upload(db, a)
        same = [w._dev_same(int(da), db, n)]
        sums = [w._dev_checksum(da, n)]
        for k in sorted({0, n - 1, n // 2, (n // 8) * 8 if (n // 8) * 8 < n else 0}):
            b = a.copy()
            b[k] ^= 0x10
            w._dev_upload(db, b)
            same.append(w._dev_same(int(da), db, n))
            sums.append(w._dev_checksum(db, n))
        out["same"].append(same)
        out["checksum"].append(len(set(sums)) == len(sums))
        w._dev_free(da)
        w._dev_free(db)
    # a kept copy that changes under a request fails its runs and ends the worker
    spec = load_spec(sys.argv[1]).resolved({"n": 300_001})
    ptx = open(sys.argv[2]).read()
    # timings of one set: kept from the first, filled device to device after; a kept copy that
    # changed under a timing makes it an error that ends the worker
    from superopt.judge.backends import _proto
    tw = pack_sets(spec, [make_input_set(spec, seed=4)])
    desc = _proto.write_blobs(tw["blobs"])
    treq = {"op": "time", "ptx_a": ptx, "ptx_b": ptx, "kernel": spec.kernel, "set": tw["sets"][0],
            "blobs": desc, "reps": 30, "warmup": 2, "flush_l2": True, "max_seconds": 5.0}
    ttable = ParentTable(w.store.limit)
    timings = []
    for _ in range(2):
        use, keep = ttable.plan(tw["sources"], set(range(len(tw["blobs"]))))
        timings.append(w.op_time(dict(treq, resident={"use": use, "keep": keep})))
    out["timing_kept"] = [(len(r["a_ms"]), sorted(r["spent"]), min(r["a_ms"] + r["b_ms"]) > 0) for r in timings]
    out["timing_plain"] = len(w.op_time(treq)["b_ms"])
    # a timing prepared apart (op_time_prepare, under a shared step) and run by the request
    # naming it; a request naming another one sets up again
    prep = w.op_time_prepare(dict(treq, prepare_id=7))
    got = w.op_time(dict(treq, prepared=7))
    out["timing_prepared"] = [prep.get("prepared"), sorted(prep["spent"]), got["prepared_apart"], len(got["b_ms"]),
                              sorted(got["spent"])]
    w.op_time_prepare(dict(treq, prepare_id=8))
    out["timing_mismatch"] = [w.op_time(dict(treq, prepared=9))["prepared_apart"], w.prepared is None]
    use, keep = ttable.plan(tw["sources"], set(range(len(tw["blobs"]))))
    d, n = w.store.get(next(iter(use.values())))
    cu.cuMemsetD8(d, 0x5A, 16)
    bad = w.op_time(dict(treq, resident={"use": use, "keep": keep}))
    out["timing_bad"] = [bad.get("error", ""), bad.get("fatal")]
    _proto.remove(desc["file"])
    s = make_input_set(spec, seed=3)
    wire = pack_sets(spec, [s])
    table = ParentTable(w.store.limit)
    use, keep = table.plan(wire["sources"], wire["inputs"])
    req = {"op": "run", "ptx": ptx, "kernel": spec.kernel, "timeout": 5.0, "sets": wire["sets"],
           "blobs": wire["blobs"], "resident": {"use": use, "keep": keep}}
    first = w.op_run(req)
    out["first"] = [r["status"] for r in first["results"]]
    out["spent"] = sorted(first["spent"])
    use, keep = table.plan(wire["sources"], wire["inputs"])
    d, n = w.store.get(next(iter(use.values())))
    cu.cuMemsetD8(d, 0x5A, 16)                      # some kernel's wild store onto a kept input
    blobs = [np.zeros(0, np.uint8) if i in use else b for i, b in enumerate(wire["blobs"])]
    second = w.op_run(dict(req, blobs=blobs, resident={"use": use, "keep": {}}))
    out["second"] = [r["status"] for r in second["results"]]
    out["second_error"] = second["results"][0]["error"]
    out["second_fatal"] = second["fatal"]
    print(json.dumps(out))
''')


def test_worker_compares_and_checks_kept_copies_on_the_device():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               SUPEROPT_GPU_RESIDENT_BYTES=str(1 << 30))
    p = subprocess.run([sys.executable, "-c", _IN_PROCESS, str(HERE / "kernels" / "judge.toml"),
                        str(PTX / "baseline.ptx")], capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0 and "no CUDA device" in p.stderr:
        pytest.skip("no CUDA device")
    assert p.returncode == 0, p.stderr[-3000:]
    import json
    got = json.loads(p.stdout.strip().splitlines()[-1])
    for same in got["same"]:
        assert same[0] is True and not any(same[1:]), same       # equal, then every flipped byte seen
    assert all(got["checksum"])
    assert got["first"] == ["ok"] and {"keep", "fill", "launch", "readback", "free"} <= set(got["spent"])
    for n, spent, positive in got["timing_kept"]:
        assert n == 30 and positive and {"keep", "load", "fill", "runs", "free", "total"} <= set(spent)
    assert got["timing_plain"] == 30
    pid, prep_spent, apart, rounds, run_spent = got["timing_prepared"]
    assert pid == 7 and {"keep", "load", "fill"} <= set(prep_spent) and apart is True and rounds == 30
    assert "runs" in run_spent and "fill" not in run_spent and "load" not in run_spent
    assert got["timing_mismatch"] == [False, True]
    assert "outside the kernel's buffers" in got["timing_bad"][0] and got["timing_bad"][1] is True
    assert got["second"] == ["crash"] and got["second_fatal"] is True
    assert "outside the kernel's buffers" in got["second_error"]


@pytest.mark.parametrize("pool", [str(1 << 30), "0"])
def test_a_reused_allocation_never_shows_an_earlier_launchs_results(monkeypatch, pool):
    """The worker's set allocations come from its pool (superopt.judge.backends.alloc_pool): nvcc's
    code writes its output, then a candidate that writes nothing (noop) runs on a set of the same
    sizes whose output starts as NaN. Its output must be NaN, not nvcc's results left in a reused
    allocation; its guards intact; and nvcc's results the same with the pool on and off."""
    monkeypatch.setenv("SUPEROPT_GPU_POOL_BYTES", pool)
    base, noop = ((PTX / f"{k}.ptx").read_text() for k in ("baseline", "noop"))
    s = make_input_set(SPEC, seed=21)
    poisoned = s.with_outputs({"out": np.full(SPEC.param("out").length, np.nan, np.float32)}, np.random.default_rng(5))
    b = _backend(monkeypatch, "0")
    try:
        first = b.run_many(base, SPEC, [s, s], timeout=5)
        after = b.run_many(noop, SPEC, [poisoned, poisoned], timeout=5)
    finally:
        b.close()
    monkeypatch.setenv("SUPEROPT_GPU_POOL_BYTES", "0")
    ref = _backend(monkeypatch, "0")
    try:
        want = ref.run_many(base, SPEC, [s], timeout=5)[0]
    finally:
        ref.close()
    for r in first:
        _same_result(r, want)
        assert not np.isnan(r.outputs["out"]).all()
    for r in after:
        assert r.status == "ok" and np.isnan(r.outputs["out"]).all()
        assert all(r.guards_intact.values())
