"""optimize_module with a deadline (NVCC_PLUS_TIMEOUT's soft limit) and with a capture."""
from __future__ import annotations

import struct
import time
from pathlib import Path

from superopt.optimize import optimize_module
from superopt.specs.capture.format import aggregate, write_capture
from tests.capture.test_capture_specs import BIGS, SAXPY, p, ptr, t

K_PTX = (Path(__file__).resolve().parents[1] / "capture" / "data" / "k.ptx").read_text()
EMU = {"backend": "emulator", "no_gpu": "estimate", "budget": 3, "passes": ["cache_hints"]}


def test_past_deadline_searches_nothing_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path))
    t0 = time.monotonic()
    res = optimize_module(K_PTX, config={**EMU, "deadline": time.time() - 1})
    assert time.monotonic() - t0 < 5
    assert not res.changed
    assert all("time limit" in k["reason"] for k in res.records["kernels"])
    n = K_PTX.count(".entry ")
    assert n >= 3 and len(res.records["kernels"]) == n
    assert any(m.startswith(f"time limit reached: {n} kernel(s) not searched") for m in res.messages)


def _small_capture():
    n, xb, yb = 5000, 0x7f0000000000, 0x7f0010000000
    recs = [{"t": "launch", "pid": 1, "corr": 1, "kernel": SAXPY, "grid": [20, 1, 1], "block": [256, 1, 1],
             "shared": 0, "params": [p(0, 4, struct.pack("<i", n)), p(4, 4, struct.pack("<f", 2.5)),
                                     ptr(8, xb, xb, 4 * n), ptr(16, yb, yb, 4 * n)]}, t(1, SAXPY, 5.0),
            {"t": "launch", "pid": 1, "corr": 2, "kernel": BIGS, "grid": [1, 1, 1], "block": [32, 1, 1],
             "shared": 0, "params": [p(0, 16, struct.pack("<4f", 1, 2, 3, 4)), ptr(16, yb, yb, 128)]},
            t(2, BIGS, 0.001)]
    return aggregate(recs)


def test_captured_launches_are_used_and_minor_kernels_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    cap = tmp_path / "cap.json"
    write_capture(_small_capture(), cap)
    monkeypatch.setenv("NVCC_PLUS_CAPTURE", str(cap))
    res = optimize_module(K_PTX, config=dict(EMU), kernels=[SAXPY, BIGS])
    by = {k["kernel"]: k for k in res.records["kernels"]}
    assert by[SAXPY]["spec_origin"] == "captured" and by[SAXPY]["capture_share"] > 0.99
    assert "under 1%" in by[BIGS]["reason"] and by[BIGS]["candidates"] == []


def test_unreadable_capture_is_named_and_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NVCC_PLUS_CAPTURE", str(tmp_path / "nope.json"))
    res = optimize_module(K_PTX, config={**EMU, "deadline": time.time() - 1})
    assert any("capture not used" in m and "nope.json" in m for m in res.messages)


def test_bad_settings_are_named():
    import pytest

    from superopt.optimize import SettingError, options_from_config
    for cfg, word in [({"backend": "quantum"}, "backend"), ({"no_gpu": "bogus"}, "no_gpu"),
                      ({"policy": "ulp:abc"}, "policy"), ({"budget": "nan"}, "budget"),
                      ({"budget": "soon"}, "budget")]:
        with pytest.raises(SettingError, match=word):
            options_from_config(cfg)


def test_corrupt_cache_entries_are_ignored_and_replaced(tmp_path):
    from superopt.store.cache import DecisionCache
    cache = DecisionCache(tmp_path)
    key = "ab" + "0" * 62
    path = cache._path(key)
    path.parent.mkdir(parents=True)
    for bad in (b"\x00\xff binary", b"[1, 2]", b'{"plan": 3}'):
        path.write_bytes(bad)
        assert cache.get(key) is None
    path.unlink()
    path.mkdir()                                   # a folder in its place
    assert cache.get(key) is None
    cache.put(key, {"kernel": "k", "plan": []})
    assert cache.get(key) == {"kernel": "k", "plan": []}


def test_unwritable_report_dir_keeps_the_result(tmp_path, monkeypatch):
    from superopt.api import optimize_ptx
    ro = tmp_path / "ro"
    ro.write_text("a file where a folder should be")
    monkeypatch.setenv("NVCC_PLUS_REPORT_DIR", str(ro / "sub"))
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "c"))
    out = optimize_ptx(K_PTX, mode="optimize", config={**EMU, "deadline": time.time() - 1})
    assert out.ptx == K_PTX and any("records not written" in m for m in out.messages)
