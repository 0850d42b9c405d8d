"""SASS for a record's PTX: ptxas, then cuobjdump (or nvdisasm), when they are installed.

Records keep each kernel's PTX function, not the whole module, so the kernel is assembled alone
under a header this ptxas accepts. That fails for kernels that use module-level declarations
(globals, device functions, ``.file`` tables); the reason is returned instead of SASS, like
every other case where no SASS can be shown (tools missing, unknown target), so a report
degrades with a note and never fails because of this.

Tools are looked up on ``PATH`` first, then in the pip CUDA toolchain (``nvidia/cu13/bin`` of
``pip install nvcc-plus[toolchain]``).
"""
from __future__ import annotations

import re
import shutil
import site
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

TOOL_TIMEOUT_S = 60
_PIP_TOOL_DIRS = ("nvidia/cu13/bin", "nvidia/cuda_nvcc/bin", "nvidia/cuda_cuobjdump/bin", "nvidia/cuda_nvdisasm/bin")


@dataclass(frozen=True)
class Sass:
    text: str | None          # one instruction a line, "/*0040*/ IMAD ..." ; None when unavailable
    note: str                 # which tools made it, or why there is none


def find_tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    roots = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    for root in roots:
        for sub in _PIP_TOOL_DIRS:
            candidate = Path(root) / sub / name
            if candidate.is_file():
                return str(candidate)
    return None


@lru_cache(maxsize=4)
def _ptx_isa(ptxas: str) -> str:
    """The PTX ISA version that ``ptxas`` reads (CUDA 13.y reads 9.y, 12.y reads 8.y up to 8.8)."""
    try:
        out = subprocess.run([ptxas, "--version"], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        return "8.0"
    m = re.search(r"release (\d+)\.(\d+)", out)
    if not m:
        return "8.0"
    major, minor = int(m.group(1)), int(m.group(2))
    if major >= 13:
        return f"{major - 4}.{minor}"
    if major == 12:
        return f"8.{min(minor, 8) if minor >= 7 else min(minor, 5)}" if minor != 8 else "8.7"
    return "7.0"


def sass_target(target: str | None) -> str | None:
    m = re.fullmatch(r"(?:sm|compute)_(\d+[a-z]?)", target or "")
    return f"sm_{m.group(1)}" if m else None


def _clean_cuobjdump(text: str) -> str:
    lines = []
    for line in text.splitlines():
        m = re.match(r"\s*(/\*[0-9a-f]{4,}\*/)\s+(.*?)\s*(?:/\*\s*0x[0-9a-f]+\s*\*/)?\s*$", line)
        if m and m.group(2):
            lines.append(f"{m.group(1)} {m.group(2)}")
    return "\n".join(lines)


@lru_cache(maxsize=256)
def sass_for(function_ptx: str, target: str | None) -> Sass:
    """SASS of one PTX function for ``target`` (``sm_90``/``compute_90``), or why not."""
    arch = sass_target(target)
    if arch is None:
        return Sass(None, f"no SASS: the record's target {target!r} is not an sm_/compute_ architecture")
    ptxas = find_tool("ptxas")
    dumper = find_tool("cuobjdump") or find_tool("nvdisasm")
    if ptxas is None or dumper is None:
        missing = " and ".join(n for n, t in (("ptxas", ptxas), ("cuobjdump or nvdisasm", dumper)) if t is None)
        return Sass(None, f"no SASS: {missing} not found on PATH "
                          "(install a CUDA toolkit, or pip install 'nvcc-plus[toolchain]' and put nvidia/cu13/bin on PATH)")
    header = f".version {_ptx_isa(ptxas)}\n.target {arch}\n.address_size 64\n\n"
    with tempfile.TemporaryDirectory(prefix="nvcc-plus-sass-") as tmp:
        ptx, cubin = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        ptx.write_text(header + function_ptx)
        flags = ["-lineinfo"] if ".loc" in function_ptx else []
        try:
            asm = subprocess.run([ptxas, f"-arch={arch}", *flags, "-o", str(cubin), str(ptx)],
                                 capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
            if asm.returncode != 0:
                first = next((ln for ln in asm.stderr.splitlines() if "error" in ln.lower()), asm.stderr.strip()[:200])
                return Sass(None, "no SASS: ptxas could not assemble the kernel on its own (the record keeps the "
                                  f"kernel, not its module's other declarations): {first.replace(str(ptx), 'kernel.ptx')}")
            tool = Path(dumper).name
            cmd = [dumper, "-sass", str(cubin)] if tool.startswith("cuobjdump") else [dumper, "-c", str(cubin)]
            dump = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            return Sass(None, f"no SASS: running the CUDA tools failed ({exc})")
        if dump.returncode != 0:
            return Sass(None, f"no SASS: {tool} failed: {dump.stderr.strip()[:200]}")
        text = _clean_cuobjdump(dump.stdout)
        if not text:
            return Sass(None, f"no SASS: {tool} printed no instructions")
        return Sass(text, f"ptxas -arch={arch} {'-lineinfo ' if flags else ''}+ {tool}")
