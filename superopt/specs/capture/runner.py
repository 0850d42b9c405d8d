"""Run a program under the capture library and write the aggregated capture."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from .build import CaptureBuildError, build_library
from .format import CaptureError, aggregate, read_raw, write_capture

__all__ = ["run_capture", "capture_env", "DEFAULT_OUT", "DEFAULT_CAP"]

DEFAULT_OUT = "nvcc-plus.capture.json"
DEFAULT_CAP = 256 * 1024 * 1024


def capture_env(lib: str | os.PathLike, raw_path: str | os.PathLike, *, data_dir: str | None = None,
                cap_bytes: int = DEFAULT_CAP, base: dict | None = None) -> dict:
    """The environment that makes the CUDA driver load the capture library."""
    env = dict(os.environ if base is None else base)
    env["CUDA_INJECTION64_PATH"] = str(lib)
    env["SUPEROPT_CAPTURE_OUT"] = str(raw_path)
    env.pop("SUPEROPT_CAPTURE_DATA_DIR", None)
    if data_dir:
        env["SUPEROPT_CAPTURE_DATA_DIR"] = str(data_dir)
        env["SUPEROPT_CAPTURE_DATA_CAP"] = str(int(cap_bytes))
    return env


def run_capture(argv: list[str], out_path: str | os.PathLike = DEFAULT_OUT, data: bool = False,
                cap_bytes: int = DEFAULT_CAP, *, data_dir: str | os.PathLike | None = None,
                cache_dir: str | os.PathLike | None = None, keep_raw: bool = False) -> int:
    """Run ``argv`` with its kernel launches captured; write the aggregated capture to
    ``out_path`` and return the program's exit code (128 + N when killed by signal N).

    stdin/stdout/stderr are the caller's. With ``data`` the buffers of the first launch of
    each shape are saved before and after it (at most ``cap_bytes`` per launch) in
    ``data_dir`` (default ``OUT.data/``). Raises CaptureBuildError when the library cannot
    be built and CaptureError when the program cannot be started.
    """
    if not argv:
        raise CaptureError("no program to capture: give it after --, e.g. superopt capture -- ./app args")
    lib = build_library(cache_dir)
    out = Path(out_path)
    if out.parent and not out.parent.exists():
        raise CaptureError(f"{out}: the directory {out.parent} does not exist")
    ddir = None
    if data:
        ddir = Path(data_dir) if data_dir else out.with_name(out.name + ".data")
        if ddir.exists():
            shutil.rmtree(ddir, ignore_errors=True)   # snapshots of an older run would mislead
        ddir.mkdir(parents=True, exist_ok=True)
        ddir = ddir.resolve()
    tmpdir = tempfile.mkdtemp(prefix="nvcc-plus-capture.")
    raw = Path(tmpdir) / "raw.jsonl"
    raw.touch()
    env = capture_env(lib, raw, data_dir=str(ddir) if ddir else None, cap_bytes=cap_bytes)
    try:
        try:
            proc = subprocess.Popen(list(argv), env=env)
        except OSError as e:
            raise CaptureError(f"cannot run {argv[0]}: {e.strerror or e}") from None
        while True:
            try:
                rc = proc.wait()
                break
            except KeyboardInterrupt:      # the program got the SIGINT too; let it decide
                continue
        code = 128 - rc if rc < 0 else rc
        records = read_raw(raw)
        cap = aggregate(records, program=[str(a) for a in argv], cwd=os.getcwd(), exit_code=code)
        if not any(r.get("t") == "init" for r in records):
            cap["errors"].append({"message": "the capture library was never loaded: the program made no "
                                  "CUDA driver call (no GPU, or no CUDA at all?), or CUDA_INJECTION64_PATH "
                                  "was not honoured", "count": 1})
        if data and ddir is not None:
            cap["data_dir"] = str(ddir)
        write_capture(cap, out)
        if keep_raw:
            shutil.copy(raw, out.with_name(out.name + ".raw.jsonl"))
        return code
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
