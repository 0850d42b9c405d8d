"""Where the GPU workers of a build spent their time: their cProfile stats (SUPEROPT_GPU_WORKER_PROFILE)
merged (or any profiles: ``--pattern``), the functions with the most own and cumulative time, as a small JSON table.

    python -m bench.economy.worker_profile FOLDER [--top 40] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import pstats
from pathlib import Path


def summarize(folder: Path, top: int = 40, pattern: str = "worker-*.prof") -> dict:
    files = sorted(folder.glob(pattern))
    if not files:
        return {"workers": 0}
    stats = pstats.Stats(str(files[0]))
    for f in files[1:]:
        stats.add(str(f))
    rows = []
    for (path, line, fn), (cc, nc, tt, ct, _) in stats.stats.items():
        rows.append({"function": f"{'/'.join(Path(path).parts[-2:])}:{line}:{fn}", "calls": nc, "own_s": round(tt, 3),
                     "cumulative_s": round(ct, 3)})
    return {"workers": len(files), "total_s": round(stats.total_tt, 3),
            "by_own": sorted(rows, key=lambda r: -r["own_s"])[:top],
            "by_cumulative": sorted(rows, key=lambda r: -r["cumulative_s"])[:top]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--pattern", default="worker-*.prof",
                    help="which profiles to merge (default: the GPU workers'; the economy bench's "
                         "--profile-dir holds <mode>-*.prof)")
    args = ap.parse_args(argv)
    text = json.dumps(summarize(args.folder, args.top, args.pattern), indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
