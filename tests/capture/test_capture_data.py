"""The program's own data from a capture (--data snapshots) in the check, on the emulator:
a CSR SpMV whose matrix is a struct by value holding pointers, as real code writes it.

* set 0 starts from the program's data and nvcc's code must reproduce the program's output
  (the golden test); a snapshot that does not match is refused with the reason;
* the index arrays (row pointers, column indices) keep the program's data in every set, the
  values vary, so random indices never send the kernel outside its buffers.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import ptx_ir
from superopt.judge.backends.base import get_backend
from superopt.judge.check import check
from superopt.judge.inputs import make_input_set
from superopt.specs.capture.format import aggregate
from superopt.specs.capture.specs import captured_specs

DATA = Path(__file__).with_name("data")
SPMV = "_Z4spmv3CsrPKfPf"
ROWS = 200


@pytest.fixture(scope="module")
def ptx():
    return (DATA / "k.ptx").read_text()


def _matrix(rng):
    counts = rng.integers(0, 9, ROWS)
    row_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    nnz = int(row_ptr[-1])
    col = rng.integers(0, 150, nnz).astype(np.int32)
    val = rng.standard_normal(nnz).astype(np.float32)
    x = rng.standard_normal(150).astype(np.float32)
    return row_ptr, col, val, x


def _capture(tmp_path, ptx, *, tamper=False):
    """A capture of one spmv launch with --data snapshots, the 'after' files made by running
    nvcc's code on the 'before' files (what the program's run would have left)."""
    rng = np.random.default_rng(7)
    row_ptr, col, val, x = _matrix(rng)
    y = np.zeros(ROWS, np.float32)
    bases = {"row_ptr": 0x7f0000000000, "col": 0x7f0001000000, "val": 0x7f0002000000,
             "x": 0x7f0003000000, "y": 0x7f0004000000}
    arrays = {"row_ptr": row_ptr, "col": col, "val": val, "x": x, "y": y}
    raw = struct.pack("<i4x", ROWS) + struct.pack("<QQQ", bases["row_ptr"], bases["col"], bases["val"])
    inner = [[8, bases["row_ptr"], row_ptr.nbytes], [16, bases["col"], col.nbytes], [24, bases["val"], val.nbytes]]
    params = [{"offset": 0, "size": 32, "bytes": raw.hex(), "alloc": None, "inner": inner},
              {"offset": 32, "size": 8, "bytes": struct.pack("<Q", bases["x"]).hex(), "alloc": [bases["x"], x.nbytes]},
              {"offset": 40, "size": 8, "bytes": struct.pack("<Q", bases["y"]).hex(), "alloc": [bases["y"], y.nbytes]}]
    where = {"row_ptr": (0, 8), "col": (0, 16), "val": (0, 24), "x": (1, None), "y": (2, None)}
    before = []
    for name, (pi, at) in where.items():
        f = tmp_path / f"{name}.before.bin"
        arrays[name].tofile(f)
        e = {"param": pi, "bytes": arrays[name].nbytes, "path": str(f)}
        if at is not None:
            e["at"] = at
        before.append(e)
    rec = {"t": "launch", "pid": 1, "corr": 1, "kernel": SPMV, "grid": [1, 1, 1], "block": [256, 1, 1],
           "shared": 0, "params": params, "snapshot": {"prefix": "p", "ok": 1, "before": before}}
    after_rec = {"t": "snapshot_after", "pid": 1, "corr": 1, "ok": 1, "after": []}
    cap = aggregate([rec, after_rec, {"t": "time", "pid": 1, "corr": 1, "kernel": SPMV, "start": 0, "end": 5000}])
    spec = captured_specs(cap, ptx_ir.parse(ptx), SPMV).specs[0]
    # what nvcc's code leaves in the buffers, starting from the program's data
    s0 = make_input_set(spec, 1, 0)
    out = get_backend("emulator").run_many(ptx, spec, [s0])[0]
    assert out.ok, out.error
    after = []
    for name, (pi, at) in where.items():
        f = tmp_path / f"{name}.after.bin"
        a = np.array(out.outputs[spec.buffers[[b.name for b in spec.buffers].index(_spec_name(spec, pi, at))].name])
        if tamper and name == "y":
            a = a.copy()
            a[3] = a[3] + np.float32(1)
        a.tofile(f)
        e = {"param": pi, "bytes": a.nbytes, "path": str(f)}
        if at is not None:
            e["at"] = at
        after.append(e)
    after_rec["after"] = after
    cap = aggregate([rec, after_rec, {"t": "time", "pid": 1, "corr": 1, "kernel": SPMV, "start": 0, "end": 5000}])
    return cap


def _spec_name(spec, pi, at):
    kp = spec.kernel_params[pi]
    return kp.pointers[at] if at is not None else kp.name


def test_index_arrays_keep_the_programs_data(tmp_path, ptx):
    cap = _capture(tmp_path, ptx)
    r = captured_specs(cap, ptx_ir.parse(ptx), SPMV)
    spec = r.specs[0]
    dist = {b.name: b.distribution for b in spec.buffers}
    assert dist == {"p0_8": "snapshot", "p0_16": "snapshot", "p0_24": "auto", "p1": "auto", "p2": "auto"}, dist
    assert spec.random_layout == ()          # the index arrays hold the program's data
    assert set(spec.snapshot["before"]) == set(dist) and set(spec.snapshot["after"]) == set(dist)
    s0, s1 = make_input_set(spec, 3, 0), make_input_set(spec, 3, 1)
    assert all(d == "program data" for d in s0.distributions.values())
    assert s1.distributions["p0_8"] == "program data" and s1.distributions["p0_24"] != "program data"
    assert np.array_equal(s1.data["p0_16"], np.fromfile(tmp_path / "col.before.bin", np.int32))
    assert not np.array_equal(s1.data["p0_24"], s0.data["p0_24"])


def test_golden_output_is_checked_and_a_rewrite_judged(tmp_path, ptx):
    spec = captured_specs(_capture(tmp_path, ptx), ptx_ir.parse(ptx), SPMV).specs[0]
    v = check(ptx, ptx, spec, backend="emulator", sets=3)
    assert v.status == "accepted", v.summary()
    assert v.evidence["golden"]["buffers"] == sorted(b.name for b in spec.buffers)
    # a wrong rewrite: one multiply-add rounded toward zero
    at = ptx.index(f".entry {SPMV}")
    body = ptx[at:]
    assert "fma.rn.f32" in body
    bad = ptx[:at] + body.replace("fma.rn.f32", "fma.rz.f32", 1)
    w = check(ptx, bad, spec, backend="emulator", sets=3)
    assert w.status == "rejected", w.summary()


def test_a_snapshot_nvccs_code_does_not_reproduce_is_refused(tmp_path, ptx):
    spec = captured_specs(_capture(tmp_path, ptx, tamper=True), ptx_ir.parse(ptx), SPMV).specs[0]
    v = check(ptx, ptx, spec, backend="emulator", sets=2)
    assert v.status == "could_not_judge"
    assert "does not reproduce the program's own output" in v.reason and "'p2' element 3" in v.reason, v.reason


def test_without_data_the_index_arrays_are_named(tmp_path, ptx):
    cap = _capture(tmp_path, ptx)
    for s in cap["kernels"][SPMV]["shapes"]:
        s["snapshot"] = None
    r = captured_specs(cap, ptx_ir.parse(ptx), SPMV)
    assert r.specs and r.specs[0].snapshot is None
    assert any("p0_8, p0_16" in n and "--data" in n for n in r.notes), r.notes
    # the search asks whether nvcc's code can be judged on them before it searches
    assert r.specs[0].random_layout == ("p0_8", "p0_16")
    assert "random_layout" not in r.specs[0].to_dict()       # not part of the spec's key
