"""Inputs kept on the GPU across a kernel's candidates (superopt.judge.backends.resident): the
same candidates judged through one judge, as a search judges them, with the worker keeping
inputs (``SUPEROPT_GPU_RESIDENT_BYTES``) and without.

    PYTHONPATH=. python -m bench.judge.resident [--n 4194304] [--rounds 3] [--pairs 2] [--out FILE]

Each mode runs in a child process of its own (its own GPU worker). Per mode: every candidate of
tests/judge/kernels (planted cheats and equivalent rewrites) judged in turn by one
``BackendJudge`` at n (the baseline's runs reused as in a search), ``rounds`` times over;
the verdicts (each must be the expected one), the wall time of each verify and the GPU-step
seconds (``phases``). Writes ``bench/results/<date>-resident-<gpu>.json`` (or ``--out``): per mode
the median verify wall time and the GPU-held seconds, and ``ratio`` (off / on).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KDIR = ROOT / "tests" / "judge" / "kernels"
CANDIDATES = ["eq_reorder", "eq_commute", "eq_cuda", "noop", "off_by_one", "ignore_input", "fma",
              "writes_input", "block0", "last_lane"]
ON_BYTES = 1 << 30


def one_mode(n: int, rounds: int, backend: str = "gpu") -> dict:
    """Runs in the child: every candidate ``rounds`` times through one judge."""
    from bench.judge.run import EXPECT, with_n
    from superopt.judge.judge import BackendJudge
    from superopt.judge.phases import recording
    from superopt.specs.launch_spec import load_spec
    spec = with_n(load_spec(str(KDIR / "judge.toml")), n)
    base = (KDIR / "ptx" / "baseline.ptx").read_text()
    judge = BackendJudge(backend=backend, check_sets=4)
    rows, bad = [], []
    with recording() as ph:
        judge.verify(base, base, spec)                       # nvcc's runs (and the worker's start)
        start = dict(ph.seconds)
        for rnd in range(rounds):
            for name in CANDIDATES:
                cand = (KDIR / "ptx" / f"{name}.ptx").read_text()
                t0 = time.perf_counter()
                v = judge.verify(base, cand, spec)
                rows.append({"round": rnd, "candidate": name, "status": v.status,
                             "wall_s": round(time.perf_counter() - t0, 4)})
                if v.status != EXPECT[name]:
                    bad.append(f"{name}: {v.status} (expected {EXPECT[name]}): {v.reason[:200]}")
    after = {k: round(v - start.get(k, 0.0), 4) for k, v in ph.seconds.items()}
    walls = [r["wall_s"] for r in rows]
    return {"rows": rows, "wrong_verdicts": bad, "median_verify_s": statistics.median(walls),
            "total_verify_s": round(sum(walls), 4), "phases_s": after}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=2, help="off/on alternations (default 2)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--backend", default="gpu", help="gpu; emulator only to try the script on a CPU")
    ap.add_argument("--child", choices=["off", "on"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_mode(args.n, args.rounds, args.backend)))
        return 0
    modes = {}
    for mode in ("off", "on") * args.pairs:                  # interleaved: off, on, off, on ...
        env = dict(os.environ, SUPEROPT_GPU_RESIDENT_BYTES=str(ON_BYTES if mode == "on" else 0),
                   PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.run([sys.executable, "-m", "bench.judge.resident", "--child", mode, "--n", str(args.n),
                            "--rounds", str(args.rounds)], cwd=ROOT, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stderr[-3000:], file=sys.stderr)
            return 1
        modes.setdefault(mode, []).append(json.loads(p.stdout.strip().splitlines()[-1]))
        r = modes[mode][-1]
        print(f"[resident] {mode}: median verify {r['median_verify_s'] * 1e3:.1f} ms, total {r['total_verify_s']} s, "
              f"gpu_check {r['phases_s'].get('gpu_check', 0)} s, wrong {len(r['wrong_verdicts'])}", flush=True)
    from bench.judge.run import commit, gpu_name
    gpu = gpu_name()
    summary = {m: {"median_verify_s": statistics.median(x["median_verify_s"] for x in runs),
                   "gpu_check_s": statistics.median(x["phases_s"].get("gpu_check", 0.0) for x in runs),
                   "check_s": statistics.median(x["phases_s"].get("check", 0.0) for x in runs),
                   "wrong_verdicts": sum(len(x["wrong_verdicts"]) for x in runs)} for m, runs in modes.items()}
    result = {"benchmark": "bench/judge/resident: a kernel's candidates through one judge, inputs kept on the GPU or not",
              "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "gpu": gpu, "commit": commit(),
              "n": args.n, "rounds": args.rounds, "candidates": CANDIDATES, "resident_bytes_on": ON_BYTES,
              "summary": summary, "modes": modes,
              "ratio_median_verify": round(summary["off"]["median_verify_s"] / summary["on"]["median_verify_s"], 3),
              "ratio_gpu_check": round(summary["off"]["gpu_check_s"] / summary["on"]["gpu_check_s"], 3)
              if summary["on"]["gpu_check_s"] else None,
              "all_verdicts_correct": all(s["wrong_verdicts"] == 0 for s in summary.values())}
    out = args.out or ROOT / "bench" / "results" / f"{dt.date.today()}-resident-{gpu.split()[-1].lower()}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("ratio_median_verify", "ratio_gpu_check", "all_verdicts_correct")}))
    print(f"[resident] wrote {out}")
    return 0 if result["all_verdicts_correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
