"""Whole-program benchmark: plain nvcc vs nvcc-plus without and with a capture of real launches.

    python -m bench.programs.run [--program NAME ...] [--modes nvcc,plus,capture] [--reps 5]
                                 [--budget 10] [--out FILE] [--fresh] [--dry-run]

Every program under bench/programs/<name>/ is a small CUDA application with its own Makefile
(two also have a CMakeLists.txt), its sizes fixed in its source, its own cudaEvent timers and its
own self-check; it prints one line ``NVCC_PLUS_BENCH kernel_ms=<median ms> check=<PASS|FAIL>``.
For each program, in a scratch folder (a fresh copy of the program per mode):

* ``nvcc``: ``make NVCC=<real nvcc>``;
* ``plus``: ``make NVCC=nvcc-plus`` with NVCC_PLUS_BACKEND=gpu, NVCC_PLUS_BUDGET=--budget and a
  per-program, per-mode NVCC_PLUS_REPORT_DIR and NVCC_PLUS_CACHE_DIR (a fresh decision cache, so
  one mode never reuses another's decisions) -- "nvcc-plus without capture";
* ``capture``: ``superopt capture -o cap.json --data -- ./program`` on the plain-nvcc build, then the
  same nvcc-plus build with NVCC_PLUS_CAPTURE=<cap.json> -- "nvcc-plus with capture".

All builds first, then the runs: --reps rounds, each round running every built mode once in
rotating order, so drift of the machine spreads over the modes. Runs hold superopt's GPU lock.
Every build, capture and run has a timeout; failures are recorded, never fatal.

Results: bench/results/<date>-programs-<gpu>.json (or --out): date, GPU, commit, per program per
mode the build seconds, kernel_ms of every run, median, min/max, quartiles, check status, the
speedups nvcc median / mode median and their geometric mean per mode. The file is rewritten
after every program, and an existing --out is merged into (programs run now replace their
earlier entries; --fresh starts over), so a benchmark can be run in parts (--program, repeatable)
within a device call's time limit.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MODES = ("nvcc", "plus", "capture")
LINE_RE = re.compile(r"^NVCC_PLUS_BENCH kernel_ms=([0-9.eE+-]+|nan|inf) check=(PASS|FAIL)\s*$", re.M)
# a program timed at several block sizes (biasgrad) prints one such line per block size too
BLOCK_RE = re.compile(r"^NVCC_PLUS_BENCH block=(\d+) kernel_ms=([0-9.eE+-]+|nan|inf) check=(PASS|FAIL)\s*$", re.M)
# a program timing each kernel by itself (bench/alias) prints one such line per kernel too
PER_KERNEL_RE = re.compile(r"^NVCC_PLUS_BENCH kernel=(\w+) kernel_ms=([0-9.eE+-]+|nan|inf) check=(PASS|FAIL)\s*$", re.M)
KERNEL_RE = re.compile(r"__global__\s+void\s+(\w+)")


# ---------------------------------------------------------------- discovery and tools

def programs(root: Path = HERE) -> list[str]:
    """The program folders under root (default bench/programs)."""
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and ((p / "Makefile").is_file() or (p / "CMakeLists.txt").is_file()))


def kernels_of(name: str, root: Path = HERE) -> list[str]:
    out: list[str] = []
    for src in sorted((root / name).glob("*.cu")):
        out += KERNEL_RE.findall(src.read_text())
    return out


def _script(tmp: Path, name: str, module: str) -> str:
    """The console script beside this Python (no pyenv shim in front), else on PATH, else a
    wrapper running ``python -m module`` from this checkout."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    exe = shutil.which(name)
    if exe:
        return exe
    tmp.mkdir(parents=True, exist_ok=True)
    w = tmp / name
    w.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -m {module} "$@"\n')
    w.chmod(0o755)
    return str(w)


def real_nvcc(given: str | None) -> str:
    if given:
        return given
    if os.environ.get("NVCC_PLUS_REAL_NVCC"):
        return os.environ["NVCC_PLUS_REAL_NVCC"]
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        cand = Path(folder) / "nvcc"
        if cand.is_file() and os.access(cand, os.X_OK):
            try:
                head = cand.read_bytes()[:4096]
            except OSError:
                continue
            if b"nvcc_plus" in head or b"nvcc-plus" in head:
                continue        # a wrapper of nvcc-plus, not the real one
            return str(cand)
    for c in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if c and (Path(c) / "bin" / "nvcc").is_file():
            return str(Path(c) / "bin" / "nvcc")
    return "nvcc"


def commit() -> str:
    """The commit the results are from: ``NVCC_PLUS_COMMIT`` when set (a copy of the checkout
    whose .git is not the tree's: the device machine's copy reported an older HEAD for newer
    committed trees, 2026-12-04), else HEAD, with ``+dirty`` when tracked files differ from it
    (then HEAD alone does not say what ran)."""
    if os.environ.get("NVCC_PLUS_COMMIT"):
        return os.environ["NVCC_PLUS_COMMIT"]
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=20).stdout.strip()
        if not rev:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=20).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _tree_digest() -> str:
    from bench.tree_digest import digest
    return digest()


def gpu_name() -> str | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout.strip().splitlines()
        return out[0].strip() if out else None
    except (OSError, subprocess.SubprocessError):
        return None


def gpu_tag(name: str | None) -> str:
    if not name:
        return "nogpu"
    tag = name.lower().replace("nvidia", "").strip()
    return re.sub(r"[^a-z0-9]+", "-", tag).strip("-") or "gpu"


@contextlib.contextmanager
def gpu_held(timeout: float):
    """superopt's per-GPU lock (the one its timing takes), so that a program's run never
    overlaps a search's timing from a concurrent build; nothing when superopt is not importable."""
    try:
        from superopt.judge.gpu_lock import gpu_lock
    except Exception:        # noqa: BLE001 - the benchmark must run without the package
        yield
        return
    # The lock of the GPU the program runs on (CUDA's device 0 here), named by its UUID as
    # the searches' leases name it (superopt.judge.devices).
    try:
        from superopt.judge.devices import visible_devices
        device = visible_devices()[0].uuid
    except Exception:        # noqa: BLE001 - no enumeration: the old name
        device = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    with gpu_lock(device, timeout=timeout):
        yield


# ---------------------------------------------------------------- running commands

def run_cmd(cmd: list[str], cwd: Path, env: dict, timeout: float) -> dict:
    """Run with a wall-clock limit; on timeout the whole process group is killed."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors="replace", start_new_session=True)
    except OSError as exc:
        return {"rc": None, "seconds": 0.0, "timed_out": False, "stdout": "", "stderr": str(exc)}
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        timed_out = True
    return {"rc": proc.returncode, "seconds": time.perf_counter() - t0, "timed_out": timed_out,
            "stdout": out or "", "stderr": err or ""}


def tail(text: str, n: int = 2000) -> str:
    return text[-n:]


def build(name: str, mode: str, compiler: str, work: Path, env: dict, timeout: float,
          system: str, root: Path = HERE) -> dict:
    """Copy the program root/<name> to work/<mode>/<name> and build it; returns the build record
    with the binary's path (or None)."""
    src = root / name
    dest = work / mode / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("build", name, "*.o"))
    use_cmake = (system == "cmake" and (src / "CMakeLists.txt").is_file()) or not (src / "Makefile").is_file()
    if use_cmake:
        steps = [["cmake", "-S", ".", "-B", "build", f"-DCMAKE_CUDA_COMPILER={compiler}",
                  "-DCMAKE_BUILD_TYPE=Release"],
                 ["cmake", "--build", "build"]]
        binary = dest / "build" / name
    else:
        steps = [["make", f"NVCC={compiler}"]]
        binary = dest / name
    rec = {"system": "cmake" if use_cmake else "make", "compiler": compiler, "seconds": 0.0,
           "ok": False, "rc": None, "timed_out": False}
    log_out, log_err, plus_lines = "", "", []
    for cmd in steps:
        r = run_cmd(cmd, dest, env, max(1.0, timeout - rec["seconds"]))
        rec["seconds"] += r["seconds"]
        rec["rc"], rec["timed_out"] = r["rc"], r["timed_out"]
        log_out += r["stdout"]
        log_err += r["stderr"]
        plus_lines += [ln for ln in r["stderr"].splitlines() if ln.startswith("nvcc-plus")]
        if r["rc"] != 0:
            break
    rec["ok"] = rec["rc"] == 0 and binary.is_file()
    rec["nvcc_plus_lines"] = plus_lines[:20]
    if not rec["ok"]:
        rec["log_tail"] = tail(log_out + "\n" + log_err)
    rec["binary"] = str(binary) if rec["ok"] else None
    return rec


def parse_run(r: dict) -> dict:
    m = None
    for m in LINE_RE.finditer(r["stdout"]):
        pass                                  # the last such line counts
    out = {"rc": r["rc"], "wall_s": round(r["seconds"], 3), "timed_out": r["timed_out"]}
    if m:
        out["kernel_ms"] = float(m.group(1))
        out["check"] = m.group(2)
    else:
        out["kernel_ms"] = None
        out["check"] = "TIMEOUT" if r["timed_out"] else "NO_RESULT"
    blocks = {str(int(b.group(1))): {"kernel_ms": float(b.group(2)), "check": b.group(3)}
              for b in BLOCK_RE.finditer(r["stdout"])}
    if blocks:
        out["blocks"] = blocks
    per_kernel = {k.group(1): {"kernel_ms": float(k.group(2)), "check": k.group(3)}
                  for k in PER_KERNEL_RE.finditer(r["stdout"])}
    if per_kernel:
        out["per_kernel"] = per_kernel
    if out["check"] == "PASS" and r["rc"] != 0:
        out["check"] = "ERROR"                # a PASS line, then a crash
    if out["check"] != "PASS":
        out["output_tail"] = tail(r["stdout"] + "\n" + r["stderr"], 1500)
    return out


def summarize(rec: dict) -> None:
    """Median, spread and check status of one mode's runs, in place."""
    runs = rec.get("runs") or []
    ms = [r["kernel_ms"] for r in runs if r.get("kernel_ms") is not None and r["check"] == "PASS"]
    rec["kernel_ms"] = [r.get("kernel_ms") for r in runs]
    if ms:
        rec["median_ms"] = statistics.median(ms)
        rec["min_ms"], rec["max_ms"] = min(ms), max(ms)
        if len(ms) >= 4:
            q = statistics.quantiles(ms, n=4)
            rec["q1_ms"], rec["q3_ms"], rec["iqr_ms"] = q[0], q[2], q[2] - q[0]
    else:
        rec["median_ms"] = None
    checks = {r["check"] for r in runs}
    if rec.get("capture_failed"):
        rec["check"] = "CAPTURE_FAILED"
    elif not rec.get("build", {}).get("ok"):
        rec["check"] = "BUILD_FAILED" if not rec.get("skipped") else "SKIPPED"
    elif not runs:
        rec["check"] = "BUILT" if rec.get("dry_run") else "NOT_RUN"
    elif checks == {"PASS"}:
        rec["check"] = "PASS"
    elif "FAIL" in checks:
        rec["check"] = "FAIL"
    else:
        rec["check"] = "ERROR"


# ---------------------------------------------------------------- one program

def bench_program(name: str, args, work: Path, tools: dict, root: Path = HERE) -> dict:
    """Build the program root/<name> (default under bench/programs) in every mode of args.modes,
    run the builds --reps rounds and summarize; returns the program's row."""
    print(f"[programs] {name}: building ({', '.join(args.modes)}) ...", flush=True)
    base_env = {k: v for k, v in os.environ.items() if k != "NVCC_PLUS_CAPTURE"}
    row: dict = {"program": name, "kernels": kernels_of(name, root), "modes": {}}
    records_root = (args.records or work / "records").resolve()
    need_plain = "nvcc" in args.modes or ("capture" in args.modes and not args.dry_run)
    plain_bin = None
    if need_plain:
        b = build(name, "nvcc", tools["nvcc"], work, base_env, args.build_timeout, args.build_system, root)
        plain_bin = b["binary"]
        if "nvcc" in args.modes:
            row["modes"]["nvcc"] = {"build": b, "runs": []}
        print(f"[programs] {name}: nvcc build {'ok' if b['ok'] else 'FAILED'} ({b['seconds']:.1f} s)", flush=True)

    def plus_env(mode: str) -> dict:
        env = dict(base_env)
        env["NVCC_PLUS_BACKEND"] = "gpu"
        env["NVCC_PLUS_BUDGET"] = str(args.budget)
        env["NVCC_PLUS_REAL_NVCC"] = tools["nvcc"]
        rdir = records_root / name / mode
        if rdir.exists():
            shutil.rmtree(rdir)
        rdir.mkdir(parents=True, exist_ok=True)
        env["NVCC_PLUS_REPORT_DIR"] = str(rdir)
        cache = work / f"cache-{mode}" / name
        if cache.exists():
            shutil.rmtree(cache)
        env["NVCC_PLUS_CACHE_DIR"] = str(cache)
        if args.timeout is not None:
            env["NVCC_PLUS_TIMEOUT"] = str(args.timeout)
        return env

    if "plus" in args.modes:
        env = plus_env("plus")
        b = build(name, "plus", tools["nvcc_plus"], work, env, args.build_timeout, args.build_system, root)
        row["modes"]["plus"] = {"build": b, "runs": [], "records_dir": env["NVCC_PLUS_REPORT_DIR"]}
        print(f"[programs] {name}: nvcc-plus build {'ok' if b['ok'] else 'FAILED'} ({b['seconds']:.1f} s)", flush=True)

    if "capture" in args.modes:
        rec: dict = {"runs": []}
        row["modes"]["capture"] = rec
        if args.dry_run:
            rec.update(skipped="dry run: capture needs the GPU", build={"ok": False})
        elif not plain_bin:
            rec.update(skipped="the plain nvcc build failed, nothing to capture", build={"ok": False})
        else:
            cap = (work / "nvcc" / name / "cap.json").resolve()
            with gpu_held(args.run_timeout + args.capture_timeout):
                c = run_cmd([*tools["superopt"], "capture", "-o", str(cap), *(["--data", "--data-cap", args.data_cap] if args.data else []),
                             "--", plain_bin],
                            Path(plain_bin).parent, base_env, args.capture_timeout)
            crec = {"rc": c["rc"], "seconds": round(c["seconds"], 3), "timed_out": c["timed_out"],
                    "file": str(cap), "bytes": cap.stat().st_size if cap.is_file() else None}
            prog = parse_run(c)
            try:
                data = json.loads(cap.read_text())
                crec["kernels_captured"] = len(data.get("kernels") or {})
                crec["errors"] = (data.get("errors") or [])[:5]
            except (OSError, ValueError, AttributeError):
                crec["kernels_captured"] = None
            crec["program_check"] = prog["check"]
            crec["program_kernel_ms"] = prog["kernel_ms"]
            if c["rc"] != 0 or not cap.is_file():
                crec["output_tail"] = tail(c["stdout"] + "\n" + c["stderr"])
            rec["capture"] = crec
            print(f"[programs] {name}: capture rc={c['rc']} ({c['seconds']:.1f} s, "
                  f"{crec['bytes'] or 0} bytes, {crec.get('kernels_captured')} kernels)", flush=True)
            if cap.is_file() and c["rc"] == 0:
                env = plus_env("capture")
                env["NVCC_PLUS_CAPTURE"] = str(cap)
                b = build(name, "capture", tools["nvcc_plus"], work, env, args.build_timeout,
                          args.build_system, root)
                rec["build"] = b
                rec["records_dir"] = env["NVCC_PLUS_REPORT_DIR"]
                print(f"[programs] {name}: nvcc-plus+capture build {'ok' if b['ok'] else 'FAILED'} "
                      f"({b['seconds']:.1f} s)", flush=True)
            else:
                rec.update(skipped="capture failed", capture_failed=True, build={"ok": False})

    if not args.dry_run:
        built = [m for m in MODES if m in row["modes"] and row["modes"][m].get("build", {}).get("ok")]
        for rnd in range(args.reps):
            order = built[rnd % len(built):] + built[:rnd % len(built)] if built else []
            for mode in order:
                binary = row["modes"][mode]["build"]["binary"]
                with gpu_held(args.run_timeout * 4):
                    r = run_cmd([binary], Path(binary).parent, base_env, args.run_timeout)
                run = parse_run(r)
                row["modes"][mode]["runs"].append(run)
                print(f"[programs] {name}: {mode} run {rnd + 1}/{args.reps}: {run['kernel_ms']} ms "
                      f"{run['check']}", flush=True)
    for rec in row["modes"].values():
        if args.dry_run:
            rec["dry_run"] = True
        summarize(rec)
        if rec.get("build", {}).get("binary"):
            rec["build"]["binary"] = os.path.relpath(rec["build"]["binary"], work)
    base = row["modes"].get("nvcc", {}).get("median_ms")
    row["speedup"] = {}
    for mode in ("plus", "capture"):
        m = row["modes"].get(mode, {}).get("median_ms")
        row["speedup"][mode] = base / m if base and m else None
    return row


# ---------------------------------------------------------------- results

def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def finish(result: dict) -> dict:
    rows = result["programs"]
    result["geomean_speedup"] = {m: geomean([r["speedup"].get(m) for r in rows]) for m in ("plus", "capture")}
    result["programs_counted"] = {m: [r["program"] for r in rows if r["speedup"].get(m)] for m in ("plus", "capture")}
    result["check_failures"] = [f"{r['program']}:{m}:{rec['check']}" for r in rows
                                for m, rec in r["modes"].items() if rec["check"] not in ("PASS", "SKIPPED", "BUILT")]
    result["all_checks_pass"] = not result["check_failures"]
    result["kernel_count"] = sum(len(r["kernels"]) for r in rows)
    return result


def merge(result: dict, old: dict) -> dict:
    done = {r["program"] for r in result["programs"]}
    kept = [r for r in old.get("programs", []) if r["program"] not in done]
    result["programs"] = sorted(kept + result["programs"], key=lambda r: r["program"])
    for part in old.get("parts", []):
        names = [p for p in part.get("programs", []) if p in {r["program"] for r in kept}]
        if names:
            result["parts"].append({**part, "programs": names})
    return result


def table(result: dict) -> str:
    head = ["program", "kernels", "nvcc ms", "plus ms", "plus x", "capture ms", "capture x", "checks",
            "build s (nvcc/plus/capture)"]
    lines = []
    for r in result["programs"]:
        md = r["modes"]

        def ms(m):
            v = md.get(m, {}).get("median_ms")
            return f"{v:.3f}" if v else "-"

        def sx(m):
            v = r["speedup"].get(m)
            return f"{v:.3f}" if v else "-"

        def bs(m):
            b = md.get(m, {}).get("build") or {}
            return f"{b['seconds']:.1f}" if "seconds" in b else "-"

        checks = "/".join(md[m]["check"] for m in MODES if m in md)
        lines.append([r["program"], str(len(r["kernels"])), ms("nvcc"), ms("plus"), sx("plus"),
                      ms("capture"), sx("capture"), checks, "/".join(bs(m) for m in MODES)])
    g = result["geomean_speedup"]
    lines.append(["geomean", str(result["kernel_count"]), "", "", f"{g['plus']:.3f}" if g["plus"] else "-",
                  "", f"{g['capture']:.3f}" if g["capture"] else "-",
                  ("built" if result.get("dry_run") else "all PASS") if result["all_checks_pass"] else "FAILURES", ""])
    try:
        from rich.console import Console
        from rich.table import Table
        t = Table(title=f"bench/programs on {result['gpu'] or 'no GPU'} @ {result['commit']}")
        for h in head:
            t.add_column(h, justify="left" if h in ("program", "checks") else "right")
        for ln in lines:
            t.add_row(*ln)
        con = Console(width=160, record=True)
        with con.capture() as cap:
            con.print(t)
        return cap.get()
    except ImportError:
        widths = [max(len(h), *(len(ln[i]) for ln in lines)) for i, h in enumerate(head)]
        fmt = "  ".join(f"{{:{w}}}" for w in widths)
        return "\n".join([fmt.format(*head), fmt.format(*("-" * w for w in widths)),
                          *(fmt.format(*ln) for ln in lines)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.programs.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", action="append", help="only this program (repeatable); default all")
    ap.add_argument("--modes", default="nvcc,plus,capture", help="comma-separated subset of nvcc,plus,capture")
    ap.add_argument("--reps", type=int, default=5, help="runs of each program per mode (default 5)")
    ap.add_argument("--budget", type=float, default=10.0, help="NVCC_PLUS_BUDGET, search seconds per kernel (default 10)")
    ap.add_argument("--timeout", type=float, help="NVCC_PLUS_TIMEOUT for the nvcc-plus builds (default: not set)")
    ap.add_argument("--out", type=Path, help="result file (default bench/results/<date>-programs-<gpu>.json); "
                                             "an existing one is merged into")
    ap.add_argument("--fresh", action="store_true", help="do not merge into an existing --out")
    ap.add_argument("--records", type=Path, help="folder for the nvcc-plus records (default <scratch>/records)")
    ap.add_argument("--scratch", type=Path, help="build folder (default a new temporary folder, kept)")
    ap.add_argument("--nvcc", help="the real nvcc (default NVCC_PLUS_REAL_NVCC, else nvcc on PATH)")
    ap.add_argument("--nvcc-plus", dest="nvcc_plus", help="the nvcc-plus command (default: the console script)")
    ap.add_argument("--superopt", help="the superopt command, for `superopt capture` (default: the console script)")
    ap.add_argument("--build-system", choices=("make", "cmake"), default="make",
                    help="cmake: build the programs that have a CMakeLists.txt with CMake (default make)")
    ap.add_argument("--build-timeout", type=float, default=900.0, help="seconds per build (default 900)")
    ap.add_argument("--run-timeout", type=float, default=60.0, help="seconds per program run (default 60)")
    ap.add_argument("--capture-timeout", type=float, default=180.0, help="seconds for superopt capture (default 180)")
    ap.add_argument("--data", action=argparse.BooleanOptionalAction, default=True,
                    help="capture with --data (the program's own buffers: a golden test and the input of index "
                         "arrays); default on")
    ap.add_argument("--data-cap", default="2G", help="superopt capture --data-cap (default 2G: the programs' "
                                                       "buffers are up to ~600 MB per launch)")
    ap.add_argument("--dry-run", action="store_true",
                    help="build only (nvcc and plus modes; no runs, no capture); writes no result file "
                         "unless --out is given")
    ap.add_argument("--list", action="store_true", help="list the programs and their kernels, and exit")
    args = ap.parse_args(argv)

    known = programs()
    if args.list:
        for p in known:
            ks = kernels_of(p)
            print(f"{p:10s} {len(ks):2d}  {' '.join(ks)}")
        print(f"{len(known)} programs, {sum(len(kernels_of(p)) for p in known)} kernels")
        return 0
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad or not args.modes:
        ap.error(f"--modes: unknown {bad}; choose from {','.join(MODES)}")
    names = args.program or known
    unknown = [p for p in names if p not in known]
    if unknown:
        ap.error(f"--program: no program {unknown}; there are {', '.join(known)}")
    if args.reps < 1:
        ap.error("--reps must be at least 1")

    work = (args.scratch or Path(tempfile.mkdtemp(prefix="nvcc-plus-programs-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    tools = {"nvcc": real_nvcc(args.nvcc),
             "nvcc_plus": args.nvcc_plus or _script(work / "bin", "nvcc-plus", "nvcc_plus")}
    sup = args.superopt or _script(work / "bin", "superopt", "superopt")
    tools["superopt"] = [sup]
    print(f"[programs] scratch {work}; nvcc {tools['nvcc']}; nvcc-plus {tools['nvcc_plus']}; superopt {sup}",
          flush=True)

    gpu = gpu_name()
    now = dt.datetime.now(dt.timezone.utc)
    out = args.out
    if out is None and not args.dry_run:
        out = ROOT / "bench" / "results" / f"{now.date().isoformat()}-programs-{gpu_tag(gpu)}.json"
    old = None
    if out is not None and out.is_file() and not args.fresh:
        old = json.loads(out.read_text())
    result = {
        "benchmark": "bench/programs: whole programs, plain nvcc vs nvcc-plus without and with capture",
        "date": now.isoformat(timespec="seconds"),
        "gpu": gpu,
        "commit": commit(),
        "tree_digest": _tree_digest(),          # python -m bench.tree_digest --find DIGEST names the commit
        "method": "each program's own cudaEvent timer: kernel_ms = the program's median over its timed "
                  "repetitions of one repetition's kernel time (after a warm-up); per mode the median "
                  "over --reps runs of the program, runs of the modes interleaved round by round; "
                  "speedup = nvcc median / mode median; a run counts only when its self-check passed",
        "reps": args.reps,
        "budget_s": args.budget,
        "nvcc_plus_timeout_s": args.timeout,
        "modes": args.modes,
        "build_system": args.build_system,
        "dry_run": args.dry_run,
        "parts": [{"commit": commit(), "date": now.isoformat(timespec="seconds"), "programs": list(names)}],
        "programs": [],
    }
    for name in names:
        try:
            row = bench_program(name, args, work, tools)
        except Exception as exc:  # noqa: BLE001 - one program's failure is recorded, not fatal
            row = {"program": name, "kernels": kernels_of(name), "modes": {}, "speedup": {},
                   "error": f"{type(exc).__name__}: {exc}"}
            print(f"[programs] {name}: benchmark error {row['error']}", flush=True)
        result["programs"].append(row)
        snapshot = finish(merge(json.loads(json.dumps(result)), old) if old else json.loads(json.dumps(result)))
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(out.suffix + ".tmp")
            tmp.write_text(json.dumps(snapshot, indent=1) + "\n")
            os.replace(tmp, out)
    final = finish(merge(result, old) if old else result)
    print(table(final))
    if out is not None:
        print(f"[programs] wrote {out}")
    return 0 if final["all_checks_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
