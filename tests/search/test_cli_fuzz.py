"""Bad input to every ``superopt`` command (issue 25): empty, random bytes, non-UTF-8, deeply
nested, huge, a FIFO, a folder, /dev/zero, a missing file. Each gives its documented exit
status (2, bad input, unless the command documents otherwise) and a message naming the input,
never a Python traceback, never a hang, never the last-resort "internal error" line (each
cause is handled where it arises). Run in-process with click's CliRunner."""
from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from superopt.cli import main
from superopt.store import safe_files
from tests.bounded import bounded_memory, within
from tests.reports.records import kernel, module

ROOT = Path(__file__).resolve().parents[2]
GOOD_PTX = (ROOT / "tests" / "capture" / "data" / "k.ptx").read_text()
GOOD_PASS = ROOT / "tests" / "search" / "data" / "example_pass.py"
HUGE_LIMIT = 1 << 20                     # the input cap during the test; "huge" is twice that
KINDS = ["empty", "random", "non-utf8", "nested", "huge", "fifo", "folder", "dev-zero", "missing"]


def make_input(folder: Path, kind: str, suffix: str) -> Path:
    p = folder / f"in-{kind}{suffix}"
    rng = random.Random(kind)
    if kind == "empty":
        p.write_bytes(b"")
    elif kind == "random":
        p.write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
    elif kind == "non-utf8":
        p.write_bytes(GOOD_PTX.encode()[:200] + b"\xff\xfe\xc3\x28 caf\xe9\n" + GOOD_PTX.encode()[200:])
    elif kind == "nested":
        p.write_text("[" * 200_000 + "]" * 200_000 if suffix != ".ptx" else "{" * 200_000 + "}" * 200_000)
    elif kind == "huge":
        p.write_bytes(b"\n" * (2 * HUGE_LIMIT))
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "folder":
        p.mkdir()
    elif kind == "dev-zero":
        p.symlink_to("/dev/zero")
    elif kind == "missing":
        pass
    return p


@pytest.fixture
def env(tmp_path, monkeypatch):
    for k in list(os.environ):
        if k.startswith("NVCC_PLUS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(safe_files, "INPUT_LIMIT", HUGE_LIMIT)
    monkeypatch.setattr(safe_files, "CONFIG_LIMIT", HUGE_LIMIT)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / "good.ptx").write_text(GOOD_PTX)
    (tmp_path / "good.json").write_text(json.dumps(module([kernel("scale4")])))
    (tmp_path / "ref.py").write_text("def reference(a, b, n):\n    b[:n] = a[:n]\n")
    return tmp_path


K = "_Z6scale4PfS_fi"           # a kernel of good.ptx
SIG = "vcopy(const float* a, float* b, int n)"

# (command line with {IN} for the bad input, the suffix it gets, the exit status, what the
# output must say besides naming the input). 2 is bad input; a few commands document another
# status for an input they tolerate.
COMMANDS = {
    "optimize-ptx": (["optimize", "{IN}"], ".ptx", 2, ""),
    "verify-baseline": (["verify", "{IN}", "good.ptx", "--kernel", K, "--backend", "emulator"], ".ptx", 2, ""),
    "verify-candidate": (["verify", "good.ptx", "{IN}", "--kernel", K, "--backend", "emulator"], ".ptx", 2, ""),
    "verify-spec": (["verify", "good.ptx", "good.ptx", "--kernel", K, "--backend", "emulator", "--spec", "{IN}"],
                    ".json", 2, ""),
    "verify-spec-toml": (["verify", "good.ptx", "good.ptx", "--kernel", K, "--backend", "emulator", "--spec",
                          "{IN}"], ".toml", 2, ""),
    "try-pass": (["try", "{IN}", "--on", "good.ptx"], ".py", 2, ""),
    "try-on": (["try", str(GOOD_PASS), "--on", "{IN}", "--backend", "emulator"], ".ptx", 0, "unreadable"),
    "report": (["report", "{IN}"], ".json", 2, ""),
    "report-md": (["report", "{IN}", "--format", "md", "-o", "out.md"], ".json", 2, ""),
    "report-archive": (["report", "{IN}"], ".tgz", 2, ""),
    "compare": (["compare", "{IN}", "good.json"], ".json", 2, ""),
    "gate-old": (["gate", "{IN}", "good.json"], ".json", 2, ""),
    "gate-new": (["gate", "good.json", "{IN}"], ".json", 2, ""),
    "dataset": (["dataset", "export", "{IN}", "-o", "out.jsonl", "--no-cache"], ".json", 0, "unreadable"),
    "propose": (["model", "propose", "{IN}", "--kernel", K], ".ptx", 2, ""),
    "generate-description": (["generate", "--description-file", "{IN}", "--signature", SIG, "--reference",
                              "ref.py"], ".txt", 2, ""),
    "generate-reference": (["generate", "copy a to b", "--signature", SIG, "--reference", "{IN}"], ".py", 2, ""),
    "generate-spec": (["generate", "copy a to b", "--signature", SIG, "--reference", "ref.py", "--spec", "{IN}"],
                      ".toml", 2, ""),
}
# Where an input is fine for a command (a folder of records, free text as a description) or the
# command documents another status: (exit status, whether the message names the input, what
# the output must say).
OVERRIDES = {
    ("try-on", "folder"): (0, False, "fired on 0"),               # --on searches folders
    ("try-on", "missing"): (2, True, ""),
    ("report", "folder"): (0, False, "0 kernel(s)"),              # a records folder, empty
    ("report-md", "folder"): (0, False, "wrote out.md"),
    ("report-archive", "folder"): (0, False, "0 kernel(s)"),
    ("compare", "folder"): (0, False, "kernel"),
    ("dataset", "folder"): (0, False, "0 row(s) from 0 record file(s)"),
    ("dataset", "missing"): (2, True, ""),
    ("generate-description", "nested"): (2, False, "characters (at most"),    # brackets are a description
}


def run(args: list[str], timeout: float = 20.0):
    with bounded_memory(2 << 30), within(timeout):
        return CliRunner().invoke(main, args)


def assert_clean(res, code: int, must_name: str, also: str = ""):
    out = res.output
    assert "Traceback" not in out, out
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "internal error" not in out, out
    assert res.exit_code == code, (res.exit_code, out)
    if must_name:
        assert must_name in out, out
    if also:
        assert also in out, out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_bad_input_is_one_named_error(env, command, kind):
    template, suffix, code, also = COMMANDS[command]
    code, named, also = OVERRIDES.get((command, kind), (code, True, also))
    bad = make_input(env, kind, suffix)
    args = [a.replace("{IN}", bad.name) for a in template]
    res = run(args)
    assert_clean(res, code, bad.name if named else "", also)


@pytest.mark.parametrize("kind", ["random", "fifo", "dev-zero", "huge", "folder"])
def test_bad_cuda_source_to_optimize(env, kind):
    if kind == "random" and shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    bad = make_input(env, kind, ".cu")
    assert_clean(run(["optimize", bad.name], timeout=120), 2, bad.name)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "nested", "non-utf8", "folder"])
def test_bad_config_file_is_a_warning_not_a_crash(env, monkeypatch, kind):
    bad = make_input(env, kind, ".toml")
    monkeypatch.setenv("NVCC_PLUS_CONFIG", str(bad))
    res = run(["config"])
    assert_clean(res, 0, bad.name)
    assert bad.name in res.output and "warning" in res.output


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "random", "nested", "folder"])
def test_bad_cache_files_do_not_break_cache_stats(env, kind):
    cache = env / "cache"
    cache.mkdir()
    make_input(cache, kind, ".json").rename(cache / "stats.json")
    for args in (["cache", "stats"], ["cache", "stats", "--json"], ["cache", "info"], ["cache", "clear"]):
        assert_clean(run(args), 0, "")


# ---- outputs and numbers -----------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["optimize", "-o", "nodir/x.ptx", "good.ptx"],
    ["optimize", "-o", "/proc/version", "good.ptx"],
    ["optimize", "--report", "good.ptx", "good.ptx"],
    ["report", "good.json", "-o", "nodir/r.txt"],
    ["report", "good.json", "--format", "md", "-o", "nodir/r.md"],
    ["dataset", "export", "good.json", "-o", "/proc/version", "--no-cache"],
])
def test_unwritable_output_is_named(env, args):
    res = run(args)
    named = args[2] if args[0] == "optimize" else args[-1] if args[-1] != "--no-cache" else args[-2]
    assert_clean(res, 2, named)


def test_options_after_a_ptx_file_are_not_dropped_silently(env):
    """Everything after FILE goes to nvcc, which a .ptx input never runs: an -o there used to be
    ignored (exit 0, no file)."""
    res = run(["optimize", "good.ptx", "-o", "out.ptx"])
    assert_clean(res, 2, "-o", "before FILE")
    assert not (env / "out.ptx").exists()


@pytest.mark.parametrize("args", [
    ["verify", "good.ptx", "good.ptx", "--kernel", K, "--timeout", "nan"],
    ["verify", "good.ptx", "good.ptx", "--kernel", K, "--timeout", "-1"],
    ["verify", "good.ptx", "good.ptx", "--kernel", K, "--timeout", "0"],
    ["verify", "good.ptx", "good.ptx", "--kernel", K, "--timeout", "inf"],
    ["verify", "good.ptx", "good.ptx", "--kernel", K, "--sets", "100000000"],
    ["verify", "good.ptx", "good.ptx", "--kernel", K, "--sets", "0"],
    ["verify", "good.ptx", "good.ptx", "--kernel", K, "--seed", "-1"],
    ["optimize", "--budget", "nan", "good.ptx"],
    ["optimize", "--budget", "-1", "good.ptx"],
    ["gate", "good.json", "good.json", "--max-regression", "nan"],
    ["dataset", "export", "good.json", "--min-speedup", "nan"],
    ["model", "propose", "good.ptx", "--kernel", K, "--rounds", "0"],
    ["model", "propose", "good.ptx", "--kernel", K, "--budget", "inf"],
    ["model", "check", "--max-tokens", "-5"],
    ["model", "serve", "--model", "m", "--port", "70000", "--dry-run"],
    ["generate", "x", "--signature", SIG, "--reference", "ref.py", "--budget", "nan"],
    ["generate", "x", "--signature", SIG, "--reference", "ref.py", "--temperature", "inf"],
])
def test_numeric_options_are_validated(env, args):
    res = run(args)
    flag = next(a for a in reversed(args) if a.startswith("--") and a != "--dry-run")
    assert_clean(res, 2, flag)


def test_gate_nan_threshold_would_have_passed_a_regression(env):
    """Why --max-regression nan must be refused: every comparison with nan is false."""
    from tests.reports.records import with_speedup
    old = env / "old.json"
    old.write_text(json.dumps(module([with_speedup(kernel("scale4"), 1.5)])))
    new = env / "new.json"
    new.write_text(json.dumps(module([with_speedup(kernel("scale4"), 1.0)])))
    assert run(["gate", str(old), str(new)]).exit_code == 1
    assert run(["gate", str(old), str(new), "--max-regression", "nan"]).exit_code == 2


def test_unparsable_ptx_names_the_file_and_the_parser_error(env):
    (env / "bad.ptx").write_text(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k( {\n")
    res = run(["optimize", "bad.ptx"])
    assert_clean(res, 2, "bad.ptx", "not PTX that can be parsed")
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1, res.output


@pytest.mark.parametrize("fmt", ["term", "md", "html"])
def test_report_writes_the_file_in_every_format(env, fmt):
    out = env / f"report.{fmt}"
    res = run(["report", "good.json", "--format", fmt, "-o", str(out), "--no-sass"])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "scale4" in text
    if fmt == "term":
        assert "\x1b[" not in text and "kernel" in text
