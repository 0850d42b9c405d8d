"""The fixture of the toolbox CLI tests: a project folder as the working directory (a ``.git``
marks its root), no NVCC_PLUS_* setting from outside, a decision cache of its own."""
from __future__ import annotations

import os

import pytest


@pytest.fixture
def env(tmp_path, monkeypatch):
    for k in list(os.environ):
        if k.startswith("NVCC_PLUS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("NVCC_PLUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    return tmp_path
