"""The bar: `superopt generate --test-model` on a vector-add description with a numpy
reference ends with exit 0 or 1 and a verdict line, never a traceback. The real path: the
offline SmolLM2-135M in process, the PTX grammar with the header pinned, ptxas, the CPU
emulator against the numpy reference. Bounded (one round, one answer, 120 tokens) so it
stays well within a couple of minutes on a CPU; CI runs it (it installs the test model)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.generate.helpers import SIGNATURE, write_reference
from tests.model.helpers import need_llm

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_generate_with_the_test_model_ends_with_a_verdict(tmp_path):
    need_llm()
    ref = write_reference(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "superopt", "generate", "Add two float vectors: c[i] = a[i] + b[i] for i < n.",
         "--signature", SIGNATURE, "--reference", str(ref), "--test-model", "--backend", "emulator",
         "--rounds", "1", "--samples", "1", "--max-tokens", "120", "--max-statements", "16", "--budget", "300",
         "-o", str(tmp_path / "vadd.ptx")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    elapsed = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    assert proc.returncode in (0, 1), out
    verdict = proc.stdout.strip().splitlines()[-1]
    assert verdict.startswith("ACCEPTED: vadd" if proc.returncode == 0 else "NOT VERIFIED: vadd"), out
    rec = json.loads((tmp_path / "vadd.record.json").read_text())
    assert rec["model"]["backend"] == "local" and len(rec["rounds"]) == 1
    answer = rec["rounds"][0]["responses"][0]
    assert answer["fate"] and answer["tokens"] <= 120
    print(f"\n{verdict} ({elapsed:.0f} s; the answer: {answer['fate']}: {answer.get('reason', '')[:120]})")
