"""The commit a bench's results name: HEAD, marked when the tree differs from it, or what
NVCC_PLUS_COMMIT says."""
from __future__ import annotations

import subprocess

from bench.programs import run as programs


def _git(tree, *args):
    return subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True, check=True).stdout.strip()


def test_a_tree_that_differs_from_head_is_marked(tmp_path, monkeypatch):
    _git(tmp_path, "init", "-q")
    (tmp_path / "f.py").write_text("x = 1\n")
    _git(tmp_path, "add", "f.py")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    monkeypatch.setattr(programs, "ROOT", tmp_path)
    monkeypatch.delenv("NVCC_PLUS_COMMIT", raising=False)
    head = _git(tmp_path, "rev-parse", "--short", "HEAD")
    assert programs.commit() == head
    (tmp_path / "f.py").write_text("x = 2\n")
    assert programs.commit() == head + "+dirty"
    monkeypatch.setenv("NVCC_PLUS_COMMIT", "abc1234")
    assert programs.commit() == "abc1234"
