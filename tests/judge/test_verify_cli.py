"""`superopt verify` (issue 12.3): infers the spec when none is given and says so; exit 2 for
any input it cannot judge (never a traceback); --sets >= 1."""
from pathlib import Path

from click.testing import CliRunner

from superopt.judge.verify_cli import verify_command

CHEATS = Path(__file__).with_name("cheats")


def run(*args):
    return CliRunner().invoke(verify_command, [*map(str, args), "--backend", "emulator"])


def test_inferred_spec_accepts_equivalent_and_rejects_a_cheat():
    ok = run(CHEATS / "saxpy.ptx", CHEATS / "variants" / "saxpy_eq_reorder.ptx", "--kernel", "saxpy")
    assert ok.exit_code == 0 and "ACCEPTED" in ok.output and "spec inferred from the baseline" in ok.output
    bad = run(CHEATS / "saxpy.ptx", CHEATS / "variants" / "saxpy_const_a.ptx", "--kernel", "saxpy")
    assert bad.exit_code == 1 and "REJECTED" in bad.output


def test_unreadable_inputs_exit_2_without_traceback(tmp_path):
    rnd = tmp_path / "random.ptx"
    rnd.write_bytes(bytes(range(256)) * 3)
    txt = tmp_path / "text.ptx"
    txt.write_text("this is not ptx {")
    for base in (rnd, txt, tmp_path / "missing.ptx"):
        r = run(base, CHEATS / "saxpy.ptx", "--kernel", "saxpy")
        assert r.exit_code == 2, r.output
        assert "COULD NOT JUDGE" in r.output
        assert "Traceback" not in r.output


def test_sets_must_be_positive():
    r = run(CHEATS / "saxpy.ptx", CHEATS / "saxpy.ptx", "--kernel", "saxpy", "--sets", "0")
    assert r.exit_code == 2 and "ACCEPTED" not in r.output


def test_spec_too_large_for_the_emulator_is_refused_quickly(tmp_path, monkeypatch):
    import time
    monkeypatch.setenv("NVCC_PLUS_EMULATOR_MAX_MB", "1")
    spec = tmp_path / "big.toml"
    spec.write_text((CHEATS / "saxpy.toml").read_text().replace("100000", "1000000"))
    t0 = time.monotonic()
    r = run(CHEATS / "saxpy.ptx", CHEATS / "saxpy.ptx", "--kernel", "saxpy", "--spec", spec)
    assert r.exit_code == 2 and "too large for the emulator" in r.output
    assert time.monotonic() - t0 < 20
