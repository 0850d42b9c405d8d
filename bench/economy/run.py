"""Search economy on one GPU: the whole program benchmark plus a many-kernel project built with
``make -j`` as a user's build runs, before and after, and where the searches' time went.

    python -m bench.economy.run [--old-tree DIR] [--jobs 8] [--budget S] [--timeout S]
                                [--modes nvcc,before,after,tune,deferred] [--runs 1] [--out FILE]

One scratch project holds every program of ``bench/programs`` and ``bench/economy/manykernels``
under a top-level Makefile whose targets build each of them (``make -jJOBS`` spreads the
compilations of all of them over the cores, as ``make -j`` does for a real project; every
nvcc-plus compilation searches on the one GPU):

* ``nvcc``: plain nvcc;
* ``before``: nvcc-plus from ``--old-tree`` (the code before this change: a search leases the GPU
  for its whole duration);
* ``after``: nvcc-plus from this checkout (the GPU held per GPU step);
* ``tune``: as ``after``, with each program's capture (``superopt capture`` of its nvcc build):
  what ``superopt tune`` builds.
* ``deferred``: as ``tune`` with ``NVCC_PLUS_SEARCH=deferred``: the build queues its searches and
  returns, ``superopt cache wait`` runs the queue, and a second build (``make -B``) applies the
  decisions (docs/deferred.md). Its ``build`` is the first build (what a user waits for); the
  queue's and the applying build's walls are beside it; its searches are the queue runner's
  records; its binaries are the applying build's.

Each nvcc-plus mode gets a fresh decision cache and its own report folder. Then every program's
binary runs ``--runs`` times per mode (its own timer and self-check, the GPU held so no search
overlaps it). From the captures: the kernels over 1% of a program's GPU time ("worth searching").
From the records: which kernels were searched (a candidate judged), why the others were not, and
per mode the phases of every search (``superopt.judge.phases``): GPU-busy and lease seconds. The
old tree records no phases: its lease is each search's duration and its GPU work is estimated
from its candidates' check and timing wall times (an upper bound on its GPU-busy time).

Results: ``bench/results/<date>-search-economy-<gpu>.json`` with the top-level numbers
``gpu_busy_fraction`` (after), ``searched_fraction`` (tune: kernels over 1% searched / all such),
``tune_build_ratio`` (tune build wall / nvcc build wall), ``throughput_ratio`` (kernels searched
per build-minute, after / before), and the programs' speedups per mode.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.programs import run as programs
from bench import tree_digest
from bench.economy.phase_timeline import build_timeline, read_phases
from bench.economy.timeline import read_steps, timeline

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROJECTS = [*programs.programs(), "manykernels"]
MODES = ("nvcc", "before", "after", "tune", "deferred")
WORTH_SHARE = 0.01


def project_dir(name: str) -> Path:
    return HERE / name if name == "manykernels" else programs.HERE / name


def makefile(names: list[str]) -> str:
    """The top-level Makefile: one target per project; CAPS, when set, is the folder of the
    projects' captures (``<name>.json``), handed to each project's compilations."""
    lines = [f"PROJECTS := {' '.join(names)}", "NVCC ?= nvcc", "CAPS ?=", "", "all: $(PROJECTS)", "",
             "$(PROJECTS):",
             "\t+cd $@ && $(if $(CAPS),NVCC_PLUS_CAPTURE=$(CAPS)/$@.json) $(MAKE) NVCC=\"$(NVCC)\"", "",
             ".PHONY: all $(PROJECTS)", ""]
    return "\n".join(lines)


def prepare(work: Path, mode: str) -> Path:
    dest = work / mode
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in PROJECTS:
        shutil.copytree(project_dir(name), dest / name, ignore=shutil.ignore_patterns("build", "*.o", name))
    (dest / "Makefile").write_text(makefile(PROJECTS))
    return dest


def compile_packages(*trees) -> dict:
    """The trees' packages compiled to bytecode once, before the builds, as an installed
    nvcc-plus is (pip compiles on install): a checkout copied without ``__pycache__`` otherwise
    has every compilation compile its ~500 modules again (the economy bench's profile,
    2026-12-04: 7556 module compilations, 17 s of one build's main threads). Returns
    {tree: whether it compiled}."""
    import compileall
    out = {}
    for tree in trees:
        if tree is None:
            continue
        ok = all(compileall.compile_dir(str(Path(tree) / pkg), quiet=1, workers=0)
                 for pkg in ("nvcc_plus", "superopt", "ptx_ir", "reports") if (Path(tree) / pkg).is_dir())
        out[str(tree)] = bool(ok)
    return out


def wrapper(work: Path, tree: Path, name: str, profile_dir: Path | None = None) -> str:
    """An nvcc-plus that runs ``tree``'s code (its own PYTHONPATH, whatever is installed). Each
    compilation writes its own span (phase ``compilation``, its .cu file as ``kernel``) to
    SUPEROPT_PHASE_LOG when that is set (bench.economy.phase_timeline). With ``profile_dir``,
    each compilation under cProfile in ``<mode>-<pid>.prof`` there: from Python 3.12 that profile
    holds every thread; before, each thread that ends writes ``<mode>-<pid>-t<ident>.prof`` (a
    diagnosis: its overhead slows the build; bench.economy.worker_profile --pattern merges them)."""
    w = work / f"nvcc-plus-{name}"
    shim = work / f"shim-{name}.py"
    lines = ["import json, os, runpy, sys, time",
             "t0 = time.time()",
             "sys.argv = ['nvcc_plus'] + sys.argv[1:]",
             "cu = next((a for a in sys.argv if a.endswith('.cu')), '')"]
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
        lines += ["import cProfile",
                  f"out = os.path.join({str(profile_dir)!r}, '{name}-%d.prof' % os.getpid())",
                  "p = cProfile.Profile()", "p.enable()",
                  # the searches run in threads. Python 3.12's cProfile (sys.monitoring) sees every
                  # thread and allows one profiler at a time; before 3.12 it sees the thread that
                  # enabled it alone, so each thread gets its own profile, dumped when it ends
                  "import threading",
                  "_run = threading.Thread.run",
                  "def _profiled(self):",
                  "    q = cProfile.Profile()",
                  "    try:",
                  "        q.enable()",
                  "    except ValueError:",
                  "        return _run(self)",
                  "    try:",
                  "        _run(self)",
                  "    finally:",
                  "        q.disable()",
                  "        q.dump_stats(out[:-5] + '-t%d.prof' % threading.get_ident())",
                  "if sys.version_info < (3, 12):",
                  "    threading.Thread.run = _profiled"]
    lines += ["try:",
              "    runpy.run_module('nvcc_plus', run_name='__main__', alter_sys=True)",
              "finally:"]
    if profile_dir is not None:
        lines += ["    p.disable()", "    p.dump_stats(out)"]
    lines += ["    log = os.environ.get('SUPEROPT_PHASE_LOG')",
              "    if log:",
              "        with open(log, 'a') as f:",
              "            f.write(json.dumps({'pid': os.getpid(), 'thread': 0, 'kernel': os.path.basename(cu),",
              "                                'phase': 'compilation', 'start': t0, 'end': time.time()}) + '\\n')"]
    shim.write_text("\n".join(lines) + "\n")
    run = f'"{sys.executable}" "{shim}" "$@"'
    w.write_text(f'#!/bin/sh\nPYTHONPATH="{tree}${{PYTHONPATH:+:$PYTHONPATH}}" exec {run}\n')
    w.chmod(0o755)
    return str(w)


def build(tree: Path, compiler: str, env: dict, jobs: int, timeout: float, caps: Path | None = None,
          again: bool = False) -> dict:
    cmd = ["make", f"-j{jobs}", f"NVCC={compiler}"] + ([f"CAPS={caps}"] if caps else []) + (["-B"] if again else [])
    r = programs.run_cmd(cmd, tree, env, timeout)
    binaries = {n: str(tree / n / n) for n in PROJECTS if (tree / n / n).is_file()}
    out = {"wall_s": round(r["seconds"], 2), "rc": r["rc"], "timed_out": r["timed_out"], "binaries": binaries,
           "nvcc_plus_lines": [ln for ln in r["stderr"].splitlines() if ln.startswith("nvcc-plus")][:60]}
    if r["rc"] != 0:
        out["log_tail"] = programs.tail(r["stdout"] + "\n" + r["stderr"], 4000)
    return out


def plus_env(base: dict, work: Path, mode: str, args, nvcc: str) -> dict:
    env = dict(base)
    env.update(NVCC_PLUS_BACKEND="gpu", NVCC_PLUS_REAL_NVCC=nvcc)
    if args.budget is not None:
        env["NVCC_PLUS_BUDGET"] = str(args.budget)
    if args.timeout is not None:
        env["NVCC_PLUS_TIMEOUT"] = str(args.timeout)
    for var, sub in (("NVCC_PLUS_REPORT_DIR", "records"), ("NVCC_PLUS_CACHE_DIR", "cache")):
        d = work / sub / mode
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        env[var] = str(d)
    steps = step_log(work, mode)
    steps.unlink(missing_ok=True)
    env["SUPEROPT_GPU_STEP_LOG"] = str(steps)
    phases = phase_log(work, mode)
    phases.unlink(missing_ok=True)
    env["SUPEROPT_PHASE_LOG"] = str(phases)
    return env


def step_log(work: Path, mode: str) -> Path:
    """Where a mode's builds log their GPU steps (bench.economy.timeline)."""
    return work / f"gpu-steps-{mode}.jsonl"


def phase_log(work: Path, mode: str) -> Path:
    """Where a mode's builds log their compilations and search phases (bench.economy.phase_timeline)."""
    return work / f"phases-{mode}.jsonl"


# a build's working facts, not written to the results
HIDDEN = ("binaries", "span", "records_dir")


def deferred_builds(work: Path, caps: Path, base: dict, args, nvcc: str, superopt: str) -> dict:
    """The ``deferred`` mode: queue, wait, apply. Returns the first build's dict with the queue's
    and the applying build's figures, the applying build's binaries, and ``records_dir``: the
    queue runner's records (moved aside before the applying build writes its own)."""
    tree = prepare(work, "deferred")
    env = plus_env(base, work, "deferred", args, nvcc)
    env["NVCC_PLUS_SEARCH"] = "deferred"
    compiler = wrapper(work, ROOT, "deferred")
    began = time.time()
    first = build(tree, compiler, env, args.jobs, args.build_timeout, caps)
    t0 = time.monotonic()
    waited = programs.run_cmd([superopt, "cache", "wait", "--timeout", str(args.build_timeout)], tree, env,
                              args.build_timeout + 60)
    queue_s = round(time.monotonic() - t0, 2)
    span = (began, time.time())
    records = work / "records" / "deferred"
    searches = work / "records" / "deferred-searches"
    if searches.exists():
        shutil.rmtree(searches)
    shutil.move(str(records), str(searches))
    records.mkdir()
    second = build(tree, compiler, env, args.jobs, args.build_timeout, caps, again=True)
    out = dict(first)
    out.update(binaries=second["binaries"], span=span, records_dir=searches, queue_wall_s=queue_s,
               queue_rc=waited["rc"], apply_build_wall_s=second["wall_s"], apply_build_rc=second["rc"],
               apply_nvcc_plus_lines=second["nvcc_plus_lines"],
               total_wall_s=round(first["wall_s"] + queue_s + second["wall_s"], 2))
    if waited["rc"] != 0:
        out["queue_tail"] = programs.tail(waited["stdout"] + "\n" + waited["stderr"], 2000)
    return out


# ---------------------------------------------------------------- what the records say

def kernel_records(folder: Path) -> list[dict]:
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for k in doc.get("kernels") or []:
            k = dict(k)
            k["_source"] = doc.get("source") or ""
            out.append(k)
    return out


def searches_of_queue(records: list[dict]) -> list[dict]:
    """The deferred mode's records: a kernel's queue runner record replaces the record of the
    build that queued it (``queued``; the runner writes into the same folder, while the build
    is still running or after it, under a name of its own or the same)."""
    searched_keys = {(k["_source"], k["kernel"]) for k in records if not k.get("queued")}
    return [k for k in records if not (k.get("queued") and (k["_source"], k["kernel"]) in searched_keys)]


def project_of(source: str) -> str | None:
    parts = Path(source).parts
    return next((p for p in parts if p in PROJECTS), None)


def searched(k: dict) -> bool:
    """A kernel was searched when at least one candidate was judged (or a decision measured)."""
    if k.get("status") == "optimized" and k.get("decision") == "measured":
        return True
    return any(c.get("fate") not in (None, "skipped-budget", "skipped-roofline") for c in k.get("candidates") or [])


def old_phases(k: dict) -> tuple[float, float]:
    """(lease, GPU busy upper bound) of a search by the old code: its lease was the whole search;
    its GPU work at most the checks' and timings' wall times."""
    busy = 0.0
    for c in k.get("candidates") or []:
        for key in ("verdict", "fresh_verdict"):
            busy += float(((c.get(key) or {}).get("evidence") or {}).get("wall_seconds") or 0)
        for key in ("timing", "confirmation"):
            busy += float((c.get(key) or {}).get("wall_seconds") or 0)
        busy += float((c.get("sanitizer") or {}).get("seconds") or 0)
    return float(k.get("seconds") or 0), busy


def summarize_mode(mode: str, records: list[dict], worth: dict[str, set[str]], build_wall: float) -> dict:
    kernels = [k for k in records if project_of(k["_source"])]
    done = [k for k in kernels if searched(k)]
    lease = busy = wait = 0.0
    phase_totals: Counter = Counter()
    exact = True
    for k in done:
        ph = k.get("phases")
        if ph:
            lease += ph.get("lease_s", 0.0)
            busy += ph.get("gpu_busy_s", 0.0)
            wait += ph.get("gpu_wait_s", 0.0)
            for key, v in ph.items():
                if key.endswith("_s"):
                    phase_totals[key] += v
        else:
            exact = False
            l, b = old_phases(k)
            lease += l
            busy += b
    worth_all = {(p, n) for p, names in worth.items() for n in names}
    by_key = {(project_of(k["_source"]), k["kernel"]): k for k in kernels}
    worth_done = [key for key in worth_all if key in by_key and searched(by_key[key])]
    not_searched = Counter(_why(k) for k in kernels if not searched(k))
    # a search cut short by its wait for the GPU keeps the phases of what it did (GPU work that
    # no decision uses): apart from the searched kernels', so that totals compare across files
    wasted: Counter = Counter()
    for k in kernels:
        if not searched(k):
            for key, v in (k.get("phases") or {}).items():
                if key.endswith("_s"):
                    wasted[key] += v
    return {
        "mode": mode, "kernels": len(kernels), "searched": len(done),
        "worth_searching": len(worth_all), "worth_searched": len(worth_done),
        "worth_not_searched": sorted(f"{p}:{n}" for p, n in worth_all - set(worth_done)),
        "not_searched_reasons": dict(not_searched.most_common()),
        "kept": sum(1 for k in kernels if k.get("status") == "optimized"),
        "winners": sorted(f"{project_of(k['_source'])}:{k['kernel']}:{k.get('winner')}" for k in kernels
                          if k.get("status") == "optimized"),
        "lease_s": round(lease, 3), "gpu_busy_s": round(busy, 3), "gpu_wait_s": round(wait, 3),
        "gpu_busy_fraction": round(busy / lease, 4) if lease else None,
        "phases_exact": exact, "phase_totals_s": {k: round(v, 3) for k, v in sorted(phase_totals.items())},
        "unsearched_phase_totals_s": {k: round(v, 3) for k, v in sorted(wasted.items())},
        "build_wall_s": build_wall,
        "searched_per_minute": round(len(done) / (build_wall / 60), 3) if build_wall else None,
        "per_kernel": [kernel_row(k) for k in done],
    }


PER_KERNEL_PHASES = ("lease_s", "gpu_check_s", "gpu_check_n", "gpu_time_s", "gpu_time_n", "gpu_worker_s",
                     "gpu_fill_s", "gpu_readback_s", "gpu_launch_s", "gpu_keep_s", "sanitize_s", "gpu_wait_s",
                     "check_s", "timing_s", "gpu_time_fill_s", "gpu_time_runs_s", "window_host_s")


def kernel_row(k: dict) -> dict:
    """Where one searched kernel's time went: its candidates' fates, how many were timed and how
    many timings stopped early (superopt.judge.early_stop), and its main phases."""
    cands = k.get("candidates") or []
    ph = k.get("phases") or {}
    return {"kernel": f"{project_of(k['_source'])}:{k['kernel']}", "status": k.get("status"),
            "candidates": len(cands), "fates": dict(Counter(str(c.get("fate")) for c in cands)),
            "timed": sum(1 for c in cands if c.get("timing")),
            "stopped_early": sum(1 for c in cands if (c.get("timing") or {}).get("stopped_early")),
            "phases": {name: ph[name] for name in PER_KERNEL_PHASES if name in ph}}


def _why(k: dict) -> str:
    reason = str(k.get("reason") or k.get("status") or "?")
    for cut in (" (", ":", ";"):
        if cut in reason[12:]:
            reason = reason[:12 + reason[12:].index(cut)]
    return reason[:100]


def worth_from_captures(caps: Path) -> dict[str, set[str]]:
    from superopt.specs.capture.format import kernel_share
    out = {}
    for name in PROJECTS:
        path = caps / f"{name}.json"
        try:
            share = kernel_share(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        out[name] = {k for k, s in share.items() if s >= WORTH_SHARE}
    return out


# ---------------------------------------------------------------- the run

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-tree", type=Path, help="a checkout of the code before (for --modes before)")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--budget", type=float, default=None, help="NVCC_PLUS_BUDGET (default: nvcc-plus's)")
    ap.add_argument("--timeout", type=float, default=None, help="NVCC_PLUS_TIMEOUT (default: nvcc-plus's)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--run-modes", default=None, help="which modes' binaries to run (default: every mode built)")
    ap.add_argument("--build-timeout", type=float, default=900)
    ap.add_argument("--run-timeout", type=float, default=120)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--before-from", type=Path, help="an earlier results file whose 'before' mode (the code "
                    "before issue 23, measured on the same GPU) gives throughput_ratio without building it again")
    ap.add_argument("--profile-dir", type=Path, help="a diagnosis: each nvcc-plus compilation under cProfile "
                    "(one .prof per compilation) and the modes' records copied there; slows the builds")
    ap.add_argument("--records-dir", type=Path, help="the nvcc-plus modes' kernel records copied there")
    ap.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                    help="an nvcc-plus setting for the builds (repeatable; recorded in the results as 'settings')")
    args = ap.parse_args(argv)
    extra = {}
    for item in args.set:
        name, eq, value = item.partition("=")
        if not eq or not name.startswith(("NVCC_PLUS_", "SUPEROPT_")):
            ap.error(f"--set {item!r}: expected a setting's name (NVCC_PLUS_... or SUPEROPT_...), '=', a value")
        extra[name] = value
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        ap.error(f"unknown mode(s) {unknown} (known: {', '.join(MODES)})")
    if "before" in modes and not args.old_tree:
        ap.error("--modes before needs --old-tree")
    work = args.work or Path(tempfile.mkdtemp(prefix="nvcc-plus-economy-"))
    work.mkdir(parents=True, exist_ok=True)
    bytecode = compile_packages(ROOT, args.old_tree)
    nvcc = programs.real_nvcc(None)
    base = {k: v for k, v in os.environ.items() if not k.startswith("NVCC_PLUS_")}
    base["NVCC_PLUS_REAL_NVCC"] = nvcc
    base.update(extra)
    superopt = programs._script(work, "superopt", "superopt")
    gpu = programs.gpu_name()
    result = {"benchmark": "search-economy", "date": dt.date.today().isoformat(), "gpu": gpu,
              "commit": programs.commit(), "tree_digest": tree_digest.digest(),   # python -m bench.tree_digest --find
              "jobs": args.jobs, "budget": args.budget, "timeout": args.timeout,
              "projects": PROJECTS, "settings": extra, "modes": {}, "programs": {}, "bytecode_compiled": bytecode}
    if args.before_from and "before" not in modes:
        result["modes"]["before"] = before_from(args.before_from)
    caps = work / "caps"
    builds: dict[str, dict] = {}
    out = args.out or ROOT / "bench" / "results" / f"{result['date']}-search-economy-{programs.gpu_tag(gpu)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)

    def log(msg):
        print(f"[economy] {msg}", flush=True)

    def save():
        """Rewritten after every stage: a run cut short keeps what it measured."""
        result["builds"] = {m: {k: v for k, v in b.items() if k not in HIDDEN} for m, b in builds.items()}
        out.write_text(json.dumps(result, indent=1) + "\n")

    if "nvcc" in modes or "tune" in modes or "deferred" in modes:
        tree = prepare(work, "nvcc")
        builds["nvcc"] = build(tree, nvcc, base, args.jobs, args.build_timeout)
        log(f"nvcc build: {builds['nvcc']['wall_s']} s, rc {builds['nvcc']['rc']}")
        save()
    if "tune" in modes or "deferred" in modes:
        caps.mkdir(exist_ok=True)
        t0 = time.monotonic()
        for name, binary in builds["nvcc"]["binaries"].items():
            with programs.gpu_held(args.run_timeout * 2):
                r = programs.run_cmd([superopt, "capture", "-o", str(caps / f"{name}.json"), "--", binary],
                                     Path(binary).parent, base, args.run_timeout * 2)
            if r["rc"] != 0:
                log(f"capture of {name} failed: {programs.tail(r['stderr'], 300)}")
        result["capture_s"] = round(time.monotonic() - t0, 2)
        log(f"captures: {result['capture_s']} s")
    for mode in ("before", "after", "tune"):
        if mode not in modes:
            continue
        tree = prepare(work, mode)
        code = args.old_tree.resolve() if mode == "before" else ROOT
        env = plus_env(base, work, mode, args, nvcc)
        began = time.time()
        builds[mode] = build(tree, wrapper(work, code, mode, args.profile_dir), env, args.jobs, args.build_timeout,
                             caps if mode == "tune" else None)
        for keep in {args.profile_dir, args.records_dir} - {None}:
            shutil.copytree(work / "records" / mode, keep / f"records-{mode}", dirs_exist_ok=True)
            for logged in (step_log(work, mode), phase_log(work, mode)):
                if logged.is_file():
                    shutil.copy2(logged, keep / logged.name)
        builds[mode]["span"] = (began, time.time())
        log(f"{mode} build: {builds[mode]['wall_s']} s, rc {builds[mode]['rc']}")
        save()
    if "deferred" in modes:
        builds["deferred"] = deferred_builds(work, caps, base, args, nvcc, superopt)
        d = builds["deferred"]
        log(f"deferred: build {d['wall_s']} s, queue {d['queue_wall_s']} s, applying build {d['apply_build_wall_s']} s")
        save()
    worth = worth_from_captures(caps) if caps.is_dir() else {}
    result["worth_searching"] = {p: sorted(n) for p, n in worth.items()}
    for mode, b in builds.items():
        result["modes"][mode] = {"build": {k: v for k, v in b.items() if k not in HIDDEN}}
        if mode != "nvcc":
            recs = kernel_records(b.get("records_dir") or work / "records" / mode)
            if mode == "deferred":
                recs = searches_of_queue(recs)
            result["modes"][mode].update(summarize_mode(mode, recs, worth, b.get("total_wall_s") or b["wall_s"]))
            span = b.get("span") or (None, None)
            result["modes"][mode]["gpu_timeline"] = timeline(read_steps(step_log(work, mode)), *span)
            result["modes"][mode]["build_timeline"] = build_timeline(read_phases(phase_log(work, mode)),
                                                                     read_steps(step_log(work, mode)), *span)
    save()
    run_modes = [m for m in builds if m in args.run_modes.split(",")] if args.run_modes else list(builds)
    # the programs, each mode's binary in turn
    for name in PROJECTS:
        row = result["programs"].setdefault(name, {})
        for rnd in range(args.runs):
            for mode in run_modes:
                binary = builds[mode]["binaries"].get(name)
                if not binary:
                    row.setdefault(mode, {"check": "BUILD_FAILED"})
                    continue
                with programs.gpu_held(args.run_timeout * 4):
                    r = programs.parse_run(programs.run_cmd([binary], Path(binary).parent, base, args.run_timeout))
                rec = row.setdefault(mode, {"runs": []})
                rec["runs"].append(r)
        for mode, rec in row.items():
            ms = [r["kernel_ms"] for r in rec.get("runs", []) if r.get("check") == "PASS" and r.get("kernel_ms")]
            rec["median_ms"] = sorted(ms)[len(ms) // 2] if ms else None
            rec["check"] = rec.get("check") or ("PASS" if rec.get("runs") and all(
                r["check"] == "PASS" for r in rec["runs"]) else "FAIL")
        base_ms = (row.get("nvcc") or {}).get("median_ms")
        row["speedup"] = {m: round(base_ms / r["median_ms"], 4) for m, r in row.items()
                          if isinstance(r, dict) and r.get("median_ms") and base_ms and m != "nvcc"}
        # never slower (issue 24): each mode against nvcc beyond the runs' spread, as bench/never_slower judges
        from bench.never_slower.run import slower_than_nvcc
        nv = _passing_ms(row.get("nvcc"))
        row["vs_nvcc"] = {m: slower_than_nvcc(nv, _passing_ms(r)) for m, r in list(row.items())
                          if isinstance(r, dict) and "runs" in r and m != "nvcc"}
        mark_same_code(row["vs_nvcc"], name, result["modes"])
        log(f"{name}: " + ", ".join(f"{m} {r.get('median_ms')} ms {r.get('check')}" for m, r in row.items()
                                    if isinstance(r, dict) and "check" in r))
        save()
    finish(result)
    save()
    log(f"wrote {out}")
    print(json.dumps({k: result.get(k) for k in ("gpu_busy_fraction", "searched_fraction", "tune_build_ratio",
                                                 "throughput_ratio", "all_checks_pass")}))
    return 0


def _passing_ms(rec: dict | None) -> list[float]:
    return [r["kernel_ms"] for r in (rec or {}).get("runs", []) if r.get("check") == "PASS" and r.get("kernel_ms")]


def before_from(path: Path) -> dict:
    """The 'before' mode of an earlier results file, saying where it came from."""
    doc = json.loads(Path(path).read_text())
    before = (doc.get("modes") or {}).get("before")
    if not before:
        raise SystemExit(f"{path}: no 'before' mode in it")
    return dict(before, taken_from=str(path), taken_from_commit=doc.get("commit"), taken_from_date=doc.get("date"))


def finish(result: dict) -> dict:
    """The top-level numbers of the issue, from the modes (None where a mode was not run)."""
    m = result["modes"]

    def get(mode, key):
        return (m.get(mode) or {}).get(key)

    result["gpu_busy_fraction"] = get("after", "gpu_busy_fraction")
    worth, done = get("tune", "worth_searching"), get("tune", "worth_searched")
    result["searched_fraction"] = round(done / worth, 4) if worth else None
    nv, tune = (get("nvcc", "build") or {}).get("wall_s"), (get("tune", "build") or {}).get("wall_s")
    result["tune_build_ratio"] = round(tune / nv, 3) if nv and tune else None
    dfr = get("deferred", "build") or {}
    # what a deferred build waits for, and the whole queue-wait-apply cycle, against plain nvcc
    result["deferred_build_ratio"] = round(dfr["wall_s"] / nv, 3) if nv and dfr.get("wall_s") else None
    result["deferred_total_ratio"] = round(dfr["total_wall_s"] / nv, 3) if nv and dfr.get("total_wall_s") else None
    b, a = get("before", "searched_per_minute"), get("after", "searched_per_minute")
    result["throughput_ratio"] = round(a / b, 3) if a and b else None
    checks = [r.get("check") for p in result["programs"].values() for r in p.values()
              if isinstance(r, dict) and "check" in r]
    # None where no program ran (--run-modes none): no check failed, none passed either
    result["all_checks_pass"] = all(c == "PASS" for c in checks) if checks else None
    def entries(same: bool, measured: bool = True) -> list[str]:
        return sorted(f"{name}:{m}: {v['reason']}" for name, p in result["programs"].items()
                      for m, v in (p.get("vs_nvcc") or {}).items()
                      if v.get("slower") and bool(v.get("same_code")) == same
                      and v.get("spread_measured", True) == measured)
    result["slower_entries"] = entries(False)
    result["slower"] = len(result["slower_entries"])
    # nvcc's own machine code in that mode (no rewrite kept for the program): a difference is noise
    result["slower_same_code_entries"] = entries(True)
    # one run per side (--runs 1): a median lower than nvcc's with no spread to weigh it against
    result["slower_unmeasured_entries"] = entries(False, measured=False)
    return result


def mark_same_code(vs_nvcc: dict, name: str, modes: dict) -> None:
    """Mark the modes whose build kept no rewrite for program ``name`` (its records' winners):
    their binary runs nvcc's code, so 'slower beyond the spread' there is noise, not a rewrite's
    fault (three runs flagged identical code twice, 2026-12-02); ``finish`` counts them apart."""
    for m, v in vs_nvcc.items():
        winners = (modes.get(m) or {}).get("winners")
        if winners is not None and not any(w.split(":", 1)[0] == name for w in winners):
            v["same_code"] = True


if __name__ == "__main__":
    sys.exit(main())
