"""What every compilation of a build was doing, moment by moment, and what it was doing while
the GPU sat idle.

bench.economy.timeline says how the GPU's time split (timing, checks, idle); it cannot say why
the GPU was idle. Here each compilation's wall time is laid on a grid of ``DT`` seconds and every
cell gets the innermost thing the compilation was doing then, from two logs:

* SUPEROPT_PHASE_LOG (superopt.judge.phases.log_span): the search's phases (spec, propose,
  ptxas, check, timing, sanitize, shadow, worker_start, gpu_wait, ...) and, from the bench's
  wrapper, the compilation's whole span (phase ``compilation``);
* SUPEROPT_GPU_STEP_LOG (superopt.judge.devices): each GPU step's wait (``gpu_wait``) and hold
  (``gpu:check``, ``gpu:time``, ``gpu:sanitize``).

A cell of a compilation's span that no phase covers is ``driver`` (nvcc's own steps, the
driver, the search's untracked work). Later-starting spans paint over earlier ones (a nested
phase starts after its parent), GPU steps over everything. The summary (:func:`build_timeline`):

* ``by_label_s``: compilation-seconds per label over the build;
* ``idle``: the cells where no GPU step held the GPU and none waited for it, and what the
  running compilations did then (``by_label_s``: compilation-seconds; ``mean_running``);
* ``running_s``: seconds of the build with k compilations running;
* ``last``: the compilation that ended last (its source, start, end and labels).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

DT = 0.01
KINDS = ("time", "check", "sanitize")


def read_phases(path: Path) -> list[dict]:
    rows = []
    try:
        text = path.read_text()
    except OSError:
        return rows
    for line in text.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and {"pid", "phase", "start", "end"} <= r.keys() and r["start"] <= r["end"]:
            rows.append(r)
    return rows


def build_timeline(phases: list[dict], steps: list[dict], start: float | None = None,
                   end: float | None = None) -> dict:
    comps = [r for r in phases if r["phase"] == "compilation"]
    if not comps:
        return {"compilations": 0}
    start = min(r["start"] for r in comps) if start is None else start
    end = max(r["end"] for r in comps) if end is None else end
    n = max(1, int(np.ceil((end - start) / DT)))
    labels = ["", "driver"]
    ids = {"": 0, "driver": 1}

    def lid(name: str) -> int:
        if name not in ids:
            ids[name] = len(labels)
            labels.append(name)
        return ids[name]

    def cells(a: float, b: float) -> slice:
        i = int(np.clip((a - start) / DT, 0, n))
        j = int(np.clip(np.ceil((b - start) / DT), 0, n))
        return slice(i, max(i, j))

    grids: dict[int, np.ndarray] = {}
    source: dict[int, str] = {}
    span: dict[int, tuple] = {}
    for c in comps:
        g = grids.setdefault(c["pid"], np.zeros(n, np.int32))
        g[cells(c["start"], c["end"])] = 1
        source[c["pid"]] = c.get("kernel") or str(c["pid"])
        span[c["pid"]] = (c["start"], c["end"])
    for r in sorted((r for r in phases if r["phase"] != "compilation" and r["pid"] in grids),
                    key=lambda r: r["start"]):
        g = grids[r["pid"]]
        sl = cells(r["start"], r["end"])
        inside = g[sl] != 0                 # only while the compilation runs
        g[sl] = np.where(inside, lid(r["phase"]), g[sl])
    held = np.zeros(n, bool)
    waited = np.zeros(n, bool)
    for s in sorted(steps, key=lambda s: s["asked"]):
        sw, sh = cells(s["asked"], s["got"]), cells(s["got"], s["released"])
        waited[sw] = True
        held[sh] = True
        g = grids.get(s.get("pid"))
        if g is not None:
            for sl, name in ((sw, "gpu_wait"), (sh, f"gpu:{s['kind']}")):
                inside = g[sl] != 0
                g[sl] = np.where(inside, lid(name), g[sl])
    stack = np.stack(list(grids.values()))
    running = (stack != 0).sum(axis=0)
    idle = ~held & ~waited & (running > 0)

    def tally(mask: np.ndarray | None, rows=None) -> dict:
        sel = stack if rows is None else stack[rows]
        if mask is not None:
            sel = sel[:, mask]
        counts = np.bincount(sel.ravel(), minlength=len(labels))
        out = {labels[k]: round(float(c) * DT, 2) for k, c in enumerate(counts) if k and c}
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    last_pid = max(span, key=lambda p: span[p][1])
    row = list(grids).index(last_pid)
    run_hist = np.bincount(running, minlength=stack.shape[0] + 1)
    return {
        "compilations": len(grids),
        "span_s": round(end - start, 2),
        "dt_s": DT,
        "by_label_s": tally(None),
        "idle": {"s": round(float(idle.sum()) * DT, 2),
                 "mean_running": round(float(running[idle].mean()), 2) if idle.any() else 0.0,
                 "by_label_s": tally(idle)},
        "running_s": {str(k): round(float(c) * DT, 2) for k, c in enumerate(run_hist) if c},
        "last": {"source": source[last_pid], "start_s": round(span[last_pid][0] - start, 2),
                 "end_s": round(span[last_pid][1] - start, 2), "by_label_s": tally(None, [row])},
        "per_compilation": [{"source": source[p], "start_s": round(span[p][0] - start, 2),
                             "end_s": round(span[p][1] - start, 2)}
                            for p in sorted(span, key=lambda p: span[p][0])],
    }
