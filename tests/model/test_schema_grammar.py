"""Plan-mode schema and rewrite-mode grammar: generated from the registry / kept in the
repository, accepted by xgrammar, and every string they admit parses."""
from __future__ import annotations

import importlib.util
import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import ptx_ir
from ptx_ir.opcodes import OPCODES
from ptx_ir.printer import emit_function
from superopt.search.candidates import Step, apply_plan
from superopt.model.grammar import GRAMMAR_FILE, ebnf_literal, function_header, grammar_text, kernel_grammar
from superopt.model.rewrite import PASS_NAME, RewriteError, make_rewrite_candidate, parse_function
from superopt.model.schema import PlanError, parse_plan, plan_schema
from tests.model.helpers import VADD, VADD_FN, VADD_GOOD

needs_xgrammar = pytest.mark.skipif(importlib.util.find_spec("xgrammar") is None,
                                    reason="xgrammar is not installed (pip install 'nvcc-plus[llm]')")
CORPUS_SRC = Path(__file__).resolve().parent.parent / "corpus" / "src"


# ------------------------------------------------------------------------------- schema

def test_schema_lists_registered_passes_with_their_values(test_passes):
    schema = plan_schema(test_passes, max_steps=3)
    steps = schema["properties"]["steps"]
    assert steps["maxItems"] == 3 and steps["minItems"] == 1
    alts = {a["properties"]["pass"]["const"]: a for a in steps["items"]["oneOf"]}
    assert set(alts) == {"test-nc-loads", "test-never-fires"}
    params = alts["test-nc-loads"]["properties"]["params"]
    assert params["properties"] == {"which": {"enum": ["all", "first"]}}
    assert params["required"] == ["which"] and params["additionalProperties"] is False
    assert alts["test-never-fires"]["properties"]["params"]["properties"]["level"]["enum"] == [1, 2, 3]


def test_schema_from_the_live_registry_hides_the_rewrite_pseudo_pass():
    import superopt.model.rewrite  # noqa: F401 (registers model-rewrite)
    from superopt.passes import registry
    assert PASS_NAME in registry()
    schema = plan_schema()
    names = set() if schema is None else {a["properties"]["pass"]["const"]
                                          for a in schema["properties"]["steps"]["items"]["oneOf"]}
    assert PASS_NAME not in names
    assert plan_schema({}) is None


def test_parse_plan_checks_names_and_values(test_passes):
    plan = parse_plan('{"steps":[{"pass":"test-nc-loads","params":{"which":"first"}}]}', test_passes)
    assert plan == [Step("test-nc-loads", {"which": "first"})]
    bad = [
        ("not json", "not JSON"),
        ('{"steps":[]}', "no steps"),
        ('{"steps":[{"pass":"nope","params":{}}]}', "unknown pass"),
        ('{"steps":[{"pass":"test-nc-loads","params":{"which":"middle"}}]}', "not one of"),
        ('{"steps":[{"pass":"test-nc-loads","params":{}}]}', "needs parameter"),
        ('{"steps":[{"pass":"test-nc-loads","params":{"which":"first","x":1}}]}', "no parameter"),
        ('{"steps":[' + ",".join(['{"pass":"test-never-fires","params":{"level":1}}'] * 5) + "]}", "at most"),
        ('{"steps":[], "why": 1}', "unexpected keys"),
    ]
    for text, msg in bad:
        with pytest.raises(PlanError, match=msg):
            parse_plan(text, test_passes)


@needs_xgrammar
def test_xgrammar_enforces_the_plan_schema(test_passes):
    import xgrammar as xgr
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False)
    compiled = compiler.compile_json_schema(json.dumps(plan_schema(test_passes)), any_whitespace=False,
                                            separators=(",", ":"))

    def ok(s):
        m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        return m.accept_string(s) and m.is_terminated()
    assert ok('{"steps":[{"pass":"test-nc-loads","params":{"which":"all"}}]}')
    assert ok('{"steps":[{"pass":"test-never-fires","params":{"level":3}},'
              '{"pass":"test-nc-loads","params":{"which":"first"}}]}')
    assert not ok('{"steps":[{"pass":"test-nc-loads","params":{"which":"middle"}}]}')
    assert not ok('{"steps":[{"pass":"vectorize","params":{}}]}')
    assert not ok('{"steps":[]}')


# ------------------------------------------------------------------------------- grammar

def test_grammar_opcodes_match_ptx_ir():
    text = grammar_text()
    rule = text[text.index("opcode ::="):]
    listed = set(re.findall(r'"([a-z0-9_]+)"', rule))
    assert listed == {o for o in OPCODES if "." not in o}


def test_kernel_grammar_pins_the_header():
    fn = ptx_ir.parse(VADD).function("vadd")
    g = kernel_grammar(fn, max_statements=40)
    assert g.startswith("root ::= " + ebnf_literal(function_header(fn)))
    assert "statement{0,40}" in g and "flat_statement{0,40}" in g
    assert function_header(fn).endswith("{\n") and "vadd_param_3" in function_header(fn)
    assert ebnf_literal('a"b\\c\n\t') == '"a\\"b\\\\c\\n\\t"'


@needs_xgrammar
def test_kernel_grammar_accepts_the_kernel_and_refuses_other_headers():
    from superopt.model.grammar import accepts
    fn = ptx_ir.parse(VADD).function("vadd")
    g = kernel_grammar(fn, max_statements=60)
    assert accepts(g, VADD_FN)
    assert accepts(g, VADD_GOOD)
    assert not accepts(g, VADD_FN.replace("vadd(", "vadd2("))
    assert not accepts(g, VADD_FN.replace(".param .u32 vadd_param_3", ".param .u64 vadd_param_3"))
    assert not accepts(g, VADD_FN.replace("\tret;\n", "\tfrobnicate.u32 \t%r1;\n"))   # unknown opcode
    assert not accepts(kernel_grammar(fn, max_statements=10), VADD_FN)               # over the bound
    long_name = "_Z" + "x" * 40
    assert not accepts(g, VADD_FN.replace("$L__BB0_2", "$L__" + "B" * 40))           # rambling label
    assert not accepts(g, VADD_FN.replace("\tret;\n", f"\tbra.uni \t{long_name};\n"))  # unknown long name
    assert accepts(g, VADD_FN.replace("\tret;\n", "\tbra.uni \t$L__BB0_2;\n"))


def _corpus_functions(tmp_path_factory) -> list:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    out = tmp_path_factory.mktemp("grammar-corpus")
    fns = []
    for name in ("elementwise", "reductions", "stencils", "warp_intrinsics", "control_flow"):
        src = CORPUS_SRC / f"{name}.cu"
        if not src.exists():
            continue
        ptx = out / f"{name}.ptx"
        proc = subprocess.run([nvcc, "-arch=sm_90", "-O3", "-ptx", str(src), "-o", str(ptx)],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            module = ptx_ir.parse(ptx.read_text())
            fns += [(module, f) for f in module.functions if not f.is_declaration]
    if not fns:
        pytest.skip("no corpus PTX could be made")
    return fns


@needs_xgrammar
def test_grammar_accepts_every_corpus_function(tmp_path_factory):
    """Everything nvcc makes (printed canonically by ptx_ir) is inside the grammar."""
    import xgrammar as xgr
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False).compile_grammar(grammar_text())
    from superopt.model.grammar import accepts
    fns = _corpus_functions(tmp_path_factory)
    refused = []
    for module, fn in fns:
        m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        if not (m.accept_string(emit_function(fn)) and m.is_terminated()):
            refused.append(fn.name)
    assert not refused, f"{len(refused)} of {len(fns)} corpus functions refused: {refused[:5]}"
    assert len(fns) >= 20
    # and each kernel's own grammar (header pinned, names limited, statements bounded) takes it
    kernels = [(m, f) for m, f in fns if f.is_entry][::3]
    refused = [f.name for m, f in kernels
               if not accepts(kernel_grammar(f, module=m, max_statements=int(len(f.body) * 1.5) + 8),
                              emit_function(f))]
    assert not refused and len(kernels) >= 10, refused


@needs_xgrammar
def test_every_string_the_grammar_admits_parses():
    """Random walks through the per-kernel grammar (character by character, any allowed
    character) always give text that ptx_ir parses: constrained answers always parse."""
    import numpy as np
    import torch  # noqa: F401 (xgrammar's bitmask is a torch tensor)
    import xgrammar as xgr
    chars = [chr(c) for c in range(32, 127)] + ["\t", "\n"]
    vocab = chars + ["<stop>"]
    stop = len(vocab) - 1
    info = xgr.TokenizerInfo(vocab, stop_token_ids=[stop])
    fn = ptx_ir.parse(VADD).function("vadd")
    grammar = kernel_grammar(fn, max_statements=6).replace("body ::= statement{0,6}", "body ::= statement{2,6}")
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar(grammar)
    closers = set(";\n,])|")
    weights_all = np.array([10.0 if ch in closers else 1.0 for ch in chars] + [50.0])
    rng = random.Random(1234)
    bitmask = xgr.allocate_token_bitmask(1, len(vocab))
    made = 0
    for _ in range(150):
        m = xgr.GrammarMatcher(compiled)
        out = []
        while not m.is_terminated() and len(out) < 3000:
            m.fill_next_token_bitmask(bitmask)
            bits = bitmask[0].numpy().view(np.uint32)
            allowed = [i for i in range(len(vocab)) if (bits[i // 32] >> (i % 32)) & 1]
            w = weights_all[allowed]
            tok = rng.choices(allowed, weights=w)[0]
            assert m.accept_token(tok)
            if tok != stop:
                out.append(vocab[tok])
        if not m.is_terminated():
            continue
        text = "".join(out)
        try:
            new = parse_function(text, ptx_ir.parse(VADD), "vadd")
        except RewriteError as e:
            assert e.fate != "unparsed", f"grammar admitted text that does not parse: {e}\n{text}"
            # undeclared registers / missing labels are context rules a grammar cannot state
            continue
        assert new.name == "vadd"
        made += 1
    assert made >= 100


# ------------------------------------------------------------------------------- rewrites

def test_rewrite_candidate_keeps_the_contract():
    module = ptx_ir.parse(VADD)
    cand = make_rewrite_candidate(module, "vadd", VADD_GOOD)
    assert "%r6, %tid.x" not in cand.ptx and "%r6, %tid.x" in VADD
    assert cand.plan[0].pass_name == PASS_NAME
    # the plan re-applies (what the cache and the lockfile do) to the same text
    again, changes = apply_plan(module, "vadd", cand.plan)
    assert ptx_ir.emit(again) == cand.ptx and changes
    # fenced answers are accepted too
    assert make_rewrite_candidate(module, "vadd", "```ptx\n" + VADD_GOOD + "```\n").ptx == cand.ptx

    cases = [
        (VADD_GOOD.replace("vadd(", "vadd_fast("), "changes-contract", "name"),
        (VADD_GOOD.replace(".param .u32 vadd_param_3", ".param .u64 vadd_param_3"), "changes-contract", "params"),
        (".global .f32 g;\n" + VADD_GOOD, "changes-contract", "module-level"),
        (VADD_GOOD.replace("add.f32 \t%f3", "add.f32 \t%f9"), "invalid-ir", "undeclared register"),
        (VADD_GOOD.replace("@%p1 bra \t$L__BB0_2;", "@%p1 bra \t$L__BB0_9;"), "invalid-ir", "missing label"),
        (VADD_GOOD.replace("ld.global.nc.f32 \t%f1, [%rd8];", "ld.global.nc.f32 %f1 [%rd8]"), "unparsed", "line 27, column 23"),
    ]
    for text, fate, msg in cases:
        with pytest.raises(RewriteError, match=msg) as err:
            make_rewrite_candidate(module, "vadd", text)
        assert err.value.fate == fate


def test_rewrite_pseudo_pass_never_fires_in_the_rule_search():
    from superopt.passes import get_pass
    fn = ptx_ir.parse(VADD).function("vadd")
    info = get_pass(PASS_NAME)
    assert info.params == {}
    assert info(fn.clone()) == []
    assert info(fn.clone(), function=VADD_FN) == []          # identical body: no change
    assert info(fn.clone(), function=VADD_GOOD)
    assert info(fn.clone(), function=VADD_GOOD.replace("vadd(", "other(")) == []


def test_grammar_file_is_packaged():
    assert GRAMMAR_FILE.name == "ptx.ebnf" and GRAMMAR_FILE.exists()
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"*.ebnf"' in text
