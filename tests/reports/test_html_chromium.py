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
