"""Helpers shared by tests/passes/test_warp_shuffle.py, test_unroll.py (with nounroll) and
test_address_arith.py: apply a pass to PTX text, assemble with ptxas, run a pass over a
sample of the committed corpus (every PTX it rewrites must parse, validate and assemble),
and judge baseline vs rewritten kernels on the CPU emulator through superopt.judge.check.

Corpus sample: every plain ``sm_90`` entry plus the smallest entry of each other variant
(``lineinfo``, ``-G``, ``rdc``, other archs). ``NVCC_PLUS_FULL_CORPUS=1`` runs all entries.
"""
from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import ptx_ir
from superopt.passes import get_pass, param_grid

DATA = Path(__file__).resolve().parent
ROOT = DATA.parent.parent.parent
CORPUS = ROOT / "tests" / "corpus"


def ptxas_path() -> str | None:
    return os.environ.get("NVCC_PLUS_PTXAS") or shutil.which("ptxas")


def assemble(text: str, arch: str = "sm_90", extra: tuple = ()) -> tuple[bool, str]:
    """ptxas -arch=ARCH on ``text``: (ok, log)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.ptx"
        src.write_text(text)
        proc = subprocess.run([ptxas_path(), f"-arch={arch}", *extra, str(src), "-o",
                               str(Path(tmp) / "out.cubin")], capture_output=True, text=True)
        return proc.returncode == 0, proc.stdout + proc.stderr


def load(name: str) -> str:
    return (DATA / name).read_text()


@dataclass
class Applied:
    module: object
    text: str
    changes: dict = field(default_factory=dict)      # function name -> [Change]

    def fired(self, name: str) -> bool:
        return bool(self.changes.get(name))


def apply(pass_name: str, text: str, kernels=None, **params) -> Applied:
    """Parse, run the pass on every function (or the named ones), validate, print."""
    module = ptx_ir.parse(text)
    info = get_pass(pass_name)
    changes = {}
    for fn in module.functions:
        if fn.is_declaration or (kernels is not None and fn.name not in kernels):
            continue
        changes[fn.name] = info(fn, **params)
        fn.validate()
    out = ptx_ir.emit(module)
    ptx_ir.parse(out).functions     # the printed text parses again
    return Applied(module, out, changes)


def kernel_names(text: str) -> list[str]:
    return [f.name for f in ptx_ir.parse(text).kernels]


def find_kernel(text: str, fragment: str) -> str:
    names = [n for n in kernel_names(text) if fragment in n]
    assert len(names) == 1, (fragment, names)
    return names[0]


# --------------------------------------------------------------------------- corpus


def corpus_entries() -> list[dict]:
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    entries = manifest["entries"] if isinstance(manifest, dict) else manifest
    if os.environ.get("NVCC_PLUS_FULL_CORPUS"):
        return entries
    chosen = [e for e in entries if e["variant"] == "sm_90"]
    by_variant: dict = {}
    for e in entries:
        if e["variant"] == "sm_90":
            continue
        best = by_variant.get(e["variant"])
        if best is None or e["bytes"] < best["bytes"]:
            by_variant[e["variant"]] = e
    return chosen + sorted(by_variant.values(), key=lambda e: e["file"])


@functools.lru_cache(maxsize=None)
def corpus_text(file: str) -> str:
    return (CORPUS / file).read_text()


def _ptxas_entry(entry: dict, text: str) -> str | None:
    argv = shlex.split(entry["ptxas_command"])
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "x.ptx"), os.path.join(tmp, "x.cubin")
        Path(src).write_text(text)
        cmd = [ptxas_path()]
        skip = False
        for a in argv[1:]:
            if skip:
                skip = False
                continue
            if a == "-o":
                skip = True
                continue
            if a.endswith(".ptx"):
                continue
            cmd.append(a)
        cmd += ["-o", out, src]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        return None if proc.returncode == 0 else proc.stderr[-3000:]


@dataclass
class CorpusResult:
    fired: dict = field(default_factory=dict)       # (file, params) -> {function: n changes}
    failures: list = field(default_factory=list)    # (file, params, what)
    checked_files: int = 0

    def count(self, params: dict | None = None) -> int:
        return sum(len(v) for (f, p), v in self.fired.items() if params is None or p == repr(params))


def run_on_corpus(pass_name: str, grid: list[dict] | None = None, workers: int = 4) -> CorpusResult:
    """Run ``pass_name`` with every parameter set of ``grid`` (default: the pass's own grid)
    on every function of the sampled corpus; every rewritten module must validate, print,
    parse again and assemble with the entry's own ptxas command."""
    info = get_pass(pass_name)
    grid = grid or param_grid(info)
    result = CorpusResult()
    jobs = []
    for entry in corpus_entries():
        text = corpus_text(entry["file"])
        base = ptx_ir.parse(text)
        result.checked_files += 1
        for params in grid:
            module = base.clone()
            fired = {}
            try:
                for fn in module.functions:
                    if fn.is_declaration:
                        continue
                    ch = info(fn, **params)
                    fn.validate()
                    if ch:
                        fired[fn.name] = len(ch)
                out = ptx_ir.emit(module) if fired else None
                if out is not None:
                    ptx_ir.parse(out)
            except Exception as exc:  # noqa: BLE001 - any crash is a test failure, reported
                result.failures.append((entry["file"], repr(params), f"{type(exc).__name__}: {exc}"))
                continue
            if fired:
                result.fired[(entry["file"], repr(params))] = fired
                jobs.append((entry, params, out))
    if ptxas_path() is None:
        result.failures.append(("-", "-", "ptxas not found"))
        return result
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_ptxas_entry, e, t): (e, p) for e, p, t in jobs}
        for fut in concurrent.futures.as_completed(futures):
            e, p = futures[fut]
            err = fut.result()
            if err:
                result.failures.append((e["file"], repr(p), "ptxas: " + err))
    return result


# --------------------------------------------------------------------------- emulator


def emulator_available() -> tuple[bool, str]:
    try:
        from superopt.judge.backends.base import get_backend
        be = get_backend("emulator")
        return be.available()
    except Exception as exc:  # noqa: BLE001
        return False, f"{type(exc).__name__}: {exc}"


def spec(kernel: str, block, grid, params: list[dict], shared_bytes: int = 0, vary_sizes=True):
    from superopt.specs.launch_spec import LaunchSpec
    return LaunchSpec.from_dict({"kernel": kernel, "grid": list(grid), "block": list(block),
                                 "shared_bytes": shared_bytes, "params": params,
                                 "vary_sizes": vary_sizes})


def buf(name: str, type_: str, length, direction: str = "in", distribution: str = "auto") -> dict:
    return {"name": name, "kind": "buffer", "type": type_, "length": length,
            "direction": direction, "distribution": distribution}


def scalar(name: str, type_: str, value, values=None) -> dict:
    d = {"name": name, "kind": "scalar", "type": type_, "value": value}
    if values is not None:
        d["values"] = values
    return d


def judge(baseline: str, candidate: str, launch, sets: int = 3, seed: int | None = None):
    from superopt.judge.check import check
    return check(baseline, candidate, launch, backend="emulator", sets=sets, seed=seed)
