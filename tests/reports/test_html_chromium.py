"""The HTML report as a browser renders it (headless Chromium): a screenshot that is not blank,
and, in the rendered DOM, every kept speedup label inside the chart's SVG and inside its view
box, measured with the browser's own text layout (getBBox)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from reports.load import load_record, load_record_files
from reports.render import html_report
from tests.reports.png import decode, ink
from tests.reports.records import BENCH_RECORDS, kept_speedups

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (apt-get install -y chromium; .ci/run installs it)")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check"]

# Added to a copy of the report only: measure every text of the chart as laid out.
MEASURE = """<script>
const svg = document.querySelector("svg.speedups");
const vb = svg.viewBox.baseVal;
const out = {viewBox: [vb.x, vb.y, vb.width, vb.height], texts: []};
for (const t of svg.querySelectorAll("text")) {
  const b = t.getBBox();
  const own = Array.from(t.childNodes).filter(n => n.nodeType === 3).map(n => n.data).join("");
  out.texts.push({cls: t.getAttribute("class"), text: own, x: b.x, y: b.y, w: b.width, h: b.height});
}
const pre = document.createElement("pre"); pre.id = "measured"; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def _chromium(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, *args], capture_output=True, timeout=timeout)


@pytest.fixture(scope="module")
def report_page(tmp_path_factory):
    path = BENCH_RECORDS[-1]
    page = tmp_path_factory.mktemp("html") / "report.html"
    page.write_text(html_report(load_record_files([path])), encoding="utf-8")
    return path, page


def test_screenshot_is_a_rendered_page(report_page, tmp_path):
    _, page = report_page
    shot = tmp_path / "report.png"
    run = _chromium(f"--screenshot={shot}", "--window-size=1400,1000", page.as_uri())
    assert shot.exists(), run.stderr.decode(errors="replace")[-2000:]
    width, height, _, _ = decode(shot.read_bytes())
    assert (width, height) == (1400, 1000)
    assert ink(shot.read_bytes()) > 0.02           # text, bars and tables, not a white page


def test_rendered_chart_holds_every_kept_speedup_inside_its_view_box(report_page, tmp_path):
    path, page = report_page
    measured_page = tmp_path / "measured.html"
    measured_page.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    run = _chromium("--dump-dom", measured_page.as_uri())
    dom = run.stdout.decode()
    m = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert m, f"the page did not run its measurement: {run.stderr.decode(errors='replace')[-2000:]}"
    data = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    vx, vy, vw, vh = data["viewBox"]
    labels = [t for t in data["texts"] if t["cls"] == "speedup-label"]
    expected = sorted(f"{v:.2f}×" for v in kept_speedups(load_record(path)))
    assert sorted(t["text"] for t in labels) == expected
    for t in data["texts"]:
        assert t["w"] > 0, t
        assert vx <= t["x"] and t["x"] + t["w"] <= vx + vw, f"text {t['text']!r} leaves the view box horizontally: {t}"
        assert vy <= t["y"] and t["y"] + t["h"] <= vy + vh, f"text {t['text']!r} leaves the view box vertically: {t}"


# ---------------------------------------------------------------------------------- no overflowing table

# Added to a copy of a report: where every table ends (or the box that scrolls it, when it is in
# one) against the body's content box, whether it needs that box's scroll bar, and whether the
# page scrolls sideways.
LAYOUT = """<script>
(function () {
  const out = {page: [document.documentElement.scrollWidth, window.innerWidth], tables: []};
  function holder(el) {
    for (let p = el.parentElement; p; p = p.parentElement) {
      if (p === document.body || getComputedStyle(p).overflowX !== "visible") return p;
    }
    return document.body;
  }
  const body = document.body.getBoundingClientRect();
  const bodyRight = body.right - parseFloat(getComputedStyle(document.body).paddingRight);
  document.querySelectorAll("table").forEach((t, i) => {
    const h = holder(t), inBody = h === document.body;
    // a table in a box that scrolls ends where the box ends; the box must end inside the body
    const right = (inBody ? t : h).getBoundingClientRect().right;
    out.tables.push({i: i, cls: t.className, head: (t.querySelector("th") || {textContent: ""}).textContent,
                     right: right, limit: bodyRight, scrolls: !inBody && h.scrollWidth > h.clientWidth + 1});
  });
  const pre = document.createElement("pre"); pre.id = "layout"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def _layout(page, tmp_path, width: int) -> dict:
    measured = tmp_path / f"layout-{width}.html"
    measured.write_text(page.read_text(encoding="utf-8").replace("</body>", LAYOUT + "</body>"), encoding="utf-8")
    run = _chromium(f"--window-size={width},1000", "--dump-dom", measured.as_uri())
    m = re.search(r'<pre id="layout">(.*?)</pre>', run.stdout.decode(), re.S)
    assert m, f"the page did not run its measurement: {run.stderr.decode(errors='replace')[-2000:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def _long_names_record() -> dict:
    from tests.reports.records import kernel, module
    k = kernel("gemv_rows")
    k["signature"] = "gemv_rows_with_a_very_long_templated_name<float, 256, true>(" + ", ".join(
        f"float const* __restrict__ input_matrix_{i}" for i in range(6)) + ")"
    k["winner"] = "vectorize-memory(max_bytes=16,versioning=True)+occupancy(block=(128,1,1),maxnreg=128)+" * 2
    return module([k, kernel("gemm_tiled")],
                  source="/home/someone/projects/a-very-long-checkout-directory-name/src/kernels/linear_algebra/gemv.cu")


@pytest.fixture(scope="module")
def layout_pages(tmp_path_factory):
    from reports.load import LoadedRecord
    from tests.reports.records import ARCHIVES
    folder = tmp_path_factory.mktemp("layout")
    pages = {"programs": html_report(load_record_files(ARCHIVES)),        # the programs table of issue 28
             "bench": html_report(load_record_files([BENCH_RECORDS[-1]]), sass=None),   # with SASS where installed
             "long-names": html_report([LoadedRecord("long.json", _long_names_record())])}
    out = {}
    for name, html in pages.items():
        out[name] = folder / f"{name}.html"
        out[name].write_text(html, encoding="utf-8")
    return out


@pytest.mark.parametrize("name", ["programs", "bench", "long-names"])
def test_no_table_overflows_its_container_at_1400_px(layout_pages, tmp_path, name):
    data = _layout(layout_pages[name], tmp_path, 1400)
    assert data["page"][0] <= data["page"][1], f"the page scrolls sideways: {data['page']}"
    assert data["tables"]
    for t in data["tables"]:
        assert t["right"] <= t["limit"] + 0.5, f"{name}: table {t['i']} ({t['cls'] or t['head']!r}) overflows: {t}"
        if "code" not in t["cls"].split():        # listings may scroll in their box; tables of facts fit
            assert not t["scrolls"], f"{name}: table {t['i']} ({t['head']!r}) needs a scroll bar at 1400 px: {t}"


@pytest.mark.parametrize("name", ["programs", "long-names"])
def test_a_narrow_window_scrolls_inside_tables_not_the_page(layout_pages, tmp_path, name):
    data = _layout(layout_pages[name], tmp_path, 900)
    assert data["page"][0] <= data["page"][1], f"the page scrolls sideways: {data['page']}"
    for t in data["tables"]:
        assert t["right"] <= t["limit"] + 0.5, f"{name}: table {t['i']} ({t['cls'] or t['head']!r}) overflows: {t}"
