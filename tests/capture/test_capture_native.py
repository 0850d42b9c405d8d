"""The native injection library: it builds here (no GPU), and captures a real program (GPU)."""
from __future__ import annotations

import ctypes
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from superopt.specs.capture import build
from superopt.specs.capture.build import CaptureBuildError

DATA = Path(__file__).with_name("data")


def _toolkit_or_skip():
    try:
        build.find_compiler()
    except CaptureBuildError as e:
        pytest.skip(str(e))
    try:
        return build.find_toolkit()
    except CaptureBuildError as e:
        pytest.skip(str(e))


def test_library_compiles_and_is_cached(tmp_path):
    _toolkit_or_skip()
    lib = build.build_library(tmp_path)
    assert lib.exists() and lib.parent == tmp_path
    mtime = lib.stat().st_mtime_ns
    assert build.build_library(tmp_path) == lib and lib.stat().st_mtime_ns == mtime    # cached
    assert build.library_path(tmp_path) == lib
    handle = ctypes.CDLL(str(lib))            # libcupti resolves through the rpath
    assert hasattr(handle, "InitializeInjection")
    # nothing else leaks into the program's symbol space
    nm = shutil.which("nm")
    if nm:
        syms = subprocess.run([nm, "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
        exported = {line.split()[-1] for line in syms.splitlines() if " T " in line}
        assert exported == {"InitializeInjection"}


def test_missing_cupti_is_named(tmp_path, monkeypatch):
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cuda.h").write_text("")
    monkeypatch.setattr(build, "_candidate_roots", lambda: [("$CUDA_HOME", tmp_path)])
    with pytest.raises(CaptureBuildError) as e:
        build.find_toolkit()
    msg = str(e.value)
    assert "CUPTI not found" in msg and str(tmp_path) in msg and "cupti.h" in msg and "libcupti.so" in msg
    assert "nvidia-cuda-cupti" in msg


def test_missing_compiler_is_named(monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(CaptureBuildError, match="no C compiler"):
        build.find_compiler()


def test_compile_error_is_reported(tmp_path, monkeypatch):
    _toolkit_or_skip()
    bad = tmp_path / "inject.c"
    bad.write_text("this is not C\n")
    monkeypatch.setattr(build, "SOURCE", bad)
    with pytest.raises(CaptureBuildError, match="compiling the capture library failed"):
        build.build_library(tmp_path / "cache")


# --------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
def test_capture_real_program(tmp_path):
    from click.testing import CliRunner

    import ptx_ir
    from superopt.specs.capture.cli import capture_command
    from superopt.specs.capture.format import kernel_share, load_capture
    from superopt.specs.capture.specs import specs_from_capture

    nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("no nvcc on PATH")
    app = tmp_path / "app"
    subprocess.run([nvcc, "-O2", "-o", str(app), str(DATA / "app.cu")], check=True)   # static cudart
    ptx = tmp_path / "app.ptx"
    subprocess.run([nvcc, "-ptx", "-o", str(ptx), str(DATA / "app.cu")], check=True)
    out = tmp_path / "cap.json"
    env = {"NVCC_PLUS_CACHE_DIR": str(tmp_path / "cache")}
    r = CliRunner(env=env).invoke(capture_command, ["-o", str(out), "--data", "--raw", "--", str(app)])
    raw = out.with_name(out.name + ".raw.jsonl")
    assert r.exit_code == 3, (r.output, raw.read_text() if raw.exists() else "")    # the program's own
    cap = load_capture(out)
    assert cap["exit_code"] == 3 and cap["gpu"]
    ks = cap["kernels"]
    saxpy, tile, fill, axpys = "_Z5saxpyifPKfPf", "_Z6tile2dPKfPfii", "_Z4fillPjji", "_Z6axpy_s4Axpy"
    assert set(ks) == {saxpy, tile, fill, axpys}, ks.keys()
    assert ks[saxpy]["launches"] == 4 and len(ks[saxpy]["shapes"]) == 2
    big = ks[saxpy]["shapes"][0]
    assert big["count"] == 3 and big["grid"] == [(1000003 + 255) // 256, 1, 1] and big["block"] == [256, 1, 1]
    assert struct.unpack("<i", bytes.fromhex(big["params"][0]["bytes"]))[0] == 1000003
    assert struct.unpack("<f", bytes.fromhex(big["params"][1]["bytes"]))[0] == 2.5
    assert big["params"][2]["pointer"]["extent"] >= 4 * 1000003 and big["params"][2]["pointer"]["offset"] == 0
    small = ks[saxpy]["shapes"][1]
    assert small["params"][2]["pointer"]["offset"] == 64
    assert big["timed"] == 3 and big["total_ms"] > 0
    t = ks[tile]["shapes"][0]
    assert t["grid"] == [19, 25, 1] and t["block"] == [16, 8, 1] and t["shared_bytes"] == 512
    f = ks[fill]["shapes"][0]
    assert f["grid"] == [16, 1, 1] and f["block"] == [256, 1, 1]
    assert struct.unpack("<I", bytes.fromhex(f["params"][1]["bytes"]))[0] == 0xabcd
    assert sum(kernel_share(cap).values()) == pytest.approx(1.0)
    # snapshots of the first launch of each shape: fill's output is the golden 0xabcd
    snap = f["snapshot"]
    assert snap and snap.get("ok"), snap
    after = {s["param"]: s["path"] for s in snap["after"]}
    data = Path(after[0]).read_bytes()
    assert struct.unpack("<I", data[:4])[0] == 0xabcd
    # a struct by value: its pointer fields found, pointing into x (at element 8) and y
    inner = ks[axpys]["shapes"][0]["params"][0]["inner"]
    assert [(q["at"], q["offset"]) for q in inner] == [(8, 32), (16, 0)], inner
    assert inner[0]["extent"] >= 4 * 1000003
    ssnap = ks[axpys]["shapes"][0]["snapshot"]
    assert ssnap and ssnap.get("ok") and {s.get("at") for s in ssnap["after"]} == {8, 16}, ssnap
    # and the launch specs
    module = ptx_ir.parse(ptx.read_text())
    sspec = specs_from_capture(cap, module, axpys)[0]
    assert sspec.params[0].kind == "bytes" and sspec.params[0].pointers == {8: "p0_8", 16: "p0_16"}
    from superopt.judge.check import check
    v = check(ptx.read_text(), ptx.read_text(), sspec, backend="gpu", sets=2)
    assert v.status == "accepted", v.summary()
    specs = specs_from_capture(cap, module, saxpy)
    assert specs[0].grid == (3907, 1, 1) and specs[0].params[0].value == 1000003
    assert specs[0].params[2].length >= 1000003 and specs[1].grid == (4, 1, 1)
    assert not cap["errors"], cap["errors"]
