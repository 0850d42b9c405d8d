"""The GPU's peak copy bandwidth is measured once per GPU and driver, not once per compilation."""
from __future__ import annotations

import os

import pytest

from superopt.judge import peak_cache
from superopt.judge.backends.gpu import GpuBackend

UUID = "GPU-12345678-aaaa-bbbb-cccc-0123456789ab"


@pytest.fixture(autouse=True)
def cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_kept_then_read_back_until_stale():
    assert peak_cache.read(UUID, 13000) is None
    peak_cache.write(UUID, 13000, {"bytes_per_s": 7.9e12, "copy_bytes": 1 << 30})
    got = peak_cache.read(UUID, 13000)
    assert got["bytes_per_s"] == 7.9e12 and got["from"] == "kept"
    assert peak_cache.read(UUID, 13010) is None                    # another driver: measured again
    assert peak_cache.read("GPU-other", 13000) is None
    later = got["measured_at"] + peak_cache.MAX_AGE_S + 1
    assert peak_cache.read(UUID, 13000, now=later) is None


def test_implausible_or_damaged_files_are_not_believed(cache_folder):
    peak_cache.write(UUID, 1, {"bytes_per_s": 5.0})                   # 5 B/s: no GPU copies that slowly
    assert peak_cache.read(UUID, 1) is None
    path = peak_cache._path(UUID, 2)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("{not json")
    assert peak_cache.read(UUID, 2) is None
    os.unlink(path)
    os.symlink(str(cache_folder / "elsewhere.json"), path)          # a planted link is not followed
    (cache_folder / "elsewhere.json").write_text('{"bytes_per_s": 1e12, "measured_at": 1e12}')
    assert peak_cache.read(UUID, 2) is None


class _NoWorker(GpuBackend):
    """A GPU backend whose worker is never started: records what it would have asked."""

    def __init__(self):
        super().__init__(device=0)
        self._info = {"uuid": UUID, "driver_version": 13000}
        self.asked = []

    def _ensure(self):
        pass

    def _request(self, msg, timeout, step=None):
        self.asked.append((msg["op"], step))
        return {"bytes_per_s": 8.1e12, "copy_bytes": 1 << 30, "best_ms": 0.26}

    def close(self, wait=5.0):
        pass


def test_backend_measures_once_then_reads_the_kept_value():
    first = _NoWorker()
    assert first.peak_bandwidth()["bytes_per_s"] == 8.1e12
    assert first.asked == [("peak", "time")]                        # measured, holding the GPU alone
    second = _NoWorker()                                            # the next compilation's worker
    got = second.peak_bandwidth()
    assert got["bytes_per_s"] == 8.1e12 and got["from"] == "kept"
    assert second.asked == []
