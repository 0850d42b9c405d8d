"""The planted-cheat corpus (tests/judge/cheats, issue 12 item 4): every variant judged
against nvcc's code with the explicit spec and with the inferred one must get the verdict
the manifest gives, with the reason it names; on the emulator here, on a GPU in the
gpu-marked test.

Each case runs with 5 fresh master seeds (printed on failure), so a verdict that holds
only by luck shows. Why none of the cheats is caught only probabilistically:

* scalar cheats (const_a, neg_a, negzero_a): the free scalar ``a`` takes -a, 0.0 and -0.0 in
  input sets 1..3 whatever the seed (superopt.judge.inputs._free_value), so the
  condition they depend on is always met; the outputs then differ in (nearly) every element.
* mult256: one set always has n an exact multiple of 256 (size_variants for the explicit
  spec; for the inferred one, whose sizes are its own, the large set, a whole-block size, or
  inputs.multiple_variant's set where the large one is not run).
* unwritten_store: the static def-use check decides it before anything runs.
* read_past_end: the last thread reads x[n] in every set (the emulator counts every load).
* cache_ptr: the emulator gives every set its allocations at the same addresses, so set 1
  sees set 0's x pointer; cache_flag: chunks after the first see the flag already set.
* shared_garbage: shared memory starts as fresh random bits every launch; the sum of 256
  such floats equals the baseline's sum in all ~200 blocks with probability ~0.
* branch_unwritten_local, select_unwritten_shared: their outputs equal nvcc's (the poison is
  never 1234567); the taint bit rejects them whatever the poison: the branch predicate or the
  stored value is derived from never-written local/shared memory in every run.
* precision cheats (mul_add, f16): with ~10^5 random inputs some elements round
  differently (each with probability well above 1%).

The input-plan cheats (issue 25), each met by a set every plan has, whatever the seed
(superopt.judge.inputs.input_plan; the inferred spec's extra sets proven by the tracer first):

* skip_last_n4_2: tail sets with n = 514 and 518 (n % 4 == 2) unless a main set has such an n;
  tail sets draw ordinary values (N(0, 1), U[-1, 1), positive), so y + a*x != y at the last element.
* wrong_past_2p17, index16: the large set, n = 132096 (2^17 + 2^10, whole blocks) on the
  emulator, N(0, 1) inputs: 1024 elements past 2^17; 257 blocks whose loads alias lower ones.
* mul_add_finite: the spec's a = 2.0 gives -2, 0, -0 in sets 1..3 (all exact products);
  every tail and the large set get an a with a full random significand (inputs.inexact_float),
  and over ~500 elements some product rounds differently.
* nan_output: the candidate's outputs start as random bits (numbers almost everywhere) on one
  of the two launches of main sets 0 and 1 (inputs.POISONS rotation: set i gets POISONS[i % 3] and
  POISONS[(i + 1) % 3]) and on every tail and the large set: the store it skips leaves them.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from superopt.judge.check import ACCEPTED, REJECTED, check
from superopt.judge.inputs import fresh_seed
from tests.judge.corpus import Corpus, assert_verdict

HERE = Path(__file__).resolve().parent / "cheats"
CORPUS = Corpus(HERE)
MANIFEST, VARIANTS, KERNELS = CORPUS.manifest, CORPUS.variants, CORPUS.kernels
base_ptx, variant_ptx, spec_of = CORPUS.base_ptx, CORPUS.variant_ptx, CORPUS.spec_of
SEEDS = 5
TIMES: dict = {}


def test_manifest_is_complete():
    files = {p.stem for p in (HERE / "variants").glob("*.ptx")}
    assert files == set(VARIANTS)
    cheats = [v for v in VARIANTS.values() if v["verdict"] == REJECTED]
    assert len(cheats) >= 11 and len(VARIANTS) - len(cheats) >= 1
    assert {v["kernel"] for v in VARIANTS.values()} == set(KERNELS)


def test_variants_match_their_recipe(tmp_path):
    """variants/*.ptx are what make_variants.py writes from nvcc's PTX."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_variants", HERE / "make_variants.py")
    mv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mv)
    for kernel, table, regs in (("saxpy", mv.SAXPY, mv.SAXPY_REGS), ("blocksum", mv.BLOCKSUM, mv.BLOCKSUM_REGS)):
        base = mv.normalise(base_ptx(kernel))
        for name, edits in table.items():
            assert mv.apply(base, regs + edits) == variant_ptx(name), name


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("name", ["saxpy", "blocksum"] + sorted(VARIANTS))
def test_ptxas_accepts(name, tmp_path):
    path = HERE / f"{name}.ptx" if name in KERNELS else HERE / "variants" / f"{name}.ptx"
    r = subprocess.run(["ptxas", "-arch=sm_90", str(path), "-o", str(tmp_path / "out.cubin")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("which", ["explicit", "inferred"])
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_emulator_verdict(name, which):
    want = VARIANTS[name]
    kernel = want["kernel"]
    spec = spec_of(kernel, which)
    t0 = time.monotonic()
    for _ in range(SEEDS):
        seed = fresh_seed()
        v = check(base_ptx(kernel), variant_ptx(name), spec, backend="emulator", seed=seed)
        assert_verdict(v, want, f"{name} / {which} spec / seed {seed}")
        if name == "saxpy_unwritten_store":
            assert v.evidence["static"]["candidate"]["count"] >= 1
            assert "candidate_seconds" not in v.evidence          # decided before anything ran
        if name == "saxpy_read_past_end":
            assert v.evidence["guard_reads"]["x"]["past_end_bytes"] == 4
    TIMES[(name, which)] = (time.monotonic() - t0) / SEEDS
    sys.stdout.write(f"\n{name:28s} {which:8s} {v.status:9s} {TIMES[(name, which)]:.2f} s/check  {v.reason[:110]}")


# ---------------------------------------------------------------- on a GPU (the lead's H200)


@pytest.mark.gpu
@pytest.mark.parametrize("which", ["explicit", "inferred"])
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_gpu_verdict(gpu, name, which):
    want = VARIANTS[name]
    kernel = want["kernel"]
    spec = spec_of(kernel, which)
    for _ in range(2):
        seed = fresh_seed()
        v = check(base_ptx(kernel), variant_ptx(name), spec, backend=gpu, seed=seed)
        if want.get("gpu") == "emulator":
            # nothing differs on a GPU either (the garbage it reads is not 1234567): only the
            # emulator's taint bit sees a branch or store on never-written data (the search runs
            # that emulator check on the candidate it keeps: tests/search/test_emulator_shadow.py)
            assert v.status == ACCEPTED, v.summary()
            continue
        if want.get("gpu") == "memcheck":
            # the differential check on a GPU cannot see a read that changes nothing: guard
            # zones absorb it. compute-sanitizer memcheck, on exact-size buffers, must.
            from superopt.judge.sanitize import sanitize_pair
            assert v.status == ACCEPTED, v.summary()
            s = sanitize_pair(base_ptx(kernel), variant_ptx(name), spec, tools=("memcheck",), seed=seed)
            if s.status == "unavailable":
                pytest.skip(f"compute-sanitizer: {s.reason}")
            assert s.status == "rejected", s
            continue
        assert_verdict(v, want, f"{name} / {which} spec / seed {seed} / gpu")
