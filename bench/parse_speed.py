"""Parse + IR build speed of ptx_ir on the PTX corpus (issue: < 0.5 s for the ~13,000-line
CUB/Thrust program on the 2-core development machine).

    python3 -m bench.parse_speed [--repeat 5]

Per file: best-of-N and median wall time of ``parse`` alone, of ``parse`` + CFG +
dominators for every defined function (what a pass needs first), and of def-use chains
on top; lines per second over the whole corpus. Writes bench/results/parse-<date>.json.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import ptx_ir

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
HEADLINE = "cub_thrust_program.sm_90.ptx"


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "ptx_ir"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


def measure(text: str, repeat: int) -> dict:
    parse_t, ir_t, du_t = [], [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        module = ptx_ir.parse(text)
        t1 = time.perf_counter()
        for fn in module.functions:
            if not fn.is_declaration:
                fn.cfg
                fn.dominance
        t2 = time.perf_counter()
        for fn in module.functions:
            if not fn.is_declaration:
                fn.def_use
        t3 = time.perf_counter()
        parse_t.append(t1 - t0)
        ir_t.append(t2 - t0)
        du_t.append(t3 - t0)
    return {"parse_best_s": min(parse_t), "parse_median_s": statistics.median(parse_t),
            "parse_ir_best_s": min(ir_t), "parse_ir_median_s": statistics.median(ir_t),
            "with_def_use_best_s": min(du_t), "with_def_use_median_s": statistics.median(du_t)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    rows = []
    total_lines = 0
    total_parse = 0.0
    total_ir = 0.0
    for entry in manifest["entries"]:
        text = (CORPUS / entry["file"]).read_text()
        lines = text.count("\n")
        m = measure(text, args.repeat)
        rows.append({"file": entry["file"], "lines": lines, **{k: round(v, 5) for k, v in m.items()}})
        total_lines += lines
        total_parse += m["parse_median_s"]
        total_ir += m["parse_ir_median_s"]
    head = next(r for r in rows if r["file"].endswith(HEADLINE))
    load = os.getloadavg()
    result = {
        "benchmark": "ptx_ir parse + IR build",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "processor": platform.processor() or platform.machine(), "loadavg_at_end": load},
        "commit": _commit(),
        "repeat": args.repeat,
        "corpus_files": len(rows),
        "corpus_lines": total_lines,
        "lines_per_second_parse": round(total_lines / total_parse),
        "lines_per_second_parse_ir": round(total_lines / total_ir),
        "headline": {"file": head["file"], "lines": head["lines"],
                     "parse_ir_median_s": head["parse_ir_median_s"], "parse_ir_best_s": head["parse_ir_best_s"],
                     "goal_s": 0.5, "meets_goal": head["parse_ir_median_s"] < 0.5},
        "files": rows,
    }
    out = ROOT / "bench" / "results" / f"parse-{dt.date.today().isoformat()}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{head['file']}: {head['lines']} lines, parse+IR median {head['parse_ir_median_s']:.3f} s "
          f"(best {head['parse_ir_best_s']:.3f} s; goal < 0.5 s)")
    print(f"corpus: {len(rows)} files, {total_lines} lines, {result['lines_per_second_parse']:,} lines/s parse, "
          f"{result['lines_per_second_parse_ir']:,} lines/s parse+IR; load average {load[0]:.1f}")
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
