"""The search, the decision cache, the lockfile and the records, with a scripted judge.

The judge is replaced by one whose verdicts and timings the test chooses, so that what is
tested is the search's bookkeeping: which candidate wins, what every fate says, that
cached and locked decisions are reused without judging again.
"""
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

import ptx_ir
from ptx_ir import Imm
from superopt import passes
from superopt.search.candidates import Step, make_candidate
from superopt.optimize import optimize_module
from superopt.config.resolved import Settings
from superopt.judge import Judge
from superopt.search.loop import search_kernel
from superopt.search.options import SearchOptions
from reports import render
from reports.compare import compare, gate
from reports.load import validate

DATA = Path(__file__).parent.parent / "ptx_ir" / "data" / "analyses.ptx"
KERNEL = "_Z7diamondPiPKii"


@passes.register(name="test-commute", summary="read the input through the non-coherent path",
                 assumes="the input is never written (true of diamond's `in`)", params={}, source="tests")
def _commute(fn):
    out = []
    for inst in list(fn.instructions):
        if inst.opcode == "ld" and inst.space == ".global":
            fn.replace(inst, inst.with_(modifiers=(".global", ".nc", *inst.modifiers[1:])))
            out.append(passes.Change("ld.global -> ld.global.nc", inst))
    return out


@passes.register(name="test-same-code", summary="swap the operands of mul.lo", assumes="mul is commutative",
                 params={}, source="tests")
def _swap(fn):
    out = []
    for inst in list(fn.instructions):
        if inst.opcode == "mul" and ".lo" in inst.modifiers:
            d, a, b = inst.operands
            fn.replace(inst, inst.with_(operands=(d, b, a)))
            out.append(passes.Change("commuted mul.lo", inst))
    return out


@passes.register(name="test-break", summary="multiply by 4 instead of 3", assumes="nothing (wrong on purpose)",
                 params={}, source="tests")
def _break(fn):
    for inst in list(fn.instructions):
        if inst.opcode == "mul" and isinstance(inst.operands[2], Imm) and inst.operands[2].text == "3":
            fn.replace(inst, inst.with_(operands=(*inst.operands[:2], Imm("4"))))
            return [passes.Change("x3 -> x4", inst)]
    return []


@passes.register(name="test-nofire", summary="never fires", assumes="-", params={"k": [1, 2]}, source="tests")
def _nofire(fn, k=1):
    return []


@dataclass
class Verdict:
    status: str
    reason: str

    def to_dict(self):
        return {"status": self.status, "reason": self.reason, "policy": "exact", "evidence": {"seed": 1, "sets": []}}


@dataclass
class Timing:
    status: str
    faster: bool
    speedup: float
    reason: str = "scripted"
    slower: bool = False

    def to_dict(self):
        return {"status": self.status, "faster": self.faster, "speedup": self.speedup,
                "baseline": {"median": 2e-6, "iqr": 1e-8}, "candidate": {"median": 2e-6 / self.speedup, "iqr": 1e-8},
                "device": {"name": "Scripted GPU"}}


class ScriptedJudge(Judge):
    backend = "scripted"
    policy = "exact"

    def __init__(self, can_time=True, speedups=None):
        self.can_time = can_time
        self.speedups = speedups or {}
        self.calls = 0

    def verify(self, base, cand, spec, **kw):
        self.calls += 1
        if "mul.lo.s32 \t%r6, %r5, 4;" in cand:
            return Verdict("rejected", "set 0: buffer 'out' element 3 differs (baseline 9, candidate 12)")
        return Verdict("accepted", "bit-identical on 4 input sets")

    def time(self, base, cand, spec, **kw):
        s = self.speedups.get("commute", 1.0) if "ld.global.nc.u32" in cand else 1.0
        return Timing("ok", s > 1.01, s)


OPTS = SearchOptions(passes=["test-commute", "test-break", "test-nofire", "test-same-code"], budget_s=60)


def module():
    return ptx_ir.parse(DATA.read_text())


def test_fastest_verified_candidate_wins_and_every_fate_is_recorded():
    judge = ScriptedJudge(speedups={"commute": 1.25})
    result = search_kernel(module(), KERNEL, specs=[{"fake": True}], target="sm_90", options=OPTS, judge=judge)
    rec = result.record
    fates = {c["id"]: c["fate"] for c in rec["candidates"]}
    assert fates == {"test-commute": "winner", "test-break": "rejected-check", "test-same-code": "same-code"}
    assert rec["status"] == "optimized" and rec["winner"] == "test-commute"
    assert result.winner.plan == [Step("test-commute", {})]
    broken = next(c for c in rec["candidates"] if c["id"] == "test-break")
    assert "element 3 differs" in broken["reason"]
    assert rec["baseline"]["resources"]["registers"] > 0
    assert "ld.global.nc.u32" in next(c for c in rec["candidates"] if c["fate"] == "winner")["ptx"]


def test_not_faster_keeps_baseline():
    result = search_kernel(module(), KERNEL, specs=[{"fake": True}], target="sm_90", options=OPTS,
                           judge=ScriptedJudge(speedups={"commute": 1.0}))
    assert result.winner is None and result.record["status"] == "kept-baseline"
    assert {c["fate"] for c in result.record["candidates"]} == {"not-faster", "rejected-check", "same-code"}


def test_no_spec_is_not_verifiable():
    result = search_kernel(module(), KERNEL, None, target="sm_90", options=OPTS, judge=ScriptedJudge())
    assert result.record["status"] == "not-verifiable" and result.winner is None


def test_no_gpu_applies_nothing_by_default_and_estimates_only_on_request(monkeypatch):
    judge = ScriptedJudge(can_time=False)
    kept = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=OPTS, judge=judge)
    assert kept.winner is None and "no GPU" in kept.record["reason"]
    estimate_opts = SearchOptions(passes=OPTS.passes, no_gpu="estimate")
    same = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=estimate_opts, judge=judge)
    assert same.winner is None and "cheaper" in same.record["reason"]   # commuting costs the same
    import superopt.search.loop as search_mod
    real = search_mod.static_estimate
    monkeypatch.setattr(search_mod, "static_estimate",
                        lambda ptx, k: real(ptx, k) - ("ld.global.nc.u32" in ptx))
    est = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=estimate_opts, judge=judge)
    assert est.record["decision"] == "estimate" and est.winner is not None
    assert est.record["candidates"][0]["fate"] == "estimate-winner"


def test_budget_exhaustion_is_recorded():
    opts = SearchOptions(passes=OPTS.passes, budget_s=0.0)
    result = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=opts, judge=ScriptedJudge())
    assert {c["fate"] for c in result.record["candidates"]} == {"skipped-budget"}


def test_module_cache_and_lockfile(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NVCC_PLUS_LOCKFILE", str(tmp_path / "nvcc-plus.lock"))
    monkeypatch.setenv("NVCC_PLUS_LOCK", "write")
    text = DATA.read_text()
    cfg = {"passes": OPTS.passes}
    judge = ScriptedJudge(speedups={"commute": 1.3})
    first = optimize_module(text, settings=Settings.from_config(cfg), kernels=[KERNEL], judge=judge, spec_for=lambda m, k: ([{"x": 1}], "test"))
    # two candidates judged, then the kept one checked again on fresh inputs
    assert first.changed and judge.calls == 3
    assert "ld.global.nc.u32" in first.ptx
    ((lock_key, entry),) = json.loads((tmp_path / "nvcc-plus.lock").read_text())["decisions"].items()
    assert entry["searched_on"] == "Scripted GPU" and entry["spec_origin"] == "test"   # announced later
    validate(first.records)
    # the record says where the decision is stored (superopt tune reverts it there)
    keys = first.records["kernels"][0]["decision_keys"]
    assert keys["lock"] == lock_key and keys["lockfile"] == str(tmp_path / "nvcc-plus.lock")
    assert json.loads(Path(keys["cache_file"]).read_text())["plan"] == entry["plan"]
    # Rebuild: the cached decision applies without judging anything.
    again = optimize_module(text, settings=Settings.from_config(cfg), kernels=[KERNEL], judge=judge, spec_for=lambda m, k: ([{"x": 1}], "test"))
    assert judge.calls == 3 and again.ptx == first.ptx
    assert again.records["kernels"][0]["status"] in ("locked", "cached")
    assert again.records["kernels"][0]["decision_keys"]["lock" if again.records["kernels"][0]["status"] == "locked"
                                                        else "cache"] in (keys["lock"], keys["cache"])
    # A machine without cache and without GPU reproduces the same binary from the lockfile.
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "other-cache"))
    monkeypatch.delenv("NVCC_PLUS_LOCK")
    no_gpu = ScriptedJudge(can_time=False)
    locked = optimize_module(text, settings=Settings.from_config(cfg), kernels=[KERNEL], judge=no_gpu, spec_for=lambda m, k: ([{"x": 1}], "test"))
    assert no_gpu.calls == 0 and locked.ptx == first.ptx
    assert locked.records["kernels"][0]["status"] == "locked"


def test_a_cached_decision_holds_for_its_least_gain(tmp_path, monkeypatch):
    """A rewrite cached under NVCC_PLUS_MIN_GAIN=0 (1.5%) is not applied under the default 2%:
    the kernel is searched again there (and keeps nvcc's code); each floor then finds its own."""
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    text = DATA.read_text()
    judge = ScriptedJudge(speedups={"commute": 1.015})

    def build(min_gain):
        cfg = {"passes": OPTS.passes, **({} if min_gain is None else {"min_gain": min_gain})}
        return optimize_module(text, settings=Settings.from_config(cfg), kernels=[KERNEL], judge=judge,
                               spec_for=lambda m, k: ([{"x": 1}], "test"))
    no_floor = build(0)
    assert no_floor.changed and no_floor.records["kernels"][0]["status"] == "optimized"
    calls = judge.calls
    again = build(0)
    assert judge.calls == calls and again.ptx == no_floor.ptx
    assert again.records["kernels"][0]["status"] == "cached"
    floor = build(None)                               # the default 2%: searched again, nvcc's code kept
    assert judge.calls > calls and not floor.changed
    assert floor.records["kernels"][0]["status"] == "kept-baseline"
    assert floor.records["kernels"][0]["decision_keys"]["cache"] != no_floor.records["kernels"][0]["decision_keys"]["cache"]
    calls = judge.calls
    floor_again = build(None)
    assert judge.calls == calls and not floor_again.changed
    assert floor_again.records["kernels"][0]["status"] == "cached"
    assert build(0).ptx == no_floor.ptx and judge.calls == calls          # the 0% entry is still there


def test_reports_render_and_gate():
    judge = ScriptedJudge(speedups={"commute": 1.25})
    res = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=OPTS, judge=judge)
    record = {"schema": "nvcc-plus/record", "schema_version": 1, "source": "a.cu", "target": "sm_90",
              "kernels": [res.record]}
    md = render.markdown([record])
    assert "| `diamond(int*, int const*, int)` | sm_90 | optimized | test-commute | 1.25×" in md
    assert "```diff" in md and "+\tld.global.nc.u32 \t%r5, [%rd6];" in md
    page = render.html_report([record])
    assert "<svg" in page and "test-commute" in page and "diff_chg" in page
    slower = ScriptedJudge(speedups={"commute": 1.0})
    res2 = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=OPTS, judge=slower)
    record2 = {**record, "kernels": [res2.record]}
    problems = gate(compare([record], [record2]), 0.02)
    assert problems == [f"{KERNEL}: speedup fell from 1.250x to 1.000x (more than the noise floor, 2.0%)",
                        f"{KERNEL}: was optimized, now kept-baseline"]
    assert gate(compare([record], [record]), 0.02) == []
    # a rewrite the build did not use (the driver marked the record) counts as nvcc's code
    import copy
    rolled = copy.deepcopy(record)
    rolled["kernels"][0].update(status="rolled-back", reason="ptxas failed on the rewritten PTX")
    assert gate(compare([record], [rolled]), 0.02) == [
        f"{KERNEL}: speedup fell from 1.250x to 1.000x (more than the noise floor, 2.0%)",
        f"{KERNEL}: was optimized, now rolled-back"]
    assert "rolled-back" in render.markdown([rolled])


def test_make_candidate_returns_none_when_a_step_does_not_fire():
    assert make_candidate(module(), KERNEL, [Step("test-nofire", {"k": 1})]) is None


def _fake_judge(name: str):
    """A real Judge over the CPU fake backend of tests/judge, with the judge kernel's spec."""
    from superopt.judge.backends.base import register_backend
    from superopt.judge import BackendJudge
    from tests.judge.judge_fake_backend import FakeBackend
    from tests.judge.planted import judge_spec
    fake = FakeBackend()
    register_backend(name, lambda: fake)
    return BackendJudge(name), fake, judge_spec(3000)


def test_judge_reuses_baseline_runs_until_a_rejection():
    """Judge.verify runs the baseline once per (baseline, spec) and again after a rejection."""
    from tests.judge.judge_fake_backend import fake_ptx
    judge, fake, spec = _fake_judge("fake-judge-reuse")
    base = fake_ptx("baseline")
    seeds = []
    for variant, status in [("nan_payload", "accepted"), ("baseline", "accepted"), ("fma", "rejected"),
                            ("nan_payload", "accepted"), ("baseline", "accepted")]:
        v = judge.verify(base, fake_ptx(variant), spec)
        assert v.status == status, (variant, v.reason)
        seeds.append(v.evidence["seed"])
    # baseline runs: once for the first three candidates, once more after the rejection (two
    # backend calls each: the large input set runs in a call of its own); a run per candidate,
    # except nvcc's own code against itself (answered from the baseline runs)
    assert fake.calls == 2 * 2 + 3
    assert seeds[0] == seeds[1] == seeds[2] and seeds[3] == seeds[4] and seeds[3] != seeds[2]


@passes.register(name="test-cs-stores", summary="streaming stores", assumes="the output is not re-read",
                 params={}, source="tests")
def _cs_stores(fn):
    out = []
    for inst in list(fn.instructions):
        if inst.opcode == "st" and inst.space == ".global":
            fn.replace(inst, inst.with_(modifiers=(".global", ".cs", *inst.modifiers[1:])))
            out.append(passes.Change("st.global -> st.global.cs", inst))
    return out


class ComboJudge(ScriptedJudge):
    """Speedup by what the candidate contains: .nc loads, .cs stores, or both."""

    def __init__(self, both: float):
        super().__init__()
        self.both = both

    def time(self, base, cand, spec, **kw):
        nc, cs = "ld.global.nc" in cand, "st.global.cs" in cand
        s = self.both if (nc and cs) else 1.2 if nc else 1.1 if cs else 1.0
        return Timing("ok", s > 1.01, s)


@pytest.mark.parametrize("both,winner", [(1.4, "test-commute + test-cs-stores"), (1.15, "test-commute")])
def test_greedy_combination_is_judged_and_kept_only_when_faster(both, winner):
    opts = SearchOptions(passes=["test-cs-stores", "test-commute", "test-nofire"], budget_s=60)
    result = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=opts, judge=ComboJudge(both))
    ids = [c["id"] for c in result.record["candidates"]]
    # the best single goes first in the combination, then the other winning pass
    assert ids == ["test-cs-stores", "test-commute", "test-commute + test-cs-stores"]
    assert result.record["winner"] == winner


def test_conflicting_passes_are_not_combined():
    from superopt.search.loop import _conflicts
    assert _conflicts([Step("unroll", {"factor": 2}), Step("nounroll", {"scope": "innermost"})])
    assert not _conflicts([Step("unroll", {"factor": 2}), Step("occupancy", {})])


class FlakyJudge(ComboJudge):
    """The .nc candidate looks faster once and never again; .cs is steadily faster."""

    def __init__(self):
        super().__init__(both=1.0)
        self.nc_timings = 0

    def time(self, base, cand, spec, **kw):
        nc, cs = "ld.global.nc" in cand, "st.global.cs" in cand
        if nc and not cs:
            self.nc_timings += 1
            s = 1.3 if self.nc_timings == 1 else 1.0
        elif cs and not nc:
            s = 1.1
        else:
            s = 1.0
        return Timing("ok", s > 1.01, s)


def test_the_kept_candidate_is_confirmed_by_a_second_timing():
    opts = SearchOptions(passes=["test-commute", "test-cs-stores"], budget_s=60)
    judge = FlakyJudge()
    result = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=opts, judge=judge)
    fates = {c["id"]: c["fate"] for c in result.record["candidates"]}
    assert fates["test-commute"] == "not-confirmed"          # 1.3x once, 1.0x when timed again
    assert fates["test-cs-stores"] == "winner"
    win = next(c for c in result.record["candidates"] if c["fate"] == "winner")
    assert win["confirmation"]["speedup"] == 1.1 and win["speedup"] == 1.1
    assert "confirmed" in result.record["reason"]
    validate({"schema": "nvcc-plus/record", "schema_version": 1, "kernels": [result.record]})


def test_nothing_confirmed_keeps_the_baseline():
    class OnceJudge(ScriptedJudge):
        def time(self, base, cand, spec, **kw):
            self.calls += 1
            s = 1.25 if self.calls <= 2 else 1.0
            return Timing("ok", s > 1.01, s)
    opts = SearchOptions(passes=["test-commute"], budget_s=60)
    result = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=opts, judge=OnceJudge())
    assert result.winner is None and result.record["status"] == "kept-baseline"
    assert "timed again" in result.record["reason"]


def test_the_kept_candidate_is_checked_again_on_fresh_inputs():
    """A candidate that passes the search's checks but fails on fresh inputs is not kept."""
    class FreshFailJudge(ComboJudge):
        def verify(self, base, cand, spec, fresh=False):
            if fresh and "ld.global.nc" in cand:
                return Verdict("rejected", "set 2: buffer 'out' element 7 differs")
            return super().verify(base, cand, spec)
    opts = SearchOptions(passes=["test-commute", "test-cs-stores"], budget_s=60)
    result = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=opts,
                           judge=FreshFailJudge(both=1.0))
    by_id = {c["id"]: c for c in result.record["candidates"]}
    assert by_id["test-commute"]["fate"] == "rejected-check"
    assert by_id["test-commute"]["reason"].startswith("on fresh inputs")
    assert by_id["test-cs-stores"]["fate"] == "winner"
    assert by_id["test-cs-stores"]["fresh_verdict"]["status"] == "accepted"


def test_judge_fresh_verify_draws_new_inputs():
    from tests.judge.judge_fake_backend import fake_ptx
    judge, fake, spec = _fake_judge("fake-judge-fresh")
    base = fake_ptx("baseline")
    a = judge.verify(base, fake_ptx("nan_payload"), spec)
    b = judge.verify(base, fake_ptx("nan_payload"), spec, fresh=True)
    c = judge.verify(base, fake_ptx("nan_payload"), spec)
    assert a.status == b.status == c.status == "accepted"
    assert a.evidence["seed"] == c.evidence["seed"] != b.evidence["seed"]
    # fresh: its own baseline runs; the shared runs stay (baseline runs: two backend calls, the
    # large input set in a call of its own)
    assert fake.calls == (2 + 1) + (2 + 1) + 1


def test_a_candidate_the_sanitizer_flags_is_not_kept():
    from superopt.judge.sanitize import SanitizerResult

    class SanitizingJudge(ComboJudge):
        def sanitize(self, base, cand, spec, tools):
            assert tuple(tools) == ("memcheck", "racecheck")
            if "ld.global.nc" in cand:
                return SanitizerResult("rejected", "compute-sanitizer memcheck: 1 error(s) in the candidate, 0 in "
                                                   "nvcc's code: Invalid __global__ read of size 16 bytes")
            return SanitizerResult("clean", "no compute-sanitizer error beyond nvcc's code's")
    opts = SearchOptions(passes=["test-commute", "test-cs-stores"], budget_s=60)
    result = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90", options=opts,
                           judge=SanitizingJudge(both=1.0))
    by_id = {c["id"]: c for c in result.record["candidates"]}
    assert by_id["test-commute"]["fate"] == "rejected-check"
    assert by_id["test-commute"]["reason"].startswith("compute-sanitizer memcheck")
    assert by_id["test-commute"]["sanitizer"]["status"] == "rejected"
    assert by_id["test-cs-stores"]["fate"] == "winner" and by_id["test-cs-stores"]["sanitizer"]["status"] == "clean"
    # switched off: not asked
    off = search_kernel(module(), KERNEL, [{"x": 1}], target="sm_90",
                        options=SearchOptions(passes=["test-commute"], budget_s=60, sanitize=()),
                        judge=SanitizingJudge(both=1.0))
    assert off.record["winner"] == "test-commute" and "sanitizer" not in off.record["candidates"][0]


def test_sanitize_setting(monkeypatch):
    from superopt.search.options import search_options

    def options_from_config(cfg):
        return search_options(Settings.from_config(cfg))

    assert options_from_config({}).sanitize == ("memcheck", "racecheck")
    monkeypatch.setenv("NVCC_PLUS_SANITIZE", "off")
    assert options_from_config({}).sanitize == ()
    # The environment beats nvcc-plus.toml; a command's own option beats both (docs/settings.md).
    assert options_from_config({"sanitize": ["memcheck"]}).sanitize == ()
    assert options_from_config({"overrides": {"sanitize": ["memcheck"]}}).sanitize == ("memcheck",)
    monkeypatch.delenv("NVCC_PLUS_SANITIZE")
    assert options_from_config({"sanitize": ["memcheck"]}).sanitize == ("memcheck",)
    monkeypatch.setenv("NVCC_PLUS_SANITIZE", "memchek")
    with pytest.raises(ValueError, match="unknown compute-sanitizer tool"):
        options_from_config({})


def test_a_baseline_that_cannot_be_judged_is_run_once_per_search():
    from tests.judge.judge_fake_backend import fake_ptx
    judge, fake, spec = _fake_judge("fake-judge-noisy")
    noisy = fake_ptx("noisy")
    for _ in range(3):
        v = judge.verify(noisy, noisy + "// candidate\n", spec)
        assert v.status == "could_not_judge" and "not deterministic" in v.reason
    assert fake.calls == 1


def test_the_sanitizer_runs_at_the_smallest_launch_shape():
    """Instrumented launches are slow: compute-sanitizer gets the smallest of the kernel's specs
    (a captured 2048^3 launch under racecheck took minutes), not the timed one."""
    from superopt.judge.sanitize import SanitizerResult
    from superopt.specs.launch_spec import Buffer, LaunchSpec, Scalar
    seen = []

    def spec(n):
        return LaunchSpec(kernel=KERNEL, grid=("cdiv(n, 256)",), block=(256,),
                          params=[Scalar("n", "s32", n), Buffer("x", "f32", "n")])

    class SanitizingJudge(ComboJudge):
        def sanitize(self, base, cand, one, tools):
            seen.append(one)
            return SanitizerResult("clean", "no compute-sanitizer error beyond nvcc's code's")
    big, small = spec(1 << 24), spec(1000)
    result = search_kernel(module(), KERNEL, [big, small], target="sm_90",
                           options=SearchOptions(passes=["test-cs-stores"], budget_s=60),
                           judge=SanitizingJudge(both=1.0))
    assert result.record["winner"] == "test-cs-stores"
    assert seen and all(s is small for s in seen)
