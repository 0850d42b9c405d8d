"""The model path end to end through the real driver (issue 12): a fake OpenAI-compatible
server on 127.0.0.1 answers chat/completions as vLLM would. A wrong rewrite it sends (saxpy
with ``a`` hard-coded, one instruction cheaper, so the static estimate would pick it) must not
reach the output PTX; a correct rewrite it sends is accepted by the emulator and applied.

The server lives in a thread of this test for at most SERVER_LIFETIME_S; the driver runs under
NVCC_PLUS_TIMEOUT and a subprocess timeout, so nothing here can hang."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import ptx_ir
from tests.driver.helpers import NVCC_PLUS, base_env, needs_nvcc, nvcc, plus_lines

CHEATS = Path(__file__).resolve().parents[1] / "judge" / "cheats"
SAXPY = "_Z5saxpyifPKfPf"
SERVER_LIFETIME_S = 120.0
MODEL = "fake-vllm-model"


class FakeVLLM:
    """``/v1/models`` and ``/v1/chat/completions`` as vLLM answers them. Rewrite-mode requests
    (``structured_outputs.grammar``) get ``rewrites`` (one choice each, up to ``n``), plan-mode
    requests (``structured_outputs.json``) an empty plan. Requests are kept in ``bodies``."""

    def __init__(self, rewrites: list[str]):
        self.rewrites = rewrites
        self.bodies: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code: int, doc: dict) -> None:
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    return self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                fake.bodies.append(body)
                so = body.get("structured_outputs") or {}
                if body.get("model") != MODEL or [k for k in body if k.startswith("guided_")]:
                    return self._send(400, {"error": {"message": "bad request"}})
                texts = fake.rewrites[: body.get("n", 1)] if "grammar" in so else ['{"steps": []}']
                self._send(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "model": MODEL,
                    "choices": [{"index": i, "message": {"role": "assistant", "content": t},
                                 "finish_reason": "stop"} for i, t in enumerate(texts)],
                    "usage": {"completion_tokens": 100 * len(texts)}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()
        # A bounded lifetime even if the test itself hangs: the server shuts itself down.
        self.killer = threading.Timer(SERVER_LIFETIME_S, self.server.shutdown)
        self.killer.daemon = True
        self.killer.start()
        return self

    def __exit__(self, *exc):
        self.killer.cancel()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive()


def _function(ptx: str) -> str:
    return ptx_ir.printer.emit_function(ptx_ir.parse(ptx).function(SAXPY))


def wrong_rewrite(fn_text: str) -> str:
    """``a`` hard-coded to 2.0: its ld.param is gone and the fma takes the immediate."""
    m = re.search(rf"\n\s*ld\.param\.f32\s+(%f\d+), \[{SAXPY}_param_1\];", fn_text)
    assert m, fn_text
    reg = m.group(1)
    out = fn_text.replace(m.group(0), "")
    fma = re.search(rf"fma\.rn\.f32\s+%f\d+, [^;]*{re.escape(reg)}\b[^;]*;", out)
    assert fma, out
    return out.replace(fma.group(0), re.sub(rf"{re.escape(reg)}\b", "0f40000000", fma.group(0)))


def correct_rewrite(fn_text: str) -> str:
    """``mul.wide`` + ``add`` folded into ``mad.wide`` (same 64-bit result, one instruction less)."""
    m = re.search(r"\n\s*mul\.wide\.s32\s+(%rd\d+), (%r\d+), 4;", fn_text)
    assert m, fn_text
    prod, idx = m.group(1), m.group(2)
    out = fn_text.replace(m.group(0), "")
    adds = re.findall(rf"add\.s64\s+(%rd\d+), (%rd\d+), {re.escape(prod)};", out)
    assert len(adds) == 2, out
    out = re.sub(rf"add\.s64(\s+)(%rd\d+), (%rd\d+), {re.escape(prod)};",
                 rf"mad.wide.s32\1\2, {idx}, 4, \3;", out)
    return out


def _run_driver(tmp_path: Path, server: FakeVLLM, samples: int) -> tuple[subprocess.CompletedProcess, dict]:
    reports = tmp_path / "reports"
    env = base_env(NVCC_PLUS_NO_GPU="estimate", NVCC_PLUS_BACKEND="emulator", NVCC_PLUS_LLM_URL=server.url,
                   NVCC_PLUS_LLM_MODES="rewrite", NVCC_PLUS_LLM_ROUNDS="1", NVCC_PLUS_LLM_SAMPLES=str(samples),
                   NVCC_PLUS_LLM_TIMEOUT="20", NVCC_PLUS_LLM_BUDGET="60", NVCC_PLUS_TIMEOUT="100",
                   NVCC_PLUS_PASSES="nounroll",          # a rule pass that cannot fire on saxpy
                   NVCC_PLUS_CACHE_DIR=str(tmp_path / "cache"), NVCC_PLUS_REPORT_DIR=str(reports),
                   NVCC_PLUS_DATASET_DIR=str(tmp_path / "dataset"))
    t0 = time.monotonic()
    proc = subprocess.run([*NVCC_PLUS, "-arch=sm_90", "-ptx", "saxpy.cu", "-o", "out.ptx"], cwd=tmp_path,
                          env=env, capture_output=True, timeout=110)
    assert time.monotonic() - t0 < 110
    (record_file,) = reports.glob("*.json")
    (kernel,) = json.loads(record_file.read_text())["kernels"]
    return proc, kernel


def _model_entries(kernel: dict) -> list[dict]:
    return [c for c in kernel["candidates"] if (c.get("provenance") or {}).get("proposer") == "model"]


@pytest.fixture
def project(tmp_path):
    (tmp_path / ".git").mkdir()
    shutil.copy(CHEATS / "saxpy.cu", tmp_path / "saxpy.cu")
    nvcc(["-arch=sm_90", "-ptx", "saxpy.cu", "-o", "ref.ptx"], tmp_path)
    return tmp_path, (tmp_path / "ref.ptx").read_text()


def test_rewrites_are_what_they_claim():
    fn = _function((CHEATS / "saxpy.ptx").read_text())
    wrong, right = wrong_rewrite(fn), correct_rewrite(fn)
    assert "0f40000000" in wrong and f"[{SAXPY}_param_1]" not in wrong
    assert wrong.count("\n") == fn.count("\n") - 1 == right.count("\n")
    assert right.count("mad.wide.s32") == 2 and "mul.wide" not in right


@needs_nvcc
def test_wrong_model_rewrite_never_reaches_the_output(project):
    tmp_path, ref = project
    with FakeVLLM([wrong_rewrite(_function(ref))]) as server:
        proc, kernel = _run_driver(tmp_path, server, samples=1)
    assert proc.returncode == 0, proc.stderr.decode()
    assert [b for b in server.bodies if "grammar" in b["structured_outputs"]], "the model was never asked"
    out = (tmp_path / "out.ptx").read_text()
    assert out == ref                                     # nvcc's own PTX, byte for byte
    assert "ld.param.f32" in out and "0f40000000" not in out
    (entry,) = _model_entries(kernel)
    assert entry["fate"] == "rejected-check", entry
    assert kernel["status"] == "kept-baseline"
    assert kernel["model"]["summary"]["good"] == 0
    # a rejected candidate is not the user's problem: the module's one summary line only
    assert [ln for ln in plus_lines(proc.stderr) if "searched 1 kernel" not in ln] == []
    assert all("kept nvcc's code" in ln for ln in plus_lines(proc.stderr))


@needs_nvcc
def test_correct_model_rewrite_is_accepted_by_the_emulator(project):
    tmp_path, ref = project
    fn = _function(ref)
    with FakeVLLM([wrong_rewrite(fn), correct_rewrite(fn)]) as server:
        proc, kernel = _run_driver(tmp_path, server, samples=2)
    assert proc.returncode == 0, proc.stderr.decode()
    out = (tmp_path / "out.ptx").read_text()
    assert out != ref and out.count("mad.wide.s32") == 2 and "mul.wide" not in out
    assert "ld.param.f32" in out and "0f40000000" not in out      # the wrong one lost
    fates = sorted(e["fate"] for e in _model_entries(kernel))
    assert fates == ["estimate-winner", "rejected-check"], fates
    assert kernel["status"] == "optimized" and kernel["decision"] == "estimate"
