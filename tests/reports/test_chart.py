"""The speedup chart: log scale around a drawn 1.0× line, one label per kernel, every label
inside the view box (checked here with the chart's own text metrics; test_html_chromium checks
the browser's)."""
from __future__ import annotations

import math

import pytest

from reports.chart import CHAR_W, Bar, speedup_chart, text_width
from reports.load import load_record, load_record_files
from reports.render import html_report
from tests.reports.records import ARCHIVES, BENCH_RECORDS, kept_speedups
from tests.reports.svg_text import label, speedup_svg, texts, view_box


def _bar_extent(svg, label_text):
    rects = [s for s in svg.shapes if s.kind == "rect" and s.title.endswith(label_text)]
    assert len(rects) == 1
    return rects[0].attrs["x"], rects[0].attrs["x"] + rects[0].attrs["width"]


def test_bars_are_log_scaled_from_the_one_line():
    bars = [Bar("a", "a", 2.0, "2.00×", kept=True), Bar("b", "b", 0.5, "0.50×", kept=True),
            Bar("c", "c", 4.19, "4.19×", kept=True), Bar("d", "d", None, "nvcc's code kept")]
    svg = speedup_chart(bars)
    one = next(s for s in svg.shapes if s.cls == "one-line").attrs["x1"]
    a0, a1 = _bar_extent(svg, "2.00×")
    b0, b1 = _bar_extent(svg, "0.50×")
    c0, c1 = _bar_extent(svg, "4.19×")
    assert a0 == pytest.approx(one, abs=0.02) and b1 == pytest.approx(one, abs=0.02) and c0 == pytest.approx(one, abs=0.02)
    assert a1 - one == pytest.approx(one - b0, rel=1e-3)          # 2× and 0.5× equally far from 1×
    assert (c1 - one) / (a1 - one) == pytest.approx(math.log(4.19) / math.log(2.0), rel=1e-3)
    assert any(s.kind == "text" and s.text == "1× = nvcc" for s in svg.shapes)


def test_wide_speedups_are_not_capped():
    svg = speedup_chart([Bar(n, n, v, f"{v:.2f}×", kept=True) for n, v in (("a", 2.11), ("b", 3.03), ("c", 4.19))])
    widths = [_bar_extent(svg, f"{v:.2f}×")[1] for v in (2.11, 3.03, 4.19)]
    assert widths[0] < widths[1] < widths[2]


def test_every_text_fits_in_the_view_box_by_its_metrics():
    bars = [Bar("k" * 80, "k" * 80, 9.5, "9.50×", share=0.999, kept=True),
            Bar("x", "x", None, "not verifiable", share=0.001)]
    svg = speedup_chart(bars)
    for s in svg.shapes:
        if s.kind == "text":
            assert s.attrs["x"] >= 0 and s.attrs["x"] + text_width(s.text) <= svg.width + CHAR_W / 2, s.text
            assert 0 < s.attrs["y"] <= svg.height


@pytest.mark.parametrize("path", BENCH_RECORDS, ids=lambda p: p.name)
def test_the_report_of_each_committed_records_file_labels_every_kept_speedup(path):
    record = load_record(path)
    html = html_report(load_record_files([path]))
    svg = speedup_svg(html)
    labels = [label(t) for t in texts(svg, "speedup-label")]
    expected = sorted(f"{v:.2f}×" for v in kept_speedups(record))
    assert expected and sorted(labels) == expected
    _, _, width, height = view_box(svg)
    for t in texts(svg):
        x, y = float(t.get("x")), float(t.get("y"))
        assert 0 <= x and x + text_width(label(t)) <= width + CHAR_W / 2 and 0 < y <= height, label(t)


def test_the_programs_records_report_charts_every_kernel_with_its_time_share():
    loaded = load_record_files(ARCHIVES)
    html = html_report(loaded)
    svg = speedup_svg(html)
    kernels = {(r.record.get("source"), k["kernel"]) for r in loaded for k in r.record["kernels"]}
    assert len(texts(svg, "name")) == len(kernels)
    shares = [label(t) for t in texts(svg, "share-label")]
    assert shares and all(s.endswith("%") for s in shares)
    assert "Captured programs" in html
