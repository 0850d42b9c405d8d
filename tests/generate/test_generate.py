"""`superopt generate` as a library: signatures, specs, references, and the loop with planted
models judged for real (ptxas and the CPU emulator): a known-good body is accepted and runs
as a callable; a wrong one is rejected and its mismatch reaches the next prompt; one that
never assembles ends not-verified with ptxas's reasons; rounds, samples and the time budget
really stop the loop."""
from __future__ import annotations

import json
import shutil
import time

import numpy as np
import pytest

import ptx_ir
from superopt.generate.judge import ReferenceJudge
from superopt.generate.kernel import GeneratedKernel, KernelLaunchError
from superopt.generate.loop import GenerateOptions, generate
from superopt.model.dataset import row_from_generation_record as row_from_record
from superopt.generate.signature import SignatureError, parse_signature, stub_module_text
from superopt.generate.task import TaskError, build_task
from superopt.judge.ptxas import run_ptxas
from tests.generate.helpers import (SIGNATURE, VADD_FN, VADD_NO_PTXAS, VADD_WRONG, planted, write_reference)


def _task(tmp_path, ref_text=None, **kw):
    ref = write_reference(tmp_path, ref_text) if ref_text else write_reference(tmp_path)
    kw.setdefault("signature", SIGNATURE)
    return build_task("Add two float vectors: c[i] = a[i] + b[i] for i < n.", reference=str(ref), **kw)


def _run(task, model, **opts):
    opts.setdefault("save_dataset", False)
    judge = ReferenceJudge(task.reference, task.stub_ptx, backend="emulator", sets=2)
    return generate(task, model, judge, GenerateOptions(**opts))


# ---------------------------------------------------------------------------------- signature

def test_signature_pins_the_header_nvcc_would_write():
    sig = parse_signature('extern "C" __global__ void saxpy(int n, float a, const float* __restrict__ x, float* y);')
    assert [(p.name, p.pointer, p.elem, p.const) for p in sig.params] == [
        ("n", False, "s32", False), ("a", False, "f32", False), ("x", True, "f32", True), ("y", True, "f32", False)]
    stub = stub_module_text(sig, "sm_90")
    fn = ptx_ir.parse(stub).function("saxpy")
    assert [(p.name, p.type) for p in fn.params] == [
        ("saxpy_param_0", ".u32"), ("saxpy_param_1", ".f32"), ("saxpy_param_2", ".u64"), ("saxpy_param_3", ".u64")]
    assert run_ptxas(stub, "sm_90").ok


@pytest.mark.parametrize("text, says", [
    ("", "empty"),
    ("vadd", "cannot read the signature"),
    ("vadd(float* a, int)", "needs a type and a name"),
    ("vadd(const float* a, int n)", "no parameter is a pointer to non-const memory"),
    ("vadd(widget* a, int n)", "unknown element type 'widget'"),
    ("vadd(float** a, int n)", "pointers to pointers"),
    ("vadd(float& a, int n)", "only pointers and scalars"),
    ("vadd(float* a, float* a)", "used twice"),
    ("vadd(float* a, quux n)", "unknown scalar type"),
])
def test_bad_signatures_say_what_is_wrong(text, says):
    with pytest.raises(SignatureError, match=says):
        parse_signature(text)


# ---------------------------------------------------------------------------------- specs and references

def test_default_spec_is_elementwise_and_said_so(tmp_path):
    t = _task(tmp_path)
    s = t.specs[0]
    assert s.grid[0] == "cdiv(n, 256)" and s.block == (256, 1, 1)
    assert [(b.name, b.direction, b.length_expr) for b in s.buffers] == [("a", "in", "n"), ("b", "in", "n"),
                                                                        ("c", "out", "n")]
    assert any("assumed an elementwise launch" in n for n in t.notes)


def test_inline_and_file_specs(tmp_path):
    t = _task(tmp_path, spec="grid=cdiv(n,64) block=64 a:f32[n] in b:f32[n] in c:f32[n] out n=777")
    assert t.specs[0].block == (64, 1, 1) and t.specs[0].param("n").value == 777 and not t.notes
    f = tmp_path / "spec.toml"
    f.write_text('kernel = "whatever"\ngrid = ["cdiv(n, 32)", 1, 1]\nblock = [32, 1, 1]\n'
                 '[[params]]\nname = "a"\nkind = "buffer"\ntype = "f32"\nlength = "n"\n'
                 '[[params]]\nname = "b"\nkind = "buffer"\ntype = "f32"\nlength = "n"\n'
                 '[[params]]\nname = "c"\nkind = "buffer"\ntype = "f32"\nlength = "n"\ndirection = "out"\n'
                 '[[params]]\nname = "n"\nkind = "scalar"\ntype = "s32"\nvalue = 100\n')
    t = _task(tmp_path, spec=str(f))
    assert t.specs[0].kernel == "vadd" and t.specs[0].block == (32, 1, 1)


@pytest.mark.parametrize("kw, ref, says", [
    ({"spec": "grid=1 block=32 x:f32[n] in b:f32[n] in c:f32[n] out n=10"}, None, "named 'x' where the signature has 'a'"),
    ({"spec": "grid=1 block=32 a:f32[n] in b:f32[n] in n=10"}, None, "does not give parameter|3 parameters"),
    ({"signature": "vadd(const float* a, const float* b, float* c, int n, int m)"}, None, "integer scalars"),
    ({}, "def reference(a, b, c):\n    c[:] = a + b\n", "does not take n"),
    ({}, "def helper(x):\n    return x\ndef other(y):\n    return y\n", "no function named 'reference'"),
    ({}, "import nonexistent_module_xyz\n", "importing it raised ModuleNotFoundError"),
    ({}, "def reference(a, b, c, n)\n    pass\n", "line 1"),
    ({"signature": None}, None, "--signature is required"),
    ({"target": "gfx90a"}, None, "unknown target"),
])
def test_bad_inputs_are_task_errors(tmp_path, kw, ref, says):
    with pytest.raises(TaskError, match=says):
        _task(tmp_path, ref, **kw)


def test_reference_that_raises_is_could_not_judge_before_the_model_is_asked(tmp_path):
    t = _task(tmp_path, "def reference(a, b, c, n):\n    raise ValueError('nope')\n")
    model = planted([VADD_FN])
    r = _run(t, model)
    assert r.status == "could-not-judge" and r.exit_code == 2
    assert "the reference raised ValueError: nope (line 2 of ref.py" in r.reasons[0]
    assert model.requests == []


def test_reference_that_is_not_deterministic_is_could_not_judge(tmp_path):
    t = _task(tmp_path, "def reference(a, b, c, n):\n    c[:n] += a[:n]\n")     # reads its 'out' poison
    r = _run(t, planted([VADD_FN]))
    assert r.exit_code == 2 and "not deterministic" in r.reasons[0] and "inout" in r.reasons[0]


def test_reference_may_return_its_output(tmp_path):
    t = _task(tmp_path, "def reference(a, b, c, n):\n    return {'c': a + b}\n")
    assert _run(t, planted([VADD_FN])).status == "accepted"
    t = _task(tmp_path, "def reference(a, b, c, n):\n    return a + b\n")     # the only output buffer
    assert _run(t, planted([VADD_FN])).status == "accepted"


# ---------------------------------------------------------------------------------- the loop

def test_known_good_body_is_accepted_loadable_and_callable(tmp_path):
    t = _task(tmp_path)
    r = _run(t, planted([VADD_FN]))
    assert r.status == "accepted" and r.exit_code == 0, r.reasons
    assert r.verdict_line().startswith("ACCEPTED: vadd verified against ref.py:reference")
    assert run_ptxas(r.module_ptx, "sm_90").ok                     # the written module assembles
    assert r.record["result"]["confirmations"][0]["status"] == "accepted"
    assert r.record["result"]["timing"]["status"] == "not-timed"
    k = GeneratedKernel.from_result(r, backend="emulator")
    a = np.linspace(-3, 3, 1000, dtype=np.float32)
    b = np.full(1000, 0.25, np.float32)
    c = np.full(1000, -7, np.float32)
    out = k(a, b, c, 600)                       # n < len: the tail stays as it was
    assert out is c
    assert np.array_equal(c[:600], a[:600] + b[:600]) and np.all(c[600:] == -7)
    with pytest.raises(TypeError, match="float32"):
        k(a.astype(np.float64), b, c, 10)
    with pytest.raises(TypeError, match="missing n"):
        k(a, b, c)
    # a grid too large for the buffers: the kernel's own bounds check holds, the launch is fine;
    # n larger than the buffers: it writes past them, and the callable says so
    with pytest.raises(KernelLaunchError, match="outside buffer|crash"):
        k(a[:10].copy(), b[:10].copy(), c[:10].copy(), 1000)


def test_wrong_body_is_rejected_and_the_mismatch_reaches_the_next_prompt(tmp_path):
    t = _task(tmp_path)
    model = planted([VADD_WRONG], [VADD_FN])
    r = _run(t, model, rounds=3, samples=1)
    assert r.status == "accepted" and len(model.requests) == 2
    first = r.record["rounds"][0]["responses"][0]
    assert first["fate"] == "rejected-check" and "should be" in first["reason"]
    prompt = model.requests[1]["messages"][1]["content"]
    assert "## Earlier attempts that failed" in prompt
    assert "rejected-check: wrong output on set" in prompt and "should be" in prompt
    assert "inputs there: a[" in prompt                       # the input values at the mismatch
    assert "sub.f32" in prompt                                # the failed kernel itself, to repair
    assert "sub.f32" not in model.requests[0]["messages"][1]["content"]


def test_a_model_that_never_assembles_ends_not_verified_with_ptxas_reasons(tmp_path):
    t = _task(tmp_path)
    model = planted([VADD_NO_PTXAS])
    r = _run(t, model, rounds=2, samples=1)
    assert r.status == "not-verified" and r.exit_code == 1
    assert len(model.requests) == 2
    assert all("rejected-ptxas" in x and "ptxas rejects it" in x for x in r.reasons[:1])
    assert any("the line ptxas means: add.f32" in x for x in r.reasons)
    assert r.verdict_line().startswith("NOT VERIFIED: vadd: no kernel verified in 2 round(s)")
    # the second round was told, and the identical answer was not judged again
    assert r.record["rounds"][1]["responses"][0]["fate"] == "duplicate"
    assert "rejected-ptxas" in model.requests[1]["messages"][1]["content"]


def test_unparsable_cut_off_and_contract_breaking_answers_are_fed_back(tmp_path):
    t = _task(tmp_path)
    renamed = VADD_FN.replace(".entry vadd(", ".entry vsub(")
    model = planted([("garbage {", "stop"), (VADD_FN, "length"), renamed])
    r = _run(t, model, rounds=1, samples=3)
    fates = [x["fate"] for x in r.record["rounds"][0]["responses"]]
    assert fates == ["unparsed", "cut-off", "changes-contract"]
    assert r.exit_code == 1


def test_rounds_and_samples_are_limits(tmp_path):
    t = _task(tmp_path)
    model = planted([VADD_WRONG, VADD_WRONG, VADD_FN])           # 3 answers; samples=2 takes two
    r = _run(t, model, rounds=2, samples=2)
    assert [q["n"] for q in model.requests] == [2, 2]
    assert r.status == "not-verified"
    assert sum(len(rd["responses"]) for rd in r.record["rounds"]) == 4


class SlowModel:
    """A model that takes its time: request i sleeps ``delays[i]`` seconds (a callable: asked for
    the seconds then; ``None``: never answers) and then answers like :func:`planted`. Its waits
    swallow every ``Exception``, as model backends do: the budget must stop it all the same."""

    kind = "slow"

    def __init__(self, delays, *rounds):
        self.delays = list(delays)
        self.inner = planted(*rounds)
        self.requests = self.inner.requests
        self.swallowed = 0

    def describe(self):
        return {"backend": "slow", "model": "slow-model"}

    def complete(self, messages, **kw):
        i = len(self.requests)
        delay = self.delays[min(i, len(self.delays) - 1)]
        delay = delay() if callable(delay) else delay
        end = None if delay is None else time.monotonic() + delay
        while end is None or time.monotonic() < end:
            try:
                time.sleep(0.02)
            except Exception:   # noqa: BLE001 - what a careless backend does
                self.swallowed += 1
        return self.inner.complete(messages, **kw)


def _timed(t, model, budget, **opts):
    judge = ReferenceJudge(t.reference, t.stub_ptx, backend="emulator", sets=2)
    events = []
    t0 = time.monotonic()
    r = generate(t, model, judge, GenerateOptions(budget_s=budget, save_dataset=False, **opts),
                 on_event=lambda kind, data: events.append((kind, data)))
    return r, time.monotonic() - t0, events


SLACK_S = 1.5          # what a loaded 2-core machine may add to a budget's end (the stop, the record)


def test_the_budget_stops_a_model_that_never_answers(tmp_path):
    """The 600 s budget that ran 817 s: a request in flight is stopped at the budget, and a
    broad ``except Exception`` in the model cannot swallow the stop."""
    model = SlowModel([None], [VADD_FN])
    r, elapsed, _ = _timed(_task(tmp_path), model, 2.0, rounds=3, samples=1)
    assert elapsed < 2.0 + SLACK_S, elapsed
    assert len(model.requests) == 0                     # it never got to answer
    assert r.status == "not-verified" and r.exit_code == 1
    assert r.record["stopped"] == "the time budget of 2 s ran out while the model was answering in round 1"
    assert r.record["rounds"][0]["error"].startswith("stopped after ")
    assert r.record["seconds"] <= 2.0 + SLACK_S


def test_answers_given_within_the_budget_are_judged(tmp_path):
    """Round 1's answer comes 1 s before the model's share of the budget ends: it is checked
    (rejected, with its mismatch), not "not judged"; round 2's request is stopped at its share,
    and the whole run ends within the budget."""
    allowed = {}
    model = SlowModel([lambda: allowed["s"] - 1.0, None], [VADD_WRONG], [VADD_FN])
    t = _task(tmp_path)
    judge = ReferenceJudge(t.reference, t.stub_ptx, backend="emulator", sets=2)

    def on_event(kind, data):
        if kind == "request":
            allowed["s"] = data["allowed"]

    t0 = time.monotonic()
    r = generate(t, model, judge, GenerateOptions(budget_s=4.0, rounds=3, samples=1, save_dataset=False),
                 on_event=on_event)
    elapsed = time.monotonic() - t0
    first = r.record["rounds"][0]
    assert first["responses"][0]["fate"] == "rejected-check", first["responses"][0]
    assert first["model_seconds_allowed"] + first["check_seconds_kept"] <= 4.0
    assert len(r.record["rounds"]) == 2 and "stopped after" in r.record["rounds"][1]["error"]
    assert not any(resp.get("fate") == "not-judged" for rd in r.record["rounds"] for resp in rd["responses"])
    assert r.status == "not-verified" and "ran out while the model was answering in round 2" in r.record["stopped"]
    assert elapsed < 4.0 + SLACK_S, elapsed


def test_the_budget_holds_outside_the_main_thread(tmp_path):
    """No SIGALRM off the main thread: the request runs in a worker that the loop stops waiting for."""
    import threading
    model = SlowModel([None], [VADD_FN])
    box = {}
    thread = threading.Thread(target=lambda: box.update(zip(("r", "elapsed", "events"),
                                                            _timed(_task(tmp_path), model, 1.5, samples=1))))
    thread.start()
    thread.join(1.5 + 2 * SLACK_S)
    assert not thread.is_alive()
    assert box["elapsed"] < 1.5 + SLACK_S and "while the model was answering" in box["r"].record["stopped"]


def test_a_budget_too_short_for_the_round_says_what_it_needed(tmp_path):
    """No request is started that could not be checked: a budget smaller than the check of its
    answers stops before the round, with the seconds it had and needed."""
    from superopt.generate.loop import check_reserve
    assert check_reserve(2, [1.5, 0.5], 0.1, 100) == 3.0                  # the slowest check, per answer
    assert check_reserve(1, [], 0.1, 100) == pytest.approx(0.5 + 6 * 0.1)  # estimated from the reference
    assert check_reserve(1, [], 10.0, 4.0) == 2.0                          # at most half of what is left
    # checks that take 6 s (on a clock the test moves): after round 1, 4 s are left
    t = _task(tmp_path)
    offset = [0.0]
    judge = ReferenceJudge(t.reference, t.stub_ptx, backend="emulator", sets=2)
    real_verify = judge.verify

    def slow_verify(*a, **k):
        offset[0] += 6.0
        return real_verify(*a, **k)

    judge.verify = slow_verify
    model = planted([VADD_WRONG], [VADD_FN])
    r = generate(t, model, judge, GenerateOptions(budget_s=10.0, rounds=3, samples=1, save_dataset=False),
                 clock=lambda: time.monotonic() + offset[0])
    assert len(model.requests) == 1
    assert r.record["rounds"][0]["responses"][0]["fate"] == "rejected-check"
    assert r.record["stopped"].startswith("the time budget of 10 s ran out before round 2 (")
    assert "s left, checking 1 answer(s) takes about 6." in r.record["stopped"]


def test_budget_expired_is_not_an_exception():
    from superopt.generate.budget import Budget, BudgetExpired
    assert not issubclass(BudgetExpired, Exception)
    swallowed = 0
    t0 = time.monotonic()
    with pytest.raises(BudgetExpired, match="spinning: stopped after"):
        with Budget(0.3).hard("spinning"):
            while True:
                try:
                    sum(range(1000))
                except Exception:   # noqa: BLE001
                    swallowed += 1
    assert time.monotonic() - t0 < 0.3 + SLACK_S and swallowed == 0


@pytest.mark.parametrize("field, value", [("rounds", 0), ("samples", 0), ("budget_s", 0), ("max_tokens", 3)])
def test_limits_must_be_sensible(field, value):
    with pytest.raises(TaskError):
        GenerateOptions(**{field: value}).validate()


def test_model_error_on_the_first_request_is_could_not_judge(tmp_path):
    class Down:
        kind = "down"

        def describe(self):
            return {"model": "down"}

        def complete(self, *a, **k):
            from superopt.model.base import ModelError
            raise ModelError("connection refused")

    r = _run(_task(tmp_path), Down())
    assert r.exit_code == 2 and "the model could not answer: connection refused" in r.reasons[0]


def test_accepted_generation_is_a_dataset_row(tmp_path):
    t = _task(tmp_path)
    r = _run(t, planted([VADD_FN]), save_dataset=True)
    rows = list((tmp_path / "dataset").glob("gen-*.json"))
    assert len(rows) == 1
    row = json.loads(rows[0].read_text())
    assert row == row_from_record(r.record)
    assert row["task"] == "generate" and row["description"].startswith("Add two float vectors")
    assert "c[:n] = a[:n] + b[:n]" in row["reference"]["source"] and row["ptx"].startswith(".visible .entry vadd(")
    assert row["verification"]["checks"][0]["status"] == "accepted" and row["messages"][-1]["role"] == "assistant"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to compile the CUDA reference")
def test_cuda_reference_is_the_baseline_on_the_same_judge(tmp_path):
    cu = tmp_path / "ref.cu"
    cu.write_text("// nvcc-plus: grid=cdiv(n,128) block=128 a:f32[n] in b:f32[n] in c:f32[n] out n=3001\n"
                  "__global__ void vadd_ref(const float* a, const float* b, float* c, int n) {\n"
                  "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];\n}\n")
    t = build_task("add", reference=str(cu), signature=SIGNATURE)
    assert t.reference.kind == "cuda" and t.reference.label == "ref.cu:vadd_ref"
    assert t.specs[0].param("n").value == 3001                        # the reference's own comment
    r = _run(t, planted([VADD_WRONG, VADD_FN]), rounds=1, samples=2)
    assert r.status == "accepted"
    fates = [x["fate"] for x in r.record["rounds"][0]["responses"]]
    assert fates == ["rejected-check", "accepted"]
    assert r.record["result"]["timing"]["status"] == "not-timed"      # no GPU here
    # without --signature the reference's own C signature is the kernel's
    t2 = build_task("add", reference=str(cu))
    assert t2.signature.text == "vadd_ref(const float* a, const float* b, float* c, int n)"


def test_the_grammar_pins_the_header_and_admits_a_good_body(tmp_path):
    pytest.importorskip("xgrammar")
    from superopt.model.grammar import accepts, kernel_grammar
    t = _task(tmp_path)
    module = t.stub_module
    grammar = kernel_grammar(module.function("vadd"), module=module, max_statements=40)
    assert accepts(grammar, VADD_FN)
    assert not accepts(grammar, VADD_FN.replace(".entry vadd(", ".entry vsub("))
    assert not accepts(grammar, VADD_FN.replace(".param .u32 vadd_param_3", ".param .u64 vadd_param_3"))
