"""``superopt capture``: the click command (registered by superopt/cli.py)."""
from __future__ import annotations

import sys

import click

from .runner import DEFAULT_CAP, DEFAULT_OUT

__all__ = ["capture_command"]

HELP = """Run PROGRAM and record how it really launches its kernels.

\b
Every kernel launch is recorded below the CUDA runtime (a CUPTI injection library loaded
by the driver through CUDA_INJECTION64_PATH, built from source at first use), so programs
linked with the static cudart (nvcc's default) work unchanged: kernel, grid, block,
dynamic shared memory, every parameter's bytes, the allocation each pointer points into
(so buffer lengths are facts) and each launch's GPU time.

\b
The workflow (like -fprofile-generate / -fprofile-use):
  1. build:    make NVCC=nvcc-plus            (or plain nvcc)
  2. capture:  superopt capture -- ./app ARGS  (writes nvcc-plus.capture.json)
  3. rebuild:  NVCC_PLUS_CAPTURE=nvcc-plus.capture.json make NVCC=nvcc-plus
               kernels are searched and checked at the captured grid, block and sizes,
               the most time-consuming first; those under 1% of GPU time are skipped.
               Add NVCC_PLUS_LOCK=write to record the decisions in the lockfile, so later
               builds (also on machines without a GPU) apply them without searching.

\b
With --data the buffers of the first launch of each distinct shape are saved before and
after the launch (OUT.data/, at most --data-cap bytes per launch): the program's own
inputs and a golden output for the checks.

Exits with PROGRAM's exit code; 2 when the capture itself fails.
"""


def _fmt_bytes(n: str) -> int:
    s = n.strip().upper().rstrip("B")
    mult = 1
    for suf, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
        if s.endswith(suf):
            s, mult = s[:-1], m
            break
    try:
        v = int(float(s) * mult)
    except ValueError:
        raise click.BadParameter(f"{n!r} is not a size (e.g. 268435456, 256M, 1G)") from None
    if v < 0:
        raise click.BadParameter(f"{n!r} is negative")
    return v


@click.command("capture", help=HELP, context_settings={"ignore_unknown_options": True,
                                                       "allow_interspersed_args": False})
@click.option("-o", "--output", "output", default=DEFAULT_OUT, show_default=True,
              type=click.Path(dir_okay=False), help="the capture file to write")
@click.option("--data", is_flag=True, help="also save each shape's buffers before and after one launch")
@click.option("--data-cap", "data_cap", default=str(DEFAULT_CAP), show_default=True,
              help="most bytes saved per launch with --data (256M, 1G, ...); larger launches are skipped")
@click.option("--raw", is_flag=True, help="keep the raw JSON lines beside the capture (OUT.raw.jsonl)")
@click.argument("program", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- PROGRAM [ARGS]...")
def capture_command(output, data, data_cap, raw, program):
    from .build import CaptureBuildError
    from .format import CaptureError, kernel_share, load_capture
    from .runner import run_capture
    cap_bytes = _fmt_bytes(data_cap)
    argv = list(program)
    if argv and argv[0] == "--":
        argv = argv[1:]
    try:
        code = run_capture(argv, output, data=data, cap_bytes=cap_bytes, keep_raw=raw)
        cap = load_capture(output)
    except (CaptureBuildError, CaptureError) as e:
        click.echo(f"superopt capture: {e}", err=True)
        sys.exit(2)
    _summary(cap, output, kernel_share(cap))
    sys.exit(code)


def _short(name: str, width: int = 60) -> str:
    try:
        from ptx_ir.params import demangle
        d = demangle(name) or name
    except Exception:
        d = name
    return d if len(d) <= width else d[:width - 1] + "…"


def _summary(cap: dict, path: str, share: dict) -> None:
    from rich.console import Console
    from rich.table import Table
    con = Console(stderr=True)
    ks = cap.get("kernels") or {}
    t = Table(title=f"{path}: {len(ks)} kernel(s), {cap.get('total_ms', 0):.3f} ms GPU time", title_justify="left")
    t.add_column("kernel")
    t.add_column("launches", justify="right")
    t.add_column("shapes", justify="right")
    t.add_column("total ms", justify="right")
    t.add_column("share %", justify="right")
    for n, k in ks.items():
        t.add_row(_short(n), str(k.get("launches", 0)), str(len(k.get("shapes") or [])),
                  f"{k.get('total_ms', 0):.3f}", f"{100 * share.get(n, 0):.1f}")
    con.print(t)
    for e in cap.get("errors") or []:
        con.print(f"[yellow]capture: {e['message']}" + (f" (×{e['count']})" if e.get("count", 1) > 1 else ""))
