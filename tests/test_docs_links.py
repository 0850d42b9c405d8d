"""The README stays short and its documentation stays connected: every relative link in
README.md and docs/*.md points at a file that exists (and at a heading that exists, when it names
one), every docs page is reachable from the README by links, and the README is at most 300
lines. The README was once 945 lines with its links unchecked; this keeps the split honest."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))
README_MAX_LINES = 300

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The text with fenced code blocks and inline code removed (links there are not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(path: Path) -> list[str]:
    return LINK.findall(_prose(path.read_text()))


def anchors(path: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped (not '-' or '_'), spaces to '-',
    a repeated id gets -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for title in HEADING.findall(FENCE.sub("", path.read_text())):
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)      # a link's text only
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)


def resolve(source: Path, target: str) -> tuple[Path, str]:
    path, _, anchor = target.partition("#")
    return (source if not path else (source.parent / path).resolve()), anchor


def broken_links(source: Path) -> list[str]:
    out = []
    for target in filter(_relative, links(source)):
        path, anchor = resolve(source, target)
        if not path.exists():
            out.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            out.append(f"{target}: no heading #{anchor} in {path.name}")
    return out


@pytest.mark.parametrize("source", [README, *PAGES], ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(source):
    assert broken_links(source) == []


def test_the_readme_is_at_most_300_lines():
    n = len(README.read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines; move detail to a page under docs/"


def test_every_docs_page_is_reachable_from_the_readme():
    reached, todo = set(), [README]
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        for target in filter(_relative, links(page)):
            path, _ = resolve(page, target)
            if path.suffix == ".md" and path.exists():
                todo.append(path)
    assert [str(p.relative_to(REPO)) for p in PAGES if p not in reached] == []


def test_the_worked_pass_example_is_the_file_it_names():
    """docs/adding-a-pass.md shows tests/search/data/example_pass.py, which the tests run."""
    page = (REPO / "docs" / "adding-a-pass.md").read_text()
    shown = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    code = (REPO / "tests" / "search" / "data" / "example_pass.py").read_text()
    assert shown == code[code.index("from ptx_ir"):]


# The checker itself: it must find what it is there to find.

def test_the_checker_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "a.md").write_text("# A page\n\n## Some section: here\n\n## Twice\n\n## Twice\n")
    src = tmp_path / "b.md"
    src.write_text("[ok](a.md) [ok](a.md#some-section-here) [ok](a.md#twice-1) [gone](nothing.md)\n"
                   "[bad](a.md#nowhere) [web](https://example.com) `[code](not-a-link.md)`\n"
                   "```\n[x](fenced.md)\n```\n"
                   "[own](#local) [own](#elsewhere), and a link whose text spans [two\nlines](missing-too.md)\n"
                   "\n# Local\n")
    assert broken_links(src) == ["nothing.md: no such file",
                                 "a.md#nowhere: no heading #nowhere in a.md",
                                 "#elsewhere: no heading #elsewhere in b.md",
                                 "missing-too.md: no such file"]
