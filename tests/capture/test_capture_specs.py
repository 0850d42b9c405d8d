"""Captured launches -> LaunchSpecs (origin "captured") on a small PTX module (no GPU)."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

import ptx_ir
from superopt.specs.capture.format import aggregate
from superopt.specs.capture.specs import (CaptureSpecError, captured_specs, read_only_params,
                                          specs_from_capture)
from superopt.specs.launch_spec import Buffer, Bytes, LaunchSpec, Scalar

DATA = Path(__file__).with_name("data")
SAXPY, SCALE2, BIGS = "_Z5saxpyifPKfPf", "_Z6scale22P2dyPfi", "_Z4bigs3BigPf"


@pytest.fixture(scope="module")
def module():
    return ptx_ir.parse((DATA / "k.ptx").read_text())


def p(off, size, raw: bytes, alloc=None):
    return {"offset": off, "size": size, "bytes": raw.hex(), "alloc": alloc}


def ptr(off, value, base, extent):
    return p(off, 8, struct.pack("<Q", value), [base, extent])


def saxpy_launch(corr, n, a, grid, xoff=0):
    xb, yb = 0x7f0000000000, 0x7f0010000000
    return {"t": "launch", "pid": 1, "corr": corr, "kernel": SAXPY, "grid": [grid, 1, 1], "block": [256, 1, 1],
            "shared": 0, "params": [p(0, 4, struct.pack("<i", n)), p(4, 4, struct.pack("<f", a)),
                                    ptr(8, xb + xoff, xb, 4 * n + xoff), ptr(16, yb, yb, 4 * n + 2)]}


def t(corr, kernel, ms):
    return {"t": "time", "pid": 1, "corr": corr, "kernel": kernel, "start": 0, "end": int(ms * 1e6)}


@pytest.fixture(scope="module")
def capture():
    recs = [saxpy_launch(1, 1 << 22, 2.5, 16384), t(1, SAXPY, 5.0),
            saxpy_launch(2, 1 << 22, 2.5, 16384), t(2, SAXPY, 5.0),
            saxpy_launch(3, 1000, 2.5, 4, xoff=16), t(3, SAXPY, 0.01),
            saxpy_launch(4, 5000, 2.5, 20), t(4, SAXPY, 0.02)]
    ob = 0x7f0020000000
    recs.append({"t": "launch", "pid": 1, "corr": 5, "kernel": SCALE2, "grid": [2, 3, 1], "block": [128, 2, 1],
                 "shared": 512, "params": [p(0, 8, struct.pack("<fi", 1.5, -7)), p(8, 8, struct.pack("<d", -0.25)),
                                           p(16, 8, struct.pack("<Q", 2 ** 64 - 1)), ptr(24, ob, ob, 1024),
                                           p(32, 4, struct.pack("<i", 256))]})
    recs.append(t(5, SCALE2, 0.05))
    recs.append({"t": "launch", "pid": 1, "corr": 6, "kernel": BIGS, "grid": [1, 1, 1], "block": [32, 1, 1],
                 "shared": 0, "params": [p(0, 16, struct.pack("<4f", 1, 2, 3, 4)), ptr(16, ob, ob, 128)]})
    recs.append(t(6, BIGS, 0.001))
    return aggregate(recs)


def test_saxpy_main_and_small_spec(module, capture):
    specs = specs_from_capture(capture, module, SAXPY)
    assert len(specs) == 2
    main, small = specs
    assert all(isinstance(s, LaunchSpec) and s.origin == "captured" for s in specs)
    assert main.grid == (16384, 1, 1) and main.block == (256, 1, 1) and main.shared_bytes == 0
    n, a, x, y = main.params
    assert isinstance(n, Scalar) and n.type == "s32" and n.value == 1 << 22
    assert isinstance(a, Scalar) and a.type == "f32" and a.value == 2.5
    assert isinstance(x, Buffer) and x.type == "f32" and x.length == 1 << 22
    assert x.direction == "in"                # only loaded, every store is relative to y
    assert y.length == (4 * (1 << 22) + 2) // 4 and y.direction == "inout"
    assert main.resolved().is_resolved and not main.vary_sizes
    # the smaller one: same block, least work (n=1000; x starts 16 bytes into its allocation)
    assert small.grid == (4, 1, 1) and small.params[0].value == 1000 and small.params[2].length == 1000
    assert small.block == main.block


def test_spec_found_by_plain_name(module, capture):
    r = captured_specs(capture, module, "saxpy")
    assert r.kernel == SAXPY and r.specs and r.share > 0.9 and not r.minor


def test_scalars_decoded_by_type_and_small_struct(module, capture):
    r = captured_specs(capture, module, SCALE2)
    (spec,) = r.specs
    s, d, m, out, n = spec.params
    assert spec.grid == (2, 3, 1) and spec.block == (128, 2, 1) and spec.shared_bytes == 512
    assert s.type == "u64" and s.value == int.from_bytes(struct.pack("<fi", 1.5, -7), "little")
    assert d.type == "f64" and d.value == -0.25
    assert m.type == "u64" and m.value == 2 ** 64 - 1
    assert out.type == "f32" and out.length == 256 and out.direction == "inout"
    assert n.value == 256
    assert r.minor is True                    # 0.05 ms of ~10 ms


def test_big_struct_is_given_as_its_bytes(module, capture):
    """A 16-byte struct by value (no pointers) is passed as the program passed it."""
    r = captured_specs(capture, module, BIGS)
    assert r.reason is None and len(r.specs) == 1, r.reason
    b, out = r.specs[0].params
    assert isinstance(b, Bytes) and b.size == 16 and b.raw == struct.pack("<4f", 1, 2, 3, 4) and not b.pointers
    assert isinstance(out, Buffer) and out.length == 32
    again = LaunchSpec.from_dict(r.specs[0].to_dict())
    assert again == r.specs[0]


AXPYS = "_Z6axpy_s4Axpy"


def axpys_capture(n=5000, a=0.5, xoff=32):
    xb, yb = 0x7f0000000000, 0x7f0010000000
    raw = struct.pack("<if", n, a) + struct.pack("<QQ", xb + xoff, yb)
    rec = {"t": "launch", "pid": 1, "corr": 1, "kernel": AXPYS, "grid": [20, 1, 1], "block": [256, 1, 1],
           "shared": 0, "params": [{**p(0, 24, raw), "inner": [[8, xb, 4 * 8192], [16, yb, 4 * 8192]]}]}
    return aggregate([rec, t(1, AXPYS, 0.01)])


def test_struct_with_pointer_fields_gets_embedded_buffers(module):
    cap = axpys_capture()
    shape = cap["kernels"][AXPYS]["shapes"][0]
    assert [q["at"] for q in shape["params"][0]["inner"]] == [8, 16]
    assert shape["params"][0]["inner"][0]["offset"] == 32
    spec = specs_from_capture(cap, module, AXPYS)[0]
    s, x, y = spec.params
    assert isinstance(s, Bytes) and s.pointers == {8: "p0_8", 16: "p0_16"}
    assert struct.unpack("<if", s.raw[:8]) == (5000, 0.5)
    # element types from the kernel's own loads and stores through the fields
    assert (x.type, x.length, x.embedded) == ("f32", 8192 - 8, True)
    assert (y.type, y.length, y.embedded) == ("f32", 8192, True)
    assert spec.kernel_params == [s]
    # the pointer values do not split shapes; other bytes do
    other = axpys_capture(xoff=32)["kernels"][AXPYS]["shapes"][0]["params"][0]
    assert other["inner"] == shape["params"][0]["inner"]


def test_struct_spec_is_judged_on_the_emulator(module):
    """The spec runs: nvcc's code against itself is accepted, a changed constant rejected."""
    from superopt.judge.check import check
    ptx = (DATA / "k.ptx").read_text()
    spec = specs_from_capture(axpys_capture(n=700), module, AXPYS)[0]
    ok = check(ptx, ptx, spec, backend="emulator", sets=2)
    assert ok.status == "accepted", ok.summary()
    bad = ptx.replace("0f3F800000", "0f3F800001")
    assert bad != ptx
    v = check(ptx, bad, spec, backend="emulator", sets=2)
    assert v.status == "rejected" and "p0_16" in v.reason, v.summary()


def test_uncaptured_kernel_gives_no_specs(module):
    cap = aggregate([])
    assert specs_from_capture(cap, module, SAXPY) == []
    r = captured_specs(cap, module, SAXPY)
    assert not r.captured and "never launched" in r.reason and r.share is None


def test_null_pointer_is_not_expressible(module):
    rec = saxpy_launch(1, 10, 1.0, 1)
    rec["params"][3] = p(16, 8, bytes(8))
    with pytest.raises(CaptureSpecError, match="null pointer"):
        specs_from_capture(aggregate([rec]), module, SAXPY)


def test_param_count_mismatch(module):
    rec = saxpy_launch(1, 10, 1.0, 1)
    rec["params"] = rec["params"][:3]
    r = captured_specs(aggregate([rec]), module, SAXPY)
    assert not r.specs and "3 parameters" in r.reason


def test_falls_back_to_next_shape(module):
    bad = saxpy_launch(1, 1 << 20, 1.0, 4096)
    bad["params"][2] = p(8, 8, bytes(8))               # null x in the biggest shape
    good = saxpy_launch(2, 1000, 1.0, 4)
    r = captured_specs(aggregate([bad, t(1, SAXPY, 9.0), good, t(2, SAXPY, 0.1)]), module, SAXPY)
    assert len(r.specs) == 1 and r.specs[0].grid == (4, 1, 1)
    assert any("could not be used" in n for n in r.notes)


def test_read_only_params(module):
    fn = next(k for k in module.kernels if k.name == SAXPY)
    assert read_only_params(fn) == {0, 1, 2}


def test_shapes_with_5_percent_of_the_kernel_time_are_weighted(module):
    """Every captured shape with >= 5% of the kernel's GPU time is timed by the search, weighed
    by its share; every block the program used bounds a .maxntid."""
    from superopt.specs.capture.specs import WEIGHTED_SHARE
    recs = [saxpy_launch(1, 1 << 22, 2.5, 16384), t(1, SAXPY, 6.0),
            saxpy_launch(2, 1 << 20, 2.5, 4096), t(2, SAXPY, 3.0),
            saxpy_launch(3, 1000, 2.5, 4, xoff=16), t(3, SAXPY, 0.01)]
    other = saxpy_launch(4, 1 << 21, 2.5, 2048)
    other["block"] = [1024, 1, 1]
    recs += [other, t(4, SAXPY, 1.0)]
    r = captured_specs(aggregate(recs), module, SAXPY)
    assert [round(share, 3) for _, share in r.weighted] == [0.599, 0.3, 0.1]
    assert all(share >= WEIGHTED_SHARE for _, share in r.weighted)
    assert r.weighted[0][0] is r.specs[0]
    assert [s.block for s, _ in r.weighted] == [(256, 1, 1), (256, 1, 1), (1024, 1, 1)]
    assert r.weighted[2][0].params[0].value == 1 << 21
    assert r.blocks == [(256, 1, 1), (1024, 1, 1)]      # the 1000-element launch (0.1%) too


def test_the_captured_choice_carries_the_program_launches(module, capture):
    from superopt.specs.sources import candidates_in_order
    found = candidates_in_order(module, SAXPY, source=None, settings=None, capture=capture)
    choice = found.choices[0]
    assert choice.origin == "captured" and choice.launches.kind == "captured"
    assert len(choice.launches.weighted) == 1          # the small shapes have < 5% of the time
    assert choice.launches.captured_blocks == ((256, 1, 1),)
