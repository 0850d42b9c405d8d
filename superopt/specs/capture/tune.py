"""``superopt tune``: build, capture, rebuild at the captured launches, check -- in one command.

The loop a user of ``-fprofile-generate`` / ``-fprofile-use`` knows, with the program's own
exit code as the check at both ends:

1. **build** with ``NVCC_PLUS_MODE=off`` (nvcc-plus is plain nvcc, nothing searched);
2. **capture**: run the program under ``superopt capture`` (with ``--data``: its own buffers
   become an input set and a golden output of the checks); it must succeed;
3. **rebuild** with ``NVCC_PLUS_CAPTURE`` (and ``NVCC_PLUS_LOCK=write``, so later builds,
   GPU-less ones too, apply the decisions without searching);
4. **check and compare**: run the tuned program under a second capture (no data): its exit
   code must be the first run's, and the kernels' GPU time of both runs is reported.

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

__all__ = ["tune_command", "TuneError"]

HELP = """Build, capture PROGRAM's real launches, rebuild at those launches, and check.

\b
  superopt tune --build "make -B NVCC=nvcc-plus" -- ./app ARGS
\b
  1. build   : BUILD with NVCC_PLUS_MODE=off (plain nvcc through nvcc-plus)
  2. capture : superopt capture --data -- PROGRAM   (must exit as it normally does)
  3. rebuild : BUILD with NVCC_PLUS_CAPTURE=CAPTURE and NVCC_PLUS_LOCK=write
  4. check   : PROGRAM again (under a capture without data): same exit code; the kernels'
               GPU time before and after is printed.
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


def tune(build: str, program: list[str], *, capture_path: str, data: bool, cap_bytes: int,
         lock: bool, compare: bool, echo=print) -> dict:
    """The loop; returns what happened (raises TuneError when a step fails)."""
    from .format import load_capture
    from .runner import run_capture
    base = dict(os.environ)
    out: dict = {"capture": capture_path}
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
    if compare:
        after_path = str(Path(capture_path).with_suffix(".tuned.json"))
        echo(f"superopt tune: check: {shlex.join(program)}")
        code2 = run_capture(program, after_path, data=False, cap_bytes=cap_bytes)
        out["after_ms"] = load_capture(after_path).get("total_ms")
    else:
        echo(f"superopt tune: check: {shlex.join(program)}")
        code2 = subprocess.run(program).returncode
    out["tuned_exit"] = code2
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
              help="run the tuned program under a capture to report its GPU time")
@click.argument("program", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- PROGRAM [ARGS]...")
def tune_command(build, capture_path, data, data_cap, lock, compare, program):
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
                 lock=lock, compare=compare, echo=echo)
    except (TuneError, CaptureBuildError, CaptureError) as e:
        echo(f"superopt tune: {e}")
        sys.exit(2)
    timing = ""
    if r.get("before_ms") and r.get("after_ms"):
        timing = (f"; kernels' GPU time {r['before_ms']:.3f} ms -> {r['after_ms']:.3f} ms "
                  f"({r['before_ms'] / r['after_ms']:.3f}x)")
    if r["tuned_exit"] != r["program_exit"]:
        echo(f"superopt tune: the tuned program exited {r['tuned_exit']}, the captured run {r['program_exit']}: "
             f"its behaviour changed. Records: {r['records']}" + (" ; the lockfile holds the decisions: delete "
                                                                  "them to go back" if lock else ""))
        sys.exit(1)
    echo(f"superopt tune: done: {r['modules_optimized']} module(s) rebuilt at the captured launches, the program "
         f"exits {r['tuned_exit']} as before{timing}. Records: {r['records']}"
         + (" ; decisions in the lockfile" if lock else ""))
