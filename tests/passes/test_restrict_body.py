"""restrict-body and no-alias versioning (superopt.passes._versioning): nvcc's restrict-compiled
body (cicc -kernel-params-are-restrict) behind a launch-time check, nvcc's own body otherwise.

The check here is made by hand (``matvec_check``: the byte ranges of A (n*n floats), x and tmp
(n floats) from the parameters, tmp disjoint from both) or constant (true / false), standing in
for the footprint analysis' (``superopt.passes._alias_footprint.alias_check``, monkeypatched).

data/restrict_body.ptx and data/restrict_body.restrict.ptx are nvcc 13.0 output of
data/restrict_body.cu (the commands are in its header).
"""
from __future__ import annotations

import numpy as np
import pytest

import ptx_ir
from ptx_ir.nodes import Addr, Directive, Imm, Sym, VarDecl
from ptx_ir.printer import emit_function
from superopt.passes import get_pass
from superopt.passes._alias_check import AliasCheck
from superopt.passes._loop_tools import I
from superopt.passes._versioning import VersioningRefused, refusal, same_code, versioned
from tests.passes.data.ptx_tools import assemble, emulate, emulator_available, judge_on_emulator, load, ptxas_path

MATVEC = "_Z11matvec_rowsPKfS0_Pfi"
BUMP = "_Z4bumpPfi"
BASE = load("restrict_body.ptx")
RESTRICT = load("restrict_body.restrict.ptx")
TEXT = ptx_ir.emit(BASE)
ORIGIN = "restrict-compiled body from nvcc (cicc -kernel-params-are-restrict)"

needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas not on PATH")


def _need_emulator():
    ok, why = emulator_available()
    if not ok:
        pytest.skip(why)


def matvec_check(fn, const: bool | None = None) -> AliasCheck:
    """tmp's n floats disjoint from A's n*n and x's n (``const``: a constant answer instead)."""
    p = [q.name for q in fn.params]
    r = fn.new_register
    a, x, t, n = r(".u64"), r(".u64"), r(".u64"), r(".u32")
    ins = [I("ld", ".param.u64", a, Addr(Sym(p[0]))), I("ld", ".param.u64", x, Addr(Sym(p[1]))),
           I("ld", ".param.u64", t, Addr(Sym(p[2]))), I("ld", ".param.u32", n, Addr(Sym(p[3])))]
    ok = r(".pred")
    if const is not None:
        ins.append(I("setp", ".eq.u32" if const else ".ne.u32", ok, n, n))
    else:
        n4, nn, nn4, te, ae, xe = r(".u64"), r(".u32"), r(".u64"), r(".u64"), r(".u64"), r(".u64")
        pa, px = r(".pred"), r(".pred")
        ins += [I("mul", ".wide.s32", n4, n, 4), I("mul", ".lo.s32", nn, n, n), I("mul", ".wide.s32", nn4, nn, 4),
                I("add", ".s64", te, t, n4), I("add", ".s64", ae, a, nn4), I("add", ".s64", xe, x, n4),
                I("setp", ".le.u64", pa, te, a), I("setp", ".le.or.u64", pa, ae, t, pa),
                I("setp", ".le.u64", px, te, x), I("setp", ".le.or.u64", px, xe, t, px),
                I("and", ".pred", ok, pa, px)]
    return AliasCheck(ins, ok.name, [p[2]], p[:3], {p[0]: "4*n*n bytes", p[1]: "4*n bytes", p[2]: "4*n bytes"})


def versioned_module(const=None, fast=None):
    module = BASE.clone()
    fn = module.function(MATVEC)
    changes = versioned(fn, fast or RESTRICT.function(MATVEC), matvec_check(fn, const), origin=ORIGIN,
                        fast_module=RESTRICT, base_module=BASE)
    return module, fn, changes


def restrict_text(name=MATVEC) -> str:
    return emit_function(RESTRICT.function(name))


@pytest.fixture
def hand_check(monkeypatch):
    """The footprint analysis stands in as the hand-made check."""
    from superopt.passes import restrict_body
    monkeypatch.setattr(restrict_body, "alias_check_for",
                        lambda fn: matvec_check(fn) if fn.name == MATVEC else None)


# --------------------------------------------------------------------------- the rewrite

@needs_ptxas
def test_the_versioned_matvec_assembles_and_holds_both_bodies():
    module, fn, changes = versioned_module()
    assert len(changes) == 1 and changes[0].description.startswith(ORIGIN + " behind launch-time no-alias check")
    text = ptx_ir.emit(module)
    res = assemble(text)
    assert res.ok, res.log
    body = emit_function(fn)
    assert body.count("ld.global.nc.f32") == emit_function(RESTRICT.function(MATVEC)).count("ld.global.nc.f32") > 0
    assert body.count("st.global.f32") == (emit_function(BASE.function(MATVEC)).count("st.global.f32")
                                           + emit_function(RESTRICT.function(MATVEC)).count("st.global.f32"))
    fn.validate()
    # the fast body's registers are fresh registers of fn; its own declarations are gone
    assert len([d for d in fn.reg_decls if not d.name.startswith("%np")]) == len(BASE.function(MATVEC).reg_decls)
    # the check, then the branch to nvcc's body, then the fast body
    first = [i for i in fn.instructions][:20]
    assert any(i.opcode == "bra" and i.guard is not None and i.guard.negated for i in first)
    # nvcc's own code is there unchanged after the label
    from ptx_ir.printer import emit_statement
    own = [emit_statement(i) for i in BASE.function(MATVEC).instructions]
    assert [emit_statement(i) for i in fn.instructions][-len(own):] == own


def _matvec_case(n, rng, alias=False):
    a = rng.standard_normal(n * n).astype(np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    t = rng.standard_normal(n).astype(np.float32)
    params = [("buf", a, 0), ("buf", x, 0), ("alias", 1, 0) if alias else ("buf", t, 0), np.int32(n)]
    return params


def _run(text, params, n, block=32):
    return emulate(text, MATVEC, (-(-n // block), 1, 1), (block, 1, 1), params, arena=4096)


def _same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def test_disjoint_buffers_give_nvcc_results_on_the_emulator():
    _need_emulator()
    module, _, _ = versioned_module()
    text = ptx_ir.emit(module)
    rng = np.random.default_rng(7)
    for n, block in ((13, 32), (29, 8), (1, 32)):
        params = _matvec_case(n, rng)
        assert _same(_run(TEXT, params, n, block), _run(text, params, n, block)), n


def test_the_fast_path_runs_when_the_check_holds_and_nvcc_path_when_not():
    """With tmp aliasing x the two bodies differ (restrict keeps tmp[i] in a register and reads
    x[j] = tmp[j] before the stores): a constant-true check gives the restrict body's result, a
    constant-false one nvcc's, and the real check sees the overlap and runs nvcc's."""
    _need_emulator()
    n = 13
    params = _matvec_case(n, np.random.default_rng(3), alias=True)
    nvcc_out = _run(TEXT, params, n)
    restrict_out = _run(ptx_ir.emit(RESTRICT), params, n)
    assert not _same(nvcc_out, restrict_out)            # the case tells the bodies apart
    always, _, _ = versioned_module(const=True)
    never, _, _ = versioned_module(const=False)
    checked, _, _ = versioned_module()
    assert _same(_run(ptx_ir.emit(always), params, n), restrict_out)
    assert _same(_run(ptx_ir.emit(never), params, n), nvcc_out)
    assert _same(_run(ptx_ir.emit(checked), params, n), nvcc_out)


def test_the_differential_check_accepts_the_pass_on_the_emulator(hand_check):
    _need_emulator()
    module = BASE.clone()
    changes = get_pass("restrict-body")(module.function(MATVEC), restrict=restrict_text())
    assert changes
    spec = {"kernel": MATVEC, "grid": ["cdiv(n, 32)", 1, 1], "block": [32, 1, 1], "params": [
        {"name": "A", "kind": "buffer", "type": "f32", "length": "n*n", "direction": "in"},
        {"name": "x", "kind": "buffer", "type": "f32", "length": "n", "direction": "in"},
        {"name": "tmp", "kind": "buffer", "type": "f32", "length": "n", "direction": "inout"},
        {"name": "n", "kind": "scalar", "type": "s32", "value": 37}]}
    verdict = judge_on_emulator(TEXT, ptx_ir.emit(module), spec)
    if verdict.status == "could_not_judge":
        pytest.skip(verdict.reason)
    assert verdict.status == "accepted", verdict.reason


# --------------------------------------------------------------------------- the pass

def test_the_pass_says_where_the_body_came_from(hand_check):
    from superopt.search.candidates import Step, make_candidate
    cand = make_candidate(BASE, MATVEC, [Step("restrict-body", {"restrict": restrict_text()})])
    assert cand is not None
    (change,) = cand.changes
    assert change.startswith("restrict-body: restrict-compiled body from nvcc (cicc -kernel-params-are-restrict) "
                             "behind launch-time no-alias check (")
    assert "_param_2 vs _Z11matvec_rowsPKfS0_Pfi_param_0" in change
    assert assemble(cand.ptx).ok if ptxas_path() else True
    # the id (records, reports, the build's summary line) names the body by size and hash;
    # the plan keeps it whole
    assert cand.id.startswith("restrict-body(restrict=<code ") and len(cand.id) < 80, cand.id
    assert cand.plan[0].params["restrict"] == restrict_text()


def test_a_restrict_body_equal_to_nvcc_gives_no_change(hand_check, monkeypatch):
    assert same_code(BASE.function(BUMP), RESTRICT.function(BUMP))
    assert not same_code(BASE.function(MATVEC), RESTRICT.function(MATVEC))
    from superopt.passes import restrict_body
    monkeypatch.setattr(restrict_body, "alias_check_for", lambda fn: AliasCheck([], "%p1", [], []))
    fn = BASE.clone().function(BUMP)
    assert get_pass("restrict-body")(fn, restrict=restrict_text(BUMP)) == []


def test_without_the_fact_or_a_check_the_pass_does_nothing(monkeypatch):
    from superopt.passes import restrict_body
    assert get_pass("restrict-body")(BASE.clone().function(MATVEC)) == []
    monkeypatch.setattr(restrict_body, "alias_check_for", lambda fn: None)
    assert get_pass("restrict-body")(BASE.clone().function(MATVEC), restrict=restrict_text()) == []


def test_a_fast_body_with_another_signature_is_refused(hand_check):
    other = RESTRICT.function(MATVEC).clone()
    other.params[3] = VarDecl(space=".param", type=".u64", name=other.params[3].name)
    with pytest.raises(VersioningRefused, match="parameters differ"):
        versioned_module(fast=other)
    renamed = RESTRICT.function(MATVEC).clone()
    renamed.params[0] = VarDecl(space=".param", type=".u64", name="p0")
    assert "parameters differ" in refusal(BASE.function(MATVEC), renamed)
    # another kernel's body (bump) under the pass: nothing
    wrong = restrict_text(BUMP)
    assert get_pass("restrict-body")(BASE.clone().function(MATVEC), restrict=wrong) == []
    swapped = restrict_text().replace(MATVEC, "_Z11matvec_rowsPfS_Pfi")
    assert get_pass("restrict-body")(BASE.clone().function(MATVEC), restrict=swapped) == []


def test_other_entry_directives_and_unchecked_calls_are_refused():
    base = BASE.function(MATVEC)
    fast = RESTRICT.function(MATVEC).clone()
    fast.directives.append(Directive(".maxntid", [Imm("128"), Imm("1"), Imm("1")], terminated=False))
    assert "entry directives" in refusal(base, fast)
    calls = RESTRICT.function(MATVEC).clone()
    calls.body.insert(len(calls.body) - 1, ptx_ir.Instruction("call", (".uni",), (Sym("helper"),)))
    assert "calls a function" in refusal(base, calls)


def test_a_fast_body_using_a_global_the_baseline_lacks_is_refused():
    fast_module = RESTRICT.clone()
    fast_module.items.insert(0, VarDecl(space=".global", type=".f32", name="extra_g", linkage=(".visible",)))
    fast = fast_module.function(MATVEC)
    fast.body.insert(len(fast.body) - 1, I("mov", ".u64", fast.reg_decls[-1].name + "0", Sym("extra_g")))
    assert "does not declare" in refusal(BASE.function(MATVEC), fast, fast_module=fast_module, base_module=BASE)


@needs_ptxas
def test_local_and_shared_variables_of_the_fast_body_are_renamed_and_merged():
    """A clone of nvcc's own body as the fast body (what a transformed clone would be), given a
    local depot and a shared array that clash by name with fn's: both survive, renamed."""
    module = BASE.clone()
    fn = module.function(MATVEC)
    depot = [VarDecl(space=".local", type=".b8", name="__local_depot0", align=4, dims=(16,)),
             VarDecl(space=".shared", type=".b8", name="stage", align=4, dims=(64,))]
    fn.body[0:0] = depot
    fast = fn.clone()
    check = matvec_check(fn, const=True)
    versioned(fn, fast, check, origin="a clone")
    names = [s.name for s in fn.body if isinstance(s, VarDecl) and s.space != ".reg"]
    assert sorted(names) == sorted(["__local_depot0", "stage", "__local_depot0_np_fast0", "stage_np_fast0"])
    res = assemble(ptx_ir.emit(module))
    assert res.ok, res.log


# --------------------------------------------------------------------------- the search's plumbing

def test_the_search_asks_for_the_variant_once_and_only_for_kernels_that_could_use_it(hand_check):
    from superopt.config.resolved import Settings
    from superopt.decide.run import ModuleRun
    from superopt.search.choices import kernel_search_options
    from superopt.search.options import SearchOptions
    calls = []

    def variant():
        calls.append(1)
        return ptx_ir.emit(RESTRICT)
    run = ModuleRun(TEXT, ptx_ir.parse(TEXT), target="sm_90", source=None, settings=Settings(),
                    options=SearchOptions(), restrict_variant=variant)
    assert run.kernel_facts(BUMP) == {} and calls == []        # one pointer: never asked
    facts = run.kernel_facts(MATVEC)
    assert calls == [1] and facts["restrict_body"] == restrict_text()
    opts = kernel_search_options(run.options_for(MATVEC), None, None)
    assert opts.extra_params["restrict-body"] == {"restrict": restrict_text()}
    from dataclasses import replace

    from superopt.search.rules import rule_candidates
    notes: list = []
    (cand,) = rule_candidates(run.module, MATVEC, replace(opts, passes=["restrict-body"]), notes)
    assert [s.pass_name for s in cand.plan] == ["restrict-body"] and ORIGIN in cand.changes[0]
    assert run.options_for(BUMP) is run.options
    run.kernel_facts(MATVEC)
    assert calls == [1]                                      # memoized here too
    # a variant that raises only loses the fact, and says so
    bad = ModuleRun(TEXT, ptx_ir.parse(TEXT), target="sm_90", source=None, settings=Settings(),
                    options=SearchOptions(), restrict_variant=lambda: 1 / 0)
    assert bad.kernel_facts(MATVEC) == {}
    assert any("restrict-compiled PTX not used: ZeroDivisionError" in m for m in bad.messages)
    # NVCC_PLUS_PASSES without restrict-body: never asked
    calls.clear()
    off = ModuleRun(TEXT, ptx_ir.parse(TEXT), target="sm_90", source=None, settings=Settings(),
                    options=SearchOptions(passes=["unroll"]), restrict_variant=variant)
    assert off.kernel_facts(MATVEC) == {} and calls == []


# --------------------------------------------------------------------------- with the real check

def test_the_real_footprint_check_runs_the_restrict_body_only_on_disjoint_buffers():
    """No hand check: superopt.passes._alias_footprint builds it from nvcc's PTX. Disjoint
    buffers give nvcc's results (through the restrict body), tmp aliased onto x gives nvcc's
    results too (through nvcc's body: the restrict body's would differ), and the differential
    check accepts the candidate."""
    _need_emulator()
    module = BASE.clone()
    changes = get_pass("restrict-body")(module.function(MATVEC), restrict=restrict_text())
    assert changes and "no-alias check" in changes[0].description
    text = ptx_ir.emit(module)
    rng = np.random.default_rng(11)
    for n, block in ((13, 32), (29, 8)):
        params = _matvec_case(n, rng)
        assert _same(_run(TEXT, params, n, block), _run(text, params, n, block)), n
        aliased = _matvec_case(n, rng, alias=True)
        assert not _same(_run(TEXT, aliased, n, block), _run(ptx_ir.emit(RESTRICT), aliased, n, block))
        assert _same(_run(TEXT, aliased, n, block), _run(text, aliased, n, block)), n
    spec = {"kernel": MATVEC, "grid": ["cdiv(n, 32)", 1, 1], "block": [32, 1, 1], "params": [
        {"name": "A", "kind": "buffer", "type": "f32", "length": "n*n", "direction": "in"},
        {"name": "x", "kind": "buffer", "type": "f32", "length": "n", "direction": "in"},
        {"name": "tmp", "kind": "buffer", "type": "f32", "length": "n", "direction": "inout"},
        {"name": "n", "kind": "scalar", "type": "s32", "value": 37}]}
    verdict = judge_on_emulator(TEXT, text, spec)
    assert verdict.status == "accepted", verdict.reason
