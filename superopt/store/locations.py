"""Where nvcc-plus.lock is read and written: one rule for both, so that a decision written by
one build is the one the next build reads.

Read: ``NVCC_PLUS_LOCKFILE``; else the first ``nvcc-plus.lock`` found from the working
directory up to the project root, then from the source's folder up to its project root (the
order nvcc-plus.toml is found in; see :mod:`superopt.store.discovery`).

Write (``NVCC_PLUS_LOCK=write``): the file that was read; else a new one beside the
nvcc-plus.toml in use; else at the source's project root (the folder holding ``.git``); else
in the working directory. Each of these lies on the read path, so the next build finds it.
Before this rule the lock was read from the source's folder and written to the working
directory: under CMake (compiling in the build directory) a build wrote a lock it never read.

The decision cache's folder (``cache_dir``) is here too: the driver asks whether anything is
stored before it does any work (:mod:`nvcc_plus.nothing_stored`).

Standard library only (and the settings table, for the cache folder's variable).
"""
from __future__ import annotations

import os
from pathlib import Path

LOCK_NAME = "nvcc-plus.lock"
LOCKFILE_ENV = "NVCC_PLUS_LOCKFILE"
CONFIG_NAME = "nvcc-plus.toml"


def config_file(cwd=None, source_dirs=(), env=None) -> tuple[str | None, str]:
    """(the nvcc-plus.toml in use, how it was found): ``NVCC_PLUS_CONFIG``; else the first
    found from the working directory up to its project root, then from each source folder
    up to its project root (CMake compiles in the build directory)."""
    env = os.environ if env is None else env
    if env.get("NVCC_PLUS_CONFIG"):
        return env["NVCC_PLUS_CONFIG"], "env NVCC_PLUS_CONFIG"
    from superopt.store.discovery import find_upwards
    for i, folder in enumerate([cwd or os.getcwd(), *source_dirs]):
        found = find_upwards(CONFIG_NAME, folder)
        if found:
            return found, "found from the working directory" if i == 0 else f"found from {folder}"
    return None, "none found"


def _start_dirs(source_dir, cwd) -> list[str]:
    dirs = [os.path.abspath(cwd or os.getcwd())]
    if source_dir and os.path.abspath(source_dir) not in dirs:
        dirs.append(os.path.abspath(source_dir))
    return dirs


def lockfile_to_read(source_dir=None, cwd=None, env=None) -> Path | None:
    """The lockfile this compilation reads, or None."""
    env = os.environ if env is None else env
    if env.get(LOCKFILE_ENV):
        return Path(env[LOCKFILE_ENV])
    from superopt.store.discovery import find_upwards
    for folder in _start_dirs(source_dir, cwd):
        found = find_upwards(LOCK_NAME, folder)
        if found:
            return Path(found)
    return None


def lockfile_to_write(source_dir=None, config_path: str | None = None, cwd=None, env=None) -> Path:
    """Where ``NVCC_PLUS_LOCK=write`` records decisions (see the module doc)."""
    found = lockfile_to_read(source_dir, cwd, env)
    if found is not None:
        return found
    if config_path:
        return Path(config_path).resolve().parent / LOCK_NAME
    if source_dir:
        from superopt.store.discovery import project_folders
        folders = project_folders(os.path.abspath(source_dir))
        if folders and os.path.exists(os.path.join(folders[-1], ".git")):
            return Path(folders[-1]) / LOCK_NAME
    return Path(cwd or os.getcwd()) / LOCK_NAME


def cache_dir(env=None) -> Path:
    """The decision cache's folder: ``NVCC_PLUS_CACHE_DIR``, else ``$XDG_CACHE_HOME/nvcc-plus``,
    else ``~/.cache/nvcc-plus``."""
    from superopt.config.settings import env_value      # the variable and its aliases
    env = os.environ if env is None else env
    named = env_value("NVCC_PLUS_CACHE_DIR", env)
    if named:
        return Path(named)
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nvcc-plus"


def any_cached_decision(env=None) -> bool:
    """Whether the decision cache may hold an entry (its ``decisions`` folder has anything in it;
    a folder that cannot be read counts as holding one)."""
    folder = cache_dir(env) / "decisions"
    try:
        with os.scandir(folder) as it:
            return any(True for _ in it)
    except FileNotFoundError:
        return False
    except OSError:
        return True
