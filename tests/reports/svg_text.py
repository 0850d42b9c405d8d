"""Reading the speedup chart back out of a rendered report (for assertions on it)."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

SVG_NS = "{http://www.w3.org/2000/svg}"


def speedup_svg(html: str) -> ET.Element:
    m = re.search(r'<svg class="speedups".*?</svg>', html, re.S)
    assert m, "the report has no speedup chart"
    return ET.fromstring(m.group(0))


def view_box(svg: ET.Element) -> tuple[float, float, float, float]:
    x, y, w, h = map(float, svg.get("viewBox").split())
    return x, y, w, h


def texts(svg: ET.Element, cls: str | None = None) -> list[ET.Element]:
    out = []
    for el in svg.iter(f"{SVG_NS}text"):
        if cls is None or cls in (el.get("class") or "").split():
            out.append(el)
    return out


def label(el: ET.Element) -> str:
    """A text element's own text (its <title> tooltip left out)."""
    return (el.text or "") + "".join(child.tail or "" for child in el)
