"""Find the real nvcc, never nvcc-plus itself.

Order: the launcher's argv[1] (CMAKE_CUDA_COMPILER_LAUNCHER=nvcc-plus runs
``nvcc-plus /path/to/nvcc ARGS``), the configured one (NVCC_PLUS_REAL_NVCC, --plus-real-nvcc,
nvcc-plus.toml), ``nvcc`` on PATH, $CUDA_HOME/bin/nvcc, $CUDA_PATH/bin/nvcc,
/usr/local/cuda/bin/nvcc, and the pip toolchain (site-packages/nvidia/cu13/bin/nvcc or
nvidia/cuda_nvcc/bin/nvcc).

A candidate is nvcc-plus itself when it resolves to the running script, or when it is a
script (``#!``) that mentions nvcc_plus/nvcc-plus (the console script, a wrapper, a symlink
named nvcc). Such candidates are skipped. As a last guard, NVCC_PLUS_DEPTH counts nested
nvcc-plus processes: nested ones prefer ELF binaries, and a deep nesting is refused.
"""
from __future__ import annotations

import os
import sys

DEPTH_VAR = "NVCC_PLUS_DEPTH"
MAX_DEPTH = 4
_HEAD = 8192


class NotFound(Exception):
    pass


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(_HEAD)
    except OSError:
        return b""


def is_elf(path: str) -> bool:
    return _head(path)[:4] == b"\x7fELF"


def _own_paths() -> set[str]:
    p = sys.argv[0] if sys.argv else ""
    return {os.path.realpath(p)} if p and os.path.isfile(p) else set()


def is_self(path: str) -> bool:
    """True when running ``path`` would run nvcc-plus again."""
    real = os.path.realpath(path)
    if real in _own_paths():
        return True
    head = _head(real)
    if head.startswith(b"#!"):
        return b"nvcc_plus" in head or b"nvcc-plus" in head
    return False


def is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def which_all(name: str, path_env: str | None) -> list[str]:
    out = []
    for d in (path_env or "").split(os.pathsep):
        if not d:
            continue
        cand = os.path.join(d, name)
        if is_executable(cand):
            out.append(cand)
    return out


def _pip_candidates() -> list[str]:
    try:
        import importlib.util
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    out = []
    for loc in spec.submodule_search_locations:
        try:
            names = sorted(os.listdir(loc), reverse=True)   # cu13 before cu12
        except OSError:
            continue
        for n in names:
            if n.startswith("cu") and n[2:].isdigit() or n == "cuda_nvcc":
                out.append(os.path.join(loc, n, "bin", "nvcc"))
    return out


def candidates(configured: str | None, env: dict[str, str]) -> list[tuple[str, str]]:
    """(path, where it came from), in order of preference."""
    out: list[tuple[str, str]] = []
    if configured:
        out.append((configured, "configured"))
    out += [(p, "PATH") for p in which_all("nvcc", env.get("PATH"))]
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        if env.get(var):
            out.append((os.path.join(env[var], "bin", "nvcc"), var))
    out.append(("/usr/local/cuda/bin/nvcc", "default location"))
    out += [(p, "pip toolchain") for p in _pip_candidates()]
    return out


def find(configured: str | None = None, env: dict[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if configured and not is_executable(configured):
        # A setting the user made must not be replaced silently by another nvcc.
        raise NotFound(f"the configured nvcc {configured!r} (NVCC_PLUS_REAL_NVCC, --plus-real-nvcc "
                       f"or real_nvcc in nvcc-plus.toml) is not an executable file; fix or unset it")
    depth = current_depth(env)
    good: list[str] = []
    for path, _where in candidates(configured, env):
        if not is_executable(path) or is_self(path):
            continue
        good.append(path)
        if depth == 0:
            return path
    if not good:
        raise NotFound("cannot find the real nvcc (set NVCC_PLUS_REAL_NVCC=/path/to/nvcc)")
    # Nested nvcc-plus: something between us and nvcc ran nvcc-plus again; prefer a binary.
    for path in good:
        if is_elf(os.path.realpath(path)):
            return path
    return good[0]


def launcher_compiler(argv: list[str]) -> str | None:
    """In launcher mode argv[0] (of the arguments) is the compiler to run: return it."""
    if not argv:
        return None
    first = argv[0]
    if first.startswith("-"):
        return None
    if os.path.splitext(first)[1] in _input_exts():
        return None
    if os.sep in first:
        return first if is_executable(first) else None
    # A bare name (CMAKE_CUDA_COMPILER_LAUNCHER with a compiler on PATH): only if it is
    # not also a file in the working directory, which would be an input.
    if os.path.exists(first):
        return None
    found = which_all(first, os.environ.get("PATH"))
    return found[0] if found else None


def _input_exts() -> set[str]:
    from nvcc_plus.filetypes import INPUT_EXTS
    return INPUT_EXTS


def looks_like_nvcc(path: str) -> bool:
    return "nvcc" in os.path.basename(path)


def current_depth(env: dict[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    try:
        return max(0, int(env.get(DEPTH_VAR, "0")))
    except ValueError:
        return 0


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    out = dict(os.environ if env is None else env)
    out[DEPTH_VAR] = str(current_depth(env) + 1)
    return out
