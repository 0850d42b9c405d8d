"""A digest of the code a benchmark ran, and the commit it belongs to.

The device machine runs a copy of the working tree whose ``.git`` is not the tree's: its HEAD
named an older commit for newer trees (2026-12-04), so result files carried a commit set by hand
(``NVCC_PLUS_COMMIT``) or corrected afterwards. A digest of the source files themselves travels
with the copy: benchmarks record it beside the commit (``tree_digest``), and on the checkout

    python -m bench.tree_digest --find DIGEST [--last 50]

names the commits whose sources have that digest (``--at COMMIT`` prints one commit's digest).
Only what decides a result counts: the Python sources of the packages and the benchmarks, and
the benchmark programs' sources; results, records and documentation do not.
"""
from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("nvcc_plus", "superopt", "ptx_ir", "reports", "bench")
SUFFIXES = (".py", ".cu", ".cuh", ".h", ".toml", ".ptx", ".json", "Makefile")
LEFT_OUT = ("bench/results/",)


def _counted(rel: str) -> bool:
    return rel.endswith(SUFFIXES) and not rel.startswith(LEFT_OUT) and "__pycache__" not in rel


def digest(root: Path | str = ROOT) -> str:
    """16 hex digits over every counted file's path and contents under ``root``."""
    root = Path(root)
    h = hashlib.sha256()
    files = sorted(p.relative_to(root).as_posix() for d in SOURCE_DIRS if (root / d).is_dir()
                   for p in (root / d).rglob("*") if p.is_file())
    for rel in files:
        if not _counted(rel):
            continue
        h.update(rel.encode() + b"\0" + hashlib.sha256((root / rel).read_bytes()).digest())
    return h.hexdigest()[:16]


def digest_at(commit: str, repo: Path | str = ROOT) -> str:
    """The digest of ``commit``'s tree (its files as git stores them)."""
    top = subprocess.run(["git", "ls-tree", "--name-only", commit], cwd=repo, capture_output=True, text=True,
                         check=True).stdout.split()
    dirs = [d for d in SOURCE_DIRS if d in top]          # git archive refuses a path the commit lacks
    with tempfile.TemporaryDirectory(prefix="tree-digest-") as tmp:
        archive = subprocess.run(["git", "archive", "--format=tar", commit, *dirs], cwd=repo,
                                 capture_output=True, check=True).stdout
        path = Path(tmp) / "tree.tar"
        path.write_bytes(archive)
        with tarfile.open(path) as tar:
            tar.extractall(Path(tmp) / "tree", filter="data")
        return digest(Path(tmp) / "tree")


def find(wanted: str, last: int = 50, repo: Path | str = ROOT) -> list[str]:
    """The commits among the last ``last`` whose digest is ``wanted`` (newest first)."""
    revs = subprocess.run(["git", "rev-list", f"--max-count={last}", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.split()
    return [r[:7] for r in revs if digest_at(r, repo) == wanted]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tree_digest", description=__doc__.split("\n\n")[0])
    ap.add_argument("--at", help="print this commit's digest")
    ap.add_argument("--find", help="name the commits with this digest")
    ap.add_argument("--last", type=int, default=50, help="how many commits --find looks at (default 50)")
    args = ap.parse_args(argv)
    if args.find:
        found = find(args.find, args.last)
        print("\n".join(found) if found else f"no commit among the last {args.last} has digest {args.find}")
        return 0 if found else 1
    print(digest_at(args.at) if args.at else digest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
