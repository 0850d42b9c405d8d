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
from reports.keyed import KernelEntry, build_speedup, current_kernels
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
    unknown: int = 0                  # kept rewrites whose speedup the record lacks (counted as 1.0)

    @property
    def speedup(self) -> float:
        return 1.0 / (1.0 - self.saved) if self.saved < 1 else math.inf


@dataclass
class Headline:
    """The answer a report leads with, in the order it is read: what each captured program
    gains (Amdahl's law over its kernels' shares of its GPU time), what all kernels gain
    (nvcc's code counts as 1.0), then what the kept rewrites gain."""
    programs: list[ProgramEstimate]
    geomean_all: float | None         # over every kernel whose speed is known (keyed.build_speedup)
    kernels: int                      # how many that is
    geomean_kept: float | None        # over the kept rewrites with a speedup
    kept: int                         # how many that is
    unknown: int                      # kept rewrites whose speedup the record lacks: in neither


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
    headline: Headline | None = None


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
        out.append(ProgramEstimate(source, len(vs), share, saved, sum(1 for v in vs if v.kept),
                                   unknown=sum(1 for v in vs if v.kept and not v.speedup)))
    return out


def headline(views: list[KernelView], programs: list[ProgramEstimate]) -> Headline:
    every = [build_speedup(v.kernel) for v in views]
    kept = [v.speedup for v in views if v.kept and v.speedup]
    return Headline(programs, _geomean([s for s in every if s]), sum(1 for s in every if s),
                    _geomean(kept), len(kept), sum(1 for s in every if not s))


HEADLINE_PROGRAMS = 4        # programs named in the headline; the rest are in the programs table


@dataclass
class HeadlineItem:
    key: str                  # "program", "programs-more", "all", "kept": the page's id for it
    value: str                # "1.404×"; "" for a note without a number
    label: str                # what the number is
    detail: str = ""          # how it was made, what it leaves out


def headline_items(h: Headline) -> list[HeadlineItem]:
    """The headline as sentences every renderer prints the same way."""
    items = []
    for i, p in enumerate(h.programs[:HEADLINE_PROGRAMS]):
        unknown = f"; {p.unknown} kept rewrite(s) without a recorded speedup counted as 1.0×" if p.unknown else ""
        items.append(HeadlineItem(f"program-{i + 1}", f"{p.speedup:.3f}×", f"estimated GPU-time speedup of {p.label}",
                                  f"Amdahl's law over its {p.kernels} captured kernel(s), {p.share:.1%} of the "
                                  f"captured run's GPU time, {p.kept} of them rewritten{unknown}"))
    if len(h.programs) > HEADLINE_PROGRAMS:
        rest = h.programs[HEADLINE_PROGRAMS:]
        lo, hi = min(p.speedup for p in rest), max(p.speedup for p in rest)
        items.append(HeadlineItem("programs-more", f"{lo:.3f}×–{hi:.3f}×" if hi > lo else f"{lo:.3f}×",
                                  f"estimated GPU-time speedups of {len(rest)} more program(s)",
                                  "each one in the captured programs table"))
    if h.geomean_all is not None:
        items.append(HeadlineItem("all", f"{h.geomean_all:.3f}×",
                                  f"geomean over all {h.kernels} kernel(s) (nvcc's code = 1.0×)",
                                  f"{h.unknown} kept rewrite(s) without a recorded speedup left out" if h.unknown else ""))
    items.append(HeadlineItem("kept", f"{h.geomean_kept:.3f}×" if h.geomean_kept else "–",
                              f"geomean over the {h.kept} kernel(s) with a kept rewrite"))
    if not h.programs:        # a hint, after the numbers: value "" is printed as a note
        items.append(HeadlineItem("program", "", "no program estimate: no kernel was judged with a capture",
                                  "superopt capture records a run's launches and each kernel's share of its GPU time"))
    return items


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
                v.speedup if v.kept else None, v.chart_label, v.capture_share, f"#{v.anchor}", v.kept,
                v.speedup_spread)
            for v in views]
    devices = sorted({v.evidence.device for v in views if v.evidence and v.evidence.device})
    tools = sorted({f"nvcc-plus {r.record['tool'].get('nvcc_plus')}" for r in loaded if r.record.get("tool")})
    stamps = sorted(r.record["created"] for r in loaded if r.record.get("created"))
    programs = [replace(p, label=names[p.source]) for p in _programs(views)]
    head = headline(views, programs)
    return Report(
        views=views, replaced=kernels.replaced, origins=[r.origin for r in loaded],
        chart=speedup_chart(bars) if bars else None,
        counts=Counter(v.status for v in views),
        geomean_kept=head.geomean_kept,
        devices=devices, tools=tools, created=(stamps[0], stamps[-1]) if stamps else None,
        programs=programs, sass_note=sass_note, headline=head)


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
