"""Where a build may look for its files: upwards from a folder, never past the project.

``nvcc-plus.toml`` and ``nvcc-plus.lock`` are looked for in a folder and its parents. An
unbounded walk would let a file in ``/tmp`` or a shared parent folder steer every build
below it (a ``real_nvcc`` to run, a locked rewrite to apply). The walk stops, as git's
``safe.directory`` check does, at the project root (the first folder holding ``.git``) and
before any folder not owned by the user running the build: the effective user, or under
``sudo`` the user who ran sudo (``SUDO_UID``, as git accepts it). Comparing with the owner
of the starting folder instead would trust a checkout another user owns when root builds it.

Standard library only: the driver imports this on every compilation.
"""
from __future__ import annotations

import os


def trusted_owner(uid: int) -> bool:
    """Whether files owned by ``uid`` may steer this build: the effective user's, or, when
    running as root through sudo, those of the user who ran sudo (git's rule)."""
    euid = os.geteuid()
    if uid == euid:
        return True
    if euid == 0:
        sudo = os.environ.get("SUDO_UID", "")
        return sudo.isdigit() and int(sudo) == uid
    return False


def project_folders(start: str) -> list[str]:
    """``start`` and its parents up to the project root, each owned by a trusted user
    (:func:`trusted_owner`); empty when ``start`` itself is not."""
    here = os.path.abspath(start)
    out = []
    while True:
        try:
            if not trusted_owner(os.stat(here).st_uid):
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
    """The first ``name`` (a regular file owned by a trusted user) from ``start`` (default:
    the working directory) up to the project root, or None."""
    for folder in project_folders(start or os.getcwd()):
        cand = os.path.join(folder, name)
        try:
            st = os.stat(cand)
        except OSError:
            continue
        if os.path.isfile(cand) and trusted_owner(st.st_uid):
            return cand
    return None
