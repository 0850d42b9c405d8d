"""nvcc-plus against plain nvcc on small sources: same outputs, same messages, same exit codes.

Most tests use the documented developer hook NVCC_PLUS_OPTIMIZER=module:function with the
stand-ins of fake_optimizers.py; the roundtrip tests at the end call the real
superopt.optimize_ptx (and so ptx_ir) and are skipped only while ptx_ir has no parser.
"""
from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.driver.helpers import (NVCC_PLUS, REAL_NVCC, base_env, fatbin_section, needs_nvcc,
                                  opt_env, pair, plus, plus_lines, run)

pytestmark = needs_nvcc


def calls(log: Path) -> list[str]:
    return log.read_text().split("\n")[:-1] if log.exists() else []


def test_compile_c_identical_fatbin(src):
    log = src / "calls.txt"
    _, p = pair(["-c", "k.cu", "-o", "ref.o"], ["-c", "k.cu", "-o", "k.o"], src,
                opt_env("identity", NVCC_PLUS_TEST_LOG=str(log)))
    assert p.stderr == b"" and p.stdout == b""
    assert fatbin_section(src / "k.o") == fatbin_section(src / "ref.o")
    assert calls(log) == [f"{src / 'k.cu'} compute_75"]


def test_compile_and_link(src):
    _, p = pair(["k.cu", "main.cu", "-o", "ref"], ["k.cu", "main.cu", "-o", "app"], src,
                opt_env("identity", NVCC_PLUS_TEST_LOG=str(src / "l")))
    assert p.stderr == b""
    assert fatbin_section(src / "app") == fatbin_section(src / "ref")
    assert len(calls(src / "l")) == 2


def test_dc_and_dlink_and_rdc(src):
    log = src / "calls.txt"
    env = opt_env("identity", NVCC_PLUS_TEST_LOG=str(log))
    pair(["-dc", "k.cu", "-o", "ref.o"], ["-dc", "k.cu", "-o", "k.o"], src, env)
    assert fatbin_section(src / "k.o") == fatbin_section(src / "ref.o")
    pair(["-rdc=true", "-c", "main.cu", "-o", "mainref.o"], ["-rdc=true", "-c", "main.cu", "-o", "main.o"],
         src, env)
    assert fatbin_section(src / "main.o") == fatbin_section(src / "mainref.o")
    n = len(calls(log))
    pair(["-dlink", "k.o", "main.o", "-o", "dlref.o"], ["-dlink", "k.o", "main.o", "-o", "dl.o"], src, env)
    assert len(calls(log)) == n
    assert fatbin_section(src / "dl.o") == fatbin_section(src / "dlref.o")


def test_lib(src):
    env = opt_env("identity", NVCC_PLUS_TEST_LOG=str(src / "l"))
    _, p = pair(["-c", "k.cu", "-o", "ref.o"], ["-lib", "k.cu", "main.cu", "-o", "libk.a"], src, env)
    assert p.stderr == b"" and len(calls(src / "l")) == 2
    members = subprocess.run(["ar", "t", "libk.a"], cwd=src, capture_output=True, text=True).stdout.split()
    assert sorted(members) == ["k.o", "main.o"]
    (src / "x").mkdir()
    subprocess.run(["ar", "x", "../libk.a", "k.o"], cwd=src / "x", check=True)
    assert fatbin_section(src / "x" / "k.o") == fatbin_section(src / "ref.o")


@pytest.mark.parametrize("flags,archs", [
    (["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"],
     ["compute_80", "compute_90"]),
    (["-arch=sm_90a"], ["compute_90", "compute_90a"]),
    (["-lineinfo", "-G", "-Xptxas", "-v"], ["compute_75"]),
], ids=["gencode", "sm_90a", "G-lineinfo"])
def test_variants_identical(src, flags, archs):
    log = src / "calls.txt"
    ref, p = pair(["-c", *flags, "k.cu", "-o", "ref.o"], ["-c", *flags, "k.cu", "-o", "k.o"], src,
                  opt_env("identity", NVCC_PLUS_TEST_LOG=str(log)))
    if "-G" not in flags:
        # -G objects differ between any two nvcc runs (debug info names temporary files)
        assert fatbin_section(src / "k.o") == fatbin_section(src / "ref.o")
    assert p.stdout == ref.stdout
    # -Xptxas -v output, the -G/-lineinfo warning: same text, same stream
    timing = re.compile(r"time = [0-9.]+ ms")
    assert timing.sub("", p.stderr.decode()) == timing.sub("", ref.stderr.decode())
    assert sorted(line.split()[1] for line in calls(log)) == archs


def test_G_ptx_identical(src):
    pair(["-ptx", "-G", "k.cu", "-o", "ref.ptx"], ["-ptx", "-G", "k.cu", "-o", "k.ptx"], src, opt_env("identity"))
    assert (src / "k.ptx").read_bytes() == (src / "ref.ptx").read_bytes()


@pytest.mark.parametrize("mode,out", [("-cubin", "k.cubin"), ("-fatbin", "k.fatbin"), ("-ptx", "k.ptx")])
def test_device_only_outputs_identical(src, mode, out):
    _, p = pair([mode, "-arch=sm_90", "k.cu", "-o", "ref." + out.split(".")[1]],
                [mode, "-arch=sm_90", "k.cu", "-o", out], src, opt_env("identity"))
    assert p.stderr == b""
    assert (src / out).read_bytes() == (src / ("ref." + out.split(".")[1])).read_bytes()


def test_rewrite_reaches_ptxas_and_fatbinary(src):
    """A real rewrite ends up in every product: the PTX, the cubin and the object."""
    plus(["-ptx", "k.cu", "-o", "m.ptx"], src, opt_env("marker"))
    assert "rewritten by nvcc-plus test marker" in (src / "m.ptx").read_text()
    pair(["-ptx", "-arch=sm_80", "k.cu", "-o", "ref.ptx"], ["-cubin", "-arch=sm_80", "k.cu", "-o", "rz.cubin"],
         src, opt_env("round_to_zero"))
    (src / "edited.ptx").write_text((src / "ref.ptx").read_text().replace(".rn.f32", ".rz.f32"))
    pair(["-cubin", "-arch=sm_80", "edited.ptx", "-o", "edited.cubin"],
         ["-cubin", "-arch=sm_80", "k.cu", "-o", "plain.cubin"], src, base_env(NVCC_PLUS_MODE="off"))
    assert (src / "rz.cubin").read_bytes() != (src / "plain.cubin").read_bytes()
    assert (src / "rz.cubin").read_bytes() == (src / "edited.cubin").read_bytes()
    _, p = pair(["-c", "k.cu", "-o", "ref.o"], ["-c", "k.cu", "-o", "k.o"], src, opt_env("marker"))
    assert p.stderr == b""
    assert fatbin_section(src / "k.o") != fatbin_section(src / "ref.o")


@pytest.mark.parametrize("flags", [
    ["-MD"], ["-MMD"], ["-MD", "-MF", "deps/custom.d"], ["-MD", "-MT", "my target"],
    ["-MMD", "-MP", "-MT", "a", "-MT", "b"],
], ids=["MD", "MMD", "MF", "MT", "MP-two-MT"])
def test_depfiles_identical(src, flags):
    for d in ("r/deps", "p/deps"):
        (src / d).mkdir(parents=True)
    ref, p = pair(["-c", *flags, "../k.cu", "-o", "obj.o"], ["-c", *flags, "../k.cu", "-o", "obj.o"],
                  src / "p", opt_env("identity"), ref_cwd=src / "r")
    assert p.stderr == ref.stderr                 # e.g. the warning about two -MT, once
    rel = "deps/custom.d" if "-MF" in flags else "obj.d"
    assert (src / "p" / rel).read_bytes() == (src / "r" / rel).read_bytes()


@pytest.mark.parametrize("flags,dep", [(["-odir", "o"], "o/k.d"), ([], "k.d")], ids=["odir", "no-o"])
def test_depfile_without_o(src, flags, dep):
    for d in ("r/o", "p/o"):
        (src / d).mkdir(parents=True)
    pair(["-c", "-MD", "../k.cu", *flags], ["-c", "-MD", "../k.cu", *flags], src / "p", opt_env("identity"),
         ref_cwd=src / "r")
    assert (src / "p" / dep).read_bytes() == (src / "r" / dep).read_bytes()


def test_keep_and_keep_dir_honoured(src):
    for d in ("kr", "kp"):
        (src / d).mkdir()
    pair(["-c", "k.cu", "-o", "ref.o", "--keep", "--keep-dir", "kr"],
         ["-c", "k.cu", "-o", "k.o", "--keep", "--keep-dir", "kp"], src, opt_env("marker"))
    assert sorted(os.listdir(src / "kp")) == sorted(os.listdir(src / "kr"))
    assert "test marker" in (src / "kp" / "k.ptx").read_text()     # the PTX that was compiled
    (src / "cwdkeep").mkdir()
    (src / "cwdkeep" / "k.cu").write_text((src / "k.cu").read_text())
    (src / "cwdkeep" / "scale.h").write_text((src / "scale.h").read_text())
    plus(["-c", "k.cu", "--keep"], src / "cwdkeep", opt_env("identity"))
    assert (src / "cwdkeep" / "k.ptx").exists() and (src / "cwdkeep" / "k.o").exists()


def test_keep_dir_without_keep_leaves_nothing(src):
    (src / "kd").mkdir()
    plus(["-c", "k.cu", "-o", "k.o", "--keep-dir", "kd"], src, opt_env("identity"))
    assert os.listdir(src / "kd") == []


def test_prepend_and_append_flags(src):
    log = src / "calls.txt"
    flags = {"NVCC_PREPEND_FLAGS": "-DSCALE=3.0f", "NVCC_APPEND_FLAGS": "-lineinfo"}
    pair(["-ptx", "k.cu", "-o", "ref.ptx"], ["-ptx", "k.cu", "-o", "k.ptx"], src,
         opt_env("identity", NVCC_PLUS_TEST_LOG=str(log), **flags), base_env(**flags))
    text = (src / "k.ptx").read_text()
    assert text == (src / "ref.ptx").read_text() and "0f40400000" in text and ".loc" in text
    assert len(calls(log)) == 1


def test_x_cu_and_threads(src):
    (src / "k.cpp").write_text((src / "k.cu").read_text())
    env = opt_env("identity", NVCC_PLUS_TEST_LOG=str(src / "l"))
    flags = ["--threads", "2", "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]
    pair(["-x", "cu", "-c", "k.cpp", "-o", "ref.o", *flags], ["-x", "cu", "-c", "k.cpp", "-o", "k.o", *flags],
         src, env)
    assert fatbin_section(src / "k.o") == fatbin_section(src / "ref.o")
    assert len(calls(src / "l")) == 2


def test_options_file_and_xcompiler_forms(src):
    (src / "opts").write_text('-Xcompiler -fPIC -Xcompiler=-Wall,-Wextra --compiler-options "-O2"\n')
    _, p = pair(["--options-file", "opts", "-c", "k.cu", "-o", "ref.o"],
                ["--options-file", "opts", "-c", "k.cu", "-o", "k.o"], src,
                opt_env("identity", NVCC_PLUS_TEST_LOG=str(src / "l")))
    assert fatbin_section(src / "k.o") == fatbin_section(src / "ref.o")
    assert len(calls(src / "l")) == 1 and p.returncode == 0

# ---- errors --------------------------------------------------------------------------------


BROKEN = {
    "frontend": '__global__ void k(int* x) { x[0] = undefined_name; }\n',
    "include": '#include "no_such_header.h"\n__global__ void k() {}\n',
    "device": '__global__ void k(int* x) { asm("not.an.instruction;"); }\n',
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_broken_source_gives_nvcc_message_once(tmp_path, kind):
    (tmp_path / "bad.cu").write_text(BROKEN[kind])
    ref, p = pair(["-c", "bad.cu", "-o", "ref.o"], ["-c", "bad.cu", "-o", "bad.o"], tmp_path,
                  opt_env("marker"), check=False)
    assert ref.returncode != 0
    assert p.returncode == ref.returncode
    assert p.stdout == ref.stdout
    norm = (lambda b: b.decode().replace(str(tmp_path), "T"))
    if kind == "device":       # ptxas names its temporary input file: compare the rest
        import re
        norm = (lambda b: re.sub(r"ptxas \S+, line", "ptxas F, line", b.decode()))
    assert norm(p.stderr) == norm(ref.stderr)
    assert not plus_lines(p.stderr)


def test_user_failure_after_a_rewrite_is_reported_once(src):
    """The rewrite succeeded, then the host compile fails for the user's reasons."""
    ref, p = pair(["-c", "k.cu", "-o", "no/such/dir/ref.o"], ["-c", "k.cu", "-o", "no/such/dir/k.o"], src,
                  opt_env("marker"), check=False)
    assert ref.returncode != 0 and p.returncode == ref.returncode
    assert p.stderr.decode().replace("k.o", "X") == ref.stderr.decode().replace("ref.o", "X")


@pytest.mark.parametrize("name,what", [
    ("crash", "optimizer raised RuntimeError: deliberate optimizer crash (compute_80, compute_90)"),
    # the first rewrite ptxas rejects ends the rewriting of this file
    ("garbage", "ptxas failed on the rewritten PTX (compute_80): ptxas "),
    ("rename_kernel", "rewritten PTX changes the kernels or visible symbols (compute_80, compute_90)"),
])
def test_broken_optimizer_falls_back_with_one_line(src, name, what):
    flags = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]
    _, p = pair(["-c", *flags, "k.cu", "-o", "ref.o"], ["-c", *flags, "k.cu", "-o", "k.o"], src, opt_env(name))
    assert p.returncode == 0
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("nvcc-plus: k.cu: " + what)
    assert lines[0].endswith("; using nvcc's own PTX")
    assert fatbin_section(src / "k.o") == fatbin_section(src / "ref.o")


def test_optimizer_timeout(src):
    p = plus(["-c", "k.cu", "-o", "k.o"], src, opt_env("slow", NVCC_PLUS_TIMEOUT="0.5"))
    assert plus_lines(p.stderr) == [
        "nvcc-plus: k.cu: optimizer timed out after 0.5 s (compute_75); using nvcc's own PTX"]


def test_optimizer_timeout_is_not_swallowed_by_except_exception(src):
    t0 = time.monotonic()
    p = plus(["-c", "k.cu", "-o", "k.o"], src, opt_env("swallowing", NVCC_PLUS_TIMEOUT="0.5"))
    assert p.returncode == 0
    assert plus_lines(p.stderr) == [
        "nvcc-plus: k.cu: optimizer timed out after 0.5 s (compute_75); using nvcc's own PTX"]
    assert time.monotonic() - t0 < 25      # the optimizer would run 30 s


def test_optimizer_that_cannot_be_imported(src):
    p = plus(["-c", "k.cu", "-o", "k.o"], src,
             base_env(NVCC_PLUS_MODE="optimize", NVCC_PLUS_OPTIMIZER="no_such_module:f"))
    (line,) = plus_lines(p.stderr)
    assert line.startswith("nvcc-plus: k.cu: cannot load the optimizer: ModuleNotFoundError")


def test_messages_and_records(src):
    p = plus(["-c", "k.cu", "-o", "k.o", "--plus-report-dir", str(src / "rec")], src, opt_env("chatty"))
    assert plus_lines(p.stderr) == ["nvcc-plus: k.cu: kernel k: nothing to do"]
    (rec,) = (src / "rec").iterdir()
    assert '"kernel": "k"' in rec.read_text()

# ---- modes, flags, passthrough -------------------------------------------------------------


def test_off_mode_and_plus_flags(src):
    log = src / "calls.txt"
    env = opt_env("identity", NVCC_PLUS_TEST_LOG=str(log), NVCC_PLUS_MODE="off")
    plus(["-c", "k.cu", "-o", "k.o"], src, env)
    assert not log.exists()
    p = plus(["-c", "--plus-mode=optimize", "k.cu", "-o", "k2.o"], src, env)
    assert len(calls(log)) == 1 and p.stderr == b""
    p = plus(["-c", "k.cu", "-o", "k3.o"], src, base_env(NVCC_PLUS_MODE="bogus"))
    assert plus_lines(p.stderr) == ["nvcc-plus: unknown mode 'bogus' from NVCC_PLUS_MODE "
                                    "(expected off, roundtrip, optimize); running nvcc unchanged"]


def test_toml_selects_mode(src):
    (src / "nvcc-plus.toml").write_text('mode = "off"\n')
    log = src / "calls.txt"
    env = base_env(NVCC_PLUS_OPTIMIZER="fake_optimizers:identity", NVCC_PLUS_TEST_LOG=str(log))
    plus(["-c", "k.cu", "-o", "k.o"], src, env)
    assert not log.exists()
    (src / "nvcc-plus.toml").write_text('mode = "optimize"\n')
    plus(["-c", "k.cu", "-o", "k.o"], src, env)
    assert len(calls(log)) == 1


@pytest.mark.parametrize("args", [["--version"], ["-E", "k.cu"], ["-M", "k.cu"], ["--list-gpu-arch"]])
def test_passthrough_identical(src, args):
    ref, p = pair(args, args, src, opt_env("crash"))
    assert (p.returncode, p.stdout, p.stderr) == (ref.returncode, ref.stdout, ref.stderr)


def test_launcher_mode(src):
    log = src / "calls.txt"
    p = plus([REAL_NVCC, "-c", "k.cu", "-o", "k.o"], src, opt_env("identity", NVCC_PLUS_TEST_LOG=str(log)))
    assert p.stderr == b"" and len(calls(log)) == 1
    # a launcher in front of a compiler that is not nvcc runs it untouched
    p = run([*NVCC_PLUS, "gcc", "-c", "-x", "c", "/dev/null", "-o", "n.o"], src, opt_env("identity"))
    assert p.returncode == 0 and (src / "n.o").exists()


def test_recursion_through_a_path_wrapper(src):
    """An `nvcc` on PATH that is nvcc-plus itself is skipped, not recursed into."""
    from tests.driver.helpers import write_wrapper
    w = write_wrapper(src / "bin", "nvcc")
    env = opt_env("identity", PATH=f"{w.parent}{os.pathsep}{os.environ['PATH']}")
    p = run([w, "-c", "k.cu", "-o", "k.o"], src, env)
    assert p.returncode == 0 and p.stderr == b""

# ---- roundtrip with the real optimizer (superopt + ptx_ir) ---------------------------------


def roundtrip(test):
    """Marks the tests that run the real optimizer in roundtrip mode (ptx_ir parse + emit)."""
    return test


def _roundtrip_reproduces_text(ptx_files) -> bool:
    from superopt.api import optimize_ptx
    return all(optimize_ptx(f.read_text(), mode="roundtrip").ptx == f.read_text() for f in ptx_files)


@roundtrip
def test_roundtrip_cubin_identical(src):
    """Parsed and re-emitted by ptx_ir, the PTX assembles to the very same cubin."""
    _, p = pair(["-cubin", "-arch=sm_90", "k.cu", "-o", "ref.cubin"],
                ["-cubin", "-arch=sm_90", "k.cu", "-o", "k.cubin"], src, base_env(NVCC_PLUS_MODE="roundtrip"))
    assert p.stderr == b"", p.stderr.decode()
    assert (src / "k.cubin").read_bytes() == (src / "ref.cubin").read_bytes()


@roundtrip
@pytest.mark.parametrize("mode,out", [("-fatbin", "k.fatbin"), ("-c", "k.o")])
def test_roundtrip_byte_identical(src, mode, out):
    """fatbinary embeds the PTX text itself: identical because ptx_ir reproduces nvcc's text."""
    flags = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
    ext = out.split(".")[1]
    (src / "kr").mkdir()
    _, p = pair([mode, *flags, "k.cu", "-o", "ref." + ext, "--keep", "--keep-dir", "kr"],
                [mode, *flags, "k.cu", "-o", out], src, base_env(NVCC_PLUS_MODE="roundtrip"))
    assert p.stderr == b"", p.stderr.decode()
    # ptx_ir's faithful printing gives back nvcc's own text for an unchanged module.
    assert _roundtrip_reproduces_text(sorted((src / "kr").glob("*.ptx")))
    if mode == "-c":
        assert fatbin_section(src / out) == fatbin_section(src / "ref.o")
    else:
        assert (src / out).read_bytes() == (src / ("ref." + ext)).read_bytes()


@pytest.mark.parametrize("name,why", [
    ("garbage_with_record", "ptxas failed on the rewritten PTX"),
    ("rename_kernel_with_record", "rewritten PTX changes the kernels or visible symbols"),
])
def test_records_say_when_the_build_did_not_use_the_rewrite(src, name, why):
    """The optimizer's record called the kernel optimized; the build then used nvcc's PTX."""
    import json
    p = plus(["-c", "k.cu", "-o", "k.o", "--plus-report-dir", str(src / "rec")], src, opt_env(name))
    assert p.returncode == 0
    (path,) = (src / "rec").iterdir()
    rec = json.loads(path.read_text())
    assert rec["driver"]["applied"] is False and rec["driver"]["reason"].startswith(why)
    (k,) = rec["kernels"]
    assert k["status"] == "rolled-back"
    assert why in k["reason"] and "test-pass: 1.500x" in k["reason"]
    from reports.load import validate
    validate(rec)
