"""NVCC_PLUS_BUILD_BUDGET: compilations of one build spend from one ledger (nvcc_plus.budget)."""
import os
import time

from nvcc_plus import config as C
from nvcc_plus.budget import Ledger
from tests.driver.helpers import needs_nvcc, opt_env, plus, plus_lines

K_CU = "__global__ void k(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] *= 2.0f; }\n"


def test_ledger_spends_across_compilations(tmp_path):
    path = str(tmp_path / "ledger.json")
    a = Ledger(path, 10.0)
    assert a.start() == 10.0
    time.sleep(0.3)
    b = Ledger(path, 10.0)
    left = b.start()                      # a is still running: its time so far counts
    assert 9.0 < left < 9.8
    a.finish()
    b.finish()
    c = Ledger(path, 10.0)
    assert c.start() < 9.8                # both spent
    c.finish()


def test_ledger_survives_a_corrupt_file(tmp_path):
    path = tmp_path / "ledger.json"
    path.write_text("<<<<<<< not json")
    assert Ledger(str(path), 5.0).start() == 5.0


def test_build_budget_settings(tmp_path):
    assert C.load({}, {"NVCC_PLUS_BUILD_BUDGET": "120"}, cwd=str(tmp_path)).build_budget == 120
    assert C.load({"build-budget": "7"}, {}, cwd=str(tmp_path)).build_budget == 7
    bad = C.load({}, {"NVCC_PLUS_BUILD_BUDGET": "lots"}, cwd=str(tmp_path))
    assert bad.build_budget is None and "NVCC_PLUS_BUILD_BUDGET" in bad.problems[0]


@needs_nvcc
def test_second_compilation_gets_what_the_first_left(tmp_path):
    (tmp_path / "k.cu").write_text(K_CU)
    ledger = tmp_path / "ledger.json"
    env = opt_env("deadline_reporter", NVCC_PLUS_BUILD_BUDGET="3", NVCC_PLUS_TEST_SPEND="3.2",
                  NVCC_PLUS_BUILD_LEDGER=str(ledger))
    first = plus(["-c", "k.cu", "-o", "a.o"], tmp_path, env)
    assert plus_lines(first.stderr) == ["nvcc-plus: k.cu: deadline in 3 s"]
    second = plus(["-c", "k.cu", "-o", "b.o"], tmp_path, {**env, "NVCC_PLUS_TEST_SPEND": "0"})
    lines = plus_lines(second.stderr)
    assert lines[0].startswith("nvcc-plus: k.cu: the build's optimizer budget (3 s")
    assert lines[1] == "nvcc-plus: k.cu: deadline in 0 s"
    assert second.returncode == 0 and (tmp_path / "b.o").exists()
