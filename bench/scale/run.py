"""Scale benchmark: a many-kernel project built with ``make -j`` by nvcc-plus on 1 GPU, on 2 GPUs,
and from a GPU-less client through a Dask cluster of one worker per GPU on this host.

    python -m bench.scale.run [--files 12] [--kernels-per-file 2] [--jobs 4] [--budget 3]
                              [--phases 1gpu,2gpu,cluster] [--wheels .whl-dask] [--out FILE]
                              [--merge EARLIER.json] [--dry-run]

The project (generated in a scratch folder): ``--files`` .cu files, each with
``--kernels-per-file`` kernels (an axpy, a row-wise gemv, a clamp-and-scale; every kernel
carries a file-specific constant so that no two share a decision) with ``// nvcc-plus:`` launch
comments, and a Makefile compiling each to an object with ``$(NVCC) -arch=ARCH -O3 -c``.

Phases, each on a fresh copy of the project with a fresh decision cache and its own records:

* ``1gpu``: ``make -jJOBS NVCC=nvcc-plus`` with ``NVCC_PLUS_GPUS=0``;
* ``2gpu``: the same with ``NVCC_PLUS_GPUS=0,1``;
* ``cluster``: a Dask scheduler and one worker per GPU on 127.0.0.1 (``CUDA_VISIBLE_DEVICES=i``,
  ``--resources GPU=1``, started with Dask's own programs), and the build from a client that sees
  no GPU (``CUDA_VISIBLE_DEVICES=""``) with ``NVCC_PLUS_CLUSTER``.

Every kernel's decision (the winning candidate, or nvcc's code) is read from the records; the
phases must agree (timing noise can flip a borderline candidate: the differences are listed).
The figure of merit is throughput, kernels searched per second of wall time; the goal is
``2gpu`` ≥ 1.7× ``1gpu``.

Results: ``$OUT/<date>-scale.json`` when OUT is set, and ``bench/results/<date>-scale.json``
(or ``--out``): date, commit (NVCC_PLUS_COMMIT, else git), GPUs (CUDA's enumeration: ordinal,
UUID, model), settings, per phase the wall time, kernels, how many were searched and with which
status, the decisions, and the ratios. A phase can be run alone (``--phases``) and merged with
an earlier result of the same settings (``--merge``), to stay within a time limit per command.

Dask on a host without it: ``--wheels DIR`` installs ``distributed`` from wheels in DIR
(``pip download`` of it for this Python) into a scratch folder first, offline.

``--dry-run`` runs all of it on a CPU: two fake GPUs (``SUPEROPT_FAKE_GPUS``), checks on the
emulator and stand-in timings (bench/scale/dryrun.py), small sizes; the figures then say nothing
about GPUs, only that the machinery works.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PHASES = ("1gpu", "2gpu", "cluster")
GOAL = 1.7

SIZES = {
    # n for the element-wise kernels; rows x cols for gemv: >= 16 MB per launch on the GPU
    "large": {"n": 4194301, "rows": 8191, "cols": 512},
    # 4 MB per launch: a check takes well under a second, so a short budget still tries several candidates
    "medium": {"n": 1048573, "rows": 2047, "cols": 512},
    "small": {"n": 4099, "rows": 255, "cols": 64},
}

TEMPLATES = [
    ("axpy_{f}",
     "// nvcc-plus: grid=cdiv(n,256) block=256 x:f32[n] in y:f32[n] inout n={n} a=1.5\n"
     "__global__ void axpy_{f}(int n, float a, const float* __restrict__ x, float* __restrict__ y) {{\n"
     "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
     "    if (i < n) y[i] = a * x[i] + y[i] + {c}f;\n"
     "}}\n"),
    ("gemv_{f}",
     "// nvcc-plus: grid=cdiv(rows,128) block=128 m:f32[rows*cols] in v:f32[cols] in out:f32[rows] out "
     "rows={rows} cols={cols}\n"
     "__global__ void gemv_{f}(int rows, int cols, const float* m, const float* v, float* out) {{\n"
     "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
     "    if (r >= rows) return;\n"
     "    float s = {c}f;\n"
     "    for (int j = 0; j < cols; ++j) s += m[(size_t)r * cols + j] * v[j];\n"
     "    out[r] = s;\n"
     "}}\n"),
    ("clamp_{f}",
     "// nvcc-plus: grid=cdiv(n,256) block=256 x:f32[n] in out:f32[n] out n={n} lo=-0.5 hi=0.5\n"
     "__global__ void clamp_{f}(int n, float lo, float hi, const float* x, float* out) {{\n"
     "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
     "    if (i < n) out[i] = fminf(fmaxf(x[i], lo), hi) * {c}f;\n"
     "}}\n"),
]


# ---------------------------------------------------------------- the project

def generate(folder: Path, files: int, per_file: int, sizes: dict, arch: str) -> list[tuple[str, str]]:
    """Write the project; returns (file, kernel) of every kernel."""
    folder.mkdir(parents=True, exist_ok=True)
    kernels = []
    for i in range(files):
        f = f"k{i:02d}"
        parts = []
        for t in range(per_file):
            name, text = TEMPLATES[t % len(TEMPLATES)]
            c = f"{1.0 + (i * 7 + t) / 1000:.3f}"        # unique per kernel: no shared decisions
            parts.append(text.format(f=f, c=c, **sizes))
            kernels.append((f"{f}.cu", name.format(f=f)))
        (folder / f"{f}.cu").write_text("\n".join(parts))
    objs = " ".join(f"k{i:02d}.o" for i in range(files))
    (folder / "Makefile").write_text(
        f"NVCC ?= nvcc\nARCH ?= {arch}\nOBJS = {objs}\n\nall: $(OBJS)\n\n"
        "%.o: %.cu\n\t$(NVCC) -arch=$(ARCH) -O3 -c $< -o $@\n\n"
        "clean:\n\trm -f $(OBJS)\n\n.PHONY: all clean\n")
    return kernels


def nvcc_plus_wrapper(folder: Path) -> str:
    """nvcc-plus from this checkout (not whatever version is installed)."""
    folder.mkdir(parents=True, exist_ok=True)
    w = folder / "nvcc-plus"
    w.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" '
                 f'-m nvcc_plus "$@"\n')
    w.chmod(0o755)
    return str(w)


# ---------------------------------------------------------------- environment

def ensure_dask(wheels: str | None, scratch: Path) -> str | None:
    """Make ``distributed`` importable here and in children; returns a folder to put on
    PYTHONPATH (None when it is installed already)."""
    try:
        import distributed  # noqa: F401
        return None
    except ImportError:
        pass
    if not wheels:
        raise SystemExit("Dask distributed is not installed: pip install 'nvcc-plus[cluster]', or pass "
                         "--wheels DIR with its wheels (pip download distributed)")
    # Only the wheels whose distribution this Python lacks (the folder is distributed and all its
    # dependencies): what is installed here is not shadowed by other versions.
    from importlib import metadata
    missing = []
    for whl in sorted(Path(wheels).glob("*.whl")):
        dist = whl.name.split("-")[0]
        try:
            metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            missing.append(str(whl))
    site = scratch / "dask-site"
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
           "--target", str(site), *missing]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"installing distributed from {wheels} failed:\n{p.stderr[-3000:]}")
    sys.path.insert(0, str(site))
    return str(site)


def base_env(extra_path: str | None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NVCC_PLUS_", "SUPEROPT_")) or k in ("NVCC_PLUS_REAL_NVCC", "NVCC_PLUS_COMMIT")}
    paths = [str(ROOT)] + ([extra_path] if extra_path else []) + \
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def commit() -> str:
    if os.environ.get("NVCC_PLUS_COMMIT"):
        return os.environ["NVCC_PLUS_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=20).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def gpus(env: dict) -> list[dict]:
    code = ("import json\nfrom superopt.judge import devices\n"
            "try:\n    ds = devices.visible_devices()\nexcept devices.NoDevice as e:\n    ds = []\n"
            "print(json.dumps([{'ordinal': d.ordinal, 'uuid': d.uuid, 'name': d.name} for d in ds]))\n")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return []


# ---------------------------------------------------------------- one phase

def read_decisions(report_dir: Path) -> dict:
    """(file, kernel) -> {"status", "winner"} from the records of one build."""
    out = {}
    for path in sorted(report_dir.glob("*.json")):
        rec = json.loads(path.read_text())
        src = Path(rec.get("source") or path.name).name
        for k in rec.get("kernels", []):
            out[f"{src}:{k['kernel']}"] = {"status": k.get("status"), "winner": k.get("winner"),
                                           "reason": (k.get("reason") or "")[:200],
                                           "skipped_budget": sum(1 for c in k.get("candidates", [])
                                                                 if c.get("fate") == "skipped-budget"),
                                           "device": (k.get("device") or {}).get("uuid"),
                                           "worker": (k.get("cluster") or {}).get("worker")}
    return out


def run_make(project: Path, env: dict, jobs: int, timeout: float) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen(["make", f"-j{jobs}"], cwd=project, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        timed_out = True
    wall = time.perf_counter() - t0
    lines = [ln for ln in err.splitlines() if ln.startswith("nvcc-plus:")]
    return {"rc": proc.returncode, "wall_s": round(wall, 3), "timed_out": timed_out,
            "nvcc_plus_lines": lines[:40], "stderr_tail": err[-2000:] if proc.returncode else ""}


def phase(name: str, args, scratch: Path, env0: dict, wrapper: str, kernels: list, sizes: dict,
          gpu_list: list[dict]) -> dict:
    work = scratch / name
    if work.exists():
        shutil.rmtree(work)
    project = work / "project"
    generate(project, args.files, args.kernels_per_file, sizes, args.arch)
    reports = work / "records"
    reports.mkdir(parents=True)
    env = dict(env0)
    env.update({"NVCC": wrapper, "NVCC_PLUS_CACHE_DIR": str(work / "cache"), "NVCC_PLUS_REPORT_DIR": str(reports),
                "NVCC_PLUS_LOCKFILE": str(work / "no.lock"), "NVCC_PLUS_BUDGET": str(args.budget),
                "NVCC_PLUS_TIMEOUT": str(args.module_timeout)})
    if args.sanitize:
        env["NVCC_PLUS_SANITIZE"] = args.sanitize
    ngpu = 1 if name == "1gpu" else 2
    if args.dry_run:
        env["SUPEROPT_FAKE_GPUS"] = "2"
        env["NVCC_PLUS_JUDGE"] = "bench.scale.dryrun:judge"
    cluster = None
    if name == "cluster" and not args.dry_run:
        ngpu = min(2, len(gpu_list))
    result: dict = {"phase": name, "gpus_used": ngpu}
    try:
        if name in ("1gpu", "2gpu"):
            env["NVCC_PLUS_GPUS"] = ",".join(str(i) for i in range(ngpu))
            env["NVCC_PLUS_BACKEND"] = "gpu" if not args.dry_run else "auto"
        else:
            from bench.scale.localcluster import LocalDaskCluster
            workers = []
            for i in range(2 if args.dry_run else min(2, len(gpu_list))):    # one worker per GPU
                w = {"CUDA_VISIBLE_DEVICES": str(gpu_list[i]["uuid"] if gpu_list else i)}
                if args.dry_run:
                    w = {"SUPEROPT_FAKE_GPUS": f"GPU-fake{i}=Fake GPU", "NVCC_PLUS_JUDGE": "bench.scale.dryrun:judge"}
                workers.append(w)
            wenv = {k: v for k, v in env.items() if k not in ("NVCC_PLUS_JUDGE", "SUPEROPT_FAKE_GPUS")}
            t0 = time.perf_counter()
            cluster = LocalDaskCluster(workers, env=wenv, log_dir=str(work / "dask-logs")).start()
            result["cluster_start_s"] = round(time.perf_counter() - t0, 3)
            env = {k: v for k, v in env.items() if k not in ("NVCC_PLUS_JUDGE", "SUPEROPT_FAKE_GPUS")}
            env["CUDA_VISIBLE_DEVICES"] = ""          # the client sees no GPU
            env["NVCC_PLUS_CLUSTER"] = cluster.address
        made = run_make(project, env, args.jobs, max(30.0, min(args.make_timeout, args.deadline - time.time())))
    finally:
        if cluster is not None:
            cluster.stop()
    decisions = read_decisions(reports)
    statuses: dict[str, int] = {}
    for d in decisions.values():
        statuses[d["status"]] = statuses.get(d["status"], 0) + 1
    searched = sum(1 for d in decisions.values() if d["status"] in ("optimized", "kept-baseline")
                   and not d["reason"].startswith(("not searched", "cluster search failed", "no GPU")))
    result.update(made)
    result.update({"kernels": len(kernels), "records": len(decisions), "searched": searched,
                   "statuses": statuses, "kernels_per_s": round(searched / made["wall_s"], 4) if made["wall_s"] else None,
                   "devices_used": sorted({d["device"] for d in decisions.values() if d["device"]}),
                   "workers_used": sorted({d["worker"] for d in decisions.values() if d["worker"]}),
                   "decisions": decisions})
    return result


def compare(a: dict, b: dict) -> list[str]:
    diffs = []
    for key in sorted(set(a) | set(b)):
        da, db = a.get(key), b.get(key)
        wa = (da or {}).get("winner") if da else "missing"
        wb = (db or {}).get("winner") if db else "missing"
        if wa != wb:
            bound = [n for n, d in (("first", da), ("second", db)) if d and d.get("skipped_budget")]
            diffs.append(f"{key}: {wa} vs {wb}" + (f" (budget-bound search in the {' and '.join(bound)}: "
                                                   f"candidates left untried)" if bound else ""))
    return diffs


def summarize(res: dict) -> None:
    ph = res["phases"]
    one = ph.get("1gpu")
    for other, label in (("2gpu", "throughput_ratio_2gpu_vs_1gpu"), ("cluster", "throughput_ratio_cluster_vs_1gpu")):
        if one and other in ph and one.get("kernels_per_s") and ph[other].get("kernels_per_s"):
            res[label] = round(ph[other]["kernels_per_s"] / one["kernels_per_s"], 3)
            res[label.replace("throughput", "wall")] = round(one["wall_s"] / ph[other]["wall_s"], 3)
    eq = {}
    if one:
        for other in ("2gpu", "cluster"):
            if other in ph:
                diffs = compare(one["decisions"], ph[other]["decisions"])
                eq[f"{other}_vs_1gpu"] = {"equal": not diffs, "differences": diffs}
    res["decisions_equal"] = all(v["equal"] for v in eq.values()) if eq else None
    res["decision_comparisons"] = eq
    r = res.get("throughput_ratio_2gpu_vs_1gpu")
    res["goal"] = {"throughput_ratio_2gpu_vs_1gpu": GOAL, "met": (r >= GOAL) if r is not None else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scale.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=12)
    ap.add_argument("--kernels-per-file", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--budget", type=float, default=3.0, help="NVCC_PLUS_BUDGET, seconds per kernel search")
    ap.add_argument("--sanitize", default=None, help="NVCC_PLUS_SANITIZE (default: nvcc-plus's)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--sizes", choices=sorted(SIZES), default=None, help="medium (default on GPUs), large or small (--dry-run)")
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--module-timeout", type=float, default=600.0, help="NVCC_PLUS_TIMEOUT")
    ap.add_argument("--make-timeout", type=float, default=560.0, help="seconds per build")
    ap.add_argument("--total-timeout", type=float, default=585.0,
                    help="seconds for everything (a build gets what is left; a device call allows 600)")
    ap.add_argument("--wheels", default=None, help="folder of wheels to install distributed from, offline")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--merge", type=Path, default=None, help="an earlier result with the same settings")
    ap.add_argument("--dry-run", action="store_true", help="on a CPU: fake GPUs, emulator, stand-in timings")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = ap.parse_args(argv)
    args.deadline = time.time() + args.total_timeout
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        ap.error(f"unknown phase(s) {unknown}; known: {', '.join(PHASES)}")
    sizes_name = args.sizes or ("small" if args.dry_run else "medium")
    scratch = Path(tempfile.mkdtemp(prefix="nvcc-plus-scale-"))
    try:
        extra = ensure_dask(args.wheels, scratch) if "cluster" in phases else None
        env0 = base_env(extra)
        if args.dry_run:
            env0["SUPEROPT_FAKE_GPUS"] = "2"
        gpu_list = gpus(env0)
        env0.pop("SUPEROPT_FAKE_GPUS", None)
        if not args.dry_run and len(gpu_list) < 2 and "2gpu" in phases:
            print(f"bench.scale: the 2gpu phase needs 2 GPUs, CUDA shows {len(gpu_list)}: {gpu_list} "
                  f"(--phases 1gpu,cluster measures the lease and the cluster path on one)", file=sys.stderr)
            return 2
        if not args.dry_run and not gpu_list:
            print("bench.scale: no GPU", file=sys.stderr)
            return 2
        wrapper = nvcc_plus_wrapper(scratch / "bin")
        settings = {"files": args.files, "kernels_per_file": args.kernels_per_file, "jobs": args.jobs,
                    "budget_s": args.budget, "sanitize": args.sanitize or "default", "arch": args.arch,
                    "sizes": sizes_name, "module_timeout_s": args.module_timeout, "dry_run": args.dry_run}
        now = dt.datetime.now(dt.timezone.utc)
        res = {"benchmark": "scale", "date": now.isoformat(timespec="seconds"), "commit": commit(),
               "host": os.uname().nodename, "gpus": gpu_list, "settings": settings,
               "method": "make -jJOBS of a generated project, nvcc-plus with fresh decision caches per phase; "
                         "1gpu: NVCC_PLUS_GPUS=0; 2gpu: NVCC_PLUS_GPUS=0,1; cluster: Dask scheduler + one "
                         "worker per GPU on 127.0.0.1, GPU-less client (CUDA_VISIBLE_DEVICES=\"\"); throughput = "
                         "kernels searched / wall seconds of the make",
               "phases": {}}
        if args.merge:
            earlier = json.loads(args.merge.read_text())
            if earlier.get("settings") != settings:
                print(f"bench.scale: --merge {args.merge}: other settings ({earlier.get('settings')})", file=sys.stderr)
                return 2
            res["phases"].update({k: v for k, v in earlier.get("phases", {}).items() if k not in phases})
            res["merged_from"] = {"file": str(args.merge), "commit": earlier.get("commit"), "date": earlier.get("date")}
        kernels = generate(scratch / "listing", args.files, args.kernels_per_file, SIZES[sizes_name], args.arch)
        for name in phases:
            print(f"bench.scale: phase {name} ...", file=sys.stderr, flush=True)
            res["phases"][name] = phase(name, args, scratch, env0, wrapper, kernels, SIZES[sizes_name], gpu_list)
            p = res["phases"][name]
            print(f"bench.scale: phase {name}: rc={p['rc']} {p['wall_s']:.1f} s, {p['searched']}/{p['kernels']} "
                  f"kernels searched, {p['kernels_per_s']} kernels/s, statuses {p['statuses']}",
                  file=sys.stderr, flush=True)
        summarize(res)
        text = json.dumps(res, indent=1) + "\n"
        name = f"{now.date().isoformat()}-scale{'-dryrun' if args.dry_run else ''}.json"
        outs = [args.out] if args.out else ([] if args.dry_run else [ROOT / "bench" / "results" / name])
        if os.environ.get("OUT"):
            outs.append(Path(os.environ["OUT"]) / name)
        for out in outs:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
            print(f"bench.scale: wrote {out}", file=sys.stderr)
        print(json.dumps({k: res.get(k) for k in ("throughput_ratio_2gpu_vs_1gpu", "throughput_ratio_cluster_vs_1gpu",
                                                 "decisions_equal", "goal")}, indent=1))
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
