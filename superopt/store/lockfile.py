"""``nvcc-plus.lock``: decisions a build without a GPU can apply deterministically.

A lock entry maps a kernel's decision key (see :mod:`superopt.store.cache`, computed without the
ptxas version so a lock travels between machines with the same nvcc) to the winning plan
and the hash of the PTX it produced. Applying a locked plan re-runs the passes and checks
the hash; a mismatch keeps the baseline and says so.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from superopt.store.cache import atomic_write_text
from superopt.store.safe_files import LOCKFILE_LIMIT, exclusive_lock, loads_json, read_text

LOCK_NAME = "nvcc-plus.lock"
LOCK_VERSION = 1


def find_lockfile(start: Path | None = None) -> Path | None:
    """The lockfile to read for a source in the folder ``start`` (the rule, shared with where
    it is written, is in :mod:`superopt.store.locations`)."""
    from superopt.store.locations import lockfile_to_read
    return lockfile_to_read(start)


class LockfileError(ValueError):
    """A lockfile that cannot be used; the message names the file."""


class Lockfile:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.entries: dict[str, dict] = {}
        if os.path.lexists(self.path):
            # The lockfile may be a symlink the user made; it must lead to a regular file
            # (a FIFO or /dev/zero is refused) of at most LOCKFILE_LIMIT bytes.
            try:
                data = loads_json(read_text(self.path, LOCKFILE_LIMIT, follow=True))
            except FileNotFoundError:
                return
            except (OSError, ValueError) as exc:    # UnicodeDecodeError is a ValueError
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                raise LockfileError(f"{self.path}: not a readable lockfile ({why}); "
                                    f"fix it (merge conflict?) or delete it") from None
            if not isinstance(data, dict) or not isinstance(data.get("decisions", {}), dict):
                raise LockfileError(f"{self.path}: not a lockfile (expected an object with "
                                    f"'version' and 'decisions')")
            if data.get("version") != LOCK_VERSION:
                raise LockfileError(f"{self.path}: lockfile version {data.get('version')} is not "
                                 f"{LOCK_VERSION}; delete it and rebuild with a GPU to re-create it")
            self.entries = data.get("decisions", {})

    def get(self, key: str) -> dict | None:
        return self.entries.get(key)

    def record(self, key: str, entry: dict) -> None:
        """Add one decision, merging with what other processes wrote meanwhile."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # serialize read-modify-write across make -j; the .lck is never truncated and never
        # opened through a symlink (a repository could ship one pointing at any file)
        with exclusive_lock(self.path.with_name(self.path.name + ".lck")):
            fresh = Lockfile(self.path) if os.path.lexists(self.path) else self
            fresh.entries[key] = entry
            self.entries = fresh.entries
            atomic_write_text(self.path, json.dumps({"version": LOCK_VERSION, "decisions": self.entries},
                                                    indent=1, sort_keys=True) + "\n")
