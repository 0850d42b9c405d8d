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


def test_error_bars_span_the_interquartile_range_of_each_kept_speedup():
    bars = [Bar("a", "a", 2.0, "2.00×", kept=True, spread=(1.8, 2.25)), Bar("b", "b", 1.5, "1.50×", kept=True),
            Bar("c", "c", None, "nvcc's code kept")]
    svg = speedup_chart(bars)
    one = next(s for s in svg.shapes if s.cls == "one-line").attrs["x1"]
    _, a1 = _bar_extent(svg, "2.00×")
    err = [s for s in svg.shapes if s.cls == "errbar"]
    assert len(err) == 3                                          # the range and its two caps, for "a" only
    span = err[0].attrs
    # on the bar's log scale: x(v) - x(1) is proportional to log(v)
    scale = (a1 - one) / math.log(2.0)
    assert span["x1"] == pytest.approx(one + scale * math.log(1.8), abs=0.02)
    assert span["x2"] == pytest.approx(one + scale * math.log(2.25), abs=0.02)
    assert "interquartile range 1.800×–2.250×" in err[0].title
    label_a = next(s for s in svg.shapes if s.kind == "text" and s.text == "2.00×")
    assert label_a.attrs["x"] > span["x2"]                       # the label clears the error bar


def test_the_reports_error_bars_come_from_the_stored_quartiles():
    record = load_record(BENCH_RECORDS[-1])
    html = html_report(load_record_files([BENCH_RECORDS[-1]]))
    svg = speedup_svg(html)
    ns = "{http://www.w3.org/2000/svg}"
    spans = [el for el in svg.iter(f"{ns}line") if el.get("class") == "errbar" and el.get("y1") == el.get("y2")]
    kept = [k for k in record["kernels"] if k["status"] == "optimized"]
    assert len(spans) == len(kept) > 0
    titles = sorted(el.find(f"{ns}title").text for el in spans)
    for k in kept:
        win = next(c for c in k["candidates"] if c["fate"] == "winner")
        t = win.get("confirmation") or win["timing"]
        lo = t["baseline"]["q1"] / t["candidate"]["q3"]
        hi = t["baseline"]["q3"] / t["candidate"]["q1"]
        assert lo <= win["speedup"] <= hi
        assert any(f"speedup {win['speedup']:.3f}×, interquartile range {lo:.3f}×–{hi:.3f}×" in x for x in titles), k["kernel"]
