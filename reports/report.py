"""A whole report: every current kernel's view, the chart, and the summary numbers.

Built once from loaded records and rendered as HTML, Markdown or a terminal table. SASS is
made only for the HTML (it costs a ptxas and a cuobjdump run per kernel and side, run in
parallel); ``sass=None`` means "when the tools are installed".
"""
from __future__ import annotations

import math
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import PurePath

from reports.chart import Bar, Svg, speedup_chart
from reports.keyed import KernelEntry, current_kernels
from reports.load import LoadedRecord, winner_of
from reports.sass import Sass, find_tool, sass_for
from reports.view import KernelView, kernel_view


@dataclass
class ProgramEstimate:
    """Amdahl's law over one source's captured kernels: the program's GPU time with the kept
    speedups applied, from each kernel's share of the captured run's GPU time."""
    source: str
    kernels: int
    share: float                      # the captured GPU time these kernels account for
    saved: float                      # fraction of the program's GPU time saved
    kept: int = 0                     # kernels with a kept rewrite
    label: str = ""

    @property
    def speedup(self) -> float:
        return 1.0 / (1.0 - self.saved) if self.saved < 1 else math.inf


@dataclass
class Report:
    views: list[KernelView]
    replaced: list[KernelEntry]
    origins: list[str]
    chart: Svg | None
    counts: Counter
    geomean_kept: float | None
    devices: list[str]
    tools: list[str]
    created: tuple[str, str] | None
    programs: list[ProgramEstimate] = field(default_factory=list)
    sass_note: str = ""


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _sass_pairs(entries: list[KernelEntry], enabled: bool | None) -> tuple[list[tuple[Sass | None, Sass | None]], str]:
    if enabled is False:
        return [(None, None)] * len(entries), "SASS not rendered (--no-sass)"
    if enabled is None and (find_tool("ptxas") is None or
                            (find_tool("cuobjdump") is None and find_tool("nvdisasm") is None)):
        missing = sass_for("", "sm_90").note      # the same sentence the per-kernel notes give
        return [(None, None)] * len(entries), missing
    jobs = []
    for e in entries:
        base = (e.kernel.get("baseline") or {}).get("ptx")
        win = (winner_of(e.kernel) or {}).get("ptx")
        jobs.append((base, win, e.key.target))
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        def run(job):
            base, win, target = job
            return (sass_for(base, target) if base else None, sass_for(win, target) if win else None)
        return list(pool.map(run, jobs)), ""


def _programs(views: list[KernelView]) -> list[ProgramEstimate]:
    by_source: dict[str, list[KernelView]] = {}
    for v in views:
        if v.capture_share is not None:
            by_source.setdefault(v.entry.key.source, []).append(v)
    out = []
    for source, vs in by_source.items():
        share = sum(v.capture_share for v in vs)
        saved = sum(v.capture_share * (1 - 1 / v.speedup) for v in vs if v.kept and v.speedup)
        out.append(ProgramEstimate(source, len(vs), share, saved, sum(1 for v in vs if v.kept)))
    return out


def build_report(loaded: list[LoadedRecord], *, sass: bool | None = False) -> Report:
    kernels = current_kernels(loaded)
    order = sorted(kernels.entries, key=lambda e: (e.key.source, e.key.target))
    pairs, sass_note = _sass_pairs(order, sass)
    views = [kernel_view(e, i + 1, pair) for i, (e, pair) in enumerate(zip(order, pairs))]
    names = display_names([v.entry.key.source for v in views])
    for v in views:
        v.file_label = names[v.entry.key.source]
    several_files = len(names) > 1
    bars = [Bar(f"{v.file_label}: {short_name(v.name)}" if several_files else short_name(v.name), f"{v.name} ({v.entry.key.source}, {v.entry.key.target})",
                v.speedup if v.kept else None, v.chart_label, v.capture_share, f"#{v.anchor}", v.kept)
            for v in views]
    devices = sorted({v.evidence.device for v in views if v.evidence and v.evidence.device})
    tools = sorted({f"nvcc-plus {r.record['tool'].get('nvcc_plus')}" for r in loaded if r.record.get("tool")})
    stamps = sorted(r.record["created"] for r in loaded if r.record.get("created"))
    return Report(
        views=views, replaced=kernels.replaced, origins=[r.origin for r in loaded],
        chart=speedup_chart(bars) if bars else None,
        counts=Counter(v.status for v in views),
        geomean_kept=_geomean([v.speedup for v in views if v.kept and v.speedup]),
        devices=devices, tools=tools, created=(stamps[0], stamps[-1]) if stamps else None,
        programs=[replace(p, label=names[p.source]) for p in _programs(views)], sass_note=sass_note)


def display_names(sources: list[str]) -> dict[str, str]:
    """Each source as its shortest trailing path that tells it apart from the others
    (``plus/blas1/blas1.cu`` and ``capture/blas1/blas1.cu`` rather than ``blas1.cu`` twice)."""
    unique = sorted(set(sources))
    parts = {s: PurePath(s).parts for s in unique}
    out = {}
    for s in unique:
        n = 1
        while n < len(parts[s]) and any(o != s and parts[o][-n:] == parts[s][-n:] for o in unique):
            n += 1
        out[s] = "/".join(parts[s][-n:]) if parts[s] else s
    return out


def short_name(signature: str) -> str:
    """``softmax_rows(float const*, float*, int)`` → ``softmax_rows``: the chart's row label."""
    return signature.split("(", 1)[0] or signature
