"""On the GPU the candidate to keep is also checked on the CPU emulator, whose poisoned registers
and memory and taint bit see a branch or store on never-written data that a GPU run cannot (its
garbage happens to match). Here a judge that says "gpu" stands in for the GPU backend."""
from __future__ import annotations

from types import SimpleNamespace

from superopt.search.candidates import Candidate
from superopt.search.loop import _emulator_shadow, _smallest_spec
from superopt.search.options import SearchOptions
from tests.judge.test_cheat_corpus import base_ptx, spec_of, variant_ptx

GPU = SimpleNamespace(backend="gpu")


def _cand(name):
    return Candidate(kernel="saxpy", plan=[], ptx=variant_ptx(name), changes=[], provenance={"proposer": "test"})


def test_a_branch_on_never_written_local_memory_is_rejected_by_the_shadow_check():
    entry = {"fate": "faster"}
    ok = _emulator_shadow(GPU, SearchOptions(), base_ptx("saxpy"), _cand("saxpy_branch_unwritten_local"),
                          [spec_of("saxpy", "explicit")], entry)
    assert not ok and entry["fate"] == "rejected-check"
    assert "never-written" in entry["reason"] and entry["emulator_verdict"]["status"] == "rejected"


def test_an_equivalent_rewrite_passes_and_other_backends_are_not_checked_twice():
    entry = {"fate": "faster"}
    assert _emulator_shadow(GPU, SearchOptions(), base_ptx("saxpy"), _cand("saxpy_eq_reorder"),
                            [spec_of("saxpy", "explicit")], entry)
    assert entry["emulator_verdict"]["status"] == "accepted"
    other = {"fate": "faster"}
    assert _emulator_shadow(SimpleNamespace(backend="emulator"), SearchOptions(), base_ptx("saxpy"),
                            _cand("saxpy_branch_unwritten_local"), [spec_of("saxpy", "explicit")], other)
    assert "emulator_verdict" not in other


def test_the_smallest_launch_is_the_one_checked():
    from dataclasses import replace
    spec = spec_of("saxpy", "explicit").resolved()
    n = spec.scalars[0].name
    big = replace(spec_of("saxpy", "explicit"))
    small = spec_of("saxpy", "explicit").resolved({n: 100})
    assert _smallest_spec([big, small]) is small


LOOP_CU = """
__global__ void spin(int n, int iters, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.f;
  for (int k = 0; k < iters; k++) acc = acc * 0.5f + x[(i + k) % n];
  y[i] = acc;
}
"""


def test_the_cost_cap_on_nvccs_launches_fires_and_leaves_the_gpus_verdict(monkeypatch, tmp_path):
    """Past the cap nvcc's own code is "could not judge" on the emulator: the candidate keeps
    the GPU's verdict (the cap bounds the cost; it never decides)."""
    import shutil
    import subprocess

    import pytest

    import superopt.search.loop as loop
    from superopt.specs.launch_spec import Buffer, LaunchSpec, Scalar
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    (tmp_path / "spin.cu").write_text(LOOP_CU)
    subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "spin.cu", "-o", "spin.ptx"], cwd=tmp_path, check=True)
    ptx = (tmp_path / "spin.ptx").read_text()
    spec = LaunchSpec(kernel="_Z4spiniiPKfPf", grid=(1,), block=(64,),
                      params=[Scalar("n", "s32", 64), Scalar("iters", "s32", 200_000, pinned=True),
                              Buffer("x", "f32", "n"), Buffer("y", "f32", "n", direction="out")],
                      vary_sizes=False)
    monkeypatch.setattr(loop, "SHADOW_LAUNCH_TIMEOUT_S", 0.05)
    entry = {"fate": "faster"}
    cand = Candidate(kernel="spin", plan=[], ptx=ptx, changes=[], provenance={"proposer": "test"})
    assert _emulator_shadow(GPU, SearchOptions(), ptx, cand, [spec], entry)
    assert entry["fate"] == "faster" and entry["emulator_verdict"]["status"] == "could_not_judge"
    assert "timeout" in entry["emulator_verdict"]["reason"].lower(), entry["emulator_verdict"]


def test_beside_the_last_checks_its_verdict_is_written_only_when_read():
    """The shadow check runs in a thread beside the late checks; the entry is the checks' until
    its verdict is read (the sanitizer's first), then the rejection is recorded as before."""
    from superopt.search.loop import _shadow_beside
    entry = {"fate": "faster"}
    read = _shadow_beside(GPU, SearchOptions(), base_ptx("saxpy"), _cand("saxpy_branch_unwritten_local"),
                          [spec_of("saxpy", "explicit")])
    assert entry == {"fate": "faster"}
    assert read(entry) is False
    assert entry["fate"] == "rejected-check" and "never-written" in entry["reason"]
    good = {"fate": "faster"}
    assert _shadow_beside(GPU, SearchOptions(), base_ptx("saxpy"), _cand("saxpy_eq_reorder"),
                          [spec_of("saxpy", "explicit")])(good)
    assert good["emulator_verdict"]["status"] == "accepted" and good["fate"] == "faster"
    other = {"fate": "faster"}
    assert _shadow_beside(SimpleNamespace(backend="emulator"), SearchOptions(), base_ptx("saxpy"),
                          _cand("saxpy_branch_unwritten_local"), [spec_of("saxpy", "explicit")])(other)
    assert other == {"fate": "faster"}


def test_a_search_does_not_keep_what_the_shadow_check_rejects():
    """Through the choice of the candidate to keep, with a judge that says "gpu": the GPU's
    checks and timing accept the planted rewrite (its garbage matches there); the shadow check
    beside the last checks rejects it and nvcc's code is kept."""
    from superopt.judge import Judge
    from superopt.judge.check import Verdict
    from superopt.search.loop import _choose
    from tests.search.test_costly_shapes import Timing

    class GpuSays(Judge):
        backend, policy, can_time = "gpu", "exact", True

        def verify(self, *a, **kw):
            return Verdict("accepted", "identical", "exact", {})

        def time(self, *a, **kw):
            return Timing("ok", True, 1.3)
    cand = _cand("saxpy_branch_unwritten_local")
    entry = {"id": cand.id, "fate": "faster", "speedup": 1.3, "plan": []}
    record = {"candidates": [entry], "notes": []}
    won = _choose([entry], {cand.id: cand}, GpuSays(), SearchOptions(sanitize=()), "saxpy", record,
                  base_ptx("saxpy"), [spec_of("saxpy", "explicit")])
    assert won is None and record["status"] == "kept-baseline"
    assert entry["fate"] == "rejected-check" and "never-written" in entry["reason"]
