"""Build (once) and locate the native injection library ``inject.c``.

The library is compiled at first use with the host C compiler (``$CC``, ``cc``, ``gcc``,
``clang``) against a CUDA toolkit's ``cupti.h``/``cuda.h`` and ``libcupti``, found from, in
order: ``$CUPTI_HOME``/``$CUDA_HOME``/``$CUDA_PATH``, the toolkit of the ``nvcc`` on ``PATH``,
``/usr/local/cuda``, and the pip wheels ``nvidia-cuda-cupti`` (``nvidia/cu13``,
``nvidia/cuda_cupti``). The built ``.so`` is cached in ``<cache dir>/capture/`` under a hash of
the source, the compiler and the toolkit paths, so a new toolkit or a new source rebuilds it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CaptureBuildError", "Toolkit", "find_toolkit", "find_compiler", "library_path",
           "build_library", "SOURCE"]

SOURCE = Path(__file__).with_name("inject.c")
_LIB_DIRS = ("lib64", "lib", "extras/CUPTI/lib64", "extras/CUPTI/lib", "targets/x86_64-linux/lib",
             "targets/sbsa-linux/lib", "targets/aarch64-linux/lib")
_INC_DIRS = ("include", "extras/CUPTI/include", "targets/x86_64-linux/include",
             "targets/sbsa-linux/include", "targets/aarch64-linux/include")


class CaptureBuildError(RuntimeError):
    """The injection library cannot be built: no compiler, no CUPTI, or a compile error."""


@dataclass(frozen=True)
class Toolkit:
    root: str                 # where it was found (reports)
    cupti_include: str        # holds cupti.h
    cuda_include: str         # holds cuda.h
    cupti_lib: str            # holds libcupti.so*


def _first(root: Path, subdirs, name: str) -> Path | None:
    for s in subdirs:
        d = root / s
        if (d / name).exists():
            return d
    return None


def _cupti_lib_dir(root: Path) -> Path | None:
    for s in _LIB_DIRS:
        d = root / s
        if d.is_dir() and any(d.glob("libcupti.so*")):
            return d
    return None


def _candidate_roots() -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    for var in ("CUPTI_HOME", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        v = os.environ.get(var)
        if v:
            out.append((f"${var}", Path(v)))
    nvcc = shutil.which("nvcc")
    if nvcc:
        real = Path(os.path.realpath(nvcc))
        out.append(("nvcc on PATH", real.parent.parent))
        if real.parent.parent != Path(nvcc).parent.parent:
            out.append(("nvcc on PATH", Path(nvcc).parent.parent))
    out.append(("/usr/local/cuda", Path("/usr/local/cuda")))
    try:
        import nvidia  # the pip wheels' namespace package
        for base in getattr(nvidia, "__path__", []):
            for sub in ("cu13", "cu12", "cuda_cupti", "cuda_runtime", "cuda_nvcc"):
                out.append((f"pip nvidia/{sub}", Path(base) / sub))
    except ImportError:
        pass
    return out


def find_toolkit() -> Toolkit:
    """The first place that has cupti.h, cuda.h and libcupti; CaptureBuildError naming what
    is missing where otherwise."""
    tried = []
    roots = _candidate_roots()
    cuda_inc_any = None
    for _, root in roots:
        d = _first(root, _INC_DIRS, "cuda.h")
        if d:
            cuda_inc_any = d
            break
    for what, root in roots:
        if not root.is_dir():
            continue
        inc = _first(root, _INC_DIRS, "cupti.h")
        lib = _cupti_lib_dir(root)
        cuda_inc = _first(root, _INC_DIRS, "cuda.h") or cuda_inc_any
        missing = [n for n, v in (("cupti.h", inc), ("libcupti.so", lib), ("cuda.h", cuda_inc)) if v is None]
        if not missing:
            return Toolkit(str(root), str(inc), str(cuda_inc), str(lib))
        tried.append(f"{root} ({what}): no {', no '.join(missing)}")
    where = "; ".join(tried) if tried else "no CUDA toolkit found (no $CUDA_HOME, no nvcc on PATH, no /usr/local/cuda)"
    raise CaptureBuildError(
        "cannot build the capture library: CUPTI not found. Looked in: " + where +
        ". Set CUDA_HOME (or CUPTI_HOME) to a toolkit with cupti.h and libcupti.so, "
        "or pip install nvidia-cuda-cupti.")


def find_compiler() -> str:
    cands = [os.environ.get("CC")] if os.environ.get("CC") else []
    cands += ["cc", "gcc", "clang"]
    for c in cands:
        path = shutil.which(c.split()[0]) if c else None
        if path:
            return path
    raise CaptureBuildError("cannot build the capture library: no C compiler found "
                            f"(tried {', '.join(c for c in cands if c)}); install gcc or set CC")


def _cache_dir() -> Path:
    from superopt.store.cache import default_cache_dir
    return Path(default_cache_dir()) / "capture"


def _key(cc: str, tk: Toolkit) -> str:
    h = hashlib.sha256()
    h.update(SOURCE.read_bytes())
    for part in (cc, tk.root, tk.cupti_include, tk.cuda_include, tk.cupti_lib):
        h.update(b"\0" + part.encode())
    return h.hexdigest()[:16]


def library_path(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the library for this source/compiler/toolkit is (or will be) cached."""
    cc, tk = find_compiler(), find_toolkit()
    base = Path(cache_dir) if cache_dir else _cache_dir()
    return base / f"libnvccplus_capture-{_key(cc, tk)}.so"


def build_library(cache_dir: str | os.PathLike | None = None, *, force: bool = False) -> Path:
    """The path of the built injection library, compiling it when not cached."""
    cc, tk = find_compiler(), find_toolkit()
    base = Path(cache_dir) if cache_dir else _cache_dir()
    out = base / f"libnvccplus_capture-{_key(cc, tk)}.so"
    if out.exists() and not force:
        return out
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CaptureBuildError(f"cannot create the cache directory {base}: {e}") from None
    fd, tmp = tempfile.mkstemp(prefix=out.stem + ".", suffix=".so.tmp", dir=base)
    os.close(fd)
    cmd = [cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-std=gnu11",
           f"-I{tk.cupti_include}", f"-I{tk.cuda_include}", str(SOURCE), "-o", tmp,
           f"-L{tk.cupti_lib}", "-lcupti", "-ldl", "-lpthread", f"-Wl,-rpath,{tk.cupti_lib}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        os.unlink(tmp)
        raise CaptureBuildError(f"cannot run the C compiler {cc}: {e}") from None
    if r.returncode != 0:
        os.unlink(tmp)
        msg = (r.stderr or r.stdout).strip().splitlines()
        raise CaptureBuildError(
            f"compiling the capture library failed (toolkit {tk.root}):\n  {' '.join(cmd)}\n  "
            + "\n  ".join(msg[-20:]))
    os.replace(tmp, out)     # atomic: concurrent builders race harmlessly
    return out
