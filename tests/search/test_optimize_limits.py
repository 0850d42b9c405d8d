"""optimize_module with a deadline (NVCC_PLUS_TIMEOUT's soft limit) and with a capture."""
from __future__ import annotations

import struct
import time
from pathlib import Path

from superopt.optimize import optimize_module
from superopt.config.resolved import Settings
from superopt.specs.capture.format import aggregate, write_capture
from tests.capture.test_capture_specs import BIGS, SAXPY, p, ptr, t

K_PTX = (Path(__file__).resolve().parents[1] / "capture" / "data" / "k.ptx").read_text()
EMU = {"backend": "emulator", "no_gpu": "estimate", "budget": 3, "passes": ["cache-hints"]}


def test_past_deadline_searches_nothing_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path))
    t0 = time.monotonic()
    res = optimize_module(K_PTX, settings=Settings.from_config(EMU), deadline=time.time() - 1)
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
    res = optimize_module(K_PTX, settings=Settings.from_config(dict(EMU)), kernels=[SAXPY, BIGS])
    by = {k["kernel"]: k for k in res.records["kernels"]}
    assert by[SAXPY]["spec_origin"] == "captured" and by[SAXPY]["capture_share"] > 0.99
    assert "under 1%" in by[BIGS]["reason"] and by[BIGS]["candidates"] == []


def test_unreadable_capture_is_named_and_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NVCC_PLUS_CAPTURE", str(tmp_path / "nope.json"))
    res = optimize_module(K_PTX, settings=Settings.from_config(EMU), deadline=time.time() - 1)
    assert any("capture not used" in m and "nope.json" in m for m in res.messages)


def test_bad_settings_are_named():
    import pytest

    from superopt.config.resolved import SettingError
    from superopt.search.options import search_options
    for cfg, word in [({"backend": "quantum"}, "backend"), ({"no_gpu": "bogus"}, "no_gpu"),
                      ({"policy": "ulp:abc"}, "policy"), ({"budget": "nan"}, "budget"),
                      ({"budget": "soon"}, "budget")]:
        with pytest.raises(SettingError, match=word):
            search_options(Settings(cfg))


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


class _Stop(BaseException):
    """Stands for the driver's hard-timeout alarm (a BaseException raised mid-search)."""


def test_a_hard_stop_mid_search_carries_the_kernels_decided_before_it(tmp_path, monkeypatch):
    import superopt.model.proposer as proposer
    import superopt.optimize as opt
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path))
    real = proposer.search_with_model
    calls = []

    def stop_on_second(module, kernel, *a, **kw):
        calls.append(kernel)
        if len(calls) == 2:
            raise _Stop("alarm")
        return real(module, kernel, *a, **kw)

    monkeypatch.setattr(proposer, "search_with_model", stop_on_second)
    try:
        opt.optimize_module(K_PTX, settings=Settings.from_config(EMU))
    except _Stop as exc:
        partial = exc.partial
    else:
        raise AssertionError("the stop was swallowed")
    ks = partial.records["kernels"]
    assert len(ks) == K_PTX.count(".entry ")
    first, second = ks[0], ks[1]
    assert first["kernel"] == calls[0] and "interrupted" not in first.get("reason", "")
    assert second["kernel"] == calls[1] and second["reason"].startswith("interrupted while being searched")
    assert all(k["reason"].startswith("not searched") for k in ks[2:])
    assert any(m.startswith(f"interrupted in {calls[1]}") for m in partial.messages)


def test_the_driver_uses_a_partial_result_on_its_hard_timeout(tmp_path):
    from types import SimpleNamespace

    from nvcc_plus.swap import swap_file
    ptx = tmp_path / "k.ptx"
    ptx.write_text(K_PTX)

    def slow(text, **kw):
        try:
            time.sleep(5)
        except BaseException as exc:
            exc.outcome = SimpleNamespace(ptx=text.replace("// Generated", "// Decided before the stop", 1),
                                          messages=["interrupted in k (OptimizerTimeout); ..."], records=[],
                                          record_paths=[])
            raise

    t0 = time.monotonic()
    res = swap_file(str(ptx), optimizer=slow, mode="optimize", source=None, target="compute_90", config={},
                    timeout=0.3)
    assert time.monotonic() - t0 < 3
    assert res.error is None and res.changed
    assert "Decided before the stop" in ptx.read_text()
    assert res.messages[0].startswith("optimizer timed out after 0.3 s; the kernels decided before it are used")
    assert not any(m.startswith("interrupted in") for m in res.messages)
