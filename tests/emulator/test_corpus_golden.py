"""The emulator against GPU truth on corpus kernels: every recorded case replayed bit for bit.

golden/corpus_cases.json lists corpus kernels (tests/corpus/ptx/*.sm_90.ptx, plain -O3) with
an inferred launch spec, a seed and the sha256 of every initial buffer (inputs are
regenerated from spec + seed, and the hashes catch a changed generator);
golden/corpus_outputs.npz holds, per case, the final buffers an NVIDIA H200 produced
(record_corpus_golden.py; ``<id>__final__<buf>``, absent when the GPU left the buffer
unchanged). Each case is replayed on the emulator and must give the same bytes, NaNs included.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import record_corpus_golden as RC  # noqa: E402

# Cases where the emulator does not reproduce the GPU: case id -> reason (first differing
# element as recorded on 2026-11-29). All but one are results that depend on the order in which
# threads/blocks ran (float atomics accumulate in a different order; racy kernels under the
# inferred spec), so the GPU value is one of several possible ones; the other depends on the
# operand order ptxas chose (which NaN an f64 add returns). They stay as strict xfails until the
# emulator reproduces the H200's order or the specs stop producing the races.
_FLOAT_ATOMIC = "float atomic accumulation order differs from the H200's (GPU-order dependent); "
MISMATCH: dict[str, str] = {
    "atomics:_Z16atomic_add_typesPKiPKfPKdPiPyPfPdi":
        _FLOAT_ATOMIC + "p5[0] gpu=0x4367ee70 emu=0x4367edcf, p6[0] gpu=0x406947632b7318ba emu=0x406947632b7318db",
    "atomics:_Z12atomic_half2P7__half2PKS_i":
        _FLOAT_ATOMIC + "half2 atomicAdd, p0: 125 of 442 differ, [0] gpu=0xb5c0 emu=0xb7e2",
    "atomics:_Z14scoped_atomicsPiS_PfPKfi":
        _FLOAT_ATOMIC + "p2: 172 of 193 differ, [1] gpu=0xc163e855 emu=0xc163e85a",
    "atomics:_Z11red_via_asmPjPfPyPKfi":
        _FLOAT_ATOMIC + "red.add.f32, p1[0] gpu=0x436a98ac emu=0x436a96e7",
    "reductions:_Z21reduce_shuffle_atomicPKfPfi":
        _FLOAT_ATOMIC + "p1[0] gpu=0x433d8544 emu=0x433d8548",
    "atomics:_Z17atomic_ref_ordersPiS_S_":
        "the inferred spec fills flag with random (nonzero) data, so consumer blocks do not wait for block 0: "
        "block-order race; p2: 12 of 13 differ, [1] gpu=0x00000025 emu=0xfffffff7",
    "inline_asm:_Z12flag_handoffPiPf":
        "the inferred spec fills flag with random (nonzero) data, so consumers read data[0] before block 0 "
        "writes it: block-order race; p1: 12 of 13 differ, [1] gpu=0x40400000 emu=0x3f1378bb",
    "cooperative_groups:_Z7cg_scanPKjPjS1_i":
        "inferred block 8x8x4 but the kernel indexes with threadIdx.x only, so 32 threads of different tiles "
        "store each element (write-write race; neither side equals the 1-D scan); p1: 769 of 769 differ, "
        "[0] gpu=0x0000000f emu=0x000000c0; p2: 721 of 769 differ, [0] gpu=0x00000000 emu=0x0000000f",
    # Added with the second recording (106 cases), not yet investigated:
    "half_bf16:_Z8half_dotPK7__half2S1_Pfi":
        _FLOAT_ATOMIC + "p2[0] gpu=0x43a80e90 emu=0x43a80e92 (one float atomicAdd total)",
    "inline_asm:_Z12timing_probePxPj":
        "reads %clock64: the values are timings and can never match; this case should not be recorded "
        "(p0[0] gpu=0x6a emu=0x0)",
    "scan:_Z15compact_scatterPKfPKjS2_Pfi":
        "scatter positions come from an atomic counter, so the element order depends on which threads ran first "
        "(p3: 909 of 1000 differ)",
    # Investigated after the second recording: neither is an emulator semantics bug.
    "launch_bounds_unroll:_Z14nounroll_loopsPKfPfii":
        "in-place read-write race between warps: thread i adds b[(i+k)%n] for k<32 and then stores b[i], so a "
        "warp whose window reaches into another warp reads that warp's result if its store landed first. On the "
        "H200 warps 2 and 10 (i=65..95, 321..351) read warp 3's / 11's stored b at their last iteration (k=31) "
        "and warp 23 (i=762..767) read warp 0's stored b[24..29] (b[0..23] still old); the emulator runs all 769 "
        "threads as one group, every load before any store (a legal schedule too). Each differing GPU value is "
        "reproduced bit for bit by summing with those stored values. p1: 68 of 769 differ, [65] "
        "gpu=0x400c0b60 emu=0x403eed3c",
    "math_library:_Z11conversionsPKfPKdPKiPiPfPdPxi":
        "compiler-dependent NaN choice, not a conversion: p5 is od (f64). In add.f64 %fd6, %fd4, %fd5 "
        "(__hiloint2double(c, c+1) + __longlong_as_double((long long)c << 20)) both operands are NaN for every "
        "c < 0. An H200 DADD returns the NaN of its second SASS source; ptxas kept the PTX order here "
        "(DADD R14, R14=fd4, R8=fd5), so the GPU gives fd5 where the emulator's convention (first PTX NaN operand, "
        "fp.nan_prop64) gives fd4. In golden f64_ops ptxas swapped the sources (DADD B, A), which is why that "
        "convention matches there; ptxas even merges add a,b and add b,a into one DADD, so no PTX-order rule "
        "fits both (with the second-operand rule this case matches bit for bit and f64_ops fails). "
        "p5: 12365 of 24593 differ, [0] gpu=0xffffffffffe00000 emu=0xfffffffeffffffff",
}


def _doc():
    if not os.path.exists(RC.CASES_JSON):
        return {"cases": []}
    with open(RC.CASES_JSON) as f:
        return json.load(f)


DOC = _doc()
GPU_STATUS = DOC.get("gpu", {}).get("status", {})
RECORDED = [c for c in DOC["cases"] if GPU_STATUS.get(c["id"], {}).get("status") == "ok"]

_NPZ = None


def _arrays() -> dict:
    global _NPZ
    if _NPZ is None:
        with np.load(RC.OUTPUTS_NPZ) as z:
            _NPZ = {k: z[k] for k in z.files}
    return _NPZ


def _params():
    out = []
    for c in RECORDED:
        marks = [pytest.mark.xfail(strict=True, reason=MISMATCH[c["id"]])] if c["id"] in MISMATCH else []
        out.append(pytest.param(c, id=c["id"], marks=marks))
    return out


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).reshape(-1, a.dtype.itemsize)


def _hex(a, i):
    a = np.ascontiguousarray(a)
    return f"0x{int(a.view(f'u{a.dtype.itemsize}')[i]):0{2 * a.dtype.itemsize}x}"


@pytest.mark.parametrize("case", _params())
def test_corpus_kernel_matches_gpu(case):
    from superopt.judge.backends.emulator import EmulatorBackend
    z = _arrays()
    cid = case["id"]
    spec, s = RC.input_set(case)
    init = s.data
    for name, a in init.items():
        h = hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).tobytes()).hexdigest()
        assert h == case["init_sha256"][name], f"input generator changed: {name} differs from the recorded input"
    r = EmulatorBackend().run_many(RC.read_ptx(case["file"]), spec, [s], timeout=60)[0]
    assert r.status == "ok", f"{r.status}: {r.error}"
    assert all(r.guards_intact.values()), r.guard_damage
    # nvcc's code never stores or branches on never-written data: the taint bit sees none here
    # (a report would be a false positive that blinds the judge for this kernel's candidates)
    assert not r.taint, r.taint
    problems = []
    for name in s.data:
        want = z.get(f"{cid}__final__{name}", init[name])
        got = np.asarray(r.outputs[name])
        wb, gb = _bits(want), _bits(got)
        assert wb.shape == gb.shape, (name, wb.shape, gb.shape)
        bad = np.flatnonzero((wb != gb).any(axis=1))
        if bad.size:
            i = int(bad[0])
            problems.append(f"{name}: {bad.size} of {want.size} elements differ; first [{i}] "
                            f"gpu={_hex(want, i)} emu={_hex(got, i)}")
    assert not problems, "\n".join(problems)


def test_corpus_fixtures_are_small_and_recorded():
    if not DOC["cases"]:
        pytest.skip("no corpus cases recorded")
    assert os.path.getsize(RC.OUTPUTS_NPZ) + os.path.getsize(RC.CASES_JSON) < 8 * 1024 * 1024
    assert DOC["gpu"]["environment"].get("name", "").startswith("NVIDIA") or \
        "H200" in json.dumps(DOC["gpu"]["environment"])
    assert len(RECORDED) == len(DOC["cases"]), \
        {k: v for k, v in GPU_STATUS.items() if v.get("status") != "ok"}
    assert set(MISMATCH) <= {c["id"] for c in RECORDED}


def _run_case(cid):
    from superopt.judge.backends.emulator import EmulatorBackend
    case = next(c for c in RECORDED if c["id"] == cid)
    spec, s = RC.input_set(case)
    r = EmulatorBackend().run_many(RC.read_ptx(case["file"]), spec, [s], timeout=60)[0]
    assert r.status == "ok", f"{r.status}: {r.error}"
    z = _arrays()
    want = {n: z.get(f"{cid}__final__{n}", a) for n, a in s.data.items()}
    return s.data, {n: np.asarray(v) for n, v in r.outputs.items()}, want


def _same(a, b):
    return np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


def test_conversions_mismatch_is_only_which_nan_an_f64_add_returns(monkeypatch):
    """The MISMATCH reason of math_library conversions: giving two-NaN f64 ops the second
    operand's NaN (the SASS order ptxas chose there) reproduces every GPU buffer."""
    cid = "math_library:_Z11conversionsPKfPKdPKiPiPfPdPxi"
    if cid not in {c["id"] for c in RECORDED}:
        pytest.skip("case not recorded")
    from ptx_ir.semantics import fp
    first = fp.nan_prop64
    monkeypatch.setattr(fp, "nan_prop64", lambda r, *ops: first(r, *(ops[::-1] if len(ops) == 2 else ops)))
    _, got, want = _run_case(cid)
    for n in want:
        assert _same(got[n], want[n]), n


def test_nounroll_mismatch_is_the_inter_warp_race():
    """The MISMATCH reason of launch_bounds_unroll nounroll_loops: every element the GPU
    computed differently is the emulator's sum with the reads of other warps' elements from
    some iteration K on replaced by the values those warps stored (bit for bit)."""
    cid = "launch_bounds_unroll:_Z14nounroll_loopsPKfPfii"
    if cid not in {c["id"] for c in RECORDED}:
        pytest.skip("case not recorded")
    from ptx_ir.semantics import fp
    init, got, want = _run_case(cid)
    case = next(c for c in RECORDED if c["id"] == cid)
    n, reps = (next(p["value"] for p in case["spec"]["params"] if p["name"] == q) for q in ("p2", "p3"))
    b0, gpu = init["p1"], want["p1"]
    x = init["p0"].copy()
    for _ in range(reps):                       # fma.rn.f32 %f9, %f9, 0f3F7FBE77, 0f3A83126F
        x = fp.f32_fma(x, np.float32(0.999), np.float32(0.001))

    def total(i, K):                            # the 32 adds, other warps' data new from k=K on
        s = x[i]
        for k in range(32):
            j = (i + k) % n
            s = np.float32(s + (gpu[j] if j // 32 != i // 32 and k >= K else b0[j]))
        return s

    bad = np.flatnonzero(gpu.view(np.uint32) != got["p1"].view(np.uint32))
    assert bad.size == 68
    assert all(_same(total(i, 32), got["p1"][i]) for i in bad[:4])    # the emulator's all-old sums
    for i in bad:
        assert any(_same(total(i, K), gpu[i]) for K in range(32)), i
