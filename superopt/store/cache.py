"""The decision cache: what the search decided for a kernel, keyed by content.

Key = sha256 of (the kernel's canonical text, the module's globals, the target, the
ptxas version (plus the model, and the identity of explicit or captured launch specs), the
policy and the set of passes). Entries are small JSON files written atomically (temp file +
``os.replace``), so concurrent compilations under ``make -j`` never see a half-written entry
and the last writer wins with identical content.

Like ccache, the cache has a size limit (``NVCC_PLUS_CACHE_MAX_SIZE``, default 1G): a hit
refreshes its entry's modification time, and after a store the least recently used entries
are removed until the cache is under 90% of the limit. Hit and miss counts live in
:mod:`superopt.store.cache_stats`.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

CACHE_VERSION = 1
DEFAULT_MAX_SIZE = "1G"
EVICT_TO = 0.9              # after eviction the cache is at most this share of its limit


def parse_size(text) -> int:
    """Bytes of ``1G``, ``500M``, ``64K``, ``1000`` (0 = no limit); ValueError names the value."""
    t = str(text).strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    num = t[:-1] if t[-1:] in "KMGT" and t[-1:] else t
    try:
        value = float(num)
    except ValueError:
        raise ValueError(f"cache size {text!r} is not a size such as 500M or 2G") from None
    if value < 0:
        raise ValueError(f"cache size {text!r} is negative")
    return int(value * mult)


def configured_max_size(settings=None) -> int:
    """The size limit from NVCC_PLUS_CACHE_MAX_SIZE / nvcc-plus.toml ``cache_max_size`` (the
    run's :class:`superopt.config.resolved.Settings`; None: the environment's)."""
    from superopt.config.resolved import Settings
    settings = settings if settings is not None else Settings()
    v, origin = settings.raw("NVCC_PLUS_CACHE_MAX_SIZE"), settings.origin("NVCC_PLUS_CACHE_MAX_SIZE")
    try:
        return parse_size(DEFAULT_MAX_SIZE if v is None else v)
    except ValueError as exc:
        raise ValueError(f"{origin}: {exc}") from None


def default_cache_dir() -> Path:
    from superopt.store.locations import cache_dir
    return cache_dir()


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
    def __init__(self, root: Path | None = None, max_bytes: int | None = None):
        self.root = Path(root) if root else default_cache_dir()
        self.max_bytes = max_bytes            # None or 0: no limit

    def _path(self, key: str) -> Path:
        return self.root / "decisions" / key[:2] / f"{key}.json"

    def path(self, key: str) -> Path:
        """Where the entry of ``key`` lives (for messages naming it)."""
        return self._path(key)

    def get(self, key: str) -> dict | None:
        """The stored decision, or None. A corrupt entry (not JSON, not an object, a folder,
        symlink, FIFO or device in its place, larger than ``CACHE_ENTRY_LIMIT``, unreadable)
        is treated as absent: the kernel is searched again and the new decision replaces it.
        Opening never follows a symlink nor waits on a FIFO (:mod:`superopt.store.safe_files`)."""
        from superopt.store.safe_files import CACHE_ENTRY_LIMIT, loads_json, open_regular, read_fd
        try:
            fd = open_regular(self._path(key))
        except OSError:
            return None
        try:
            data = loads_json(read_fd(fd, CACHE_ENTRY_LIMIT, self._path(key)).decode())
            try:
                os.utime(fd)                   # least recently *used* goes first on eviction
            except OSError:
                pass
        except (OSError, ValueError):          # UnicodeDecodeError is a ValueError
            return None
        finally:
            os.close(fd)
        if not isinstance(data, dict) or not isinstance(data.get("plan", []), list):
            return None
        return data

    def put(self, key: str, decision: dict) -> None:
        """Store a decision; an I/O error names the file (OSError) and leaves the build alone."""
        path = self._path(key)
        if path.is_dir() and not path.is_symlink():
            import shutil
            shutil.rmtree(path, ignore_errors=True)
        atomic_write_text(path, json.dumps(decision, indent=1, sort_keys=True))
        if self.max_bytes:
            self.evict(self.max_bytes)

    def entries(self) -> list[Path]:
        return sorted((self.root / "decisions").glob("*/*.json"))

    def _stat_entries(self) -> list[tuple[float, int, Path]]:
        out = []
        for p in self.entries():
            try:
                st = p.lstat()                 # a symlinked entry counts as itself, not its target
            except OSError:
                continue
            out.append((st.st_mtime, st.st_size, p))
        return out

    def size(self) -> tuple[int, int]:
        """(entries, bytes) of the decisions."""
        st = self._stat_entries()
        return len(st), sum(s for _, s, _ in st)

    def evict(self, max_bytes: int) -> int:
        """Remove least recently used decisions until they take at most ``EVICT_TO`` of
        ``max_bytes`` (when they exceed it); returns how many were removed."""
        st = self._stat_entries()
        total = sum(s for _, s, _ in st)
        if total <= max_bytes:
            return 0
        removed = 0
        for _, size, p in sorted(st, key=lambda t: t[0]):
            if total <= EVICT_TO * max_bytes:
                break
            try:
                p.unlink()
            except OSError:
                continue
            total -= size
            removed += 1
        if removed:
            from superopt.store.cache_stats import CacheStats
            try:
                CacheStats(self.root).add(evicted=removed)
            except OSError:
                pass
        return removed

    def clear(self) -> int:
        """Remove every entry; what is not a file (a folder planted as an entry) is removed too."""
        import shutil
        n = 0
        for p in self.entries():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            n += 1
        return n
