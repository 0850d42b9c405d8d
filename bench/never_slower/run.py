"""Never slower in the program (issue 24): every program, mode and block size judged against nvcc.

    python -m bench.never_slower.run [--program NAME ...] [--reps 3] [--budget 2] [--out FILE]

For every program of bench/programs (``biasgrad``, timed by itself at six block sizes chosen at
run time, and the ten whole programs), this builds it with plain nvcc, with nvcc-plus without a
capture (``plus``) and with nvcc-plus rebuilt at a capture of the plain build (``capture``),
runs each build ``--reps`` times (the modes interleaved round by round, as
:func:`bench.programs.run.bench_program` does), and judges each *entry* -- program x mode, and
for a program that prints ``NVCC_PLUS_BENCH block=B ...`` lines, program x mode x block size
-- by the program's own timer:

* **slower** when the mode's median is above nvcc's by more than the spread of the runs, half
  the sum of both sides' ranges (max - min): ``median_mode - median_nvcc > (range_nvcc +
  range_mode) / 2`` (:func:`slower_than_nvcc`);
* a run counts only when its self-check passed.

Results: ``bench/results/<date>-never-slower-<gpu>.json`` (or ``--out``) with a top-level
``slower`` (the number of entries slower than nvcc beyond the spread: must be 0),
``slower_entries``, ``all_checks_pass``, every entry (the runs of both sides, medians,
speedup, spread), each program's builds and runs as bench/programs records them, and what
nvcc-plus decided per kernel (status, reason, the launch shapes it timed). The file is rewritten
after every program and merged into when it exists (``--fresh`` starts over), so the benchmark
can be split over device calls with ``--program``. ``--deadline`` (seconds) stops starting new
programs past it; those are listed in ``not_run`` (and ``complete`` is false).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.programs import run as programs

ROOT = Path(__file__).resolve().parents[2]
MODES = ("nvcc", "plus", "capture")
# a program's build and runs take about this long with --budget 2 (seconds, H200 host); used
# only to stop before the deadline rather than in the middle of a program
ESTIMATE_S = 45.0


def slower_than_nvcc(nvcc_ms: list[float], mode_ms: list[float]) -> dict:
    """The verdict on one entry from the program's own times (ms) of both builds."""
    if not nvcc_ms or not mode_ms:
        return {"slower": None, "speedup": None, "spread_ms": None, "reason": "no passing run on one side"}
    a, b = statistics.median(nvcc_ms), statistics.median(mode_ms)
    spread = ((max(nvcc_ms) - min(nvcc_ms)) + (max(mode_ms) - min(mode_ms))) / 2
    loss = b - a
    slower = loss > spread
    side = "slower" if loss > 0 else "faster"
    where = "beyond" if abs(loss) > spread else "within"
    reason = f"median {b:.4f} ms vs nvcc {a:.4f} ms: {side} by {abs(loss):.4f} ms, {where} the spread {spread:.4f} ms"
    # one run on a side measures no spread: any difference is "beyond" it, so the verdict says so
    measured = len(nvcc_ms) > 1 and len(mode_ms) > 1
    if not measured:
        reason += " (one run on a side: no spread measured)"
    return {"slower": slower, "speedup": a / b if b > 0 else None, "spread_ms": spread, "nvcc_median_ms": a,
            "median_ms": b, "spread_measured": measured, "reason": reason}


def _times(runs: list[dict], block: str | None, key: str = "blocks") -> tuple[list[float], list[str]]:
    """(passing times, every check) of one side's runs, of one block size (or, with ``key``
    ``per_kernel``, one kernel) or of the program."""
    ms, checks = [], []
    for r in runs:
        one = (r.get(key) or {}).get(block) if block is not None else r
        if one is None:
            checks.append("NO_RESULT")
            continue
        checks.append(one.get("check") or "NO_RESULT")
        if one.get("check") == "PASS" and r.get("check") == "PASS" and one.get("kernel_ms") is not None:
            ms.append(float(one["kernel_ms"]))
    return ms, checks


def entries_of(row: dict) -> list[dict]:
    """Program x mode (x block size) entries of one program's row (bench_program's)."""
    modes = row.get("modes") or {}
    nvcc_runs = (modes.get("nvcc") or {}).get("runs") or []
    blocks = sorted({str(b) for r in nvcc_runs for b in (r.get("blocks") or {})}, key=int)
    out = []
    for mode in ("plus", "capture"):
        rec = modes.get(mode)
        if rec is None:
            continue
        runs = rec.get("runs") or []
        for block in [None] + blocks:
            a, checks_a = _times(nvcc_runs, block)
            b, checks_b = _times(runs, block)
            checks = set(checks_a) | set(checks_b)
            entry = {"program": row["program"], "mode": mode, "block": int(block) if block else None,
                     "nvcc_ms": a, "mode_ms": b,
                     "check": "PASS" if checks == {"PASS"} else
                              ("FAIL" if "FAIL" in checks else (rec.get("check") or "NO_RESULT"))}
            if not runs:
                entry["check"] = rec.get("check") or "NOT_RUN"
            entry.update(slower_than_nvcc(a, b))
            out.append(entry)
    return out


def _label(e: dict) -> str:
    return f"{e['program']}:{e['mode']}" + (f":block={e['block']}" if e["block"] else "")


def decisions(row: dict) -> dict:
    """What nvcc-plus decided per kernel in each mode (from its records)."""
    out: dict = {}
    for mode in ("plus", "capture"):
        folder = (row.get("modes") or {}).get(mode, {}).get("records_dir")
        if not folder or not Path(folder).is_dir():
            continue
        kernels = []
        for path in sorted(Path(folder).rglob("*.json")):
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            for k in doc.get("kernels") or []:
                win = next((c for c in k.get("candidates", []) if c.get("launch_shapes_timed")), None)
                kernels.append({"kernel": k.get("kernel"), "status": k.get("status"), "reason": k.get("reason"),
                                "launch_shapes_timed": [
                                    {x: s.get(x) for x in ("block", "origin", "share", "speedup", "slower", "skipped")}
                                    for s in (win or {}).get("launch_shapes_timed", [])]})
        out[mode] = kernels
    return out


def finish(result: dict) -> dict:
    entries = result["entries"]
    result["slower_entries"] = [_label(e) for e in entries if e.get("slower")]
    result["slower"] = len(result["slower_entries"])
    result["unjudged_entries"] = [_label(e) for e in entries if e.get("slower") is None]
    result["check_failures"] = [f"{_label(e)}:{e['check']}" for e in entries if e["check"] != "PASS"]
    for r in result["programs"]:
        nvcc = (r.get("modes") or {}).get("nvcc") or {}
        if nvcc.get("check") not in (None, "PASS"):
            result["check_failures"].append(f"{r['program']}:nvcc:{nvcc.get('check')}")
        if r.get("error"):
            result["check_failures"].append(f"{r['program']}:error")
    result["all_checks_pass"] = not result["check_failures"] and bool(entries)
    result["complete"] = not result.get("not_run")
    return result


def merge(result: dict, old: dict) -> dict:
    done = {r["program"] for r in result["programs"]}
    result["programs"] = sorted([r for r in old.get("programs", []) if r["program"] not in done]
                                + result["programs"], key=lambda r: r["program"])
    result["entries"] = [e for e in old.get("entries", []) if e["program"] not in done] + result["entries"]
    have = {r["program"] for r in result["programs"]}
    result["not_run"] = [p for p in dict.fromkeys(old.get("not_run", []) + result["not_run"]) if p not in have]
    return result


def table(result: dict) -> str:
    lines = [f"never slower on {result.get('gpu') or 'no GPU'} @ {result.get('commit')}: "
             f"{result['slower']} slower entr{'y' if result['slower'] == 1 else 'ies'}, "
             f"checks {'all PASS' if result['all_checks_pass'] else 'FAILURES'}"]
    for e in result["entries"]:
        sp = f"{e['speedup']:.3f}x" if e.get("speedup") else "-"
        mark = "SLOWER" if e.get("slower") else ("?" if e.get("slower") is None else "ok")
        lines.append(f"  {_label(e):36s} {sp:>8s}  {mark:6s} {e['check']:8s} {e.get('reason', '')}")
    if result.get("not_run"):
        lines.append(f"  not run (deadline): {', '.join(result['not_run'])}")
    return "\n".join(lines)


def _write(out: Path, result: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.never_slower.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", action="append", help="only this program (repeatable); default biasgrad, then all")
    ap.add_argument("--reps", type=int, default=3, help="runs of each build (default 3)")
    ap.add_argument("--budget", type=float, default=2.0, help="NVCC_PLUS_BUDGET, search seconds per kernel (default 2)")
    ap.add_argument("--modes", default="nvcc,plus,capture", help="comma-separated: nvcc and plus and/or capture")
    ap.add_argument("--out", type=Path, help="result file (default bench/results/<date>-never-slower-<gpu>.json)")
    ap.add_argument("--fresh", action="store_true", help="do not merge into an existing --out")
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds after which no new program is started (default: none)")
    ap.add_argument("--scratch", type=Path, help="build folder (default a new temporary folder, kept)")
    ap.add_argument("--nvcc", help="the real nvcc (default NVCC_PLUS_REAL_NVCC, else nvcc on PATH)")
    ap.add_argument("--build-timeout", type=float, default=600.0)
    ap.add_argument("--run-timeout", type=float, default=60.0)
    ap.add_argument("--capture-timeout", type=float, default=180.0)
    args = ap.parse_args(argv)
    started = time.monotonic()
    known = programs.programs()
    names = args.program or (["biasgrad"] + [p for p in known if p != "biasgrad"])
    unknown = [p for p in names if p not in known]
    if unknown:
        ap.error(f"--program: no program {unknown}; there are {', '.join(known)}")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if "nvcc" not in modes or not set(modes) <= set(MODES) or len(modes) < 2:
        ap.error("--modes: nvcc and at least one of plus, capture")
    work = (args.scratch or Path(tempfile.mkdtemp(prefix="nvcc-plus-never-slower-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    tools = {"nvcc": programs.real_nvcc(args.nvcc),
             "nvcc_plus": programs._script(work / "bin", "nvcc-plus", "nvcc_plus"),
             "superopt": [programs._script(work / "bin", "superopt", "superopt")]}
    bargs = argparse.Namespace(modes=modes, reps=args.reps, budget=args.budget, timeout=None, records=None,
                               build_timeout=args.build_timeout, build_system="make", run_timeout=args.run_timeout,
                               capture_timeout=args.capture_timeout, data=True, data_cap="2G", dry_run=False)
    gpu = programs.gpu_name()
    now = dt.datetime.now(dt.timezone.utc)
    out = args.out or ROOT / "bench" / "results" / f"{now.date().isoformat()}-never-slower-{programs.gpu_tag(gpu)}.json"
    old = json.loads(out.read_text()) if out.is_file() and not args.fresh else None
    result = {
        "benchmark": "never slower: every program x mode x block size of bench/programs against plain nvcc",
        "date": now.isoformat(timespec="seconds"), "gpu": gpu, "commit": programs.commit(),
        "method": "each program's own cudaEvent timer (per block size for biasgrad); --reps runs per build, the "
                  "modes interleaved; slower = median - nvcc median > (range nvcc + range mode) / 2; only runs "
                  "whose self-check passed count",
        "reps": args.reps, "budget_s": args.budget, "modes": modes, "programs": [], "entries": [], "not_run": []}
    for name in names:
        if args.deadline is not None and time.monotonic() - started + ESTIMATE_S > args.deadline:
            result["not_run"].append(name)
            continue
        try:
            row = programs.bench_program(name, bargs, work, tools)
        except Exception as exc:  # noqa: BLE001 - one program's failure is recorded, not fatal
            row = {"program": name, "kernels": programs.kernels_of(name), "modes": {}, "speedup": {},
                   "error": f"{type(exc).__name__}: {exc}"}
        row["decisions"] = decisions(row)
        result["programs"].append(row)
        result["entries"] += entries_of(row)
        result["seconds"] = round(time.monotonic() - started, 1)
        _write(out, finish(merge(json.loads(json.dumps(result)), old) if old else json.loads(json.dumps(result))))
    final = finish(merge(result, old) if old else result)
    final["seconds"] = round(time.monotonic() - started, 1)
    _write(out, final)
    print(table(final))
    print(f"[never-slower] wrote {out} ({final['seconds']} s)")
    return 0 if final["slower"] == 0 and final["all_checks_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
