"""No-alias versioning benchmark (issue 26): naive linear-algebra programs, per kernel and per
program, plain nvcc vs nvcc-plus without and with a capture.

    python -m bench.alias.run [--program NAME ...] [--modes nvcc,plus,capture] [--reps 5]
                              [--budget 5] [--deadline 540] [--out FILE] [--fresh] [--dry-run]

Every program under bench/alias/<name>/ is written the way PolyBench-GPU writes its kernels
(plain ``float*`` parameters, one thread per output, the sum accumulated directly in global
memory), has its own Makefile, its own cudaEvent timer per kernel and its own self-check, and
prints one line per kernel ``NVCC_PLUS_BENCH kernel=<name> kernel_ms=<median ms> check=...``
and, last, the program's line ``NVCC_PLUS_BENCH kernel_ms=<sum> check=...``.
``programs.toml`` says which kernels are *accumulating* (the ones the versioning is for).

The builds, the capture and the interleaved runs are bench/programs' own
(:func:`bench.programs.run.bench_program`, on this folder's programs); the verdict is
bench/never_slower's (:func:`bench.never_slower.run.slower_than_nvcc`: slower when the median
is above nvcc's by more than half the sum of both sides' ranges), taken per program x mode and
per kernel x mode.

Results: ``bench/results/<date>-alias-<gpu>.json`` (or ``--out``): date, GPU, commit, method,
settings; per program the builds and runs of every mode, per kernel per mode ``median_ms``,
spread, ``speedup`` (nvcc median / mode median), ``accumulating``, ``slower``, what nvcc-plus
decided; top level ``min_accumulating_speedup`` (per mode, the minimum over the accumulating
kernels), ``slower`` (the number of program x mode and kernel x mode entries slower beyond the
spread), ``all_checks_pass`` and ``goal_met`` (>= 2x on every accumulating kernel in every
mode, none slower). The file is rewritten after every program and merged into when it exists
(``--fresh`` starts over); ``--deadline`` stops starting programs whose expected time no
longer fits (they are listed in ``not_run``; run them with ``--program`` into the same file).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import statistics
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from bench.never_slower.run import _times as never_slower_times
from bench.never_slower.run import _write, decisions, slower_than_nvcc
from bench.programs import run as programs

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MANIFEST = HERE / "programs.toml"
MODES = ("nvcc", "plus", "capture")
GOAL_SPEEDUP = 2.0


@dataclass(frozen=True)
class Suite:
    """A folder of per-kernel-timed programs and what its goal is. bench/alias is ``ALIAS``;
    another benchmark (bench/restructure) runs this module's machinery on its own folder."""
    name: str                         # log prefix, result file name (<date>-<name>-<gpu>.json), table title
    here: Path                        # the program folders and programs.toml
    goals: dict                       # kernel kind (a list in programs.toml) -> goal speedup
    flag: str                         # per-kernel key: True when the kernel is of a goal kind
    benchmark: str                    # the result file's "benchmark"
    description: str = ""             # the command line's description
    goal_modes: tuple = ("plus", "capture")   # the modes the goal speedups apply to
    geomean_goal: float | None = None          # goal on the geomean of the programs' speedups in geomean_mode
    geomean_mode: str = "capture"
    list_note: str = ""
    goal_text: str = ""               # the result file's "goal" (default: bench/alias's)

    @property
    def manifest_path(self) -> Path:
        return self.here / "programs.toml"

    @property
    def kinds_shown(self) -> bool:
        """Several kernel kinds (or a flag not named after the one kind): records carry each kernel's kind."""
        return self.flag not in self.goals


ALIAS = Suite(
    name="alias", here=HERE, goals={"accumulating": GOAL_SPEEDUP}, flag="accumulating",
    benchmark="bench/alias: naive linear-algebra programs accumulating in global memory, per kernel, "
              "plain nvcc vs nvcc-plus without and with capture (no-alias versioning, issue 26)",
    description=(__doc__ or "").split("\n\n")[0],
    list_note="* accumulates into global memory in a loop")


# ---------------------------------------------------------------- the programs

def manifest(suite: Suite = ALIAS) -> dict:
    """programs.toml: per program its accumulating and other kernels and its expected run time."""
    return tomllib.loads(suite.manifest_path.read_text())


def program_names(suite: Suite = ALIAS) -> list[str]:
    """The program folders of bench/alias (those with a Makefile), in the manifest's order."""
    found = programs.programs(suite.here)
    order = list(manifest(suite))
    return sorted(found, key=lambda p: (order.index(p) if p in order else len(order), p))


def kinds(name: str, suite: Suite = ALIAS) -> dict[str, str]:
    """kernel -> kind (one of the suite's goal kinds, or "other"), for one program, in the manifest's order."""
    entry = manifest(suite).get(name) or {}
    out = {k: kind for kind in suite.goals for k in entry.get(kind, [])}
    out.update({k: "other" for k in entry.get("other", [])})
    return out


def kernels(name: str, suite: Suite = ALIAS) -> dict[str, bool]:
    """kernel -> accumulating (of a goal kind), for one program (the manifest's kernels, in its order)."""
    return {k: kind in suite.goals for k, kind in kinds(name, suite).items()}


def goal_of(name: str, kernel: str, suite: Suite = ALIAS) -> float | None:
    """A kernel's goal speedup: the program's ``goal`` in programs.toml when it sets one, else its kind's."""
    kind = kinds(name, suite).get(kernel)
    if kind not in suite.goals:
        return None
    return float((manifest(suite).get(name) or {}).get("goal", suite.goals[kind]))


# ---------------------------------------------------------------- time

def expected_seconds(name: str, reps: int, budget: float, modes: list[str], timeout: float | None,
                     dry_run: bool = False, suite: Suite = ALIAS) -> float:
    """A program's expected wall time on an H200 host (from bench/programs' and never_slower's
    measured builds: a plain build ~2 s, an nvcc-plus build ~3 s + ~2 x budget per kernel, a
    capture build ~5 s + ~6 x budget per kernel, the capture ~2 runs), capped at --timeout."""
    k = len(kernels(name, suite)) or len(programs.kernels_of(name, suite.here))
    run_s = float((manifest(suite).get(name) or {}).get("run_s", 2.0))
    cap = (lambda s: min(s, timeout + 5)) if timeout else (lambda s: s)
    t = 2.5 if ("nvcc" in modes or "capture" in modes) else 0.0
    if "plus" in modes:
        t += cap(3 + 2 * budget * k)
    if "capture" in modes and not dry_run:
        t += 2 * run_s + 3 + cap(5 + 6 * budget * k)
    if not dry_run:
        t += reps * len(modes) * run_s
    return t


# ---------------------------------------------------------------- verdicts

def _times(runs: list[dict], kernel: str | None) -> tuple[list[float], list[str]]:
    """(passing times, every check) of one side's runs, of one kernel or (None) of the program."""
    return never_slower_times(runs, kernel, key="per_kernel")


def _stats(ms: list[float]) -> dict:
    if not ms:
        return {"median_ms": None, "runs_ms": []}
    out = {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms),
           "range_ms": max(ms) - min(ms), "runs_ms": ms}
    if len(ms) >= 4:
        q = statistics.quantiles(ms, n=4)
        out["iqr_ms"] = q[2] - q[0]
    return out


def _check(checks: list[str], rec: dict) -> str:
    if not rec.get("runs"):
        return rec.get("check") or "NOT_RUN"
    s = set(checks)
    return "PASS" if s == {"PASS"} else ("FAIL" if "FAIL" in s else (rec.get("check") or "NO_RESULT"))


def judge(row: dict, suite: Suite = ALIAS) -> dict:
    """Per kernel and for the program: every mode's statistics, and for plus and capture the
    speedup and the never-slower verdict against nvcc; in place, returns the row."""
    modes = row.get("modes") or {}
    nvcc_runs = (modes.get("nvcc") or {}).get("runs") or []
    acc = kernels(row["program"], suite)
    kind = kinds(row["program"], suite)
    for k in row.get("kernels") or []:
        acc.setdefault(k, False)             # a kernel the manifest forgot: measured, not accumulating
    decided = row.get("decisions") or {}

    def verdicts(kernel: str | None) -> dict:
        out: dict = {}
        a, checks_a = _times(nvcc_runs, kernel)
        if "nvcc" in modes:
            out["nvcc"] = {**_stats(a), "check": _check(checks_a, modes["nvcc"])}
        for mode in ("plus", "capture"):
            rec = modes.get(mode)
            if rec is None:
                continue
            b, checks_b = _times(rec.get("runs") or [], kernel)
            v = {**_stats(b), "check": _check(checks_b, rec)}
            if rec.get("runs") and "nvcc" in modes:
                v.update({x: y for x, y in slower_than_nvcc(a, b).items() if x != "median_ms"})
            else:
                v.update(slower=None, speedup=None, spread_ms=None, reason=v["check"])
            out[mode] = v
        return out

    per_kernel = {}
    for k, is_acc in acc.items():
        v = verdicts(k)
        entry = {suite.flag: is_acc}
        if suite.kinds_shown:
            entry.update(kind=kind.get(k, "other"), goal_speedup=goal_of(row["program"], k, suite))
        entry |= {"modes": v,
                 "speedup": {m: v[m].get("speedup") for m in ("plus", "capture") if m in v},
                 "slower": {m: v[m].get("slower") for m in ("plus", "capture") if m in v}}
        found = {m: [d for d in ds if _same_kernel(d.get("kernel"), k)] for m, ds in decided.items()}
        if any(found.values()):
            entry["decisions"] = found
        per_kernel[k] = entry
    row["per_kernel"] = per_kernel
    v = verdicts(None)
    row["program_verdict"] = {"modes": v,
                              "speedup": {m: v[m].get("speedup") for m in ("plus", "capture") if m in v},
                              "slower": {m: v[m].get("slower") for m in ("plus", "capture") if m in v}}
    return row


def _same_kernel(recorded: str | None, name: str) -> bool:
    """A record's kernel name (mangled or not) is this source kernel's."""
    if not recorded:
        return False
    return recorded == name or recorded.startswith(f"_Z{len(name)}{name}") or \
        re.search(rf"(?<![\w]){re.escape(name)}\(", recorded) is not None


# ---------------------------------------------------------------- results

def finish(result: dict, suite: Suite = ALIAS) -> dict:
    """The top-level summary from the programs' rows, in place."""
    rows = result["programs"]
    modes = [m for m in ("plus", "capture") if m in result.get("modes", MODES)]
    flat, slower, unjudged, failures = [], [], [], []
    for r in rows:
        if r.get("error"):
            failures.append(f"{r['program']}:error")
        for m, rec in (r.get("modes") or {}).items():
            if rec.get("check") not in ("PASS", "SKIPPED", "BUILT"):
                failures.append(f"{r['program']}:{m}:{rec.get('check')}")
        pv = r.get("program_verdict") or {}
        for m in modes:
            s = (pv.get("slower") or {}).get(m)
            if s:
                slower.append(f"{r['program']}:{m}")
            elif s is None and m in (pv.get("modes") or {}) and not result.get("dry_run"):
                unjudged.append(f"{r['program']}:{m}")
        for k, e in (r.get("per_kernel") or {}).items():
            extra = {x: e.get(x) for x in ("kind", "goal_speedup")} if suite.kinds_shown else {}
            flat.append({"program": r["program"], "kernel": k, suite.flag: e[suite.flag], **extra,
                         "nvcc_median_ms": ((e["modes"].get("nvcc") or {}).get("median_ms")),
                         "median_ms": {m: (e["modes"].get(m) or {}).get("median_ms") for m in modes},
                         "speedup": e["speedup"], "slower": e["slower"]})
            for m in modes:
                s = e["slower"].get(m)
                if s:
                    slower.append(f"{r['program']}:{k}:{m}")
                elif s is None and m in e["modes"] and not result.get("dry_run"):
                    unjudged.append(f"{r['program']}:{k}:{m}")
                c = (e["modes"].get(m) or {}).get("check")
                if c and c not in ("PASS", "SKIPPED", "BUILT") and f"{r['program']}:{m}:{c}" not in failures:
                    failures.append(f"{r['program']}:{k}:{m}:{c}")
    result["kernels"] = flat
    mins, missing = {}, {}
    for m in modes:
        xs = [f["speedup"].get(m) for f in flat if f[suite.flag]]
        have = [x for x in xs if x]
        mins[m] = min(have) if have else None
        missing[m] = [f"{f['program']}:{f['kernel']}" for f in flat if f[suite.flag] and not f["speedup"].get(m)]
    result[f"min_{suite.flag}_speedup"] = mins
    result[f"{suite.flag}_unmeasured"] = missing
    goal_modes = [m for m in modes if m in suite.goal_modes]
    below = [f"{f['program']}:{f['kernel']}:{m}" for m in goal_modes for f in flat if f[suite.flag]
             and f["speedup"].get(m) and f["speedup"][m] < goal_of(f["program"], f["kernel"], suite)]
    kernels_met = all(not missing[m] for m in goal_modes) and not below
    if suite.kinds_shown:
        result["min_speedup_by_kind"] = {
            kind: {m: min((f["speedup"][m] for f in flat if f.get("kind") == kind and f["speedup"].get(m)),
                          default=None) for m in modes}
            for kind in [*suite.goals, "other"]}
        result["below_goal"] = below
    geo_met = True
    if suite.geomean_goal is not None:
        result["program_geomean_speedup"] = {
            m: programs.geomean([x for r in rows if (x := ((r.get("program_verdict") or {}).get("speedup") or {})
                                                     .get(m))])
            for m in modes}
        g = result["program_geomean_speedup"].get(suite.geomean_mode)
        geo_met = g is not None and g >= suite.geomean_goal and not any(
            not ((r.get("program_verdict") or {}).get("speedup") or {}).get(suite.geomean_mode) for r in rows)
    result["slower_entries"] = slower
    result["slower"] = len(slower)
    result["unjudged_entries"] = unjudged
    result["check_failures"] = failures
    result["all_checks_pass"] = not failures and bool(rows)
    result["complete"] = not result.get("not_run")
    result["goal"] = suite.goal_text or \
        f">= {GOAL_SPEEDUP:g}x on every accumulating kernel in every mode, none slower"
    result["goal_met"] = (bool(goal_modes) and not result.get("dry_run") and result["complete"]
                          and result["slower"] == 0 and not unjudged and result["all_checks_pass"]
                          and all(mins[m] is not None for m in goal_modes) and kernels_met and geo_met)
    return result


def merge(result: dict, old: dict) -> dict:
    done = {r["program"] for r in result["programs"]}
    result["programs"] = sorted([r for r in old.get("programs", []) if r["program"] not in done]
                                + result["programs"], key=lambda r: r["program"])
    have = {r["program"] for r in result["programs"]}
    result["not_run"] = [p for p in dict.fromkeys(old.get("not_run", []) + result["not_run"]) if p not in have]
    result["parts"] = old.get("parts", []) + result["parts"]
    return result


def table(result: dict, suite: Suite = ALIAS) -> str:
    modes = [m for m in ("plus", "capture") if m in result.get("modes", MODES)]

    def f(x, spec=".3f"):
        return format(x, spec) if isinstance(x, (int, float)) else "-"

    head = ["program", "kernel", "kind" if suite.kinds_shown else "acc", "nvcc ms"] + [h for m in modes for h in (f"{m} ms", f"{m} x", "")]
    lines = []
    for r in result["programs"]:
        items = list((r.get("per_kernel") or {}).items()) + [("(program)", {**(r.get("program_verdict") or {}),
                                                                            suite.flag: None})]
        for k, e in items:
            md = e.get("modes") or {}
            shown = (e.get("kind") or "") if suite.kinds_shown else {True: "yes", False: "no", None: ""}[e.get(suite.flag)]
            ln = [r["program"], k, shown,
                  f((md.get("nvcc") or {}).get("median_ms"), ".4f")]
            for m in modes:
                v = md.get(m) or {}
                mark = "SLOWER" if v.get("slower") else ("" if v.get("slower") is False else
                                                         (v.get("check") or ""))
                ln += [f(v.get("median_ms"), ".4f"), f(v.get("speedup")), mark]
            lines.append(ln)
    widths = [max(len(h), *(len(ln[i]) for ln in lines)) if lines else len(h) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:{w}}}" for w in widths)
    out = [f"bench/{suite.name} on {result.get('gpu') or 'no GPU'} @ {result.get('commit')}",
           fmt.format(*head), fmt.format(*("-" * w for w in widths)), *(fmt.format(*ln) for ln in lines)]
    mins = result.get(f"min_{suite.flag}_speedup") or {}
    if suite.kinds_shown:
        for kind, per in (result.get("min_speedup_by_kind") or {}).items():
            out.append(f"min {kind} speedup: " + ", ".join(f"{m} {f(per.get(m))}" for m in modes))
    if "program_geomean_speedup" in result:
        out.append("program geomean speedup: " + ", ".join(
            f"{m} {f(result['program_geomean_speedup'].get(m))}" for m in modes))
    out.append(f"min {suite.flag} speedup: " + ", ".join(f"{m} {f(mins.get(m))}" for m in modes)
               + f"; slower entries: {result.get('slower')}; checks "
               + ("all PASS" if result.get("all_checks_pass") else "FAILURES")
               + f"; goal ({result.get('goal')}): {'met' if result.get('goal_met') else 'NOT met'}")
    if result.get("not_run"):
        out.append(f"not run (deadline): {', '.join(result['not_run'])}")
    return "\n".join(out)


def main(argv: list[str] | None = None, suite: Suite = ALIAS) -> int:
    tag = f"[{suite.name}]"
    ap = argparse.ArgumentParser(prog=f"python -m bench.{suite.name}.run", description=suite.description)
    ap.add_argument("--program", action="append", help="only this program (repeatable); default all")
    ap.add_argument("--modes", default="nvcc,plus,capture", help="comma-separated subset of nvcc,plus,capture "
                                                                 "(nvcc needed for speedups)")
    ap.add_argument("--reps", type=int, default=5, help="runs of each program per mode (default 5)")
    ap.add_argument("--budget", type=float, default=5.0, help="NVCC_PLUS_BUDGET, search seconds per kernel (default 5)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="NVCC_PLUS_TIMEOUT, seconds per nvcc-plus build of a program (one PTX module; searching "
                         "stops at 80%% of it); default 60, 0 = not set")
    ap.add_argument("--deadline", type=float, default=540.0,
                    help="seconds after the start past which no program is started whose expected time no longer "
                         "fits (default 540: a 10-minute device call); 0 = none")
    ap.add_argument("--out", type=Path, help=f"result file (default bench/results/<date>-{suite.name}-<gpu>.json); "
                                             "an existing one is merged into")
    ap.add_argument("--fresh", action="store_true", help="do not merge into an existing --out")
    ap.add_argument("--records", type=Path, help="folder for the nvcc-plus records (default <scratch>/records)")
    ap.add_argument("--scratch", type=Path, help="build folder (default a new temporary folder, kept)")
    ap.add_argument("--nvcc", help="the real nvcc (default NVCC_PLUS_REAL_NVCC, else nvcc on PATH)")
    ap.add_argument("--nvcc-plus", dest="nvcc_plus", help="the nvcc-plus command (default: the console script)")
    ap.add_argument("--superopt", help="the superopt command, for `superopt capture` (default: the console script)")
    ap.add_argument("--build-timeout", type=float, default=300.0, help="seconds per build (default 300)")
    ap.add_argument("--run-timeout", type=float, default=60.0, help="seconds per program run (default 60)")
    ap.add_argument("--capture-timeout", type=float, default=120.0, help="seconds for superopt capture (default 120)")
    ap.add_argument("--data", action=argparse.BooleanOptionalAction, default=True,
                    help="capture with --data (the program's own buffers); default on")
    ap.add_argument("--data-cap", default="2G", help="superopt capture --data-cap (default 2G, as bench/programs)")
    ap.add_argument("--dry-run", action="store_true",
                    help="build only (nvcc and plus modes; no runs, no capture); writes no result file "
                         "unless --out is given")
    ap.add_argument("--list", action="store_true", help="list the programs and their kernels, and exit")
    args = ap.parse_args(argv)
    started = time.monotonic()

    known = program_names(suite)
    if args.list:
        for p in known:
            if suite.kinds_shown:
                print(f"{p:11s} " + " ".join(f"{k}({kd})" for k, kd in kinds(p, suite).items()))
            else:
                print(f"{p:11s} " + " ".join(f"{k}{'*' if a else ''}" for k, a in kernels(p, suite).items()))
        print(f"{len(known)} programs; {suite.list_note}")
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
    if args.timeout == 0:
        args.timeout = None
    args.build_system = "make"

    est = {p: expected_seconds(p, args.reps, args.budget, args.modes, args.timeout, args.dry_run, suite=suite)
           for p in names}
    print(f"{tag} expected time: {sum(est.values()):.0f} s (" + ", ".join(f"{p} {s:.0f} s" for p, s in est.items())
          + f"); reps {args.reps}, budget {args.budget:g} s per kernel, NVCC_PLUS_TIMEOUT {args.timeout}, "
          f"deadline {args.deadline or 'none'}", flush=True)

    work = (args.scratch or Path(tempfile.mkdtemp(prefix=f"nvcc-plus-{suite.name}-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    tools = {"nvcc": programs.real_nvcc(args.nvcc),
             "nvcc_plus": args.nvcc_plus or programs._script(work / "bin", "nvcc-plus", "nvcc_plus")}
    sup = args.superopt or programs._script(work / "bin", "superopt", "superopt")
    tools["superopt"] = [sup]
    print(f"{tag} scratch {work}; nvcc {tools['nvcc']}; nvcc-plus {tools['nvcc_plus']}; superopt {sup}", flush=True)

    gpu = programs.gpu_name()
    now = dt.datetime.now(dt.timezone.utc)
    out = args.out
    if out is None and not args.dry_run:
        out = ROOT / "bench" / "results" / f"{now.date().isoformat()}-{suite.name}-{programs.gpu_tag(gpu)}.json"
    old = json.loads(out.read_text()) if out is not None and out.is_file() and not args.fresh else None
    result = {
        "benchmark": suite.benchmark,
        "date": now.isoformat(timespec="seconds"),
        "gpu": gpu,
        "commit": programs.commit(),
        "method": "each program's own cudaEvent timer around each kernel launch (outputs reset untimed before "
                  "every repetition): per kernel the program's median over its timed repetitions after a "
                  "warm-up; the program's kernel_ms is the sum of its kernels' medians; per mode the median "
                  "over --reps runs of the program, the modes' runs interleaved round by round; speedup = nvcc "
                  "median / mode median; slower = median - nvcc median > (range nvcc + range mode) / 2, per "
                  "kernel x mode and per program x mode; a run counts only when its self-check passed "
                  "(the kernel's and the program's)",
        "settings": {"reps": args.reps, "budget_s": args.budget, "nvcc_plus_timeout_s": args.timeout,
                     "deadline_s": args.deadline or None, "modes": args.modes, "data_capture": args.data,
                     "data_cap": args.data_cap, "build_timeout_s": args.build_timeout,
                     "run_timeout_s": args.run_timeout, "capture_timeout_s": args.capture_timeout,
                     "nvcc": tools["nvcc"]},
        "modes": args.modes,
        "dry_run": args.dry_run,
        "expected_s": round(sum(est.values()), 1),
        "parts": [{"commit": programs.commit(), "date": now.isoformat(timespec="seconds"), "programs": list(names)}],
        "programs": [],
        "not_run": [],
    }
    for name in names:
        left = args.deadline - (time.monotonic() - started) if args.deadline else None
        if left is not None and est[name] > left:
            print(f"{tag} {name}: not started, expected {est[name]:.0f} s, {left:.0f} s left before the deadline",
                  flush=True)
            result["not_run"].append(name)
            continue
        try:
            row = programs.bench_program(name, args, work, tools, root=suite.here)
        except Exception as exc:  # noqa: BLE001 - one program's failure is recorded, not fatal
            row = {"program": name, "kernels": programs.kernels_of(name, suite.here), "modes": {}, "speedup": {},
                   "error": f"{type(exc).__name__}: {exc}"}
            print(f"{tag} {name}: benchmark error {row['error']}", flush=True)
        row["decisions"] = decisions(row)
        judge(row, suite)
        result["programs"].append(row)
        result["seconds"] = round(time.monotonic() - started, 1)
        if out is not None:
            snap = json.loads(json.dumps(result))
            _write(out, finish(merge(snap, json.loads(json.dumps(old))) if old else snap, suite))
    final = finish(merge(result, old) if old else result, suite)
    final["seconds"] = round(time.monotonic() - started, 1)
    if out is not None:
        _write(out, final)
    print(table(final, suite))
    if final.get("not_run"):
        print(f"{tag} to finish: python -m bench.{suite.name}.run --out {out or '<file>'} "
              + " ".join(f"--program {p}" for p in final["not_run"]))
    if out is not None:
        print(f"{tag} wrote {out} ({final['seconds']} s)")
    if args.dry_run:
        built = all((r.get("modes") or {}).get(m, {}).get("build", {}).get("ok")
                    for r in final["programs"] for m in args.modes if m != "capture")
        return 0 if built and not any(r.get("error") for r in final["programs"]) else 1
    return 0 if final["all_checks_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
