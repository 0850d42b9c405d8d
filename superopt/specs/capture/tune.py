"""``superopt tune``: build, capture, rebuild at the captured launches, check -- in one command.

The loop a user of ``-fprofile-generate`` / ``-fprofile-use`` knows, with the program's own
exit code as the check at both ends:

1. **build** with ``NVCC_PLUS_MODE=off`` (nvcc-plus is plain nvcc, nothing searched);
2. **capture**: run the program under ``superopt capture`` (with ``--data``: its own buffers
   become an input set and a golden output of the checks); it must succeed;
3. **rebuild** with ``NVCC_PLUS_CAPTURE`` (and ``NVCC_PLUS_LOCK=write``, so later builds,
   GPU-less ones too, apply the decisions without searching);
4. **check and compare**: run the tuned program under a second capture (no data): its exit
   code must be the first run's, and the kernels' GPU time of both runs is reported;
5. **never slower in the program**: each kernel's GPU time (CUPTI, in the captures) before and
   after is compared; the run-to-run spread is measured by capturing the plain build twice
   more without data (``--spread-runs``; the data capture's snapshots perturb its times). A
   kernel slower after than before by more than its spread (at least ``MIN_SPREAD``) whose
   code nvcc-plus changed has its decision replaced in the lockfile and the cache
   (:class:`superopt.store.keys.DecisionKey`, as the rebuild's records name them) by "keep
   nvcc's code", the program is rebuilt, and run under a capture once more. The last line
   reports the program's kernel time before -> after and every kernel reverted.

Before the rebuild tune waits for the queue of searches after the build (``NVCC_PLUS_SEARCH=deferred``,
docs/deferred.md), if any: searches queued earlier must not take the GPU from the rebuild's. In
deferred mode the rebuild only queues its searches: tune waits for them and builds once more,
and that build applies their decisions.

The build command must rebuild every CUDA source (``make -B NVCC=nvcc-plus``, ``cmake --build
build --clean-first``): a build that compiles nothing through nvcc-plus is reported, since the
rebuild would then have tuned nothing.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from .runner import DEFAULT_CAP, DEFAULT_OUT

__all__ = ["tune_command", "TuneError", "kernel_times", "spread_of", "slower_kernels", "revert_decisions",
           "MIN_SPREAD"]

MIN_SPREAD = 0.01        # a kernel's run-to-run spread is taken as at least 1%

HELP = """Build, capture PROGRAM's real launches, rebuild at those launches, and check.

\b
  superopt tune --build "make -B NVCC=nvcc-plus" -- ./app ARGS
\b
  1. build   : BUILD with NVCC_PLUS_MODE=off (plain nvcc through nvcc-plus)
  2. capture : superopt capture --data -- PROGRAM   (must exit as it normally does)
  3. rebuild : BUILD with NVCC_PLUS_CAPTURE=CAPTURE and NVCC_PLUS_LOCK=write
  4. check   : PROGRAM again (under a capture without data): same exit code; the kernels'
               GPU time before and after is printed.
  5. revert  : a kernel slower than before beyond the run-to-run spread (the plain build
               captured --spread-runs more times) keeps nvcc's code: its decision is replaced
               in the lockfile and the cache, the program rebuilt and checked again.
\b
BUILD runs through the shell in the current directory and must rebuild every CUDA source
(make -B, cmake --build build --clean-first). Searches queued by NVCC_PLUS_SEARCH=deferred
builds are waited for before the rebuild; in deferred mode tune rebuilds once more after the
rebuild's own queued searches are done. Exit codes: 0 tuned and the program behaves
as before; 1 the tuned program's exit code differs (the lockfile is left for you to
inspect; delete it to go back); 2 a step failed (build, capture, program), with which.
"""


class TuneError(Exception):
    """A step of the loop failed; the message says which and what to do."""


def _run_build(build: str, env: dict, label: str, echo) -> float:
    echo(f"superopt tune: {label}: {build}")
    t0 = time.monotonic()
    r = subprocess.run(build, shell=True, env=env)
    if r.returncode != 0:
        raise TuneError(f"{label} failed: `{build}` exited {r.returncode}")
    return time.monotonic() - t0


def _wait_for_queue(echo) -> None:
    """Wait for the queue of searches after the build (superopt cache wait), saying so."""
    from superopt.config.cli import project_config
    from superopt.config.resolved import Settings
    from superopt.store.cache import default_cache_dir
    from superopt.store.queue import WAIT_DONE, Queue, limits_from, wait_for_queue
    queue = Queue(default_cache_dir())
    if not queue.size()[0] and not any(r["running"] and r["state"] == "busy" for r in queue.status()["runners"]):
        return
    data, _, _, _ = project_config()
    echo("superopt tune: waiting for the queued searches (superopt cache wait)")
    code, message = wait_for_queue(queue, limits_from(Settings(data)), echo=lambda m: echo(f"superopt tune: {m}"))
    if code != WAIT_DONE:
        echo(f"superopt tune: {message}; going on without them")


def _deferred() -> bool:
    from superopt.config.cli import project_config
    from superopt.config.resolved import Settings
    from superopt.store.queue import search_mode
    data, _, _, _ = project_config()
    return search_mode(Settings(data)) == "deferred"


def _records(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*.json")) if folder.is_dir() else 0


def kernel_times(capture: dict) -> dict[str, float]:
    """Each kernel's GPU time (ms, CUPTI) in one capture."""
    return {name: float(k.get("total_ms") or 0.0) for name, k in (capture.get("kernels") or {}).items()}


def spread_of(runs: list[dict]) -> tuple[dict[str, float], dict[str, float]]:
    """(median ms, run-to-run spread) per kernel over captures of the same build: the spread is
    (max - min) / median, at least ``MIN_SPREAD``; a kernel missing from a run gets the spread 1
    (its time is not comparable)."""
    times = [kernel_times(r) for r in runs]
    names = list(dict.fromkeys(n for t in times for n in t))
    before, spread = {}, {}
    for n in names:
        got = sorted(t[n] for t in times if n in t)
        mid = got[len(got) // 2] if len(got) % 2 else (got[len(got) // 2 - 1] + got[len(got) // 2]) / 2
        before[n] = mid
        spread[n] = 1.0 if len(got) < len(times) or mid <= 0 else max(MIN_SPREAD, (got[-1] - got[0]) / mid)
    return before, spread


def slower_kernels(before: dict, spread: dict, after: dict) -> list[dict]:
    """The kernels slower after than before beyond their spread, slowest first."""
    out = []
    for n, b in before.items():
        a = after.get(n)
        if a is None or b <= 0:
            continue
        if a > b * (1 + spread[n]):
            out.append({"kernel": n, "before_ms": b, "after_ms": a, "spread": spread[n], "loss": a / b - 1})
    return sorted(out, key=lambda r: -r["loss"])


def _decisions(records_dir: Path) -> dict[str, list[dict]]:
    """Kernel (PTX name) -> its records that changed its code and say where the decision is
    stored (``decision_keys``), from a rebuild's records."""
    import json
    out: dict[str, list[dict]] = {}
    for path in sorted(records_dir.rglob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for k in (doc.get("kernels") or []) if isinstance(doc, dict) else []:
            changed = (k.get("status") == "optimized" and k.get("winner")) or \
                      (k.get("status") in ("locked", "cached") and k.get("plan"))
            if changed and k.get("decision_keys"):
                out.setdefault(k["kernel"], []).append(k)
    return out


def revert_decisions(records_dir: Path, slower: list[dict]) -> tuple[list[dict], list[str]]:
    """Replace the decision of every kernel in ``slower`` that nvcc-plus changed by "keep
    nvcc's code" in the lockfile and the cache its records name; (reverted, notes on the
    others)."""
    from superopt.store.cache import DecisionCache
    from superopt.store.lockfile import Lockfile
    found = _decisions(records_dir)
    reverted, notes = [], []
    for s in slower:
        recs = found.get(s["kernel"])
        if not recs:
            notes.append(f"{s['kernel']}: slower ({s['before_ms']:.3f} -> {s['after_ms']:.3f} ms) but nvcc-plus kept "
                         f"nvcc's code for it: nothing to revert (noise beyond the measured spread, or a "
                         f"neighbour's effect)")
            continue
        where = []
        for k in recs:
            keys = k["decision_keys"]
            entry = {"kernel": s["kernel"], "plan": [], "ptx_hash": None, "status": "kept-baseline",
                     "decision": "measured", "spec_origin": "captured",
                     "reverted": {"by": "superopt tune", "before_ms": round(s["before_ms"], 6),
                                  "after_ms": round(s["after_ms"], 6), "spread": round(s["spread"], 4),
                                  "plan": k.get("plan") or next((c.get("plan") for c in k.get("candidates", [])
                                                                 if c.get("id") == k.get("winner")), [])}}
            if keys.get("lockfile") and keys.get("lock"):
                Lockfile(Path(keys["lockfile"])).record(keys["lock"], entry)
                where.append(str(keys["lockfile"]))
            if keys.get("cache_file") and keys.get("cache"):
                DecisionCache(Path(keys["cache_file"]).parents[2]).put(keys["cache"], entry)
                where.append(str(keys["cache_file"]))
        reverted.append({**s, "stored": list(dict.fromkeys(where))})
    return reverted, notes


def tune(build: str, program: list[str], *, capture_path: str, data: bool, cap_bytes: int,
         lock: bool, compare: bool, echo=print, spread_runs: int = 2) -> dict:
    """The loop; returns what happened (raises TuneError when a step fails)."""
    from .format import load_capture
    from .runner import run_capture
    base = dict(os.environ)
    out: dict = {"capture": capture_path, "reverted": [], "revert_notes": []}
    # 1. plain build
    env = dict(base, NVCC_PLUS_MODE="off")
    out["build_seconds"] = round(_run_build(build, env, "build (plain nvcc)", echo), 2)
    # 2. capture
    echo(f"superopt tune: capture: {shlex.join(program)}")
    code = run_capture(program, capture_path, data=data, cap_bytes=cap_bytes)
    cap = load_capture(capture_path)
    out["program_exit"] = code
    out["before_ms"] = cap.get("total_ms")
    if code != 0:
        raise TuneError(f"the program exited {code} under the capture: nothing tuned (tune runs programs "
                        "whose normal run exits 0; fix the run or capture it by hand with superopt capture)")
    if not cap.get("kernels"):
        raise TuneError("the capture recorded no kernel launch: nothing to tune (does the program use the GPU?)")
    # the plain build's kernel times and their run-to-run spread (captures without data)
    plain = [] if data else [cap]
    if compare:
        while len(plain) < max(1, spread_runs):
            path = str(Path(capture_path).with_suffix(f".before-{len(plain) + 1}.json"))
            echo(f"superopt tune: capture (plain build, for the spread): {shlex.join(program)}")
            if run_capture(program, path, data=False, cap_bytes=cap_bytes) != code:
                raise TuneError(f"the plain build exited differently on a second run: its behaviour is not "
                                f"repeatable ({path})")
            plain.append(load_capture(path))
        before, spread = spread_of(plain)
        out["before_ms"] = sum(before.values())
    # 3. rebuild at the captured launches
    reports = Path(tempfile.mkdtemp(prefix="superopt-tune-records."))
    env = dict(base, NVCC_PLUS_CAPTURE=str(Path(capture_path).resolve()), NVCC_PLUS_REPORT_DIR=str(reports))
    env.pop("NVCC_PLUS_MODE", None)
    if lock:
        env["NVCC_PLUS_LOCK"] = "write"
    deferred = _deferred()
    _wait_for_queue(echo)          # searches queued by earlier builds do not compete with the rebuild's
    out["rebuild_seconds"] = round(_run_build(build, env, "rebuild (searching at the captured launches)", echo), 2)
    if deferred:
        # NVCC_PLUS_SEARCH=deferred: the rebuild queued its searches; once they are done, a build
        # applies their decisions (cached, and locked with --lock).
        _wait_for_queue(echo)
        out["search_records"] = str(reports)
        reports = Path(tempfile.mkdtemp(prefix="superopt-tune-records."))
        env["NVCC_PLUS_REPORT_DIR"] = str(reports)
        out["rebuild_seconds"] += round(_run_build(build, env, "rebuild (applying the searches queued by the "
                                                                "rebuild)", echo), 2)
    out["modules_optimized"] = _records(reports)
    out["records"] = str(reports)
    if out["modules_optimized"] == 0:
        raise TuneError(f"the rebuild compiled nothing through nvcc-plus (no record in {reports}): make BUILD "
                        "rebuild every CUDA source with nvcc-plus (make -B NVCC=nvcc-plus, cmake --build build "
                        "--clean-first with CMAKE_CUDA_COMPILER=nvcc-plus)")
    # 4. the tuned program: same exit code, and its GPU time
    echo(f"superopt tune: check: {shlex.join(program)}")
    if not compare:
        out["tuned_exit"] = subprocess.run(program).returncode
        return out
    after_path = str(Path(capture_path).with_suffix(".tuned.json"))
    code2 = run_capture(program, after_path, data=False, cap_bytes=cap_bytes)
    after = kernel_times(load_capture(after_path))
    out["after_ms"] = sum(after.values())
    out["tuned_exit"] = code2
    if code2 != code:
        return out
    # 5. never slower in the program: a kernel slower beyond its spread keeps nvcc's code
    slower = slower_kernels(before, spread, after)
    out["slower"] = slower
    if not slower:
        return out
    out["reverted"], out["revert_notes"] = revert_decisions(reports, slower)
    for n in out["revert_notes"]:
        echo(f"superopt tune: {n}")
    if not out["reverted"]:
        return out
    for r in out["reverted"]:
        echo(f"superopt tune: {r['kernel']} got slower in the program ({r['before_ms']:.3f} -> {r['after_ms']:.3f} "
             f"ms, +{100 * r['loss']:.1f}% > spread {100 * r['spread']:.1f}%): its decision is now \"keep nvcc's "
             f"code\" in {', '.join(r['stored']) or 'nothing stored'}")
    again = Path(tempfile.mkdtemp(prefix="superopt-tune-records."))
    env["NVCC_PLUS_REPORT_DIR"] = str(again)
    out["revert_rebuild_seconds"] = round(_run_build(build, env, "rebuild (the reverted kernels keep nvcc's code)",
                                                     echo), 2)
    out["records"] = str(again)
    final_path = str(Path(capture_path).with_suffix(".reverted.json"))
    echo(f"superopt tune: check: {shlex.join(program)}")
    out["tuned_exit"] = run_capture(program, final_path, data=False, cap_bytes=cap_bytes)
    out["after_ms"] = sum(kernel_times(load_capture(final_path)).values())
    return out


@click.command("tune", help=HELP, context_settings={"ignore_unknown_options": True,
                                                   "allow_interspersed_args": False})
@click.option("--build", "build", required=True, help='the build command, e.g. "make -B NVCC=nvcc-plus"')
@click.option("-o", "--capture", "capture_path", default=DEFAULT_OUT, show_default=True,
              type=click.Path(dir_okay=False), help="the capture file to write and build with")
@click.option("--data/--no-data", default=True, show_default=True,
              help="capture the program's buffers (an input set and a golden output for the checks)")
@click.option("--data-cap", "data_cap", default=str(DEFAULT_CAP), show_default=True,
              help="most bytes saved per launch with --data (256M, 1G, ...)")
@click.option("--lock/--no-lock", default=True, show_default=True,
              help="record the decisions in the lockfile (NVCC_PLUS_LOCK=write)")
@click.option("--compare/--no-compare", default=True, show_default=True,
              help="run the tuned program under a capture to report its GPU time, and revert kernels it "
                   "shows slower")
@click.option("--spread-runs", default=2, show_default=True, type=click.IntRange(1, 20),
              help="captures of the plain build without data, for the run-to-run spread of each kernel")
@click.argument("program", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- PROGRAM [ARGS]...")
def tune_command(build, capture_path, data, data_cap, lock, compare, spread_runs, program):
    from .build import CaptureBuildError
    from .cli import _fmt_bytes
    from .format import CaptureError
    argv = list(program)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise click.UsageError("no program to run: superopt tune --build CMD -- ./app ARGS")
    echo = lambda m: click.echo(m, err=True)  # noqa: E731
    try:
        r = tune(build, argv, capture_path=capture_path, data=data, cap_bytes=_fmt_bytes(data_cap),
                 lock=lock, compare=compare, echo=echo, spread_runs=spread_runs)
    except (TuneError, CaptureBuildError, CaptureError) as e:
        echo(f"superopt tune: {e}")
        sys.exit(2)
    timing = ""
    if r.get("before_ms") and r.get("after_ms"):
        timing = (f"; program kernel time {r['before_ms']:.3f} ms -> {r['after_ms']:.3f} ms "
                  f"({r['before_ms'] / r['after_ms']:.3f}x)")
    if compare and r.get("after_ms") is not None:
        timing += ("; reverted (slower in the program): " + ", ".join(
            f"{x['kernel']} ({x['before_ms']:.3f} -> {x['after_ms']:.3f} ms)" for x in r["reverted"])
            if r["reverted"] else "; no kernel reverted")
    if r["tuned_exit"] != r["program_exit"]:
        echo(f"superopt tune: the tuned program exited {r['tuned_exit']}, the captured run {r['program_exit']}: "
             f"its behaviour changed. Records: {r['records']}" + (" ; the lockfile holds the decisions: delete "
                                                                  "them to go back" if lock else ""))
        sys.exit(1)
    echo(f"superopt tune: done: {r['modules_optimized']} module(s) rebuilt at the captured launches, the program "
         f"exits {r['tuned_exit']} as before{timing}. Records: {r['records']}"
         + (" ; decisions in the lockfile" if lock else ""))
