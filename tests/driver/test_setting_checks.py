"""Settings read deep in the code are checked before use (issue 25): a bad value is a
configuration error naming the setting and the values it may have, for the optimizer, the
judging commands and `superopt config`; a build through the driver keeps nvcc's code and says
why (it never breaks)."""
from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from superopt.cli import main
from superopt.config.resolved import Settings
from superopt.config.settings import SettingError
from superopt.optimize import optimize_module
from superopt.config.checks import check_settings, setting_problems
from tests.driver.helpers import needs_nvcc, opt_env, plus
from tests.search.test_locked_mode_linear import _files

# (variable, bad value, what the message must say about the values it may have)
BAD = [
    ("NVCC_PLUS_PASSES", "nonexistent", "superopt passes --names"),
    ("NVCC_PLUS_EMULATOR_MAX_MB", "abc", "whole number >= 1"),
    ("NVCC_PLUS_EMULATOR_MAX_THREADS", "0", "whole number >= 1"),
    ("NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS", "-5", "whole number >= 1"),
    ("NVCC_PLUS_GPUS", "zzz", "ordinals (0,1), UUIDs or UUID prefixes"),
    ("NVCC_PLUS_LOCK", "bogus", "the one value is write"),
]
JUDGE = {"NVCC_PLUS_EMULATOR_MAX_MB", "NVCC_PLUS_EMULATOR_MAX_THREADS", "NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS",
         "NVCC_PLUS_GPUS"}
GOOD = {"NVCC_PLUS_PASSES": "cache-hints", "NVCC_PLUS_EMULATOR_MAX_MB": "512", "NVCC_PLUS_EMULATOR_MAX_THREADS": "1e6",
        "NVCC_PLUS_ATOMIC_LOG_MAX_RECORDS": "1024", "NVCC_PLUS_GPUS": "0, GPU-5f3c9a2e, MIG-5f3c9a2e, MIG-GPU-5f3c9a2e/1/0",
        "NVCC_PLUS_LOCK": "write"}


@pytest.fixture
def clean(tmp_path, monkeypatch):
    for k in list(os.environ):
        if k.startswith("NVCC_PLUS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name,value,valid", BAD, ids=[b[0] for b in BAD])
def test_bad_value_is_named_with_the_valid_values(clean, monkeypatch, name, value, valid):
    monkeypatch.setenv(name, value)
    problems = setting_problems()
    assert len(problems) == 1 and value in problems[0] and valid in problems[0], problems
    assert name in problems[0] or name == "NVCC_PLUS_PASSES" and "env NVCC_PLUS_PASSES" in problems[0]
    ptx, cu = _files(clean, 2)
    with pytest.raises(SettingError, match=valid.replace("(", r"\(").replace(")", r"\)")):
        optimize_module(ptx, source=cu, settings=Settings())
    (clean / "k.ptx").write_text(ptx)
    res = CliRunner().invoke(main, ["optimize", "k.ptx"])
    assert res.exit_code == 2 and value in res.output and "Traceback" not in res.output, res.output
    res = CliRunner().invoke(main, ["config"])
    assert res.exit_code == 0 and "warning" in res.output and value in res.output, res.output
    if name in JUDGE:
        res = CliRunner().invoke(main, ["verify", "k.ptx", "k.ptx", "--kernel", "_Z2k0PKfPfi",
                                        "--backend", "emulator"])
        assert res.exit_code == 2 and value in res.output, res.output


def test_passes_in_the_toml_file_are_checked_too(clean):
    with pytest.raises(SettingError, match="'nope'.*superopt passes --names"):
        check_settings({"passes": ["cache-hints", "nope"]})


def test_good_values_pass(clean, monkeypatch):
    for k, v in GOOD.items():
        monkeypatch.setenv(k, v)
    assert setting_problems() == []
    monkeypatch.setenv("NVCC_PLUS_LOCK", "")            # empty is unset
    assert setting_problems() == []


@needs_nvcc
def test_a_build_with_a_bad_setting_keeps_nvccs_code_and_says_which(src):
    env = opt_env("identity", NVCC_PLUS_OPTIMIZER="", NVCC_PLUS_LOCK="bogus",
                  NVCC_PLUS_CACHE_DIR=str(src / "cache"))
    env.pop("NVCC_PLUS_OPTIMIZER")
    res = plus(["-arch=sm_90", "-c", "k.cu", "-o", "k.o"], src, env)
    assert res.returncode == 0 and (src / "k.o").exists()
    err = res.stderr.decode()
    assert "NVCC_PLUS_LOCK='bogus'" in err and "write" in err, err
