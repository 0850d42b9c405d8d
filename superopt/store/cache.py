"""The decision cache: what the search decided for a kernel, keyed by content.

Key = sha256 of (the kernel's canonical text, the module's globals, the target, the
ptxas version, the policy, the nvcc-plus version and the set of passes). Entries are
small JSON files written atomically (temp file + ``os.replace``), so concurrent
compilations under ``make -j`` never see a half-written entry and the last writer wins
with identical content.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

CACHE_VERSION = 1


def default_cache_dir() -> Path:
    env = os.environ.get("NVCC_PLUS_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nvcc-plus"


def decision_key(*, kernel_text: str, globals_text: str, target: str, tool: str, policy: str,
                 passes: list[str]) -> str:
    h = hashlib.sha256()
    for part in (f"v{CACHE_VERSION}", kernel_text, globals_text, target, tool, policy,
                 ",".join(sorted(passes))):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class DecisionCache:
    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root else default_cache_dir()

    def _path(self, key: str) -> Path:
        return self.root / "decisions" / key[:2] / f"{key}.json"

    def path(self, key: str) -> Path:
        """Where the entry of ``key`` lives (for messages naming it)."""
        return self._path(key)

    def get(self, key: str) -> dict | None:
        """The stored decision, or None. A corrupt entry (not JSON, not an object, a folder
        in its place, unreadable) is treated as absent: the kernel is searched again and the
        new decision replaces it."""
        try:
            data = json.loads(self._path(key).read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("plan", []), list):
            return None
        return data

    def put(self, key: str, decision: dict) -> None:
        """Store a decision; an I/O error names the file (OSError) and leaves the build alone."""
        path = self._path(key)
        if path.is_dir():
            import shutil
            shutil.rmtree(path, ignore_errors=True)
        atomic_write_text(path, json.dumps(decision, indent=1, sort_keys=True))

    def entries(self) -> list[Path]:
        return sorted((self.root / "decisions").glob("*/*.json"))

    def clear(self) -> int:
        n = 0
        for p in self.entries():
            p.unlink(missing_ok=True)
            n += 1
        return n
