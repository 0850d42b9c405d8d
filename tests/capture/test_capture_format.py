"""Capture files: raw JSON lines -> aggregated capture, validation, shares (no GPU)."""
from __future__ import annotations

import json
import struct

import pytest

from superopt.specs.capture.format import (CaptureError, aggregate, is_minor, kernel_share,
                                           load_capture, minor_kernels, read_raw, write_capture)

K1 = "_Z5saxpyifPKfPf"
K2 = "_Z4tinyPf"


def hx(b: bytes) -> str:
    return b.hex()


def launch(corr, kernel, n, a, xptr, yptr, *, grid=(391, 1, 1), block=(256, 1, 1), pid=10,
           xbase=0x7f0000000000, ybase=0x7f0010000000, ext=400000, snapshot=None):
    r = {"t": "launch", "pid": pid, "corr": corr, "kernel": kernel, "grid": list(grid), "block": list(block),
         "shared": 0, "params": [
             {"offset": 0, "size": 4, "bytes": hx(struct.pack("<i", n)), "alloc": None},
             {"offset": 4, "size": 4, "bytes": hx(struct.pack("<f", a)), "alloc": None},
             {"offset": 8, "size": 8, "bytes": hx(struct.pack("<Q", xptr)), "alloc": [xbase, ext]},
             {"offset": 16, "size": 8, "bytes": hx(struct.pack("<Q", yptr)), "alloc": [ybase, ext]}]}
    if snapshot:
        r["snapshot"] = snapshot
    return r


def time(corr, kernel, ms, pid=10):
    return {"t": "time", "pid": pid, "corr": corr, "kernel": kernel, "start": 1000, "end": 1000 + int(ms * 1e6)}


def raw_records():
    xb, yb = 0x7f0000000000, 0x7f0010000000
    recs = [{"t": "init", "pid": 10, "gpu": "NVIDIA H200", "version": 1}]
    # 3 launches at n=100000, a=2: pointer values differ between launches (new allocations)
    for c, shift in ((1, 0), (2, 0x100000), (3, 0x200000)):
        recs.append(launch(c, K1, 100000, 2.0, xb + shift, yb + shift, xbase=xb + shift, ybase=yb + shift))
        recs.append(time(c, K1, 1.0))
    # a different scalar splits the shape
    recs.append(launch(4, K1, 100000, 3.0, xb, yb))
    recs.append(time(4, K1, 0.5))
    # a pointer at an offset inside its allocation splits the shape too
    recs.append(launch(5, K1, 1000, 2.0, xb + 64, yb, grid=(4, 1, 1)))
    recs.append(time(5, K1, 0.01))
    # a small kernel
    recs.append({"t": "launch", "pid": 10, "corr": 6, "kernel": K2, "grid": [1, 1, 1], "block": [32, 1, 1],
                 "shared": 128, "params": [{"offset": 0, "size": 8, "bytes": hx(struct.pack("<Q", yb)),
                                            "alloc": [yb, 128]}]})
    recs.append(time(6, K2, 0.02))
    # a timed execution with no launch record (a graph replay)
    recs.append(time(99, K2, 0.005))
    recs.append({"t": "error", "pid": 10, "where": "snapshot", "message": "boom"})
    recs.append({"t": "error", "pid": 10, "where": "snapshot", "message": "boom"})
    return recs


def test_aggregate_shapes_split_by_scalars_not_pointers():
    cap = aggregate(raw_records(), program=["./app"], cwd="/x", exit_code=0)
    assert cap["format"] == "nvcc-plus-capture" and cap["version"] == 1
    assert cap["gpu"] == "NVIDIA H200" and cap["program"] == ["./app"]
    k = cap["kernels"][K1]
    assert k["launches"] == 5
    assert k["total_ms"] == pytest.approx(3.51)
    assert [s["count"] for s in k["shapes"]] == [3, 1, 1]           # sorted by time
    top = k["shapes"][0]
    assert top["total_ms"] == pytest.approx(3.0) and top["timed"] == 3
    assert top["grid"] == [391, 1, 1] and top["block"] == [256, 1, 1] and top["shared_bytes"] == 0
    assert top["params"][0]["pointer"] is None
    assert top["params"][2]["pointer"] == {"extent": 400000, "offset": 0, "alias": None}
    assert struct.unpack("<f", bytes.fromhex(k["shapes"][1]["params"][1]["bytes"]))[0] == 3.0
    assert k["shapes"][2]["params"][2]["pointer"]["offset"] == 64
    k2 = cap["kernels"][K2]
    assert k2["launches"] == 1 and k2["untracked"] == {"launches": 1, "ms": pytest.approx(0.005)}
    assert k2["total_ms"] == pytest.approx(0.025) and k2["shapes"][0]["shared_bytes"] == 128
    assert list(cap["kernels"]) == [K1, K2]
    assert cap["errors"] == [{"message": "snapshot: boom", "count": 2}]


def test_aliasing_pointers_are_part_of_the_shape():
    b = 0x7f0000000000
    recs = [launch(1, K1, 10, 1.0, b, b + 40, xbase=b, ybase=b), launch(2, K1, 10, 1.0, b, b + 40)]
    cap = aggregate(recs)
    shapes = cap["kernels"][K1]["shapes"]
    assert len(shapes) == 2
    aliased = [s for s in shapes if s["params"][3]["pointer"]["alias"] == 2]
    assert len(aliased) == 1 and aliased[0]["params"][3]["pointer"]["offset"] == 40


def test_shares_and_minor_kernels():
    cap = aggregate(raw_records())
    share = kernel_share(cap)
    assert sum(share.values()) == pytest.approx(1.0)
    assert share[K2] == pytest.approx(0.025 / 3.535)
    assert minor_kernels(cap) == [K2]
    assert is_minor(cap, K2) is True and is_minor(cap, K1) is False and is_minor(cap, "_Zother") is None


def test_share_without_timing_uses_launches():
    recs = [r for r in raw_records() if r["t"] != "time"]
    share = kernel_share(aggregate(recs))
    assert share[K1] == pytest.approx(5 / 6)


def test_snapshot_paths_join_before_and_after():
    b = 0x7f0000000000
    snap = {"prefix": "abc", "ok": 1, "before": [{"param": 2, "bytes": 400000, "path": "/d/abc-p2.before.bin"}]}
    recs = [launch(1, K1, 10, 1.0, b, b + 0x10000000, snapshot=snap),
            {"t": "snapshot_after", "pid": 10, "corr": 1, "prefix": "abc", "ok": 1,
             "after": [{"param": 2, "bytes": 400000, "path": "/d/abc-p2.after.bin"}]},
            launch(2, K1, 20, 1.0, b, b + 0x10000000, snapshot={"skipped": "9 bytes over the cap of 1"})]
    cap = aggregate(recs)
    by_n = {s["params"][0]["bytes"]: s for s in cap["kernels"][K1]["shapes"]}
    s10 = by_n[hx(struct.pack("<i", 10))]
    assert s10["snapshot"]["ok"] is True
    assert s10["snapshot"]["before"][0]["path"].endswith("before.bin")
    assert s10["snapshot"]["after"][0]["path"].endswith("after.bin")
    assert by_n[hx(struct.pack("<i", 20))]["snapshot"] == {"skipped": "9 bytes over the cap of 1"}


def test_read_raw_tolerates_torn_lines(tmp_path):
    p = tmp_path / "raw.jsonl"
    p.write_text(json.dumps(time(1, K1, 1.0)) + "\n" + '{"t": "launch", "pid"\n\n')
    recs = read_raw(p)
    assert recs[0]["t"] == "time" and recs[1]["t"] == "error" and "raw line 2" in recs[1]["message"]
    assert read_raw(tmp_path / "missing") == []


def test_load_capture_round_trip(tmp_path):
    p = tmp_path / "c.json"
    write_capture(aggregate(raw_records()), p)
    assert load_capture(p)["kernels"][K1]["launches"] == 5


@pytest.mark.parametrize("doc, message", [
    ("not json", "not JSON"),
    ([], "a JSON object expected"),
    ({"format": "other"}, "not an nvcc-plus capture"),
    ({"format": "nvcc-plus-capture", "version": 99, "kernels": {}}, "newer than this nvcc-plus"),
    ({"format": "nvcc-plus-capture", "version": 1}, "'kernels' missing"),
    ({"format": "nvcc-plus-capture", "version": 1, "kernels": {"k": {"launches": 1, "total_ms": 0}}},
     "kernel k: missing 'shapes'"),
    ({"format": "nvcc-plus-capture", "version": 1, "kernels": {"k": {"launches": 1, "total_ms": 0, "shapes": [
        {"grid": [0, 1, 1], "block": [1, 1, 1], "count": 1, "params": []}]}}}, "shape 0: grid [0, 1, 1]"),
    ({"format": "nvcc-plus-capture", "version": 1, "kernels": {"k": {"launches": 1, "total_ms": 0, "shapes": [
        {"grid": [1, 1, 1], "block": [1, 1, 1], "count": 1,
         "params": [{"offset": 0, "size": 4, "bytes": "zz", "pointer": None}]}]}}}, "param 0: bytes"),
])
def test_load_capture_errors(tmp_path, doc, message):
    p = tmp_path / "bad.json"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with pytest.raises(CaptureError) as e:
        load_capture(p)
    assert str(p) in str(e.value) and message in str(e.value)


def test_load_capture_missing_file(tmp_path):
    with pytest.raises(CaptureError, match="no such capture file"):
        load_capture(tmp_path / "nope.json")
