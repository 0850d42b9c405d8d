"""Who held the GPU, and who waited for it, over a build: the timeline of its GPU steps.

Every GPU step of every compilation writes one line to ``SUPEROPT_GPU_STEP_LOG``
(superopt.judge.devices): its kind (``check``, ``sanitize``, ``time``), when it asked for the
GPU, when it got it and when it let go. :func:`timeline` sweeps those intervals and splits the
build's wall time into what the GPU was doing:

* ``time_s``: a timing held it (alone);
* ``check_s``: checks held it (no timing);
* ``sanitize_only_s``: only compute-sanitizer runs held it;
* ``idle_waited_s``: nobody held it while somebody waited (a hand-over, or a timing waiting at
  the turnstile for the last shared holder to leave: time a faster hand-over would give back);
* ``idle_s``: nobody held it and nobody waited (the builds were doing CPU work).

and says how many steps waited on average (``mean_waiting``) and how long the longest wait
was. Timed-out steps (GpuBusy) never got the GPU and write no line: their wait shows in the
records' ``gpu_wait`` phase, not here.
"""
from __future__ import annotations

import json
from pathlib import Path

KINDS = ("time", "check", "sanitize")


def read_steps(path: Path) -> list[dict]:
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
        if r.get("kind") in KINDS and r["asked"] <= r["got"] <= r["released"]:
            rows.append(r)
    return rows


def timeline(rows: list[dict], start: float | None = None, end: float | None = None) -> dict:
    """The split of [start, end] (default: the first ask to the last release)."""
    if not rows:
        return {"steps": 0}
    start = min(r["asked"] for r in rows) if start is None else start
    end = max(r["released"] for r in rows) if end is None else end
    events = []                      # (t, order, delta kind)
    for r in rows:
        events.append((r["asked"], "wait", +1))
        events.append((r["got"], "wait", -1))
        events.append((r["got"], r["kind"], +1))
        events.append((r["released"], r["kind"], -1))
    events.sort(key=lambda e: (e[0], e[2]))          # releases before acquisitions at one instant
    count = {"wait": 0, **{k: 0 for k in KINDS}}
    out = {"time_s": 0.0, "check_s": 0.0, "sanitize_only_s": 0.0, "idle_waited_s": 0.0, "idle_s": 0.0}
    waiting_area = 0.0
    overlap_checks = 0.0
    prev = start
    for t, kind, delta in events + [(end, None, 0)]:
        t = min(max(t, start), end)
        dt = t - prev
        if dt > 0:
            waiting_area += count["wait"] * dt
            if count["time"]:
                out["time_s"] += dt
            elif count["check"]:
                out["check_s"] += dt
                if count["check"] > 1:
                    overlap_checks += dt
            elif count["sanitize"]:
                out["sanitize_only_s"] += dt
            elif count["wait"]:
                out["idle_waited_s"] += dt
            else:
                out["idle_s"] += dt
            prev = t
        if kind is not None:
            count[kind] += delta
    span = end - start
    out = {k: round(v, 3) for k, v in out.items()}
    by_kind = {}
    for k in KINDS:
        mine = [r for r in rows if r["kind"] == k]
        by_kind[k] = {"steps": len(mine), "held_s": round(sum(r["released"] - r["got"] for r in mine), 3),
                      "waited_s": round(sum(r["got"] - r["asked"] for r in mine), 3),
                      "longest_wait_s": round(max((r["got"] - r["asked"] for r in mine), default=0.0), 3)}
    out.update(span_s=round(span, 3), steps=len(rows), mean_waiting=round(waiting_area / span, 3) if span else 0.0,
               checks_overlapping_s=round(overlap_checks, 3), by_kind=by_kind)
    return out
