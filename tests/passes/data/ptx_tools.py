"""Helpers shared by tests/passes/test_vectorize.py, test_cache_hints.py, test_occupancy.py:
assemble PTX with ptxas, read SASS when a disassembler exists, and run a pass over the
committed corpus (tests/corpus/manifest.json) checking that every rewrite assembles."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import ptx_ir
from superopt.passes import get_pass

DATA = Path(__file__).resolve().parent
ROOT = DATA.parent.parent.parent
CORPUS = ROOT / "tests" / "corpus"


def ptxas_path() -> str | None:
    return os.environ.get("NVCC_PLUS_PTXAS") or shutil.which("ptxas")


def cuobjdump_path() -> str | None:
    """cuobjdump from PATH, or from the nvidia-cuda-cuobjdump wheel ('toolchain' extra)."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13/bin/cuobjdump", "cuda_cuobjdump/bin/cuobjdump"):
            path = Path(root) / sub
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    return None


@dataclass
class Assembled:
    ok: bool
    log: str
    cubin: bytes | None = None
    registers: dict = field(default_factory=dict)     # function -> registers used


def assemble(text: str, arch: str = "sm_90", flags: tuple = ()) -> Assembled:
    """Run ``ptxas -arch=ARCH -v`` on ``text``."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.ptx"
        out = Path(tmp) / "out.cubin"
        src.write_text(text)
        proc = subprocess.run([ptxas_path(), f"-arch={arch}", *flags, "-v", str(src), "-o", str(out)],
                              capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        regs = {}
        current = None
        for line in log.splitlines():
            m = re.search(r"Compiling entry function '([^']+)'|Function properties for (\S+)", line)
            if m:
                current = m.group(1) or m.group(2)
            m = re.search(r"Used (\d+) registers", line)
            if m and current:
                regs[current] = int(m.group(1))
        return Assembled(proc.returncode == 0, log, out.read_bytes() if out.exists() else None, regs)


def sass(cubin: bytes) -> str | None:
    """SASS of a cubin, or None when no disassembler is installed."""
    tool = cuobjdump_path()
    if tool is None or cubin is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        proc = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True)
        return proc.stdout if proc.returncode == 0 else None


def sass_of(text: str, function: str) -> str | None:
    """The SASS of one function of a PTX module, or None without a disassembler."""
    asm = assemble(text)
    assert asm.ok, asm.log
    full = sass(asm.cubin)
    if full is None:
        return None
    parts = re.split(r"\n\s*Function : ", full)
    for part in parts[1:]:
        if part.split()[0] == function:
            return part
    raise AssertionError(f"{function} not in the SASS")


def load(name: str) -> ptx_ir.Module:
    return ptx_ir.parse((DATA / name).read_text())


def apply(module: ptx_ir.Module, pass_name: str, kernel: str, **params):
    """Apply a pass to one kernel of a clone; (new module, function, changes)."""
    new = module.clone()
    fn = new.function(kernel)
    changes = get_pass(pass_name)(fn, **params)
    fn.validate()
    return new, fn, changes


def kernel_named(module: ptx_ir.Module, fragment: str) -> str:
    names = [f.name for f in module.kernels if fragment in f.name]
    assert len(names) == 1, (fragment, names)
    return names[0]


# --------------------------------------------------------------------------- corpus

def corpus_entries(max_bytes: int | None = None) -> list[dict]:
    """Manifest entries (file, ptxas flags); those above ``max_bytes`` left out unless
    NVCC_PLUS_FULL_CORPUS=1."""
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    entries = manifest["entries"] if isinstance(manifest, dict) else manifest
    if os.environ.get("NVCC_PLUS_FULL_CORPUS") == "1":
        max_bytes = None
    return [e for e in entries if max_bytes is None or e.get("bytes", 0) <= max_bytes]


def ptxas_flags(entry: dict) -> tuple[str, tuple]:
    words = shlex.split(entry["ptxas_command"])
    arch = entry.get("ptxas_arch") or entry["arch"]
    flags = []
    skip = False
    for w in words[1:]:
        if skip:
            skip = False
            continue
        if w == "-o":
            skip = True
            continue
        if w.startswith("-arch=") or w.endswith(".ptx"):
            continue
        flags.append(w)
    return arch, tuple(flags)


_PARSED: dict = {}


def parsed(path: Path) -> ptx_ir.Module:
    """Parse once per test session (the corpus tests of the three passes share it);
    callers clone before changing anything."""
    key = str(path)
    if key not in _PARSED:
        _PARSED[key] = ptx_ir.parse(path.read_text())
    return _PARSED[key]


@dataclass
class CorpusRun:
    files: int = 0
    kernels: int = 0
    fired_kernels: int = 0
    changes: int = 0
    modules_assembled: int = 0
    failures: list = field(default_factory=list)
    fired_in: dict = field(default_factory=dict)       # file -> changes
    seconds: float = 0.0


def run_pass_on_corpus(pass_name: str, param_sets, *, max_bytes: int = 150_000,
                       entry_filter=None) -> CorpusRun:
    """Apply ``pass_name`` with each parameter set (a dict, or a function of the manifest
    entry giving a dict or None) to every kernel of the sampled corpus; every module that
    changed must parse back, validate and assemble with the entry's ptxas flags."""
    info = get_pass(pass_name)
    run = CorpusRun()
    start = time.time()
    for entry in corpus_entries(max_bytes):
        if entry_filter is not None and not entry_filter(entry):
            continue
        module = parsed(CORPUS / entry["file"])
        run.files += 1
        arch, flags = ptxas_flags(entry)
        for params in param_sets:
            params = params(entry) if callable(params) else params
            if params is None:
                continue
            new = module.clone()
            fired = 0
            for fn in new.kernels:
                run.kernels += 1
                try:
                    changes = info(fn, **params)
                    fn.validate()
                except Exception as exc:  # the test reports every crash, not just the first
                    run.failures.append(f"{entry['file']} {fn.name} {params}: crashed: "
                                        f"{type(exc).__name__}: {exc}")
                    continue
                if changes:
                    fired += 1
                    run.changes += len(changes)
            if not fired:
                continue
            run.fired_kernels += fired
            run.fired_in[entry["file"]] = run.fired_in.get(entry["file"], 0) + fired
            out = ptx_ir.emit(new)
            try:
                ptx_ir.parse(out)
            except Exception as exc:
                run.failures.append(f"{entry['file']} {params}: printed PTX does not parse: {exc}")
                continue
            asm = assemble(out, arch, flags)
            run.modules_assembled += asm.ok
            if not asm.ok:
                run.failures.append(f"{entry['file']} {params}: ptxas failed:\n{asm.log[-1500:]}")
    run.seconds = time.time() - start
    return run


# --------------------------------------------------------------------------- emulator

def emulator_available() -> tuple[bool, str]:
    try:
        from superopt.judge.emulator import LoadedModule  # noqa: F401
    except Exception as exc:
        return False, f"the CPU emulator is not importable ({type(exc).__name__}: {exc})"
    return True, ""


def emulate(ptx: str, kernel: str, grid, block, params: list, *, arena: int = 4096,
            shared_bytes: int = 0) -> list:
    """Run ``kernel`` on the CPU emulator and return the final bytes of every buffer.

    ``params``: per kernel parameter either a numpy scalar, a ``("buf", array, offset)``
    (a fresh 256-aligned arena of ``arena`` bytes holding ``array`` at byte ``offset``; the
    parameter is the address of the array) or ``("alias", k, offset)`` (the address
    ``offset`` bytes into the arena of buffer parameter ``k``).
    """
    import numpy as np
    from superopt.judge.emulator import LoadedModule

    dev = LoadedModule(ptx)
    bases: dict = {}
    for i, p in enumerate(params):
        if isinstance(p, tuple) and p[0] == "buf":
            _, array, offset = p
            base = dev.alloc(arena, 256)
            dev.heap.write(base, np.zeros(arena, np.uint8))
            dev.heap.write(base + offset, np.ascontiguousarray(array))
            bases[i] = base
    values = []
    for i, p in enumerate(params):
        if isinstance(p, tuple) and p[0] == "buf":
            values.append(bases[i] + p[2])
        elif isinstance(p, tuple) and p[0] == "alias":
            _, k, offset = p
            values.append(bases[k] + offset)
        else:
            values.append(p)
    dev.launch(kernel, grid, block, values, shared_bytes=shared_bytes, timeout=60)
    return [dev.heap.read(bases[i], arena) for i in sorted(bases)]


def same_results(baseline: str, candidate: str, kernel: str, grid, block, params, **kw) -> bool:
    import numpy as np
    a = emulate(baseline, kernel, grid, block, params, **kw)
    b = emulate(candidate, kernel, grid, block, params, **kw)
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def judge_on_emulator(baseline: str, candidate: str, spec: dict, sets: int = 2):
    """The project's differential check (superopt.judge.check) on the CPU emulator backend."""
    from superopt.judge.check import check
    from superopt.specs.launch_spec import LaunchSpec
    return check(baseline, candidate, LaunchSpec.from_dict(spec), backend="emulator", sets=sets)


def buffer(name, type_, length, direction):
    return {"name": name, "kind": "buffer", "type": type_, "length": length, "direction": direction}


def scalar(name, type_, value):
    return {"name": name, "kind": "scalar", "type": type_, "value": value}


def judge_corpus_rewrites(pass_name: str, params: dict, files: list[str], *,
                          sets: int = 2) -> dict:
    """For every kernel of the named corpus files that the pass rewrites: infer a launch
    spec (superopt.specs.inference) and run the differential check on the emulator.
    Returns {"accepted": [...], "rejected": [(kernel, reason)], "skipped": [(kernel, why)]}."""
    from superopt.judge.check import check
    from superopt.specs.inference import infer_specs
    out = {"accepted": [], "rejected": [], "skipped": []}
    for entry in corpus_entries():
        if Path(entry["file"]).name not in files:
            continue
        module = parsed(CORPUS / entry["file"])
        for fn0 in module.kernels:
            new = module.clone()
            if not get_pass(pass_name)(new.function(fn0.name), **params):
                continue
            inferred = infer_specs(module, fn0.name)
            if not inferred.specs:
                out["skipped"].append((fn0.name, inferred.reason))
                continue
            verdict = check(ptx_ir.emit(module), ptx_ir.emit(new), inferred.specs[0],
                            backend="emulator", sets=sets)
            if verdict.status == "accepted":
                out["accepted"].append(fn0.name)
            elif verdict.status == "rejected":
                out["rejected"].append((fn0.name, verdict.reason))
            else:
                out["skipped"].append((fn0.name, verdict.reason))
    return out
