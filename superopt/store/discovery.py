"""Where a build may look for its files: upwards from a folder, never past the project.

``nvcc-plus.toml`` and ``nvcc-plus.lock`` are looked for in a folder and its parents. An
unbounded walk would let a file in ``/tmp`` or a shared parent folder steer every build
below it (a ``real_nvcc`` to run, a locked rewrite to apply). The walk stops, as git's
``safe.directory`` check does, at the project root (the first folder holding ``.git``) and
before any folder whose owner is not the owner of the folder it started from.

Standard library only: the driver imports this on every compilation.
"""
from __future__ import annotations

import os


def project_folders(start: str) -> list[str]:
    """``start`` and its parents up to the project root, owned like ``start``."""
    here = os.path.abspath(start)
    try:
        owner = os.stat(here).st_uid
    except OSError:
        return []
    out = []
    while True:
        try:
            if os.stat(here).st_uid != owner:
                break
        except OSError:
            break
        out.append(here)
        if os.path.exists(os.path.join(here, ".git")):
            break
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return out


def find_upwards(name: str, start: str | None = None) -> str | None:
    """The first ``name`` (a regular file owned like the folder holding it) from ``start``
    (default: the working directory) up to the project root, or None."""
    for folder in project_folders(start or os.getcwd()):
        cand = os.path.join(folder, name)
        try:
            st = os.stat(cand)
            owner = os.stat(folder).st_uid
        except OSError:
            continue
        if os.path.isfile(cand) and st.st_uid == owner:
            return cand
    return None
