"""Where a differential check's time goes, alone and beside other compilations' checks.

    PYTHONPATH=. python -m bench.judge.check_cost [--n 4194304] [--rounds 2] [--procs 1,8]
                                                  [--profile] [--out FILE]

Each process runs :func:`bench.judge.resident.one_mode` (every candidate of tests/judge/kernels
judged in turn through one ``BackendJudge``, as a search judges a kernel's candidates, each with
its own GPU worker). ``--procs 1,8``: once alone, then eight such processes at the same time (as
``make -j8`` runs eight compilations on one GPU). Per count: the median verify wall time and the
median per-process phase seconds (``superopt.judge.phases``: the worker's fill, launch, readback,
free, keep ...). ``--profile``: a further process alone under cProfile, its GPU worker too; the
top functions of both by own time. Writes ``bench/results/<date>-check-cost-<gpu>.json``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _top(path: str, n: int = 25) -> list[str]:
    s = io.StringIO()
    st = pstats.Stats(path, stream=s)
    st.sort_stats("tottime").print_stats(n)
    return [line for line in s.getvalue().splitlines() if line.strip()][-(n + 1):]


def child(n: int, rounds: int, profile_dir: str | None) -> dict:
    from bench.judge.resident import one_mode
    if not profile_dir:
        return one_mode(n, rounds)
    import cProfile
    from superopt.judge.backends import gpu
    worker_prof = os.path.join(profile_dir, "worker.prof")
    init = gpu.GpuBackend.__init__

    def profiled_init(self, *a, **kw):
        kw.setdefault("worker_cmd", [sys.executable, "-m", "cProfile", "-o", worker_prof,
                                     "-m", "superopt.judge.backends._gpu_worker"])
        init(self, *a, **kw)
    gpu.GpuBackend.__init__ = profiled_init
    prof = cProfile.Profile()
    prof.enable()
    out = one_mode(n, rounds)
    prof.disable()
    parent_prof = os.path.join(profile_dir, "parent.prof")
    prof.dump_stats(parent_prof)
    out["profile_parent"] = _top(parent_prof)
    out["profile_worker_path"] = worker_prof
    return out


def run_procs(count: int, n: int, rounds: int, profile: bool = False) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    tmp = tempfile.mkdtemp(prefix="check-cost-")
    procs = []
    for k in range(count):
        cmd = [sys.executable, "-m", "bench.judge.check_cost", "--child", "--n", str(n), "--rounds", str(rounds)]
        if profile:
            cmd += ["--profile-dir", tmp]
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    outs = []
    for p in procs:
        so, se = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"[check-cost] a child failed ({p.returncode}):\n{se[-3000:]}")
        r = json.loads(so.strip().splitlines()[-1])
        if profile:
            wp = r.pop("profile_worker_path")
            for _ in range(50):                  # the worker writes its profile as it exits
                if os.path.exists(wp):
                    break
                time.sleep(0.1)
            r["profile_worker"] = _top(wp) if os.path.exists(wp) else ["(the worker wrote no profile)"]
        outs.append(r)
    return outs


def summarize(runs: list[dict]) -> dict:
    keys = sorted({k for r in runs for k in r["phases_s"]})
    return {"median_verify_s": round(statistics.median(w["wall_s"] for r in runs for w in r["rows"]), 4),
            "verifies_per_process": len(runs[0]["rows"]),
            "wrong_verdicts": sum(len(r["wrong_verdicts"]) for r in runs),
            "phases_s_median_per_process": {k: round(statistics.median(r["phases_s"].get(k, 0.0) for r in runs), 4)
                                            for k in keys}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--procs", default="1,8")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.n, args.rounds, args.profile_dir)))
        return 0
    result = {"benchmark": "bench/judge/check_cost: a kernel's candidates checked through one judge, "
                           "alone and with other processes checking at once",
              "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "n": args.n,
              "rounds": args.rounds, "by_procs": {}}
    for count in [int(c) for c in args.procs.split(",")]:
        t0 = time.perf_counter()
        runs = run_procs(count, args.n, args.rounds)
        s = summarize(runs)
        s["wall_s"] = round(time.perf_counter() - t0, 3)
        result["by_procs"][str(count)] = s
        print(f"[check-cost] {count} process(es): median verify {s['median_verify_s'] * 1e3:.1f} ms, "
              f"wall {s['wall_s']} s, wrong {s['wrong_verdicts']}", flush=True)
    if args.profile:
        r = run_procs(1, args.n, args.rounds, profile=True)[0]
        result["profile"] = {"parent_by_own_time": r["profile_parent"], "worker_by_own_time": r["profile_worker"]}
    from bench.judge.run import commit, gpu_name
    gpu = gpu_name()
    result.update(gpu=gpu, commit=commit())
    out = args.out or ROOT / "bench" / "results" / f"{dt.date.today()}-check-cost-{gpu.split()[-1].lower()}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"[check-cost] wrote {out}")
    return 0 if all(s["wrong_verdicts"] == 0 for s in result["by_procs"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
