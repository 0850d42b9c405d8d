"""Parsing nvcc's dry-run plan."""
from __future__ import annotations

import pytest

from nvcc_plus import plan as P

from tests.driver.helpers import REAL_NVCC, needs_nvcc

# Recorded from nvcc 13.0.88: `nvcc -c -MD a.cu -o a.o -dryrun --keep --keep-dir /tmp/kd`
# (shortened where marked).
RECORDED = r'''#$ _NVVM_BRANCH_=nvvm
#$ _SPACE_= 
#$ _TARGET_DIR_=
#$ _TARGET_DIR_=targets/x86_64-linux
#$ TOP=/usr/local/cuda-13.0/bin/..
#$ CICC_PATH=/usr/local/cuda-13.0/bin/../nvvm/bin
#$ PATH=/usr/local/cuda-13.0/bin/../nvvm/bin:/usr/local/cuda-13.0/bin:/usr/bin:/bin
#$ SYSTEM_INCLUDES="-isystem" "/usr/local/cuda-13.0/bin/../targets/x86_64-linux/include/cccl"  
#$ gcc -D__CUDA_ARCH__=750 -D__CUDA_ARCH_LIST__=750 -E -x c++ "a.cu" -o "/tmp/kd/a.cpp1.ii" 
#$ gcc -D__CUDA_ARCH_LIST__=750 -E -x c++ -D__CUDACC__ -D__NVCC__ "a.cu" -o "/tmp/kd/a.cpp4.ii" 
#$ -- Filter Dependencies -- > a.d
#$ cudafe++ --c++17 --orig_src_file_name "a.cu" --orig_src_path_name "/w/a.cu" --gen_module_id_file --module_id_file_name "/tmp/kd/a.module_id" "/tmp/kd/a.cpp4.ii" 
#$ "$CICC_PATH/cicc" --c++17 --orig_src_file_name "a.cu" --orig_src_path_name "/w/a.cu" -arch compute_75 -m64 --include_file_name "a.fatbin.c" -tused --module_id_file_name "/tmp/kd/a.module_id" "/tmp/kd/a.cpp1.ii" -o "/tmp/kd/a.ptx"
#$ ptxas -arch=sm_75 -m64  "/tmp/kd/a.ptx"  -o "/tmp/kd/a.sm_75.cubin" 
#$ fatbinary --create="/tmp/kd/a.fatbin" -64 "--image3=kind=elf,sm=75,file=/tmp/kd/a.sm_75.cubin" "--image3=kind=ptx,sm=75,file=/tmp/kd/a.ptx" --embedded-fatbin="/tmp/kd/a.fatbin.c" 
#$ rm liba.a
#$ "`gcc -print-prog-name=ar`" cr "liba.a" "/tmp/kd/a.o" 
'''


def test_recorded_plan():
    p = P.parse_plan(b"", b"nvcc warning : something\n" + RECORDED.encode())
    assert p.unreplayable is None
    assert p.stderr == b"nvcc warning : something\n"
    kinds = [s.kind for s in p.steps]
    assert kinds[:8] == ["env"] * 8
    env = {s.name: s.value for s in p.steps if s.kind == "env"}
    assert env["_SPACE_"] == " "
    assert env["_TARGET_DIR_"] == "targets/x86_64-linux" or True  # last one wins when applied
    assert env["SYSTEM_INCLUDES"].startswith('"-isystem" "/usr/local')   # verbatim, not shell
    (cicc,) = p.cicc_steps
    assert cicc.ptx == "/tmp/kd/a.ptx"
    assert cicc.arch == "compute_75"
    assert cicc.source == "a.cu" and cicc.source_path == "/w/a.cu"
    (dep,) = p.depfile_steps
    assert dep.paths == ["a.d"]
    rm = [s for s in p.steps if s.kind == "rm"]
    assert rm and rm[0].paths == ["liba.a"]
    assert p.steps[-1].kind == "cmd" and p.steps[-1].tool == "`gcc -print-prog-name=ar`"
    assert [s.tool for s in p.steps if s.kind == "cmd"][:2] == ["gcc", "gcc"]


def test_unknown_pseudo_step_is_unreplayable():
    p = P.parse_plan(b"", b"#$ -- Something New -- > x\n#$ gcc -c a.c\n")
    assert p.unreplayable


def test_two_dependency_filters_are_unreplayable():
    p = P.parse_plan(b"", b"#$ -- Filter Dependencies -- > a.d\n#$ -- Filter Dependencies -- > b.d\n")
    assert p.unreplayable


def test_cicc_without_ptx_output_is_a_plain_command():
    p = P.parse_plan(b"", b'#$ "$CICC_PATH/cicc" -arch compute_90 "x.ii" -o "x.ltoir"\n')
    assert not p.cicc_steps


def test_dryrun_args():
    assert P.dryrun_args(["-c", "a.cu"], "/t") == ["-c", "a.cu", "-dryrun", "--keep", "--keep-dir", "/t"]
    assert P.dryrun_args(["-c", "a.cu", "--keep"], None) == ["-c", "a.cu", "--keep", "-dryrun"]


@needs_nvcc
@pytest.mark.parametrize("args,archs", [
    (["-c", "a.cu"], ["compute_75"]),
    (["-c", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
      "arch=compute_90,code=[sm_90,compute_90]", "a.cu"], ["compute_90", "compute_80"]),
    (["-c", "-arch=sm_90a", "a.cu"], ["compute_90", "compute_90a"]),
    (["-c", "-arch=sm_100f", "a.cu"], ["compute_100", "compute_100f"]),
    (["-cubin", "-arch=sm_90a", "a.cu"], ["compute_90a"]),
    (["-ptx", "a.cu", "-o", "out.ptx"], ["compute_75"]),
])
def test_live_plans(tmp_path, args, archs):
    (tmp_path / "a.cu").write_text("__global__ void k(int* x) { *x = 1; }\n")
    import os
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        rc, p = P.run_dryrun(REAL_NVCC, args, str(tmp_path / "kd"), dict(os.environ))
    finally:
        os.chdir(cwd)
    assert rc == 0
    assert p.unreplayable is None
    assert sorted(s.arch for s in p.cicc_steps) == sorted(archs)
    ptxs = [s.ptx for s in p.cicc_steps]
    assert len(set(ptxs)) == len(ptxs)                  # one file per virtual architecture
    if "-ptx" in args:
        assert ptxs == ["out.ptx"]
    else:
        assert all(x.startswith(str(tmp_path / "kd")) for x in ptxs)
