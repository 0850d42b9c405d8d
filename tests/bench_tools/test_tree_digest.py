"""The digest benchmarks record beside the commit (bench.tree_digest): it follows the sources
that decide a result and nothing else, and names the commit a copied tree came from."""
from __future__ import annotations

import subprocess

import pytest

from bench import tree_digest as td


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture()
def repo(tmp_path):
    for rel, text in {"superopt/a.py": "A = 1\n", "ptx_ir/b.py": "B = 2\n", "bench/x/Makefile": "all:\n",
                      "bench/results/r.json": "{}\n", "docs/d.md": "words\n"}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    _git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    return tmp_path


def _commit(repo, msg):
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", msg)
    return _git(repo, "rev-parse", "HEAD")[:7]


def test_a_copied_tree_and_its_commit_have_one_digest(repo):
    first = td.digest(repo)
    assert first == td.digest_at("HEAD", repo) and len(first) == 16


def test_only_the_sources_count(repo):
    first = td.digest(repo)
    (repo / "bench/results/r.json").write_text('{"speedup": 2}\n')
    (repo / "docs/d.md").write_text("other words\n")
    (repo / "superopt/__pycache__").mkdir()
    (repo / "superopt/__pycache__/a.cpython-312.pyc").write_bytes(b"\0")
    assert td.digest(repo) == first
    (repo / "superopt/a.py").write_text("A = 3\n")
    assert td.digest(repo) != first
    (repo / "superopt/a.py").write_text("A = 1\n")
    (repo / "superopt/new.py").write_text("")              # an untracked source counts too
    assert td.digest(repo) != first


def test_the_commit_of_a_digest_is_found(repo):
    old = td.digest(repo)
    old_rev = _git(repo, "rev-parse", "HEAD")[:7]
    (repo / "superopt/a.py").write_text("A = 4\n")
    new_rev = _commit(repo, "two")
    new = td.digest(repo)
    assert td.find(new, repo=repo) == [new_rev] and td.find(old, repo=repo) == [old_rev]
    assert td.find("0" * 16, repo=repo) == []
