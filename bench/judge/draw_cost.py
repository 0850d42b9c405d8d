"""What drawing a captured-size buffer costs on the host: each output poison, its complement and the
input distributions of superopt.judge.inputs at one size, best of a few draws, for this tree and
optionally another (``--old-tree``, a checkout of the code before), in one process each.

    PYTHONPATH=. python -m bench.judge.draw_cost [--n 67108864] [--reps 3] [--old-tree DIR] [--out FILE]

A check of a kept kernel at the program's real size draws these for every buffer of every set
(2026-12-04: 64 Mi-element buffers at the economy bench's captured sizes). Writes
``bench/results/<date>-draw-cost-<host>.json``: per draw its best seconds per tree.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DRAWS = [("poison", "f32", None), ("poison", "s32", None), ("complement", "f32", None),
         ("generate", "f32", "positive"), ("generate", "f32", "normal"), ("generate", "f32", "uniform"),
         ("generate", "s32", "uniform_small")]

# run in a process of its own with the tree's superopt first on sys.path
_MEASURE = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from superopt.judge.inputs import complement_poison, generate, poison
n, reps, draws = int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
rng = np.random.default_rng(1)
out = {}
for what, et, dist in draws:
    p = poison(et, n, rng) if what == "complement" else None
    call = {"poison": lambda: poison(et, n, rng), "complement": lambda: complement_poison(p, et, rng),
            "generate": lambda: generate(et, n, dist, rng)}[what]
    best = None
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        s = time.perf_counter() - t0
        best = s if best is None else min(best, s)
    out[f"{what} {et}" + (f" {dist}" if dist else "")] = round(best, 4)
print(json.dumps(out))
"""


def measure(tree: Path, n: int, reps: int) -> dict:
    r = subprocess.run([sys.executable, "-c", _MEASURE, str(tree), str(n), str(reps), json.dumps(DRAWS)],
                       capture_output=True, text=True, check=True, env=dict(os.environ, PYTHONPATH=str(tree)))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 26)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--old-tree", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    result = {"benchmark": "draw-cost", "date": dt.date.today().isoformat(), "host": platform.node(),
              "cpus": os.cpu_count(), "commit": commit, "elements": args.n, "reps": args.reps,
              "seconds": {"this": measure(ROOT, args.n, args.reps)}}
    if args.old_tree:
        old = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.old_tree, capture_output=True,
                             text=True).stdout.strip()
        result["old_commit"] = old
        result["seconds"]["old"] = measure(args.old_tree.resolve(), args.n, args.reps)
    out = args.out or ROOT / "bench" / "results" / f"{result['date']}-draw-cost-{platform.node() or 'host'}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["seconds"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
