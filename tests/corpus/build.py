#!/usr/bin/env python3
"""Build the PTX corpus that ptx_ir's parser/printer is tested against.

Run from the repository root:

    python3 tests/corpus/build.py            # compile, verify with ptxas, write manifest
    python3 tests/corpus/build.py --check    # rebuild into a temp dir, compare, change nothing

Every source in tests/corpus/src/ is compiled with the variants listed in
SOURCES below into tests/corpus/ptx/<name>.<variant>.ptx; each PTX is then
assembled with ptxas to prove it is valid, and tests/corpus/manifest.json
records, for every file, the exact nvcc command, the target, the ptxas command
that assembles it, its size and the PTX features it contains.

Standard library only. Any failed nvcc or ptxas run is an error that shows the
command and its output; nothing is skipped.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parent          # tests/corpus
ROOT = CORPUS.parent.parent                        # repository root
SRC = CORPUS / "src"
PTX = CORPUS / "ptx"
MANIFEST = CORPUS / "manifest.json"

# --------------------------------------------------------------------------
# Variants. A variant name is "<modifier>.<modifier>....<arch>"; the arch is
# the -arch= value (and the ptxas -arch). Modifiers add nvcc flags:
MODIFIERS: dict[str, list[str]] = {
    "rdc": ["-rdc=true"],                                # relocatable device code
    "G": ["-G"],                                         # device debug: .debug_* sections, .file/.loc
    "lineinfo": ["-lineinfo"],                           # .file/.loc with inlined_at, no debug sections
    "fastmath": ["--use_fast_math"],                     # ftz, approx div/sqrt, __expf etc.
    # nvcc 13.0 never emits jump tables by default; this undocumented cicc
    # option turns on LLVM's jump-table lowering (brx.idx + .branchtargets).
    "jumptable": ["-Xcicc", "-jump-table-density=10"],
}
# Optimised variants carry -O3 (the usual release flag); -G builds do not.
OPT_FLAGS = ["-O3"]

# Which variants each source is built with. "sm_90" (plain -O3) is the default
# for every source that can be built without -rdc; the rest is a spread of
# targets and modes chosen so each PTX feature appears a few times without
# multiplying the large CUB/Thrust outputs.
SOURCES: dict[str, list[str]] = {
    "atomics": ["sm_90", "sm_75", "sm_100", "rdc.sm_90", "G.sm_90"],
    "control_flow": ["sm_90", "sm_75", "jumptable.sm_90", "jumptable.sm_80", "rdc.sm_90", "G.sm_90",
                     "lineinfo.sm_90"],
    "cooperative_groups": ["sm_90", "sm_75", "sm_80", "rdc.sm_90", "lineinfo.sm_90"],
    "cp_async": ["sm_90", "sm_80", "sm_90a", "sm_100", "lineinfo.sm_80"],
    "cub_block": ["sm_90", "sm_80", "sm_100", "lineinfo.sm_90"],
    "cub_device": ["sm_90", "sm_80"],
    "cub_thrust_program": ["sm_90"],
    "elementwise": ["sm_90", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90a", "sm_100", "rdc.sm_90", "G.sm_90",
                    "lineinfo.sm_90"],
    "function_pointers": ["sm_90", "sm_75", "rdc.sm_90", "G.sm_90"],
    "gemm": ["sm_90", "sm_80", "sm_86", "sm_90a", "G.sm_90", "lineinfo.sm_90"],
    "half_bf16": ["sm_90", "sm_75", "sm_80", "sm_89", "sm_100", "lineinfo.sm_90"],
    "inline_asm": ["sm_90", "sm_75", "sm_89", "G.sm_90"],
    "launch_bounds_unroll": ["sm_90", "sm_75", "sm_89", "lineinfo.sm_90"],
    "math_library": ["sm_90", "sm_75", "fastmath.sm_90"],
    "memory_spaces": ["sm_90", "sm_75", "sm_100", "rdc.sm_90", "G.sm_90"],
    "misc_apps": ["sm_90", "sm_86", "fastmath.sm_90", "rdc.sm_90"],
    "rdc_linkage": ["rdc.sm_90", "rdc.sm_80", "rdc.G.sm_90", "rdc.lineinfo.sm_90"],
    "reductions": ["sm_90", "sm_75", "sm_86", "lineinfo.sm_90"],
    "scan": ["sm_90", "sm_80", "G.sm_90"],
    "sm90_features": ["sm_90", "sm_90a", "sm_100", "G.sm_90a", "lineinfo.sm_90a"],
    "stencils": ["sm_90", "sm_86", "sm_100", "lineinfo.sm_90"],
    "templates": ["sm_90", "sm_80", "rdc.sm_90", "G.sm_90", "lineinfo.sm_90"],
    "textures_surfaces": ["sm_90", "sm_75", "G.sm_90"],
    "thrust_ops": ["sm_90", "sm_75"],
    "transpose_softmax": ["sm_90", "sm_86", "sm_89", "fastmath.sm_90", "lineinfo.sm_90"],
    "vector_types": ["sm_90", "sm_75", "sm_100", "G.sm_90"],
    "warp_intrinsics": ["sm_90", "sm_75", "sm_80", "G.sm_90", "lineinfo.sm_90"],
    "wmma_mma": ["sm_90", "sm_80", "sm_86", "sm_89", "sm_100", "G.sm_80", "lineinfo.sm_90"],
}

# The parse-speed benchmark file (a whole small CUB/Thrust program).
BENCHMARK = "cub_thrust_program.sm_90.ptx"

# --------------------------------------------------------------------------
# PTX features recorded per file, so tests can pick files that exercise a
# construct. Each regex is searched with re.MULTILINE.
FEATURES: dict[str, str] = {
    "brx.idx": r"\bbrx\.idx\b",
    ".branchtargets": r"\.branchtargets\b",
    ".callprototype": r"\.callprototype\b",
    "indirect_call": r"^\s*call(\.uni)?\s+(\([^)]*\),\s*)?%rd\d+,",
    ".section .debug_": r"^\s*\.section\s+\.debug_",
    ".file": r"^\s*\.file\s",
    ".loc": r"^\s*\.loc\s",
    "inlined_at": r"\binlined_at\b",
    '.pragma "nounroll"': r'\.pragma\s+"nounroll"',
    ".maxnreg": r"^\s*\.maxnreg\b",
    ".maxntid": r"^\s*\.maxntid\b",
    ".reqntid": r"^\s*\.reqntid\b",
    ".minnctapersm": r"^\s*\.minnctapersm\b",
    ".maxclusterrank": r"^\s*\.maxclusterrank\b",
    ".reqnctapercluster": r"^\s*\.reqnctapercluster\b",
    ".explicitcluster": r"^\s*\.explicitcluster\b",
    "cp.async": r"\bcp\.async\.(ca|cg)\b",
    "cp.async.bulk": r"\bcp\.async\.bulk\b",
    "mbarrier": r"\bmbarrier\.",
    "wmma": r"\bwmma\.",
    "mma.sync": r"\bmma\.sync\b",
    "ldmatrix": r"\bldmatrix\.",
    "wgmma": r"\bwgmma\.",
    "setmaxnreg": r"\bsetmaxnreg\.",
    "griddepcontrol": r"\bgriddepcontrol\.",
    ".attribute(.managed)": r"\.attribute\(\s*\.managed\s*\)",
    ".extern .shared": r"^\s*\.extern\s+\.shared\b",
    ".texref": r"\.texref\b",
    "tex": r"^\s*(@!?%\w+\s+)?(tex|tld4|txq)\.",
    "surf": r"^\s*(@!?%\w+\s+)?(suld|sust|sured|suq)\.",
    "scoped_block": r"^[ \t]+\{",
    ".weak": r"^\.weak\s",
    ".extern .func": r"^\.extern\s+\.func\b",
    ".extern .global": r"^\.extern\s+\.global\b",
    "vprintf": r"\bvprintf\b",
    "__assertfail": r"\b__assertfail\b",
    "malloc": r"^\.extern\s+\.func\s+\(.*\)\s+malloc\b",
    "param_array": r"\.param\s+\.align\s+\d+\s+\.b8\s+[\w$]+\[\d+\]",
    "local_depot": r"\b__local_depot\d+\b",
    "generic()_initializer": r"\bgeneric\(",
    ".global_initializer": r"^(\.visible\s+|\.weak\s+)?\.global\s[^;]*=",
    ".const": r"^(\.visible\s+)?\.const\s",
    "atom": r"\batom\.",
    "red": r"\bred\.",
    "shfl.sync": r"\bshfl\.sync\.",
    "vote.sync": r"\bvote\.sync\.",
    "match.sync": r"\bmatch\.(any|all)\.sync\b",
    "redux.sync": r"\bredux\.sync\.",
    "f16/bf16": r"\.(f16x2|bf16x2|f16|bf16)\b",
    "fp8": r"\.(e4m3x2|e5m2x2|e4m3|e5m2)\b",
    "f64": r"\.f64\b",
    "trap": r"^\s*(@!?%\w+\s+)?trap;",
    "dynamic_parallelism": r"\bcudaLaunchDeviceV2\b|\b__cudaCDP2LaunchDeviceV2\b",
}

# --------------------------------------------------------------------------


class BuildError(RuntimeError):
    pass


@dataclass
class Job:
    source: str        # stem, e.g. "atomics"
    variant: str       # e.g. "rdc.sm_90"
    arch: str = ""
    modifiers: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        parts = self.variant.split(".")
        self.arch, self.modifiers = parts[-1], parts[:-1]
        if not re.fullmatch(r"sm_\d+[af]?", self.arch):
            raise BuildError(f"variant {self.variant!r}: last part must be an sm_XX arch")
        for m in self.modifiers:
            if m not in MODIFIERS:
                raise BuildError(f"variant {self.variant!r}: unknown modifier {m!r}")

    @property
    def src_rel(self) -> str:
        return f"tests/corpus/src/{self.source}.cu"

    @property
    def ptx_name(self) -> str:
        return f"{self.source}.{self.variant}.ptx"

    @property
    def rdc(self) -> bool:
        return "rdc" in self.modifiers

    def nvcc_argv(self, out_rel: str) -> list[str]:
        argv = ["nvcc", "-ptx"]
        if "G" not in self.modifiers:
            argv += OPT_FLAGS
        for m in self.modifiers:
            argv += MODIFIERS[m]
        argv += [f"-arch={self.arch}", "-o", out_rel, self.src_rel]
        return argv

    def ptxas_argv(self, ptx_rel: str, cubin: str) -> list[str]:
        argv = ["ptxas", f"-arch={self.arch}"]
        if self.rdc:
            argv.append("-c")  # relocatable: unresolved .extern symbols are fine
        argv += ["-o", cubin, ptx_rel]
        return argv


def run(argv: list[str], what: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}):\n  $ {shlex.join(argv)}\n{proc.stdout}")
    return proc


def tool_version(tool: str) -> str:
    out = subprocess.run([tool, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    lines = [l.strip() for l in out.splitlines() if "release" in l]
    return lines[0] if lines else "unknown"


def features_of(text: str) -> list[str]:
    return [name for name, rx in FEATURES.items() if re.search(rx, text, re.MULTILINE)]


def build_one(job: Job, out_dir: Path, verify: bool, scratch: Path) -> dict:
    out_path = out_dir / job.ptx_name
    out_rel = os.path.relpath(out_path, ROOT)
    t0 = time.monotonic()
    argv = job.nvcc_argv(out_rel)
    proc = run(argv, f"nvcc ({job.ptx_name})")
    nvcc_s = time.monotonic() - t0
    warnings = proc.stdout.strip()
    if warnings:
        raise BuildError(f"nvcc printed diagnostics for {job.ptx_name} (sources must build cleanly):\n"
                         f"  $ {shlex.join(argv)}\n{warnings}")
    data = out_path.read_bytes()
    text = data.decode("utf-8")
    m = re.search(r"^\.target\s+([^\n/]*?)\s*$", text, re.MULTILINE)
    target = m.group(1) if m else ""  # e.g. "sm_90" or, with -G, "sm_90, debug"
    if target.split(",")[0].strip() != job.arch:
        raise BuildError(f"{job.ptx_name}: .target is {target!r}, expected {job.arch!r}")
    entry = {
        "file": f"ptx/{job.ptx_name}",
        "source": f"src/{job.source}.cu",
        "variant": job.variant,
        "arch": job.arch,
        "target": target,
        "ptx_version": (re.search(r"^\.version\s+(\S+)", text, re.MULTILINE) or [None, ""])[1],
        "rdc": job.rdc,
        "debug": "G" in job.modifiers,
        "nvcc_command": shlex.join(job.nvcc_argv(f"tests/corpus/ptx/{job.ptx_name}")),
        "ptxas_arch": job.arch,
        "ptxas_command": shlex.join(job.ptxas_argv(f"tests/corpus/ptx/{job.ptx_name}", "/tmp/x.cubin")),
        "lines": text.count("\n"),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "entries": len(re.findall(r"^(\.visible\s+|\.weak\s+)?\.entry\s", text, re.MULTILINE)),
        "functions": len(re.findall(r"^(\.visible\s+|\.weak\s+)?\.func\s", text, re.MULTILINE)),
        "features": features_of(text),
    }
    if verify:
        cubin = scratch / (job.ptx_name + ".cubin")
        pargv = job.ptxas_argv(out_rel, str(cubin))
        pproc = run(pargv, f"ptxas ({job.ptx_name})")
        cubin.unlink(missing_ok=True)
        entry["ptxas_ok"] = True
        entry["ptxas_messages"] = sorted(set(l.strip() for l in pproc.stdout.splitlines() if l.strip()))
    return {"entry": entry, "nvcc_s": nvcc_s}


def all_jobs() -> list[Job]:
    jobs = []
    for src in sorted(SOURCES):
        if not (SRC / f"{src}.cu").is_file():
            raise BuildError(f"source listed in SOURCES is missing: {SRC / (src + '.cu')}")
        for v in SOURCES[src]:
            jobs.append(Job(src, v))
    on_disk = sorted(p.stem for p in SRC.glob("*.cu"))
    unlisted = [s for s in on_disk if s not in SOURCES]
    if unlisted:
        raise BuildError(f"sources not listed in SOURCES (add them): {unlisted}")
    names = [j.ptx_name for j in jobs]
    if len(set(names)) != len(names):
        raise BuildError("duplicate variants in SOURCES")
    return jobs


def build(out_dir: Path, jobs: list[Job], n_jobs: int, verify: bool) -> list[dict]:
    out_dir.mkdir(parents=True, exist_ok=True)
    # Longest first keeps both workers busy until the end.
    heavy = {"cub_thrust_program", "thrust_ops", "cub_device", "cub_block", "cooperative_groups"}
    order = sorted(jobs, key=lambda j: (j.source not in heavy, j.ptx_name))
    results: dict[str, dict] = {}
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ptx-corpus-") as scratch, \
            concurrent.futures.ThreadPoolExecutor(max_workers=n_jobs) as pool:
        futs = {pool.submit(build_one, j, out_dir, verify, Path(scratch)): j for j in order}
        for fut in concurrent.futures.as_completed(futs):
            j = futs[fut]
            try:
                r = fut.result()
            except BuildError as e:
                errors.append(str(e))
                print(f"FAIL {j.ptx_name}", file=sys.stderr)
                continue
            results[j.ptx_name] = r
            e = r["entry"]
            print(f"  {e['file']:<52} {e['lines']:>7} lines  {r['nvcc_s']:5.1f}s"
                  + ("  ptxas ok" if verify else ""), flush=True)
    if errors:
        raise BuildError("\n\n".join(errors))
    return [results[j.ptx_name]["entry"] for j in jobs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="parallel nvcc/ptxas processes (default 2)")
    ap.add_argument("--no-verify", action="store_true", help="skip the ptxas check (not for committed output)")
    ap.add_argument("--check", action="store_true",
                    help="rebuild into a temporary directory and compare with the committed PTX; change nothing")
    args = ap.parse_args()

    for tool in ("nvcc", "ptxas"):
        if shutil.which(tool) is None:
            print(f"error: {tool} not found on PATH", file=sys.stderr)
            return 2
    t0 = time.monotonic()
    try:
        jobs = all_jobs()
        if args.check:
            with tempfile.TemporaryDirectory(prefix="ptx-corpus-check-") as tmp:
                entries = build(Path(tmp), jobs, args.jobs, verify=False)
                stale = [e["file"] for e in entries
                         if not (CORPUS / e["file"]).is_file()
                         or (CORPUS / e["file"]).read_bytes() != (Path(tmp) / Path(e["file"]).name).read_bytes()]
            extra = sorted(set(p.name for p in PTX.glob("*.ptx")) - {j.ptx_name for j in jobs})
            if stale or extra:
                print(f"corpus is stale: {len(stale)} differ/missing {stale[:10]}, {len(extra)} extra {extra[:10]}",
                      file=sys.stderr)
                return 1
            print(f"corpus up to date ({len(entries)} files, {time.monotonic() - t0:.1f}s)")
            return 0
        entries = build(PTX, jobs, args.jobs, verify=not args.no_verify)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1

    # Remove PTX no longer produced, so the directory matches the manifest.
    keep = {Path(e["file"]).name for e in entries}
    for p in sorted(PTX.glob("*.ptx")):
        if p.name not in keep:
            p.unlink()
            print(f"  removed stale {p.name}")

    manifest = {
        "description": "PTX corpus for ptx_ir parser/printer tests; regenerate with "
                       "`python3 tests/corpus/build.py` from the repository root.",
        "generator": "tests/corpus/build.py",
        "nvcc_version": tool_version("nvcc"),
        "ptxas_version": tool_version("ptxas"),
        "cwd": "repository root (commands use repository-relative paths)",
        "benchmark": f"ptx/{BENCHMARK}",
        "modifiers": {k: v for k, v in MODIFIERS.items()},
        "optimized_flags": OPT_FLAGS,
        "total_files": len(entries),
        "total_lines": sum(e["lines"] for e in entries),
        "total_bytes": sum(e["bytes"] for e in entries),
        "entries": entries,
    }
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    dt = time.monotonic() - t0
    print(f"{len(entries)} PTX files, {manifest['total_lines']} lines, {manifest['total_bytes']} bytes; "
          f"manifest written to {MANIFEST.relative_to(ROOT)} ({dt:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
