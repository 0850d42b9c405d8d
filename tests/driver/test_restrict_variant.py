"""The restrict-compiled variant of a unit (nvcc_plus.restrict_variant): the driver hands the
optimizer ``config["restrict_variant"]``, a memoized callable that runs the unit's cicc step again
with ``-kernel-params-are-restrict`` only when it is called. Its PTX is what ``nvcc -restrict
-ptx`` makes of the same file (modulo the module header); it writes none of the files the build
uses; a failing variant is one line and never breaks the build."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from nvcc_plus.restrict_variant import ALREADY, FLAG, RestrictVariant, restrict_command
from tests.driver.helpers import needs_nvcc, nvcc, opt_env, plus

MATVEC_CU = r"""
__global__ void matvec_rows(const float* A, const float* x, float* tmp, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    for (int j = 0; j < n; j++) tmp[i] += A[i * n + j] * x[j];
}
"""

LINE = ('"$CICC_PATH/cicc" --c++17 --orig_src_file_name "x.cu" -arch compute_90 -m64 '
        '--gen_c_file_name "/k/x.cudafe1.c" --stub_file_name "/k/x.cudafe1.stub.c" '
        '--gen_device_file_name "/k/x.cudafe1.gpu" --module_id_file_name "/k/x.module_id" '
        '"/k/x.cpp1.ii" -o "/k/x.ptx"')


def _body(ptx: str) -> list[str]:
    """The module without its header (comments, .version, .target, .address_size)."""
    return [ln for ln in ptx.splitlines()
            if ln.strip() and not ln.startswith("//") and not ln.startswith((".version", ".target", ".address_size"))]


def test_the_command_adds_the_flag_after_arch_and_writes_only_into_its_folder():
    argv, why = restrict_command(LINE, {"CICC_PATH": "/nv/bin"}, "/out")
    assert why == "" and argv[0] == "/nv/bin/cicc"
    i = argv.index("-arch")
    assert argv[i + 1] == "compute_90" and argv[i + 2] == FLAG
    for opt in ("-o", "--gen_c_file_name", "--stub_file_name", "--gen_device_file_name"):
        assert argv[argv.index(opt) + 1].startswith("/out/"), opt
    assert argv[argv.index("--module_id_file_name") + 1] == "/k/x.module_id"      # an input: kept
    assert argv[-3] == "/k/x.cpp1.ii"


def test_the_command_is_refused_when_it_cannot_be_made():
    assert restrict_command(LINE.replace(' -o "/k/x.ptx"', ""), {}, "/out")[0] is None
    assert restrict_command(LINE.replace("-m64", f"-m64 {FLAG}"), {}, "/out")[1] == ALREADY
    assert restrict_command("gcc -E x.cu -o x.ii", {}, "/out")[1] == "not a cicc step"


def test_a_failing_cicc_gives_none_once_and_a_one_line_reason(tmp_path):
    cicc = tmp_path / "cicc"
    count = tmp_path / "count"
    cicc.write_text(f"#!/bin/sh\necho run >> {count}\necho 'x.cu(3): error: something went wrong' >&2\nexit 2\n")
    cicc.chmod(cicc.stat().st_mode | stat.S_IEXEC)
    variant = RestrictVariant(LINE, {"CICC_PATH": str(tmp_path), "PATH": os.environ["PATH"]})
    assert variant() is None and variant() is None
    assert count.read_text().count("run") == 1                                   # memoized
    assert variant.error == f"cicc {FLAG} failed (exit 2): x.cu(3): error: something went wrong"


def test_a_cicc_that_hangs_is_stopped_at_the_timeout(tmp_path, monkeypatch):
    import time
    from nvcc_plus import restrict_variant
    monkeypatch.setattr(restrict_variant, "TIMEOUT_S", 0.5)
    cicc = tmp_path / "cicc"
    cicc.write_text("#!/bin/sh\nsleep 30\n")
    cicc.chmod(cicc.stat().st_mode | stat.S_IEXEC)
    variant = RestrictVariant(LINE, {"CICC_PATH": str(tmp_path), "PATH": os.environ["PATH"]})
    t0 = time.monotonic()
    assert variant() is None
    assert time.monotonic() - t0 < 10
    assert variant.error == f"cicc {FLAG} did not finish in 0.5 s"


@needs_nvcc
def test_the_driver_variant_is_nvcc_restrict_ptx(tmp_path: Path):
    (tmp_path / "mv.cu").write_text(MATVEC_CU)
    nvcc(["-restrict", "-ptx", "-arch=sm_90", "mv.cu", "-o", "want.ptx"], tmp_path)
    nvcc(["-ptx", "-arch=sm_90", "mv.cu", "-o", "plain.ptx"], tmp_path)
    got_prefix = tmp_path / "got"
    env = opt_env("restrict_probe", NVCC_PLUS_TEST_RESTRICT=str(got_prefix), NVCC_PLUS_VERBOSE="1")
    res = plus(["-c", "-arch=sm_90", "mv.cu", "-o", "mv.o"], tmp_path, env)
    got = (tmp_path / "got.compute_90").read_text()
    want = (tmp_path / "want.ptx").read_text()
    assert "NOT MEMOIZED" not in got
    assert _body(got) == _body(want)
    assert _body(got) != _body((tmp_path / "plain.ptx").read_text())      # restrict made a difference
    assert "ld.global.nc" in got
    assert (tmp_path / "mv.o").is_file()
    err = res.stderr.decode()
    assert "restrict-compiled variant of compute_90 made in" in err
    assert "not made" not in err


def test_a_variant_that_was_not_made_is_one_line_per_file_in_the_driver_style():
    import io

    from nvcc_plus.log import Log
    from nvcc_plus.replay import Replayer, _State
    r = Replayer.__new__(Replayer)
    r.state, stream = _State(), io.StringIO()
    r.log = Log(stream)
    r.state.variant_errors = [("k.cu", "cicc -kernel-params-are-restrict failed (exit 2): boom", "compute_80"),
                              ("k.cu", "cicc -kernel-params-are-restrict failed (exit 2): boom", "compute_90")]
    r._report_variant_errors()
    assert stream.getvalue() == ("nvcc-plus: k.cu: restrict-compiled variant not made: cicc -kernel-params-are-restrict "
                                 "failed (exit 2): boom (compute_80, compute_90); the kernels were optimized "
                                 "without it\n")


@needs_nvcc
def test_a_build_that_already_uses_restrict_gets_no_variant_and_no_line(tmp_path: Path):
    (tmp_path / "mv.cu").write_text(MATVEC_CU)
    got_prefix = tmp_path / "got"
    env = opt_env("restrict_probe", NVCC_PLUS_TEST_RESTRICT=str(got_prefix))
    res = plus(["-restrict", "-c", "-arch=sm_90", "mv.cu", "-o", "mv.o"], tmp_path, env)
    assert (tmp_path / "got.compute_90").read_text() == "None"
    assert "restrict" not in res.stderr.decode()


@needs_nvcc
def test_the_variant_is_not_made_unless_asked(tmp_path: Path):
    (tmp_path / "mv.cu").write_text(MATVEC_CU)
    env = opt_env("identity", NVCC_PLUS_VERBOSE="1")
    res = plus(["-c", "-arch=sm_90", "mv.cu", "-o", "mv.o"], tmp_path, env)
    assert "restrict-compiled variant" not in res.stderr.decode()
    assert (tmp_path / "mv.o").is_file()
