"""The misaligned set (superopt.judge.inputs.misalign): one input set of every check starts each
buffer a few bytes past a 16-byte boundary, as a pointer into an array may (``scale(x + 1, n)``).
nvcc's code cannot assume more alignment than its types give; a candidate that reads or writes
a ``float*`` as ``float4`` without testing the pointer at launch faults there (on a GPU a sticky
error that ends the program), and every other set allocates each buffer 256-aligned, so before
this set such a candidate was accepted (measured: quad_scale's VEC4 variant, identical on 14
input sets, 2026-12-07). Kernels: tests/judge/misaligned/quad.cu, PTX by nvcc 13.0
(tests/judge/misaligned/build_ptx.py)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from superopt.judge.backends.emulator import EmulatorBackend
from superopt.judge.check import ACCEPTED, REJECTED, check
from superopt.judge.inputs import misalign, misalign_bytes, make_input_set, make_rng
from tests.passes.data.unroll_tools import buf, emulator_available, scalar, spec

pytestmark = pytest.mark.skipif(not emulator_available()[0], reason="the CPU emulator needs numpy")

PTX = Path(__file__).parent / "misaligned" / "ptx"


def ptx(name: str) -> str:
    return (PTX / f"{name}.ptx").read_text()


BASE = ptx("baseline")
QUAD = spec("quad_scale", [128, 1, 1], ["cdiv(n, 512)", 1, 1],
            [buf("x", "f32", "n", "inout"), scalar("a", "f32", 1.5), scalar("n", "s32", 3001)])
PAIR = spec("pair_sum", [128, 1, 1], ["cdiv(n, 128)", 1, 1],
            [buf("a", "f64", "2*n"), buf("b", "f32", "n"), buf("out", "f64", "n", "out"),
             scalar("n", "s32", 700)])


def test_a_float4_access_nvcc_cannot_assume_is_rejected():
    v = check(BASE, ptx("vec4"), QUAD, backend="emulator", sets=3, seed=11)
    assert v.status == REJECTED, v.reason
    assert "crashed" in v.reason and "4 bytes past a 16-byte boundary" in v.reason, v.reason
    assert v.evidence["misaligned"]["bytes"] == 4


def test_a_float4_access_tested_at_launch_is_accepted():
    v = check(BASE, ptx("versioned"), QUAD, backend="emulator", sets=3, seed=11)
    assert v.status == ACCEPTED, v.reason
    assert check(BASE, BASE, QUAD, backend="emulator", sets=3, seed=11).status == ACCEPTED


def test_doubles_are_misaligned_by_their_own_size():
    """a and out hold doubles: the set starts every buffer 8 bytes past a 16-byte boundary (4 would
    be no program's pointer to a double), and a double2 load there faults."""
    assert misalign_bytes(PAIR, 8) == 8
    v = check(BASE, ptx("vec4"), PAIR, backend="emulator", sets=3, seed=12)
    assert v.status == REJECTED and "8 bytes past a 16-byte boundary" in v.reason, v.reason
    assert check(BASE, BASE, PAIR, backend="emulator", sets=3, seed=12).status == ACCEPTED


def test_no_misaligned_set_where_nvccs_own_code_reads_16_bytes():
    """scale4's float4 parameters: nvcc's code itself reads 16 bytes, so no pointer the program
    passes is misaligned; the check makes no such set."""
    from tests.judge.test_judge_aliasing import BASE as ALIASING, SCALE4
    v = check(ALIASING, ALIASING, SCALE4, backend="emulator", sets=2, seed=5)
    assert v.status == ACCEPTED and "misaligned" not in v.evidence
    assert misalign_bytes(QUAD, 16) is None and misalign_bytes(QUAD, 1) == 4


def test_the_set_keeps_its_misalignment_through_its_runs():
    """Each run of the set (nvcc's second, the candidate's) gets fresh guards of the same longer
    length, so every buffer starts at the same misaligned address on every backend."""
    s = misalign(make_input_set(QUAD, 3, 2), 4, make_rng(3))
    assert s.misaligned == 4 and s.guard_bytes == 260 and "4 bytes past" in s.label
    again = s.with_outputs({}, make_rng(4), "candidate-1")
    assert again.misaligned == 4 and {len(f) for f, _ in again.guards.values()} == {260}
    r = EmulatorBackend().run_many(BASE, QUAD, [again])[0]
    assert r.ok and not r.guard_damage


def test_the_gpu_wire_form_carries_the_longer_guards():
    from superopt.judge.backends.gpu import pack_sets
    s = misalign(make_input_set(QUAD, 3, 2), 4, make_rng(3))
    plain = make_input_set(QUAD, 3, 1)
    wire = pack_sets(QUAD, [plain, s])
    assert [w["guard"] for w in wire["sets"]] == [256, 260]
    assert pack_sets(QUAD, [s], guards=False)["sets"][0]["guard"] == 0
    bad = replace(s, guards=plain.guards)
    with pytest.raises(ValueError, match="guard zones"):
        pack_sets(QUAD, [bad])


def test_a_misaligned_set_nvccs_code_faults_on_is_dropped_not_the_check(monkeypatch):
    """Were the judge wrong about nvcc's widest access (a kernel its PTX reader cannot read gives
    1), nvcc's float4 code would fault on the set: its runs come after the others' and the set is
    dropped with a note; the check goes on."""
    from superopt.judge import alias_check
    from tests.judge.test_judge_aliasing import BASE as ALIASING, SCALE4
    monkeypatch.setattr(alias_check, "pointer_alignment", lambda ptx, kernel: 1)
    v = check(ALIASING, ALIASING, SCALE4, backend="emulator", sets=3, seed=5)
    assert v.status == ACCEPTED, v.reason
    assert [n for n in v.evidence["notes"] if "16-byte boundary" in n and "set dropped" in n], v.evidence["notes"]


def test_a_pointer_declared_aligned_is_not_misaligned():
    """A kernel parameter declared ``.ptr .global .align 16`` is the program's word that its
    pointers are 16-byte aligned (the vectorize pass takes it as proof): no misaligned set."""
    from superopt.judge import alias_check
    plain, aligned = ".param .u64 quad_scale_param_0", ".param .u64 .ptr .global .align 16 quad_scale_param_0"
    declared = BASE.replace(plain, aligned)
    assert declared != BASE
    assert alias_check.pointer_alignment(declared, "quad_scale") == 16
    assert alias_check.pointer_alignment(BASE, "quad_scale") == 4
    v = check(declared, ptx("vec4").replace(plain, aligned), QUAD, backend="emulator", sets=3, seed=11)
    assert v.status == ACCEPTED and "misaligned" not in v.evidence, v.reason
