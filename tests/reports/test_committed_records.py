"""Every committed records file validates against reports/schema.json, archives included."""
from __future__ import annotations

import pytest

from reports.load import load_record_files
from tests.reports.records import ARCHIVES, BENCH_RECORDS


@pytest.mark.parametrize("path", BENCH_RECORDS + ARCHIVES, ids=lambda p: p.name)
def test_committed_records_validate(path):
    loaded = load_record_files([path])
    assert loaded and all(r.record["kernels"] for r in loaded)
    if path in ARCHIVES:
        assert all(r.origin.startswith(f"{path}:") for r in loaded)


def test_captured_kernels_carry_their_share_of_gpu_time():
    shares = [k["capture_share"] for r in load_record_files(ARCHIVES) for k in r.record["kernels"]
              if "capture_share" in k]
    assert shares and all(0 <= s <= 1 for s in shares)
