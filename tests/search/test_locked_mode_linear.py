"""The default GPU-less build (locked mode) costs the same per kernel in a file of 600 kernels
as in one of 100 (issue 25): the source is read and scanned for ``__global__`` functions and
``// nvcc-plus:`` comments once per module, not once per kernel, and kernels are found by name
through an index. Before, a 600-kernel file added 97 s."""
from __future__ import annotations

import gc
import time

import pytest

from superopt.config.resolved import Settings
from superopt.optimize import optimize_module
from superopt.specs import comments

# One kernel of nvcc 13.0's -O3 PTX of the source below (sm_90), with its name as NAME.
KERNEL_PTX = """\t// .globl\tNAME

.visible .entry NAME(
\t.param .u64 NAME_param_0,
\t.param .u64 NAME_param_1,
\t.param .u32 NAME_param_2
)
{
\t.reg .pred \t%p<2>;
\t.reg .f32 \t%f<3>;
\t.reg .b32 \t%r<6>;
\t.reg .b64 \t%rd<8>;


\tld.param.u64 \t%rd1, [NAME_param_0];
\tld.param.u64 \t%rd2, [NAME_param_1];
\tld.param.u32 \t%r2, [NAME_param_2];
\tmov.u32 \t%r3, %ctaid.x;
\tmov.u32 \t%r4, %ntid.x;
\tmov.u32 \t%r5, %tid.x;
\tmad.lo.s32 \t%r1, %r3, %r4, %r5;
\tsetp.ge.s32 \t%p1, %r1, %r2;
\t@%p1 bra \t$L__BB0_2;

\tcvta.to.global.u64 \t%rd3, %rd1;
\tmul.wide.s32 \t%rd4, %r1, 4;
\tadd.s64 \t%rd5, %rd3, %rd4;
\tld.global.f32 \t%f1, [%rd5];
\tfma.rn.f32 \t%f2, %f1, 0f40000000, 0f3F800000;
\tcvta.to.global.u64 \t%rd6, %rd2;
\tadd.s64 \t%rd7, %rd6, %rd4;
\tst.global.f32 \t[%rd7], %f2;

$L__BB0_2:
\tret;

}
"""
KERNEL_CU = """// nvcc-plus: grid=cdiv(n,256) block=256 a:f32[n] in b:f32[n] out n=1000
__global__ void NAME(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i] * 2.0f + 1.0f;
}
"""


def _files(tmp_path, n: int):
    names = [f"k{i}" for i in range(n)]
    ptx = ".version 9.0\n.target sm_90\n.address_size 64\n\n" + "".join(
        KERNEL_PTX.replace("NAME", f"_Z{len(k)}{k}PKfPfi") for k in names)
    cu = tmp_path / f"many{n}.cu"
    cu.write_text("\n".join(KERNEL_CU.replace("NAME", k) for k in names))
    return ptx, str(cu)


def _cpu_seconds(ptx: str, source: str) -> float:
    """CPU seconds of this thread: a locked build does its work here, and threads that other
    tests of the session left running (pools, watchers) must not count against it.

    The cyclic garbage collector is off while it is measured: a full collection walks every
    object alive in the process, and in a long test session those are mostly other tests'
    leftovers, so the larger build (more allocations, more collections) paid for a heap that
    a compilation, a process of its own, does not have. The likely reason this test failed in
    large runs while it passed alone (not reproduced for sure: with the collector on, a fresh
    process measured 1.33x per kernel for the 600-kernel file, with it off 0.81x)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.thread_time()
        res = optimize_module(ptx, source=source, settings=Settings({"no_gpu": "locked", "backend": "emulator"}))
        spent = time.thread_time() - t0
    finally:
        gc.enable()
    assert len(res.records["kernels"]) == ptx.count(".entry ")
    assert not res.changed and all(k["status"] == "kept-baseline" for k in res.records["kernels"])
    return spent


@pytest.mark.parametrize("with_lockfile", [False, True], ids=["no-lockfile", "lockfile"])
def test_locked_build_is_linear_in_kernels(tmp_path, monkeypatch, with_lockfile):
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NVCC_PLUS_LOCKFILE", raising=False)
    monkeypatch.delenv("NVCC_PLUS_LOCK", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    if with_lockfile:          # a lockfile that holds none of these kernels: every lookup misses
        (tmp_path / "nvcc-plus.lock").write_text('{"version": 1, "decisions": {"x": {"plan": []}}}\n')
    small, big = _files(tmp_path, 100), _files(tmp_path, 600)
    _cpu_seconds(*_files(tmp_path, 5))                     # imports and first-use costs
    t_small, t_big = _cpu_seconds(*small), _cpu_seconds(*big)
    per_small, per_big = t_small / 100, t_big / 600
    import threading
    assert per_big <= 2 * per_small, (t_small, t_big, [t.name for t in threading.enumerate()])
    # and the 500 kernels more cost no more per kernel than the first 100 did (a fixed cost
    # of the first build must not hide a term that grows with the file)
    assert (t_big - t_small) / 500 <= 2 * per_small, (t_small, t_big)


def test_a_source_is_scanned_once_per_module(tmp_path, monkeypatch):
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    ptx, cu = _files(tmp_path, 40)
    scans = []
    real = comments._find_kernels
    monkeypatch.setattr(comments, "_find_kernels", lambda text: scans.append(1) or real(text))
    comments._SCANS.clear()
    optimize_module(ptx, source=cu, settings=Settings({"no_gpu": "locked", "backend": "emulator"}))
    assert len(scans) == 1


def test_cached_scans_give_what_a_fresh_scan_gives(tmp_path):
    _, cu = _files(tmp_path, 30)
    text = open(cu).read()
    first = comments.find_directives(text)
    assert sorted(first) == sorted(f"k{i}" for i in range(30)) and all(len(v) == 1 for v in first.values())
    first["k0"].append("changed by a caller")           # callers get their own copies
    assert comments.find_directives(text)["k0"] == first["k0"][:1]
    assert comments.directives_of(text, "k7") == first["k7"]
    decls = comments.find_kernels(text)
    assert [d.name for d in decls] == [f"k{i}" for i in range(30)]
    assert [d.line for d in decls[:3]] == [2, 8, 14]
    assert text[decls[1].start:].startswith("__global__ void k1(")
