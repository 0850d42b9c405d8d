"""The CUDA toolchain as the toolbox uses it: PTX of a ``.ptx`` or ``.cu`` file (the real nvcc).

The driver has its own replay of nvcc (:mod:`nvcc_plus.replay`); this is for ``superopt``
commands, ``superopt generate`` and ``superopt model`` given a file."""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from superopt.config.settings import env_value


class PtxSourceError(RuntimeError):
    """nvcc could not make PTX of a .cu file."""


def ptx_from_file(path: Path, arch: str, nvcc_args: tuple | list = ()) -> str:
    """PTX text of a .ptx file, or of a .cu file compiled with the real nvcc (``-arch=arch -O3``
    unless ``nvcc_args`` give their own; ``nvcc_args`` are the user's compiler flags: ``-I``,
    ``-D``, ``-std``, ...); raises :class:`PtxSourceError` with nvcc's messages when it fails."""
    path = Path(path)
    if path.suffix == ".ptx":
        return path.read_text()
    args = [a for a in nvcc_args if a not in ("-c", "--compile")]
    defaults = []
    if not _gives(args, ("-arch", "--gpu-architecture", "-gencode", "--generate-code")):
        defaults.append(f"-arch={arch}")
    if not _gives(args, ("-O", "--optimize")):
        defaults.append("-O3")
    with tempfile.TemporaryDirectory(prefix="superopt-") as tmp:
        out = Path(tmp) / "x.ptx"
        cmd = [env_value("NVCC_PLUS_REAL_NVCC") or "nvcc", *defaults, *args, "-ptx", str(path),
               "-o", str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as exc:
            raise PtxSourceError(f"cannot run {cmd[0]} for {path}: {exc.strerror}; set NVCC_PLUS_REAL_NVCC") from None
        if proc.returncode != 0:
            raise PtxSourceError(f"nvcc failed on {path} ({' '.join(cmd[1:-2])}):\n{proc.stderr.strip()}")
        return out.read_text()


def _gives(args, names) -> bool:
    """Whether the user's nvcc flags set an option (``-O2``, ``-arch=sm_80``, ``-arch sm_80``)."""
    for a in args:
        for n in names:
            if a == n or a.startswith(n + "=") or (n == "-O" and len(a) == 3 and a.startswith("-O")):
                return True
    return False
