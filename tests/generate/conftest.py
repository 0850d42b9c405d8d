"""Fixtures of the `superopt generate` tests: no configured model leaks in, and verified
generations go to the test's own dataset folder."""
import pytest


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    for var in ("NVCC_PLUS_LLM_URL", "NVCC_PLUS_LLM_LOCAL", "NVCC_PLUS_LLM_MODEL", "NVCC_PLUS_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NVCC_PLUS_DATASET_DIR", str(tmp_path / "dataset"))
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
