"""Never slower in the program, on a GPU: the naive bias gradient of bench/programs/biasgrad,
which the program launches at six block sizes chosen at run time, searched without a capture.
Whatever the search keeps must not be slower at any of those blocks; every block is in the
record."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import ptx_ir

pytestmark = pytest.mark.gpu

CU = Path(__file__).resolve().parents[2] / "bench" / "programs" / "biasgrad" / "biasgrad.cu"


def test_the_bias_gradient_keeps_nothing_slower_at_a_block_the_program_uses(tmp_path):
    from superopt.judge import BackendJudge
    from superopt.search.choices import search_choices
    from superopt.search.options import SearchOptions
    from superopt.specs.sources import explicit_or_inferred
    nvcc = shutil.which("nvcc")
    assert nvcc, "nvcc is needed to make the PTX"
    ptx = tmp_path / "biasgrad.ptx"
    subprocess.run([nvcc, "-ptx", "-O3", "-arch=sm_90", str(CU), "-o", str(ptx)], check=True)
    module = ptx_ir.parse(ptx.read_text())
    kernel = module.kernels[0].name
    choice, why = explicit_or_inferred(module, kernel, source=str(CU), settings=None)
    assert choice is not None, why
    assert [b[0] for b in choice.launches.source_blocks] == [32, 64, 128, 256, 512, 1024]
    judge = BackendJudge("gpu", "exact", 4, 60)
    kr, winner, _, _ = search_choices(module, kernel, [choice], options=SearchOptions(budget_s=30, sanitize=()),
                                      deadline=None, share=None, judge=judge, target="sm_90")
    judged = [c for c in kr["candidates"] if c.get("launch_shapes_timed")]
    if not judged:
        pytest.skip(f"no candidate was faster at the timed shape ({kr['reason']}): nothing to judge elsewhere")
    for c in judged:
        rows = c["launch_shapes_timed"]
        blocks = {r["block"][0] for r in rows}
        assert {32, 64, 128, 256, 512, 1024} <= blocks, (c["id"], sorted(blocks))
        if c["fate"] == "winner":
            assert not any(r.get("slower") for r in rows), rows
        else:
            assert c["fate"] in ("slower-elsewhere", "not-timed", "rejected-check", "not-judged"), c["fate"]
    assert (winner is None) == (kr["status"] != "optimized")
    print(kr["reason"])
    for r in judged[-1]["launch_shapes_timed"]:
        print(r["block"][0], r["origin"], r.get("speedup"), r.get("slower"), r.get("skipped") or r.get("note"))
