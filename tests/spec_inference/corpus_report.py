"""Count on how many corpus kernels launch-spec inference succeeds.

    python tests/spec_inference/corpus_report.py [--variant sm_90] [--json out.json] [-v]

For every PTX file of the corpus variant (tests/corpus/manifest.json) and every kernel in
it, runs superopt.specs.inference.infer_specs with the .cu source, and prints one line per
kernel (verifiable or the reason), then the totals and the reasons grouped.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import ptx_ir  # noqa: E402
from superopt.specs.inference import infer_specs  # noqa: E402


def _reason_key(reason: str) -> str:
    r = reason
    for pat, key in (("pointer loaded from memory", "follows pointers loaded from memory"),
                     ("loop exit depends on data", "data-dependent loop trip count"),
                     ("does not settle", "data-dependent loop trip count"),
                     ("calls ", "calls a function"),
                     ("textures or surfaces", "textures/surfaces"),
                     ("struct", "by-value struct parameter"),
                     ("no pointer parameters", "no pointer parameters"),
                     ("writes no buffer", "writes no buffer"),
                     ("module variable", "writes a __device__ variable"),
                     ("unsupported memory instruction", "unsupported memory instruction"),
                     ("at an offset that has no bound", "unbounded offset"),
                     ("no bounds check", "data-dependent index"),
                     ("before its start", "negative offset"),
                     ("no launch shape", "no launch shape fits"),
                     ("too costly", "too costly to analyse")):
        if pat in r:
            return key
    return r[:60]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="sm_90")
    ap.add_argument("--json")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    corpus = ROOT / "tests" / "corpus"
    manifest = json.loads((corpus / "manifest.json").read_text())
    rows = []
    t_all = time.time()
    for e in manifest["entries"]:
        if e["variant"] != args.variant:
            continue
        ptx = (corpus / e["file"]).read_text()
        src_path = corpus / e["source"]
        src = src_path.read_text() if src_path.exists() else None
        module = ptx_ir.parse(ptx)
        for k in module.kernels:
            t0 = time.time()
            try:
                r = infer_specs(module, k.name, source_text=src)
                ok, reason, nspecs = r.verifiable, r.reason, len(r.specs)
                shapes = [list(s.block) for s in r.specs]
            except Exception as ex:  # a bug: count it, say it
                ok, reason, nspecs, shapes = False, f"internal error: {type(ex).__name__}: {ex}", 0, []
            dt = time.time() - t0
            rows.append({"file": e["file"], "kernel": k.name, "signature": k.signature, "ok": ok,
                         "specs": nspecs, "blocks": shapes, "reason": reason, "seconds": round(dt, 2)})
            name = k.signature or k.name
            line = f"{'OK ' if ok else 'NV '} {dt:5.2f}s {e['file'].split('/')[-1]:32s} {name[:70]}"
            if not ok:
                line += f"\n        {reason}"
            print(line, flush=True)
    n = len(rows)
    good = sum(r["ok"] for r in rows)
    print(f"\n{good} of {n} kernels verifiable ({100.0 * good / max(n, 1):.0f}%), "
          f"{time.time() - t_all:.0f} s in all")
    reasons = collections.Counter(_reason_key(r["reason"]) for r in rows if not r["ok"])
    for k, v in reasons.most_common():
        print(f"  {v:4d}  {k}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
