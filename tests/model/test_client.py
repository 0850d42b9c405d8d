"""The vLLM client against an OpenAI-compatible server of our own (stdlib http.server):
structured_outputs fields (never guided_*), n, seed, finish_reason, errors; the CLI."""
from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

import ptx_ir
from superopt.cli import main
from superopt.model.base import Constraint, ModelConfig, ModelError, make_backend
from superopt.model.client import ServerBackend, api_base
from superopt.model.proposer import ModelProposer, ProposerOptions, search_with_model
from superopt.search.options import SearchOptions
from tests.model.helpers import VADD, VADD_GOOD, FakeJudge, OpenAIStandIn, PlantedModel, vadd_spec


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_api_base_forms():
    for url in ("http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/",
                "http://h:8000/v1/chat/completions"):
        assert api_base(url) == "http://h:8000/v1"


def test_request_body_uses_structured_outputs_only():
    be = ServerBackend("http://127.0.0.1:1", model="m")
    body = be.request_body([{"role": "user", "content": "x"}], constraint=Constraint("json", {"type": "object"}),
                           n=3, max_tokens=99, temperature=0.5, seed=7)
    assert body["structured_outputs"] == {"json": {"type": "object"}}
    assert body["n"] == 3 and body["seed"] == 7 and body["max_tokens"] == 99 and body["temperature"] == 0.5
    assert not [k for k in body if k.startswith("guided")]
    body = be.request_body([], constraint=Constraint("grammar", "root ::= \"a\""))
    assert body["structured_outputs"] == {"grammar": "root ::= \"a\""}


def test_config_from_environment(monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_LLM_URL", "http://gpu-box:8000")
    monkeypatch.setenv("NVCC_PLUS_LLM_MODEL", "qwen")
    monkeypatch.setenv("NVCC_PLUS_LLM_API_KEY", "secret")
    monkeypatch.setenv("NVCC_PLUS_LLM_SAMPLES", "8")
    monkeypatch.setenv("NVCC_PLUS_LLM_MODES", "rewrite")
    cfg = ModelConfig.from_env()
    assert cfg.enabled and cfg.samples == 8 and cfg.modes == ("rewrite",)
    assert cfg.describe()["api_key"] == "set"
    be = make_backend(cfg)
    assert isinstance(be, ServerBackend) and be.base == "http://gpu-box:8000/v1" and be.model == "qwen"
    monkeypatch.setenv("NVCC_PLUS_LLM_MODES", "plan,poem")
    with pytest.raises(ModelError, match="poem"):
        ModelConfig.from_env()
    for var in ("NVCC_PLUS_LLM_URL", "NVCC_PLUS_LLM_MODES"):
        monkeypatch.delenv(var)
    assert make_backend(ModelConfig.from_env()) is None


def test_client_against_a_server(test_passes):
    model = PlantedModel({"rewrite": [[VADD_GOOD, (VADD_GOOD[:100], "length")]]})
    with OpenAIStandIn(model) as server:
        be = ServerBackend(server.url, api_key="k")
        assert be.models() == ["stand-in-model"] and be.model == "stand-in-model"
        answers = be.complete([{"role": "user", "content": "go"}], constraint=Constraint("grammar", "root ::= \"x\""),
                              n=2, max_tokens=50, seed=3)
        assert [a.finish_reason for a in answers] == ["stop", "length"]
        assert answers[0].text == VADD_GOOD
        body = server.bodies[-1]
        assert body["structured_outputs"] == {"grammar": "root ::= \"x\""} and body["n"] == 2 and body["seed"] == 3
        # the stand-in refuses guided_* like a client bug would deserve; ours never sends it
        with pytest.raises(ModelError, match="refusing to send removed vLLM fields"):
            be._request("POST", "/chat/completions", {"guided_json": {}})
        with pytest.raises(ModelError, match="HTTP 404.*not found"):
            ServerBackend(server.url, model="other").complete([], constraint=Constraint("json", {}))


def test_server_path_end_to_end_with_a_planted_model(test_passes):
    """search_with_model through HTTP: the good rewrite comes back over the wire and is kept."""
    model = PlantedModel({"plan": [['{"steps":[{"pass":"test-nc-loads","params":{"which":"all"}}]}']],
                          "rewrite": [[VADD_GOOD]]})
    with OpenAIStandIn(model) as server:
        proposer = ModelProposer(ServerBackend(server.url), ProposerOptions(rounds=1, samples=1, stop_when_found=False),
                                 passes=test_passes)
        result = search_with_model(ptx_ir.parse(VADD), "vadd", [vadd_spec()], target="sm_90",
                                   options=SearchOptions(passes=["test-never-fires"]), judge=FakeJudge(),
                                   proposer=proposer)
    assert [b.get("structured_outputs", {}).keys() for b in server.bodies] == [{"json"}, {"grammar"}]
    rs = [r for rd in result.record["model"]["rounds"] for r in rd["responses"]]
    # the rewrite also drops a dead mov, which ptxas drops anyway: the same machine code
    assert [r["fate"] for r in rs] == ["faster", "same-code"]
    assert result.winner is not None and result.record["model"]["backend"]["backend"] == "server"


def test_unreachable_server_is_a_clear_error():
    be = ServerBackend(f"http://127.0.0.1:{_free_port()}", model="m", timeout=5)
    with pytest.raises(ModelError, match="cannot reach the model server"):
        be.complete([], constraint=Constraint("json", {}))


def test_model_check_cli_fails_clearly(monkeypatch):
    for var in ("NVCC_PLUS_LLM_URL", "NVCC_PLUS_LLM_LOCAL"):
        monkeypatch.delenv(var, raising=False)
    res = CliRunner().invoke(main, ["model", "check"])
    assert res.exit_code == 1 and "no model configured" in res.output
    res = CliRunner().invoke(main, ["model", "check", "--url", f"http://127.0.0.1:{_free_port()}"])
    assert res.exit_code == 1 and "cannot reach the model server" in res.output


def test_model_check_cli_against_a_server_that_ignores_structured_outputs():
    chatty = PlantedModel({"plan": [["Sure! Here is a plan: unroll everything."]],
                           "rewrite": [["I would vectorize the loads."]]})
    with OpenAIStandIn(chatty) as server:
        res = CliRunner().invoke(main, ["model", "check", "--url", server.url])
    assert res.exit_code == 1
    assert "does not parse" in res.output and "does not seem to honour structured_outputs" in res.output


def test_model_check_cli_passes_against_a_good_server():
    class Good(PlantedModel):
        def complete(self, messages, *, constraint, **kw):
            if constraint.kind == "json":
                first = constraint.spec["properties"]["steps"]["items"]["oneOf"][0]
                name = first["properties"]["pass"]["const"]
                params = {k: v["enum"][0] for k, v in first["properties"]["params"]["properties"].items()}
                self.script = {"plan": [[json.dumps({"steps": [{"pass": name, "params": params}]})]]}
            else:
                from superopt.model.cli import CHECK_KERNEL
                self.script = {"rewrite": [[CHECK_KERNEL[CHECK_KERNEL.index(".visible"):]]]}
            return super().complete(messages, constraint=constraint, **kw)
    with OpenAIStandIn(Good({})) as server:
        res = CliRunner().invoke(main, ["model", "check", "--url", server.url])
    assert res.exit_code == 0, res.output
    assert "model check passed" in res.output


def test_serve_command_line_and_missing_vllm(tmp_path):
    res = CliRunner().invoke(main, ["model", "serve", "--model", str(tmp_path), "--port", "8123", "--dry-run",
                                    "--max-model-len", "4096"])
    assert res.exit_code == 0, res.output
    line = res.output.strip()
    assert "-m vllm.entrypoints.openai.api_server" in line and "--port 8123" in line
    assert '{\\"backend\\": \\"xgrammar\\", \\"disable_any_whitespace\\": true}' in line or \
        '"backend": "xgrammar"' in line.replace('\\"', '"')
    assert line.endswith("--max-model-len 4096")
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\nexit 1\n")
    fake_python.chmod(0o755)
    res = CliRunner().invoke(main, ["model", "serve", "--model", str(tmp_path), "--python", str(fake_python)])
    assert res.exit_code != 0 and "vllm is not installed" in res.output
