"""Shared pytest setup: the `gpu` marker skips cleanly on machines without a usable GPU."""
from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def gpu_available() -> tuple[bool, str]:
    try:
        from cuda.bindings import driver
    except Exception as exc:  # cuda-python missing
        return False, f"cuda-python is not importable ({exc})"
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False, f"cuInit failed: {err.name}"
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count == 0:
            return False, "no CUDA device"
    except Exception as exc:
        return False, f"CUDA driver unusable ({exc})"
    return True, ""


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    ok, why = gpu_available()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {why}")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(scope="module")
def gpu():
    """The judge's GPU backend, one per test module (skips where none is usable)."""
    from superopt.judge.backends.gpu import GpuBackend
    b = GpuBackend()
    ok, why = b.available()
    if not ok:
        pytest.skip(why)
    yield b
    b.close()
