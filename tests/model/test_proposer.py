"""The proposer loop with planted models (scripted answers): a good proposal is verified
and kept, a wrong one is rejected and the judge's reason reaches the next prompt; every
prompt, response and verdict lands in the record. ptxas is real; the judge is the CPU
emulator when it exists, else a fake judge with the same interface (see helpers.FakeJudge)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

import ptx_ir
from superopt.search.candidates import apply_plan
from superopt.model.base import ModelConfig, ModelError
from superopt.model.proposer import ModelProposer, ProposerOptions, search_with_model
from superopt.search.loop import search_kernel
from superopt.search.options import SearchOptions
from tests.model.helpers import VADD, VADD_FN, VADD_GOOD, VADD_WRONG, FakeJudge, PlantedModel, vadd_spec

GOOD_PLAN = '{"steps":[{"pass":"test-nc-loads","params":{"which":"all"}}]}'


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    for var in ("NVCC_PLUS_LLM_URL", "NVCC_PLUS_LLM_LOCAL", "NVCC_PLUS_LLM_MODEL", "NVCC_PLUS_LLM_MODES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))


def run(model, *, modes=("plan", "rewrite"), rounds=2, samples=1, rule_passes=("test-never-fires",),
        passes=None, judge=None, **kw):
    module = ptx_ir.parse(VADD)
    opts = ProposerOptions(modes=modes, rounds=rounds, samples=samples, **kw)
    proposer = ModelProposer(model, opts, passes=passes)
    judge = judge or FakeJudge()
    result = search_with_model(module, "vadd", [vadd_spec()], target="sm_90",
                               options=SearchOptions(budget_s=120, passes=list(rule_passes)),
                               judge=judge, proposer=proposer)
    return result, judge


def responses(record):
    return [r for rd in record["model"]["rounds"] for r in rd.get("responses", [])]


def user_prompt(req) -> str:
    return req["messages"][-1]["content"]


def test_no_model_configured_changes_nothing(test_passes):
    assert not ModelConfig.from_env().enabled
    module = ptx_ir.parse(VADD)
    opts = SearchOptions(budget_s=60, passes=["test-nc-loads"])
    plain = search_kernel(module, "vadd", [vadd_spec()], target="sm_90", options=opts, judge=FakeJudge())
    with_model = search_with_model(module, "vadd", [vadd_spec()], target="sm_90", options=opts, judge=FakeJudge())
    assert "model" not in with_model.record
    strip = lambda r: {k: v for k, v in r.items() if k != "seconds"}  # noqa: E731
    assert strip(with_model.record) == strip(plain.record)
    assert with_model.winner.ptx == plain.winner.ptx


def test_importing_superopt_imports_no_model_library():
    code = ("import sys, superopt, superopt.cli, superopt.model, superopt.model.proposer, superopt.model.client; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'xgrammar', 'gguf')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_planted_good_rewrite_is_verified_and_kept(test_passes):
    model = PlantedModel({"rewrite": [[VADD_GOOD]]})
    result, judge = run(model, modes=("rewrite",))
    rec = result.record
    assert result.winner is not None and rec["status"] == "optimized" and rec["decision"] == "measured"
    win = next(e for e in rec["candidates"] if e["fate"] == "winner")
    assert win["provenance"]["proposer"] == "model" and win["provenance"]["mode"] == "rewrite"
    assert win["verdict"]["status"] == "accepted" and win["speedup"] > 1.2
    assert "mov.u32 \t%r6, %tid.x" not in result.winner.ptx
    # the plan (a model-rewrite step) re-applies, as the cache and the lockfile do
    again, _ = apply_plan(ptx_ir.parse(VADD), "vadd", result.winner.plan)
    assert ptx_ir.emit(again) == result.winner.ptx
    # prompt, response and verdict are in the record
    m = rec["model"]
    rd = m["rounds"][0]
    assert rd["mode"] == "rewrite" and "vadd_param_3" in rd["messages"][1]["content"]
    assert rd["responses"][0]["text"] == VADD_GOOD and rd["responses"][0]["fate"] == "faster"
    assert rd["responses"][0]["verdict"]["status"] == "accepted"
    assert m["stopped"].startswith("a good candidate was found")
    assert m["summary"]["good"] == 1 and m["summary"]["parsed"] == 1
    # the texts a dataset needs
    assert rec["baseline"]["ptx"] == VADD_FN
    assert "mov.u32 \t%r6" not in win["ptx"] and "ld.global.nc.f32" in win["ptx"]
    # nothing judged twice through the cache: one check and one timing for the model's
    # candidate in the search, then the deliberate fresh check and confirmation timing before
    # it is kept
    assert sum(1 for p in judge.verified if "%r6, %tid.x" not in p) == 2
    assert sum(1 for p in judge.timed if "%r6, %tid.x" not in p) == 2
    assert win["fresh_verdict"]["status"] == "accepted" and "confirmation" in win


def test_planted_good_plan_is_verified_and_kept(test_passes):
    model = PlantedModel({"plan": [[GOOD_PLAN]]})
    result, _ = run(model, modes=("plan",), passes=test_passes)
    rec = result.record
    assert result.winner is not None
    assert [s.pass_name for s in result.winner.plan] == ["test-nc-loads"]
    assert result.winner.provenance["proposer"] == "model" and result.winner.provenance["mode"] == "plan"
    prompt = user_prompt(model.requests[0])
    assert "test-nc-loads (which in ['all', 'first'])" in prompt
    assert "test-never-fires: rejected" not in prompt      # it never fired, so no rule entry
    schema = model.requests[0]["constraint"].spec
    assert {a["properties"]["pass"]["const"] for a in schema["properties"]["steps"]["items"]["oneOf"]} == \
        {"test-nc-loads", "test-never-fires"}
    assert rec["model"]["rounds"][0]["responses"][0]["fate"] == "faster"


def test_a_plan_the_rules_already_tried_is_a_duplicate(test_passes):
    model = PlantedModel({"plan": [[GOOD_PLAN]]})
    result, _ = run(model, modes=("plan",), rounds=2, passes=test_passes,
                    rule_passes=("test-nc-loads",))
    r = responses(result.record)
    assert [x["fate"] for x in r] == ["duplicate", "duplicate"]
    assert "identical to an earlier candidate: test-nc-loads(which=all) (winner)" in r[0]["reason"]
    assert "test-nc-loads(which=all): winner, 1.30x" in user_prompt(model.requests[0])   # rules' results shown
    assert "duplicate" in user_prompt(model.requests[1])
    assert result.winner.provenance == {"proposer": "rules"}


def test_wrong_rewrite_is_rejected_and_the_reason_fed_back(test_passes):
    model = PlantedModel({"rewrite": [[VADD_WRONG], [VADD_GOOD]]})
    result, _ = run(model, modes=("rewrite",), rounds=3)
    r = responses(result.record)
    assert r[0]["fate"] == "rejected-check"
    assert "buffer 'out' element 3 differs" in r[0]["reason"]
    assert r[0]["verdict"]["mismatch"]["index"] == 3
    second = user_prompt(model.requests[1])
    assert "Earlier attempts that failed" in second
    assert "rewrite (round 0, sample 0): rejected-check: output differs" in second
    assert "baseline 1.5 (0x3fc00000), candidate -0.5 (0xbf000000)" in second
    assert r[1]["fate"] == "faster"
    assert len(model.requests) == 2                     # stopped once a good one was found
    wrong = next(e for e in result.record["candidates"] if e["fate"] == "rejected-check")
    assert wrong["provenance"]["round"] == 0
    assert result.winner is not None and "sub.f32" not in result.winner.ptx


def test_ptxas_errors_come_back_with_the_line(test_passes):
    bad = VADD_GOOD.replace("ld.global.nc.f32 \t%f1, [%rd8];", "ld.global.nc.f33 \t%f1, [%rd8];")
    model = PlantedModel({"rewrite": [[bad], [VADD_GOOD]]})
    result, _ = run(model, modes=("rewrite",))
    r = responses(result.record)
    assert r[0]["fate"] == "rejected-ptxas" and ".f33" in r[0]["reason"]
    second = user_prompt(model.requests[1])
    assert "rejected-ptxas" in second and "the line ptxas means: ld.global.nc.f33" in second


def test_cut_off_unparsable_and_contract_breaking_answers_are_fed_back(test_passes):
    answers = [(VADD_GOOD[:300], "length"), VADD_GOOD.replace("ld.global.nc.f32 \t%f1, [%rd8];", "ld.global.nc.f32 %f1 [%rd8]"),
               VADD_GOOD.replace("vadd(", "vadd_v2("), VADD_GOOD.replace("add.f32 \t%f3", "add.f32 \t%f9"), VADD_FN,
               VADD_FN.replace("\tmov.u32 \t%r6, %tid.x;\n", "")]      # ptxas drops that dead mov itself
    model = PlantedModel({"rewrite": [answers, [VADD_GOOD]]})
    result, _ = run(model, modes=("rewrite",), samples=6)
    fates = [x["fate"] for x in responses(result.record)]
    assert fates == ["cut-off", "unparsed", "changes-contract", "invalid-ir", "unchanged", "same-code", "faster"]
    second = user_prompt(model.requests[1])
    for words in ("was cut off", "does not parse: line 27", "changes the kernel's name", "undeclared register %f9",
                  "identical to the original kernel", "same-code: ptxas made the same machine code as nvcc's own code"):
        assert words in second
    assert model.requests[0]["n"] == 6


def test_model_errors_leave_the_rules_result(test_passes):
    class Down:
        kind = "server"

        def describe(self):
            return {"backend": "server", "model": "x"}

        def complete(self, *a, **k):
            raise ModelError("cannot reach the model server at http://127.0.0.1:9/v1 (refused)")
    result, _ = run(Down(), rule_passes=("test-nc-loads",))
    m = result.record["model"]
    assert m["stopped"].startswith("model error: cannot reach")
    assert m["rounds"][0]["error"].startswith("cannot reach")
    assert result.winner is not None and result.winner.provenance == {"proposer": "rules"}


def test_budget_and_rounds_are_kept(test_passes):
    model = PlantedModel({"plan": [["not json"]], "rewrite": [[VADD_WRONG]]})
    result, _ = run(model, rounds=3, samples=2, passes=test_passes)
    assert len(model.requests) == 6                     # 3 rounds x 2 modes
    assert [q["mode"] for q in model.requests] == ["plan", "rewrite"] * 3
    assert len({q["seed"] for q in model.requests}) == 6
    assert result.record["model"]["stopped"] == "3 round(s) done"
    model = PlantedModel({"plan": [[GOOD_PLAN]]})
    result, _ = run(model, budget_s=0.0, passes=test_passes)
    assert model.requests == [] and "budget" in result.record["model"]["stopped"]


def test_no_spec_means_the_model_is_not_asked(test_passes):
    model = PlantedModel({"rewrite": [[VADD_GOOD]]})
    result = search_with_model(ptx_ir.parse(VADD), "vadd", None, target="sm_90",
                               options=SearchOptions(passes=[]), judge=FakeJudge(),
                               proposer=ModelProposer(model))
    assert model.requests == [] and "no launch spec" in result.record["model"]["skipped"]


def test_dataset_export_of_measured_wins(test_passes, tmp_path):
    from superopt.cli import main
    model = PlantedModel({"rewrite": [[VADD_GOOD]]})
    result, _ = run(model, modes=("rewrite",))
    record_file = tmp_path / "reports" / "vadd.record.json"
    record_file.parent.mkdir()
    record_file.write_text(json.dumps({"kernels": [result.record]}, default=str))
    out = tmp_path / "data.jsonl"
    res = CliRunner().invoke(main, ["dataset", "export", str(record_file.parent), "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 1                               # the record and the cache copy are one row
    row = rows[0]
    assert row["kernel"] == "vadd" and row["speedup"] > 1.2
    assert row["baseline_ptx"] == VADD_FN and "mov.u32 \t%r6" not in row["optimized_ptx"]
    assert row["verification"]["status"] == "accepted" and row["provenance"]["proposer"] == "model"
    assert row["plan"] == [{"pass": "model-rewrite", "params": {"function": "<optimized_ptx>"}}]
    assert row["messages"][-1] == {"role": "assistant", "content": row["optimized_ptx"]}
    # the cache alone has it too (builds feed the dataset without reports)
    res = CliRunner().invoke(main, ["dataset", "export", "-o", str(tmp_path / "c.jsonl")])
    assert res.exit_code == 0 and len((tmp_path / "c.jsonl").read_text().splitlines()) == 1
    # without a GPU (no measured speed) nothing is exported
    model = PlantedModel({"rewrite": [[VADD_GOOD]]})
    result, _ = run(model, modes=("rewrite",), judge=FakeJudge(can_time=False))
    record_file.write_text(json.dumps(result.record, default=str))
    res = CliRunner().invoke(main, ["dataset", "export", str(record_file), "--no-cache", "-o", str(out)])
    assert res.exit_code == 0 and out.read_text() == ""


def test_emulator_judges_planted_rewrites_when_it_exists(test_passes):
    """With the real CPU emulator (when it is available), the wrong rewrite fails the real
    differential check and the good one verifies."""
    from superopt.judge.backends.base import BackendUnavailable, get_backend
    try:
        ok, why = get_backend("emulator").available()
    except BackendUnavailable as e:
        pytest.skip(f"the emulator backend is not available yet: {e}")
    if not ok:
        pytest.skip(f"the emulator backend is not available: {why}")
    from superopt.judge import BackendJudge
    model = PlantedModel({"rewrite": [[VADD_WRONG], [VADD_GOOD]]})
    module = ptx_ir.parse(VADD)
    result = search_with_model(module, "vadd", [vadd_spec()], target="sm_90",
                               options=SearchOptions(budget_s=300, passes=[], no_gpu="estimate"),
                               judge=BackendJudge("emulator", check_sets=2),
                               proposer=ModelProposer(model, ProposerOptions(modes=("rewrite",), rounds=2, samples=1)))
    r = responses(result.record)
    assert r[0]["fate"] == "rejected-check", r[0]
    assert "out" in r[0]["reason"]
    assert r[1]["fate"] == "verified", r[1]
    assert "rejected-check" in user_prompt(model.requests[1])


def test_prompt_carries_resources_time_roofline_and_rules():
    from superopt.model.prompt import build_messages
    from superopt.model.proposer import context_from_record
    rec = {"baseline": {"resources": {"registers": 10, "spill_stores": 0, "spill_loads": 0, "shared_bytes": 0,
                                      "stack_bytes": 0}},
           "candidates": [{"id": "vectorize(width=4)", "fate": "winner", "speedup": 1.9, "reason": "faster",
                           "provenance": {"proposer": "rules"},
                           "timing": {"baseline": {"median": 12e-6}, "peak_bytes_per_s": 4.2e12,
                                      "implied_bytes_per_s": {"baseline": 2.1e12, "candidate": 4.0e12}}}]}
    ctx = context_from_record(rec, "sm_90")
    text = build_messages("rewrite", ptx_ir.parse(VADD).function("vadd"), ctx)[1]["content"]
    for words in ("ptxas (sm_90): 10 registers, 0 B spill stores", "measured time of this kernel: 12.00 us",
                  "50% of the measured peak 4200 GB/s", "vectorize(width=4): winner, 1.90x",
                  "param param_2: u64, pointer (out, elements f32)", "load global.f32 (4 B) at param_1 +",
                  "aligned to 4 B", "loops: none"):
        assert words in text, words


def test_dataset_export_takes_rule_wins_from_plain_records(test_passes, tmp_path):
    from superopt.cli import main
    result = search_kernel(ptx_ir.parse(VADD), "vadd", [vadd_spec()], target="sm_90",
                           options=SearchOptions(budget_s=60, passes=["test-nc-loads"]), judge=FakeJudge())
    (tmp_path / "r.json").write_text(json.dumps({"kernels": [result.record]}, default=str))
    out = tmp_path / "d.jsonl"
    res = CliRunner().invoke(main, ["dataset", "export", str(tmp_path / "r.json"), "--no-cache", "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["provenance"] == {"proposer": "rules"}
    assert rows[0]["plan"] == [{"pass": "test-nc-loads", "params": {"which": "all"}}]
    assert "ld.global.nc.f32" in rows[0]["optimized_ptx"]


def test_the_rules_choice_a_model_sees_is_confirmed_once(test_passes):
    """The prompt's context has the rules' choice made provisionally (the fastest worth
    keeping, as the search timed it); the candidate to keep is timed again (and checked at full
    size, sanitized) once, in the final choice, not once more for the model's context."""
    class Counting(FakeJudge):
        def __init__(self):
            super().__init__()
            self.confirmations = 0

        def time(self, base_ptx, cand_ptx, spec, **kw):
            self.confirmations += bool(kw.get("fresh"))
            return super().time(base_ptx, cand_ptx, spec, **kw)
    judge = Counting()
    model = PlantedModel({"plan": [[GOOD_PLAN]]})
    result, _ = run(model, modes=("plan",), rounds=1, passes=test_passes, rule_passes=("test-nc-loads",), judge=judge)
    assert "test-nc-loads(which=all): winner, 1.30x (the fastest so far" in user_prompt(model.requests[0])
    assert result.winner is not None and result.record["candidates"][0]["fate"] == "winner"
    assert "confirmed by a second timing" in result.record["reason"]
    assert judge.confirmations == 1
