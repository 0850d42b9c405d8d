"""Records for the report tests: the committed benchmark records, and small ones made from them."""
from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
BENCH_RECORDS = sorted(RESULTS.glob("*.records.json"))
ARCHIVES = sorted((RESULTS / "programs-records").glob("*.tgz"))


@lru_cache(maxsize=None)
def _bench(path: Path) -> dict:
    return json.loads(path.read_text())


# The benchmark run whose winners were timed twice (search and confirmation) on an H200.
BASE = RESULTS / "2026-11-29-h200.records.json"


def kernel(name: str) -> dict:
    """A copy of kernel ``name`` of :data:`BASE`."""
    return copy.deepcopy(next(k for k in _bench(BASE)["kernels"] if k["kernel"] == name))


def module(kernels: list[dict], *, source: str = "app/k.cu", target: str = "sm_90", created: str | None = None) -> dict:
    record = {"schema": "nvcc-plus/record", "schema_version": 1, "source": source, "target": target,
              "mode": "optimize", "kernels": copy.deepcopy(kernels)}
    for k in record["kernels"]:
        k["target"] = target
    if created:
        record["created"] = created
    return record


def with_speedup(k: dict, speedup: float) -> dict:
    """``k`` (an optimized kernel) with its winner's speedup set to ``speedup``."""
    k = copy.deepcopy(k)
    for c in k["candidates"]:
        if c.get("fate") == "winner":
            c["speedup"] = speedup
    return k


def write(path: Path, record: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def kept_speedups(record: dict) -> list[float]:
    return [c["speedup"] for k in record["kernels"] if k["status"] == "optimized"
            for c in k["candidates"] if c.get("fate") == "winner"]
