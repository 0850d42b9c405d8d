"""Time building the generated project with plain nvcc and with nvcc-plus (off, roundtrip,
optimize: the default, which without a GPU applies stored decisions only).

    python -m bench.build_overhead [--reps 5] [--jobs 2] [--files 20] [--modes plain,off,roundtrip,optimize]

nvcc-plus runs as on a user's machine: with Python's bytecode cache (PYTHONDONTWRITEBYTECODE, set on
some CI images and on the development machine, is removed from the builds' environment). The mode
``optimize-cold`` is ``optimize`` with no bytecode cache at all (PYTHONDONTWRITEBYTECODE=1 and an
empty PYTHONPYCACHEPREFIX): every start compiles nvcc-plus from source, the worst case.
``optimize`` with the default fresh cache has nothing stored, so the driver runs nvcc alone
(:mod:`nvcc_plus.nothing_stored`); ``optimize-stored`` gives it a cache holding one unrelated
decision, so every compilation takes the optimizer's full GPU-less path (look-ups that miss).

Each repetition builds every configuration once from clean, in rotating order (so that drift in
the machine's load spreads evenly), and records wall time and the CPU time of all the build's
processes. Medians, min/max and the overhead over plain nvcc go to
bench/results/build_overhead-<date>.json. Lines nvcc-plus printed (fallbacks) are counted: a
roundtrip that fell back measures less than a real roundtrip.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.build_overhead.project import generate

REPO = Path(__file__).resolve().parents[2]


def nvcc_plus_exe(tmp: Path) -> str:
    # The console script beside this Python: a pyenv shim in front of it would add ~0.1 s a call.
    beside = Path(sys.executable).parent / "nvcc-plus"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    exe = shutil.which("nvcc-plus")
    if exe:
        return exe
    w = tmp / "nvcc-plus"
    w.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m nvcc_plus "$@"\n')
    w.chmod(0o755)
    return str(w)


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def build_once(project: Path, nvcc: str, env: dict, jobs: int) -> dict:
    # each build its own (what nvcc-plus says once per build is said by each, as for a user's builds)
    env = {**env, "NVCC_PLUS_BUILD_LEDGER": str(project.parent / f"ledger-{os.urandom(6).hex()}.json")}
    subprocess.run(["make", "clean"], cwd=project, env=env, check=True, capture_output=True)
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(["make", f"-j{jobs}", f"NVCC={nvcc}"], cwd=project, env=env,
                          capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"build failed with {nvcc}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("nvcc-plus:")]
    return {"wall_s": wall, "cpu_s": cpu, "nvcc_plus_lines": len(lines),
            "first_line": lines[0] if lines else None}


def _cache_with_an_entry(tmp: Path) -> Path:
    """A decision cache holding one entry that no kernel of the project matches."""
    folder = tmp / "stored-cache" / "decisions" / "00"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ("00" * 32 + ".json")).write_text("{}")
    return tmp / "stored-cache"


def summarize(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "stdev": statistics.stdev(samples) if len(samples) > 1 else 0.0,
            "samples": samples}


def machine() -> dict:
    info = {"hostname": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                info["cpu"] = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return info


def git_commit() -> dict:
    def g(*a):
        r = subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None
    return {"commit": g("rev-parse", "HEAD"), "dirty": bool(g("status", "--porcelain"))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--modes", default="plain,off,roundtrip")
    ap.add_argument("--nvcc", default=os.environ.get("NVCC_PLUS_REAL_NVCC") or shutil.which("nvcc"))
    ap.add_argument("--cache-dir", default=None, help="NVCC_PLUS_CACHE_DIR of the builds (default: a fresh "
                                                      "empty one: nothing cached, as on a first build)")
    ap.add_argument("--flags", default="-O3 -arch=sm_90", help="NVCCFLAGS of the project")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]

    with tempfile.TemporaryDirectory(prefix="nvcc-plus-bench-") as tmpd:
        tmp = Path(tmpd)
        project = generate(tmp / "project", args.files)
        plus = nvcc_plus_exe(tmp)
        # PYTHONDONTWRITEBYTECODE (set on some CI images) would make every nvcc-plus start
        # recompile its modules: a user's installed package has its bytecode cached.
        base = {k: v for k, v in os.environ.items()
                if not k.startswith("NVCC_PLUS_") and k != "PYTHONDONTWRITEBYTECODE"}
        # this checkout's nvcc-plus, whatever an installed console script would import otherwise
        # (make runs in the project's folder: a relative PYTHONPATH would not reach it)
        base["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([base["PYTHONPATH"]] if base.get("PYTHONPATH") else []))
        base["NVCCFLAGS"] = args.flags
        base["NVCC_PLUS_CACHE_DIR"] = args.cache_dir or str(tmp / "decision-cache")
        cold = dict(base, NVCC_PLUS_MODE="optimize", NVCC_PLUS_REAL_NVCC=args.nvcc, PYTHONDONTWRITEBYTECODE="1",
                    PYTHONPYCACHEPREFIX=str(tmp / "no-pycache"))
        configs = {
            "plain": (args.nvcc, base),
            "off": (plus, dict(base, NVCC_PLUS_MODE="off", NVCC_PLUS_REAL_NVCC=args.nvcc)),
            "roundtrip": (plus, dict(base, NVCC_PLUS_MODE="roundtrip", NVCC_PLUS_REAL_NVCC=args.nvcc)),
            "optimize": (plus, dict(base, NVCC_PLUS_MODE="optimize", NVCC_PLUS_REAL_NVCC=args.nvcc)),
            "optimize-cold": (plus, cold),
            # a cache that holds a decision (of no module here): the optimizer's full GPU-less path,
            # as on a machine where something was tuned before (nvcc_plus/nothing_stored.py)
            "optimize-stored": (plus, dict(base, NVCC_PLUS_MODE="optimize", NVCC_PLUS_REAL_NVCC=args.nvcc,
                                           NVCC_PLUS_CACHE_DIR=str(_cache_with_an_entry(tmp)))),
        }
        for m in modes:
            if m not in configs:
                raise SystemExit(f"unknown mode {m}")
        load_before = os.getloadavg()
        build_once(project, *configs[modes[0]], args.jobs)        # warm the caches
        runs: dict[str, list[dict]] = {m: [] for m in modes}
        for rep in range(args.reps):
            order = modes[rep % len(modes):] + modes[:rep % len(modes)]
            for m in order:
                r = build_once(project, *configs[m], args.jobs)
                runs[m].append(r)
                print(f"rep {rep + 1}/{args.reps} {m:10s} wall {r['wall_s']:7.2f} s  cpu {r['cpu_s']:7.2f} s"
                      + (f"  ({r['nvcc_plus_lines']} nvcc-plus lines)" if r["nvcc_plus_lines"] else ""),
                      flush=True)
        load_after = os.getloadavg()

    result = {
        "benchmark": "build_overhead",
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(), **git_commit(),
        "python_bytecode_cache": "on (PYTHONDONTWRITEBYTECODE removed), except optimize-cold: off",
        "nvcc_plus_from": subprocess.run([sys.executable, "-c", "import nvcc_plus; print(nvcc_plus.__file__)"],
                                         env=base, capture_output=True, text=True, cwd=tempfile.gettempdir()).stdout.strip(),
        "nvcc": next((ln for ln in subprocess.run([args.nvcc, "--version"], capture_output=True,
                                                   text=True).stdout.splitlines() if "release" in ln), None),
        "project": {"files": args.files, "flags": args.flags, "jobs": args.jobs},
        "reps": args.reps, "loadavg_before": load_before, "loadavg_after": load_after,
        "modes": {}, "overhead_pct": {},
    }
    for m in modes:
        result["modes"][m] = {"wall_s": summarize([r["wall_s"] for r in runs[m]]),
                              "cpu_s": summarize([r["cpu_s"] for r in runs[m]]),
                              "nvcc_plus_lines": runs[m][-1]["nvcc_plus_lines"],
                              "first_nvcc_plus_line": runs[m][-1]["first_line"]}
    if "plain" in modes:
        for m in modes:
            if m == "plain":
                continue
            result["overhead_pct"][m] = {
                k: 100.0 * (result["modes"][m][k]["median"] / result["modes"]["plain"][k]["median"] - 1.0)
                for k in ("wall_s", "cpu_s")}
    out = Path(args.out) if args.out else REPO / "bench" / "results" / f"build_overhead-{dt.date.today()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({"overhead_pct": result["overhead_pct"],
                      "median_wall_s": {m: result["modes"][m]["wall_s"]["median"] for m in modes}}, indent=1))
    print(f"written {out}")
    return 0
