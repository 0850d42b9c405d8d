"""`superopt verify` exit codes and the timing decision rule (CPU only)."""
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from superopt.judge.backends.base import register_backend
from superopt.cli import main
from superopt.judge.timing import bytes_moved, decide, time_pair
from superopt.specs.launch_spec import load_spec
from tests.judge.judge_fake_backend import FakeBackend, fake_ptx

HERE = Path(__file__).parent
SPEC_FILE = HERE / "kernels" / "judge.toml"


@pytest.fixture
def ptx_files(tmp_path):
    paths = {}
    for name in ("baseline", "fma", "noop"):
        p = tmp_path / f"{name}.ptx"
        p.write_text(fake_ptx(name))
        paths[name] = str(p)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC_FILE.read_text().replace("value = 100000", "value = 3000"))
    paths["spec"] = str(spec)
    register_backend("fake", FakeBackend)
    return paths


def run(*args):
    return CliRunner().invoke(main, ["verify", *args])


def test_accepted_exit_0(ptx_files):
    r = run(ptx_files["baseline"], ptx_files["baseline"], "--kernel", "judge_kernel", "--spec", ptx_files["spec"],
            "--backend", "fake")
    assert r.exit_code == 0, r.output
    assert r.output.startswith("ACCEPTED")


def test_rejected_exit_1_says_where(ptx_files):
    r = run(ptx_files["baseline"], ptx_files["fma"], "--kernel", "judge_kernel", "--spec", ptx_files["spec"],
            "--backend", "fake")
    assert r.exit_code == 1, r.output
    assert "REJECTED" in r.output and "buffer 'out' element" in r.output and "baseline" in r.output
    assert "set 0" in r.output


def test_json_output(ptx_files):
    import json
    r = run(ptx_files["baseline"], ptx_files["noop"], "--kernel", "judge_kernel", "--spec", ptx_files["spec"],
            "--backend", "fake", "--json", "--seed", "5")
    assert r.exit_code == 1
    d = json.loads(r.output)
    assert d["status"] == "rejected" and d["evidence"]["seed"] == 5 and d["mismatch"]["kind"] == "unwritten"


@pytest.mark.parametrize("extra,msg", [
    ([], "no launch spec"),
    (["--backend", "nonesuch"], "'nonesuch' is not one of 'auto'"),    # only registered backends
    (["--policy", "loose"], "policy 'loose'"),
])
def test_could_not_judge_exit_2(ptx_files, extra, msg):
    args = [ptx_files["baseline"], ptx_files["baseline"], "--kernel", "judge_kernel"]
    if extra and extra[0] in ("--backend", "--policy"):
        args += ["--spec", ptx_files["spec"]]
    r = run(*args, *extra)
    assert r.exit_code == 2, r.output
    assert msg in r.output


def test_missing_file_exit_2(ptx_files):
    r = run("/nonexistent.ptx", ptx_files["baseline"], "--kernel", "judge_kernel", "--spec", ptx_files["spec"])
    assert r.exit_code == 2 and "cannot read PTX" in r.output


def test_bad_spec_exit_2(ptx_files, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("kernel = 'judge_kernel'\ngrid = [1]\n")
    r = run(ptx_files["baseline"], ptx_files["baseline"], "--kernel", "judge_kernel", "--spec", str(bad),
            "--backend", "fake")
    assert r.exit_code == 2 and "launch spec" in r.output


# ---------------------------------------------------------------- timing

def test_decide_clear_win():
    rng = np.random.default_rng(0)
    a = 10e-6 + rng.normal(0, 0.2e-6, 100)
    b = 8e-6 + rng.normal(0, 0.2e-6, 100)
    faster, sa, sb, ci, why = decide(a, b)
    assert faster and ci[1] < 1 and sa.median > sb.median


def test_decide_noise_is_not_a_win():
    rng = np.random.default_rng(1)
    a = 10e-6 + rng.normal(0, 1e-6, 100)
    b = 9.8e-6 + rng.normal(0, 1e-6, 100)          # 2% better median, 10% noise
    faster, *_ , why = decide(a, b)
    assert not faster and ("spread" in why or "CI" in why)


def test_decide_same_is_not_a_win():
    rng = np.random.default_rng(2)
    for k in range(20):
        a = 10e-6 + rng.normal(0, 0.3e-6, 60)
        b = 10e-6 + rng.normal(0, 0.3e-6, 60)
        assert not decide(a, b, seed=k)[0]


def test_decide_min_gain():
    a = np.full(50, 10e-6) + np.linspace(0, 1e-8, 50)
    b = np.full(50, 9.9e-6) + np.linspace(0, 1e-8, 50)
    assert decide(a, b)[0]
    assert not decide(a, b, min_gain=0.05)[0]


def test_no_gpu_no_speed():
    r = time_pair("x", "y", load_spec(str(SPEC_FILE)), backend=FakeBackend())
    assert r.status == "no_gpu" and "no GPU: no measured speed" in r.reason and not r.faster
    r = time_pair("x", "y", load_spec(str(SPEC_FILE)), backend="emulator")
    assert r.status == "no_gpu"
    from superopt.judge.timing import NoGPU
    with pytest.raises(NoGPU):
        time_pair("x", "y", load_spec(str(SPEC_FILE)), backend=FakeBackend(), require_gpu=True)


def test_bytes_moved():
    assert bytes_moved(load_spec(str(SPEC_FILE)).resolved({"n": 1000})) == 3 * 4000


WRITE_ONLY_PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry copy_to(.param .u64 out, .param .u64 inp, .param .u32 n)
{
    .reg .pred %p<2>; .reg .b32 %r<4>; .reg .f32 %f<2>; .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [inp]; ld.param.u32 %r1, [n];
    cvta.to.global.u64 %rd3, %rd1; cvta.to.global.u64 %rd4, %rd2;
    mov.u32 %r2, %tid.x; setp.ge.u32 %p1, %r2, %r1; @%p1 bra $done;
    mul.wide.u32 %rd5, %r2, 4; add.s64 %rd6, %rd4, %rd5; add.s64 %rd7, %rd3, %rd5;
    ld.global.f32 %f1, [%rd6]; st.global.f32 [%rd7], %f1;
$done:
    ret;
}
"""


def test_bytes_moved_counts_a_write_only_inout_buffer_once():
    """A captured spec marks every buffer inout; the lower bound counts twice only the
    buffers the kernel's code is seen to load from."""
    from superopt.judge.timing import buffers_read
    from superopt.specs.launch_spec import LaunchSpec
    spec = LaunchSpec.from_dict({"kernel": "copy_to", "grid": [1, 1, 1], "block": [256, 1, 1], "params": [
        {"name": "out", "kind": "buffer", "type": "f32", "length": 256, "direction": "inout"},
        {"name": "inp", "kind": "buffer", "type": "f32", "length": 256, "direction": "inout"},
        {"name": "n", "kind": "scalar", "type": "u32", "value": 256}]})
    assert buffers_read(WRITE_ONLY_PTX, spec) == {"inp"}
    assert bytes_moved(spec) == 4 * 1024                       # no PTX: both twice
    assert bytes_moved(spec, buffers_read(WRITE_ONLY_PTX, spec)) == 3 * 1024
    assert buffers_read("not ptx", spec) is None
