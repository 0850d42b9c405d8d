"""Inline SVG charts as lists of shapes: the speedup chart and timing box plots.

Geometry is computed here (and unit-tested); the template only prints shapes. Speedups are on
a log scale (2× and 0.5× are the same distance from 1.0×) with the 1.0× line drawn and
labelled; every label is placed inside the view box, with room reserved for the longest one,
measured at a monospace advance of :data:`CHAR_W` pixels per character.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

FONT_PX = 12
CHAR_W = 7.4                  # advance of a 12px monospace character, rounded up
ROW_H = 22
BAR_H = 14
PLOT_W = 480
SHARE_W = 90                  # the time-share bar's full width
NAME_CHARS = 44
TICKS = (0.1, 0.2, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0,
         30.0, 50.0, 100.0)


@dataclass
class Shape:
    kind: str                         # rect | line | text | title-group
    attrs: dict
    text: str = ""
    cls: str = ""
    title: str = ""                   # tooltip


@dataclass
class Svg:
    width: float
    height: float
    shapes: list[Shape] = field(default_factory=list)
    label: str = ""

    def add(self, kind: str, text: str = "", cls: str = "", title: str = "", **attrs) -> Shape:
        shape = Shape(kind, {k.replace("_", "-"): (round(v, 2) if isinstance(v, float) else v) for k, v in attrs.items()},
                      text, cls, title)
        self.shapes.append(shape)
        return shape


def text_width(text: str) -> float:
    return len(text) * CHAR_W


def fit(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


@dataclass
class Bar:
    name: str                         # shown at the left (shortened to NAME_CHARS)
    full_name: str                    # tooltip
    speedup: float | None             # kept speedup; None: no bar, the label says why
    label: str                        # "2.11×" or the status
    share: float | None = None        # fraction of the program's captured GPU time
    anchor: str = ""                  # link target of the kernel's section
    kept: bool = False                # a rewrite is kept (coloured bar)
    spread: tuple[float, float] | None = None   # the speedup's interquartile range (error bar)


def _ticks(lo: float, hi: float) -> list[float]:
    ticks = [t for t in TICKS if lo <= t <= hi]
    while len(ticks) > 9:
        ticks = [t for i, t in enumerate(ticks) if i % 2 == 0 or t == 1.0]
    return ticks


def speedup_chart(bars: list[Bar]) -> Svg:
    """Horizontal bars from the 1.0× line to each kernel's speedup, on a log scale."""
    values = [b.speedup for b in bars if b.speedup]
    values += [v for b in bars if b.speedup and b.spread for v in b.spread if v > 0]
    lo = min([1.0, *values]) / 1.08
    hi = max([1.1, *values]) * 1.06
    name_w = max([text_width(fit(b.name, NAME_CHARS)) for b in bars] + [text_width("kernel")]) + 12
    label_w = max([text_width(b.label) for b in bars] + [0]) + 10
    has_share = any(b.share is not None for b in bars)
    share_w = (SHARE_W + text_width("100.0%") + 24) if has_share else 0
    top, bottom = 28, 36
    x0 = name_w
    width = name_w + PLOT_W + label_w + share_w + 4
    height = top + ROW_H * len(bars) + bottom
    svg = Svg(width, height, label="speedup over nvcc per kernel, log scale")

    def x(v: float) -> float:
        return x0 + PLOT_W * (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))

    plot_bottom = top + ROW_H * len(bars)
    svg.add("text", "speedup over nvcc (log scale)", cls="axis-title", x=x0, y=16)
    if has_share:
        svg.add("text", "share of GPU time", cls="axis-title", x=width - share_w + 12, y=16)
    one = x(1.0)
    svg.add("line", cls="one-line", x1=one, x2=one, y1=top - 4, y2=plot_bottom + 4)
    svg.add("text", "1× = nvcc", cls="tick one", x=max(one - text_width("1×") / 2, 0), y=plot_bottom + 18)
    taken = [(one - text_width("1× = nvcc") / 2 - 8, one + text_width("1× = nvcc") + 8)]
    for t in _ticks(lo, hi):
        tick = f"{t:g}×"
        tx = min(max(x(t) - text_width(tick) / 2, 0), width - text_width(tick))
        if t == 1.0 or any(tx < b and tx + text_width(tick) > a for a, b in taken):
            continue                  # a label here would overlap one already drawn
        taken.append((tx - 8, tx + text_width(tick) + 8))
        svg.add("line", cls="grid", x1=x(t), x2=x(t), y1=top - 4, y2=plot_bottom + 4)
        svg.add("text", tick, cls="tick", x=tx, y=plot_bottom + 18)
    for i, b in enumerate(bars):
        y = top + ROW_H * i
        mid = y + ROW_H / 2
        svg.add("text", fit(b.name, NAME_CHARS), cls="name", title=b.full_name, x=4, y=mid + 4, href=b.anchor)
        if b.speedup and b.speedup != 1.0:
            xs = x(b.speedup)
            left, right = min(one, xs), max(one, xs)
            cls = "bar-faster" if b.speedup > 1 else "bar-slower"
            svg.add("rect", cls=cls if b.kept else "bar-other", title=f"{b.full_name}: {b.label}",
                    x=left, y=mid - BAR_H / 2, width=max(right - left, 1.0), height=BAR_H)
            lx = right + 5
            if b.spread and min(b.spread) > 0:
                lx = max(lx, _error_bar(svg, b, x(b.spread[0]), x(b.spread[1]), mid) + 5)
        else:
            svg.add("rect", cls="kept-marker", title=f"{b.full_name}: {b.label}",
                    x=one - 3, y=mid - BAR_H / 2, width=6, height=BAR_H)
            lx = one + 8
        svg.add("text", b.label, cls="speedup-label" if b.kept else "status-label", x=lx, y=mid + 4)
        if b.share is not None:
            sx = width - share_w + 12
            svg.add("rect", cls="share-track", x=sx, y=mid - 5, width=SHARE_W, height=10)
            svg.add("rect", cls="share", x=sx, y=mid - 5, width=max(SHARE_W * b.share, 0.5), height=10,
                    title=f"{b.full_name}: {b.share:.1%} of the captured run's GPU time")
            svg.add("text", f"{b.share:.1%}", cls="share-label", x=sx + SHARE_W + 6, y=mid + 4)
    return svg


def _error_bar(svg: Svg, b: Bar, x_lo: float, x_hi: float, mid: float) -> float:
    """The speedup's interquartile range across the bar's end, with caps; returns its right end."""
    lo, hi = b.spread
    tip = (f"{b.full_name}: speedup {b.speedup:.3f}×, interquartile range {lo:.3f}×–{hi:.3f}× "
           "(nvcc's quartiles over the rewrite's, from the recorded timings)")
    cap = BAR_H / 2 - 2
    svg.add("line", cls="errbar", title=tip, x1=x_lo, x2=x_hi, y1=mid, y2=mid)
    for xv in (x_lo, x_hi):
        svg.add("line", cls="errbar", title=tip, x1=xv, x2=xv, y1=mid - cap, y2=mid + cap)
    return x_hi


@dataclass
class Box:
    name: str                         # "nvcc" or "nvcc-plus"
    stats: dict                       # n, median, q1, q3, min, max (seconds)


def box_plot(boxes: list[Box]) -> Svg:
    """Min–max whiskers, the interquartile box and the median, in microseconds on one scale."""
    lo = min(b.stats["min"] for b in boxes)
    hi = max(b.stats["max"] for b in boxes)
    pad = (hi - lo) * 0.05 or hi * 0.01 or 1e-9
    lo, hi = max(lo - pad, 0.0), hi + pad
    name_w = max(text_width(b.name) for b in boxes) + 12
    width, plot_w = 560, 560 - name_w - 84
    row, top = 26, 6
    height = top + row * len(boxes) + 28
    svg = Svg(width, height, label="launch time distribution, µs")

    def x(v: float) -> float:
        return name_w + plot_w * (v - lo) / (hi - lo)

    for i, b in enumerate(boxes):
        s, mid = b.stats, top + row * i + row / 2
        tip = (f"{b.name}: n={s.get('n')}, median {s['median'] * 1e6:.3f} µs, IQR {s['q1'] * 1e6:.3f}–"
               f"{s['q3'] * 1e6:.3f} µs, min {s['min'] * 1e6:.3f}, max {s['max'] * 1e6:.3f}")
        svg.add("text", b.name, cls="name", x=4, y=mid + 4)
        svg.add("line", cls="whisker", x1=x(s["min"]), x2=x(s["max"]), y1=mid, y2=mid)
        for v in (s["min"], s["max"]):
            svg.add("line", cls="whisker", x1=x(v), x2=x(v), y1=mid - 5, y2=mid + 5)
        svg.add("rect", cls="box " + ("box-base" if i == 0 else "box-opt"), title=tip,
                x=x(s["q1"]), y=mid - 8, width=max(x(s["q3"]) - x(s["q1"]), 1.0), height=16)
        svg.add("line", cls="median", x1=x(s["median"]), x2=x(s["median"]), y1=mid - 8, y2=mid + 8)
        svg.add("text", f"{s['median'] * 1e6:.2f} µs", cls="value", x=x(s["max"]) + 6, y=mid + 4)
    axis_y = top + row * len(boxes) + 4
    svg.add("line", cls="grid", x1=name_w, x2=name_w + plot_w, y1=axis_y, y2=axis_y)
    for v in (lo, (lo + hi) / 2, hi):
        label = f"{v * 1e6:.2f} µs"
        svg.add("text", label, cls="tick", x=min(max(x(v) - text_width(label) / 2, 0), width - text_width(label)),
                y=axis_y + 16)
    return svg
