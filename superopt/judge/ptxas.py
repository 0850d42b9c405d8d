"""The static check: does ptxas accept a candidate, and what does it cost in resources?

``ptxas -v`` reports registers, spills, shared memory and stack per function; a rewrite
that ptxas undoes (or that spills) shows up here before any GPU time is spent.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from superopt.judge.phases import measured


@dataclass
class Resources:
    registers: int | None = None
    spill_stores: int = 0
    spill_loads: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0


@dataclass
class PtxasResult:
    ok: bool
    arch: str
    log: str
    resources: dict[str, Resources] = field(default_factory=dict)   # function -> resources
    cubin: bytes | None = None


_FUNC = re.compile(r"Compiling entry function '([^']+)'|Function properties for (\S+)")
_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_SMEM = re.compile(r"(\d+) bytes smem")
_STACK = re.compile(r"(\d+) bytes stack frame")


def find_ptxas() -> str:
    from superopt.config.settings import env_value
    path = env_value("NVCC_PLUS_PTXAS") or shutil.which("ptxas")
    if not path:
        raise FileNotFoundError("ptxas is not on PATH (set NVCC_PLUS_PTXAS or install the CUDA "
                                "toolchain, e.g. pip install 'nvcc-plus[toolchain]')")
    return path


def sass_arch(target: str) -> str:
    """``.target sm_90a`` / ``compute_90`` → ``sm_90a`` / ``sm_90`` for ptxas."""
    t = target.split(",")[0].strip()
    return "sm_" + t.split("_", 1)[1] if t.startswith("compute_") else t


_VERSIONS: dict = {}


def ptxas_version() -> str:
    """ptxas's version line (part of every cache key). Asked once per ptxas binary and
    remembered in the cache folder by the binary's path, size and time: a build of many files
    starts no ptxas process per file to learn it."""
    import json
    path = os.path.realpath(find_ptxas())
    try:
        st = os.stat(path)
        stamp = f"{path}|{st.st_size}|{st.st_mtime_ns}"
        # a wrapper script's stamp says nothing of the ptxas it runs: asked every time
        remember = st.st_size >= 1 << 16
    except OSError:
        stamp, remember = path, False
    if stamp in _VERSIONS:
        return _VERSIONS[stamp]
    if not remember:
        _VERSIONS[stamp] = _ask_version(path)
        return _VERSIONS[stamp]
    from superopt.store.cache import atomic_write_text, default_cache_dir
    memo = default_cache_dir() / "tool-versions.json"
    try:
        known = json.loads(memo.read_text()) if memo.is_file() and memo.stat().st_size < 1 << 16 else {}
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    version = known.get(stamp)
    if not isinstance(version, str):
        version = _ask_version(path)
        if version != "unknown":
            try:
                atomic_write_text(memo, json.dumps({**known, stamp: version}, indent=1))
            except OSError:
                pass                      # remembered for this process only
    _VERSIONS[stamp] = version
    return version


def _ask_version(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    return lines[-1] if out.returncode == 0 and lines else "unknown"


# The machine code ptxas made for recent modules, by (PTX text, SASS arch): the GPU backend
# loads a candidate from it instead of having the driver compile the PTX again on every check
# and timing (hundreds of milliseconds each, while the GPU is held). It is also the code the
# build ships: nvcc's replay assembles the same PTX with the same ptxas.
_CUBINS: "OrderedDict[tuple[str, str], bytes]" = OrderedDict()
_CUBINS_LOCK = threading.Lock()
CUBIN_CACHE = 64


def _cubin_key(ptx: str, arch: str) -> tuple[str, str]:
    return hashlib.sha256(ptx.encode()).hexdigest(), sass_arch(arch)


def cached_cubin(ptx: str, archs) -> bytes | None:
    """The cubin run_ptxas made of ``ptx`` for one of ``archs`` (``sm_90``, ``sm_90a``), if kept."""
    digest = hashlib.sha256(ptx.encode()).hexdigest()
    with _CUBINS_LOCK:
        for arch in archs:
            found = _CUBINS.get((digest, arch))
            if found is not None:
                _CUBINS.move_to_end((digest, arch))
                return found
    return None


def _remember_cubin(ptx: str, arch: str, cubin: bytes) -> None:
    with _CUBINS_LOCK:
        _CUBINS[_cubin_key(ptx, arch)] = cubin
        while len(_CUBINS) > CUBIN_CACHE:
            _CUBINS.popitem(last=False)


@measured("ptxas")
def run_ptxas(ptx: str, arch: str, *, extra: list[str] | None = None, keep_cubin: bool = False,
              relocatable: bool = False, timeout: float = 120) -> PtxasResult:
    with tempfile.TemporaryDirectory(prefix="nvcc-plus-ptxas-") as tmp:
        src = os.path.join(tmp, "in.ptx")
        out = os.path.join(tmp, "out.cubin")
        with open(src, "w") as fh:
            fh.write(ptx)
        cmd = [find_ptxas(), f"-arch={sass_arch(arch)}", "-v", "-o", out, src, *(extra or [])]
        if relocatable:
            cmd.append("-c")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return PtxasResult(False, arch, f"ptxas timed out after {timeout:.0f} s")
        log = proc.stdout + proc.stderr
        result = PtxasResult(proc.returncode == 0, arch, log.replace(src, "<candidate>.ptx"))
        if result.ok:
            result.resources = parse_resources(log)
            if keep_cubin:
                with open(out, "rb") as fh:
                    result.cubin = fh.read()
                if not extra and not relocatable:
                    _remember_cubin(ptx, arch, result.cubin)
        return result


def parse_resources(log: str) -> dict[str, Resources]:
    found: dict[str, Resources] = {}
    current = None
    for line in log.splitlines():
        m = _FUNC.search(line)
        if m:
            current = found.setdefault(m.group(1) or m.group(2), Resources())
            continue
        if current is None:
            continue
        if (m := _USED.search(line)):
            current.registers = int(m.group(1))
        if (m := _SPILL.search(line)):
            current.spill_stores, current.spill_loads = int(m.group(1)), int(m.group(2))
        if (m := _SMEM.search(line)):
            current.shared_bytes = int(m.group(1))
        if (m := _STACK.search(line)):
            current.stack_bytes = int(m.group(1))
    return found
