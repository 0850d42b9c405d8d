"""bench/scale/run.py on the CPU: the generated project, the comparison, and (slow) a whole dry
run on two fake GPUs and a local Dask cluster."""
from __future__ import annotations

import json
import shutil

import pytest

from bench.scale import run as scale


def test_generated_project_has_an_explicit_spec_for_every_kernel(tmp_path):
    from superopt.specs.comments import find_directives, parse_directive
    kernels = scale.generate(tmp_path, files=3, per_file=3, sizes=scale.SIZES["small"], arch="sm_90")
    assert len(kernels) == 9 and len({k for _, k in kernels}) == 9
    assert "k02.o" in (tmp_path / "Makefile").read_text()
    for f, k in kernels:
        found = find_directives((tmp_path / f).read_text())
        assert k in found and parse_directive(found[k][0])["items"]
    bodies = [(tmp_path / f).read_text().replace(f[:3], "") for f in ("k00.cu", "k01.cu")]
    assert bodies[0] != bodies[1]                       # constants differ per file: no shared decisions


def test_summary_ratios_and_decision_comparison():
    one = {"wall_s": 100.0, "kernels_per_s": 0.24,
           "decisions": {"a.cu:k": {"winner": "unroll(factor=2)", "skipped_budget": 0},
                         "b.cu:k": {"winner": None, "skipped_budget": 0}}}
    two = {"wall_s": 55.0, "kernels_per_s": 0.44,
           "decisions": {"a.cu:k": {"winner": "unroll(factor=2)", "skipped_budget": 0},
                         "b.cu:k": {"winner": "cache-hints(mode=nc)", "skipped_budget": 3}}}
    res = {"phases": {"1gpu": one, "2gpu": two, "cluster": dict(one, wall_s=60.0, kernels_per_s=0.4)}}
    scale.summarize(res)
    assert res["throughput_ratio_2gpu_vs_1gpu"] == pytest.approx(1.833, abs=1e-3)
    assert res["wall_ratio_2gpu_vs_1gpu"] == pytest.approx(1.818, abs=1e-3)
    assert res["goal"]["met"] is True
    assert res["decisions_equal"] is False
    diffs = res["decision_comparisons"]["2gpu_vs_1gpu"]["differences"]
    assert diffs == ["b.cu:k: None vs cache-hints(mode=nc) (budget-bound search in the second: candidates left untried)"]
    assert res["decision_comparisons"]["cluster_vs_1gpu"]["equal"] is True


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("make") is None, reason="needs nvcc and make")
def test_dry_run_end_to_end(tmp_path):
    pytest.importorskip("distributed")
    out = tmp_path / "scale.json"
    rc = scale.main(["--dry-run", "--files", "2", "--kernels-per-file", "1", "--budget", "1", "--jobs", "2",
                     "--out", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["settings"]["dry_run"] is True
    for name in ("1gpu", "2gpu", "cluster"):
        p = res["phases"][name]
        assert p["rc"] == 0 and p["searched"] == 2, p
    assert len(res["phases"]["2gpu"]["devices_used"]) >= 1
    assert res["phases"]["cluster"]["workers_used"]
