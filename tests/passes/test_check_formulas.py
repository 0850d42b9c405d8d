"""The no-alias check's ranges in words (superopt.passes._check_formulas): formulas over the
parameters and the launch, read back from the check's own code; evaluated as Python at a
launch they give the very bytes the check's code computes there."""
from __future__ import annotations

import re

import ptx_ir
from ptx_ir.nodes import Imm, Reg
from superopt.passes._alias_footprint import build_alias_check
from superopt.passes._check_formulas import MAX_CHARS, bound_text, formulas, param_label
from superopt.passes._loop_tools import I, run_straight
from tests.passes.data.ptx_tools import load

KERNEL = "_Z11matvec_rowsPKfS0_Pfi"


def _check():
    check, why = build_alias_check(load("restrict_body.ptx").function(KERNEL))
    assert check is not None, why
    return check


def test_the_written_range_reads_as_the_kernels_footprint():
    assert _check().ranges[f"{KERNEL}_param_2"] == (
        "[param_2, 4*min(%ntid.x + %ntid.x*(%nctaid.x - 1) - 1, param_3 - 1) + param_2 + 4) over 7 accesses (written)")


def test_the_formulas_evaluate_to_what_the_checks_code_computes():
    """At a launch (param values, %ntid, %nctaid), each untruncated formula, evaluated as Python,
    equals the register the check's code leaves for that end."""
    check = _check()
    values = {"param_0": 1 << 40, "param_1": 2 << 40, "param_2": 3 << 40, "param_3": 300,
              "%ntid.x": 128, "%nctaid.x": 3, "%ntid.y": 1, "%nctaid.y": 1, "%ntid.z": 1, "%nctaid.z": 1}
    env = {k: v for k, v in values.items() if k.startswith("%")}
    code = []
    for inst in check.instructions:
        if inst.opcode == "ld" and inst.space == ".param":
            name = param_label(inst.operands[1].base.name)
            inst = I("mov", inst.type, inst.operands[0], Imm(str(values[name])))
        code.append(inst)
    env = run_straight(code, env, strict=True)
    known = formulas(check.instructions)
    compared = 0
    for param, (lo, hi) in check.bounds.items():
        for reg, k in (lo, hi):
            text = bound_text((reg, k), known)
            if reg is None or "…" in text:
                continue
            python = re.sub(r"%(\w+)\.([xyz])", r"\1_\2", text)          # %ntid.x -> ntid_x
            names = {k[1:].replace(".", "_"): v for k, v in values.items() if k.startswith("%")}
            got = eval(python, {"min": min, "max": max}, {**values, **names})  # noqa: S307 - our own formula
            want = env[reg] + k
            want -= (1 << 64) if want >= (1 << 63) else 0
            assert got == want, (param, text)
            compared += 1
    assert compared >= 4


def test_shifts_are_bracketed_before_a_sum():
    """``(x >> 2) - 1`` must not read as ``x >> (2 - 1)``."""
    r = [Reg(f"%r{i}") for i in range(4)]
    code = [I("add", ".s64", r[1], r[0], 3), I("shr", ".s64", r[2], r[1], 2), I("add", ".s64", r[3], r[2], -1)]
    assert formulas(code)["%r3"] == "((%r0 + 3) >> 2) - 1"


def test_an_instruction_it_cannot_write_keeps_its_register_and_long_formulas_are_cut():
    r = [Reg(f"%r{i}") for i in range(3)]
    known = formulas([I("popc", ".b64", r[1], r[0]), I("add", ".s64", r[2], r[1], 1)])
    assert known["%r2"] == "%r1 + 1" and "%r1" not in known
    long = bound_text(("%r9", 0), {"%r9": "x + " * 200 + "x"})
    assert len(long) == MAX_CHARS and long.endswith("…")
    assert bound_text((None, 12), {}) == "12" and bound_text(("%r2", -4), known) == "%r1 + 1 - 4"
