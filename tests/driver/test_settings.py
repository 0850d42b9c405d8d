"""One table of settings (superopt/config/settings.py) that the code, docs/settings.md, --plus-help and
`superopt config` cannot drift from: eight variables were once read and documented nowhere."""
from __future__ import annotations

import re
from pathlib import Path

from nvcc_plus.plusflags import PLUS_FLAGS_BOOL, PLUS_FLAGS_WITH_VALUE
from superopt.config import settings as S

REPO = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\b(?:NVCC_PLUS|SUPEROPT)_[A-Z0-9_]*[A-Z0-9]\b")
# Names that look like variables but are not read from the environment.
NOT_VARIABLES = {"NVCC_PLUS_BENCH"}        # the line bench programs print (bench/programs)


def _names_in_code() -> dict[str, str]:
    found: dict[str, str] = {}
    for folder in ("nvcc_plus", "superopt", "ptx_ir", "reports", "bench", "tests", ".ci"):
        for path in (REPO / folder).rglob("*"):
            if path.suffix not in (".py", ".c", ".sh", "") or not path.is_file() or "corpus" in path.parts:
                continue
            if path.name == "test_settings.py" or path == REPO / "superopt" / "config" / "settings.py":
                continue
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            for name in NAME.findall(text):
                found.setdefault(name, str(path.relative_to(REPO)))
    return {k: v for k, v in found.items() if k not in NOT_VARIABLES}


def test_every_variable_the_code_reads_is_in_the_table():
    in_code = _names_in_code()
    missing = {k: v for k, v in in_code.items() if k not in S.BY_ENV}
    assert missing == {}, f"add these to superopt/config/settings.py (name: first file): {missing}"


def test_the_table_lists_nothing_the_code_does_not_read():
    in_code = _names_in_code()
    stale = sorted(s.env for s in S.SETTINGS if s.env not in in_code)
    assert stale == []


def test_settings_page_tables_are_generated_from_the_table():
    text = (REPO / S.SETTINGS_PAGE).read_text()
    blocks = S.settings_page_blocks(text)
    assert set(blocks) == set(S.GROUPS), f"every group has its block in {S.SETTINGS_PAGE}"
    assert S.update_settings_page(text) == text, "run: python -m superopt.config.settings --update-docs"
    for s in S.SETTINGS:
        assert f"`{s.env}`" in text


def test_plus_flags_match_the_table():
    flags = {s.flag for s in S.SETTINGS if s.flag}
    assert flags == PLUS_FLAGS_WITH_VALUE | PLUS_FLAGS_BOOL


def test_resolve_order_and_origin(tmp_path):
    cfg = {"budget": 7, "config_path": str(tmp_path / "nvcc-plus.toml"), "driver": {"timeout": 9}}
    assert S.resolve("NVCC_PLUS_BUDGET", config=cfg, env={}) == (7, str(tmp_path / "nvcc-plus.toml"))
    assert S.resolve("NVCC_PLUS_BUDGET", config=cfg, env={"NVCC_PLUS_BUDGET": "3"}) == ("3", "env NVCC_PLUS_BUDGET")
    assert S.resolve("NVCC_PLUS_BUDGET", config=cfg, env={"NVCC_PLUS_BUDGET": "3"},
                     flags={"budget": 1}) == (1, "--budget")
    assert S.resolve("NVCC_PLUS_TIMEOUT", config=cfg, env={})[0] == 9
    assert S.resolve("NVCC_PLUS_POLICY", config=cfg, env={}) == (None, "default")
    assert S.resolve("NVCC_PLUS_REPORT_DIR", env={"NVCC_PLUS_RECORDS_DIR": "r"}) == ("r", "env NVCC_PLUS_RECORDS_DIR")
