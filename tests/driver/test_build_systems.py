"""nvcc-plus inside real builds: CMake (compiler and launcher mode, Makefiles and Ninja,
CUDA_SEPARABLE_COMPILATION) and a hand-written Makefile (-MD, -j, rdc, device link, two archs)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.driver.helpers import REAL_NVCC, fatbin_section, needs_nvcc, opt_env, write_wrapper

pytestmark = [needs_nvcc, pytest.mark.slow]

COMMON_H = "#pragma once\n__device__ float helper(float x);\n"
K1_CU = '#include "common.h"\n__device__ float helper(float x) { return x * 2.0f + 1.0f; }\n'
K2_CU = ('#include "common.h"\n__global__ void k2(float* x) { x[threadIdx.x] = helper(x[threadIdx.x]); }\n'
         'void launch2(float* d) { k2<<<1, 32>>>(d); }\n')
MAIN_CU = ('#include <cstdio>\nvoid launch2(float*);\n'
           'int main() { launch2(nullptr); std::printf("ok\\n"); return 0; }\n')

CMAKELISTS = """cmake_minimum_required(VERSION 3.25)
project(demo LANGUAGES CXX CUDA)
set(CMAKE_CUDA_ARCHITECTURES 75 90)
add_library(kern STATIC k1.cu k2.cu)
set_target_properties(kern PROPERTIES CUDA_SEPARABLE_COMPILATION ON)
add_executable(app main.cu)
target_link_libraries(app PRIVATE kern)
set_target_properties(app PROPERTIES CUDA_SEPARABLE_COMPILATION ON)
"""

MAKEFILE = """NVCC ?= nvcc
ARCHS := -gencode arch=compute_75,code=sm_75 -gencode arch=compute_90,code=[sm_90,compute_90]
OBJS := k1.o k2.o main.o
app: $(OBJS) dlink.o
\tg++ $^ -o $@ -L$(CUDA_LIB) -lcudadevrt -lcudart_static -lrt -lpthread -ldl
dlink.o: $(OBJS)
\t$(NVCC) $(ARCHS) -dlink $^ -o $@
%.o: %.cu
\t$(NVCC) $(ARCHS) -rdc=true -MD -c $< -o $@
-include $(OBJS:.o=.d)
"""


def _write_sources(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in {"common.h": COMMON_H, "k1.cu": K1_CU, "k2.cu": K2_CU, "main.cu": MAIN_CU}.items():
        (d / name).write_text(text)


def _run(argv, cwd, env):
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"{argv}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def _calls(log: Path) -> set[str]:
    return {(os.path.basename(a), b) for a, b in (ln.split() for ln in log.read_text().splitlines())}


EXPECTED = {(f, a) for f in ("k1.cu", "k2.cu", "main.cu") for a in ("compute_75", "compute_90")}


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not found")
# Both modes and both generators, in three builds (launcher + Makefiles adds nothing the
# others do not exercise, and every CMake configure costs ~10 s on a 2-core machine).
@pytest.mark.parametrize("how,generator", [("compiler", "Unix Makefiles"), ("compiler", "Ninja"),
                                           ("launcher", "Ninja")])
def test_cmake_project(tmp_path, how, generator):
    if generator == "Ninja" and shutil.which("ninja") is None:
        pytest.skip("ninja not found")
    src = tmp_path / "src"
    _write_sources(src)
    (src / "CMakeLists.txt").write_text(CMAKELISTS)
    log = tmp_path / "calls.txt"
    env = opt_env("identity", NVCC_PLUS_TEST_LOG=str(log))
    exe = write_wrapper(tmp_path / "bin")
    build = tmp_path / "build"
    flag = (f"-DCMAKE_CUDA_COMPILER={exe}" if how == "compiler"
            else f"-DCMAKE_CUDA_COMPILER_LAUNCHER={exe}")
    _run(["cmake", "-S", src, "-B", build, "-G", generator, flag], tmp_path, env)
    (compiler_cmake,) = build.glob("CMakeFiles/*/CMakeCUDACompiler.cmake")
    text = compiler_cmake.read_text()
    assert 'set(CMAKE_CUDA_COMPILER_ID "NVIDIA")' in text
    assert re.search(r'set\(CMAKE_CUDA_COMPILER_VERSION "13\.\d+\.\d+"\)', text)
    if how == "compiler":
        assert f'set(CMAKE_CUDA_COMPILER "{exe}")' in text
    log.unlink(missing_ok=True)         # forget the configure-time compilations
    out = _run(["cmake", "--build", build, "-j", "2"], tmp_path, env)
    assert "nvcc-plus:" not in out.stdout + out.stderr
    assert (build / "app").exists()
    assert _calls(log) == EXPECTED
    # The dependency files were written and name the header (Ninja moves them to .ninja_deps).
    for obj in ("CMakeFiles/kern.dir/k1.cu.o", "CMakeFiles/kern.dir/k2.cu.o"):
        deps = (_run(["ninja", "-t", "deps", obj], build, env).stdout if generator == "Ninja"
                else (build / (obj + ".d")).read_text())
        assert "common.h" in deps, deps
    if generator == "Ninja":    # and Ninja would rebuild exactly the objects that include it
        os.utime(src / "common.h")
        dry = _run(["ninja", "-n"], build, env).stdout
        assert "k1.cu.o" in dry and "k2.cu.o" in dry and "main.cu.o" not in dry


def test_makefile_project(tmp_path):
    """make -j2 with NVCC=nvcc-plus makes the same device code and dependency files as nvcc."""
    plan = subprocess.run([REAL_NVCC, "-dryrun", "x.cu"], capture_output=True, text=True).stderr
    top = re.search(r"^#\$ TOP=(.*)$", plan, re.M).group(1)
    cuda_lib = Path(top) / "targets" / "x86_64-linux" / "lib"
    exe = write_wrapper(tmp_path / "bin")
    dirs = {"plus": tmp_path / "plus", "ref": tmp_path / "ref"}
    for d in dirs.values():
        _write_sources(d)
        (d / "Makefile").write_text(MAKEFILE)
    log = tmp_path / "calls.txt"
    env = opt_env("identity", NVCC_PLUS_TEST_LOG=str(log))
    procs = [subprocess.Popen(["make", "-j2", f"NVCC={exe}", f"CUDA_LIB={cuda_lib}"], cwd=dirs["plus"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE),
             subprocess.Popen(["make", "-j2", f"NVCC={REAL_NVCC}", f"CUDA_LIB={cuda_lib}"], cwd=dirs["ref"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)]
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0, err.decode()[-3000:]
        assert b"nvcc-plus:" not in err
    assert _calls(log) == EXPECTED
    for obj in ("k1.o", "k2.o", "main.o", "dlink.o"):
        assert fatbin_section(dirs["plus"] / obj) == fatbin_section(dirs["ref"] / obj), obj
    for dep in ("k1.d", "k2.d", "main.d"):
        assert (dirs["plus"] / dep).read_bytes() == (dirs["ref"] / dep).read_bytes(), dep
    os.utime(dirs["plus"] / "common.h")
    dry = subprocess.run(["make", "-n", f"NVCC={exe}", f"CUDA_LIB={cuda_lib}"], cwd=dirs["plus"],
                         env=env, capture_output=True, text=True).stdout
    assert "k1.cu" in dry and "k2.cu" in dry and "main.cu" not in dry
