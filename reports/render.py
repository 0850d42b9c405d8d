"""Render records: terminal summary (rich), Markdown, self-contained HTML (jinja2).

All three render the same :class:`reports.report.Report` (kernels keyed by source, target and
kernel, the newest record of each). The functions take records (dicts) or loaded records.
"""
from __future__ import annotations

import difflib

from reports.load import LoadedRecord
from reports.report import Report, build_report, headline_items
from reports.view import us


def _loaded(records) -> list[LoadedRecord]:
    return [r if isinstance(r, LoadedRecord) else LoadedRecord("(in memory)", r) for r in records]


def _report(records, sass: bool | None = False) -> Report:
    return records if isinstance(records, Report) else build_report(_loaded(records), sass=sass)


def _speed(v) -> str | None:
    return f"{v.speedup:.2f}" if v.kept and v.speedup else None


def terminal(records, console=None) -> None:
    """A table that fits a terminal: file and target columns only when they tell kernels
    apart, the share column only with captures; the winner and evidence are in md/html."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    report = _report(records)
    console = console or Console()
    views = report.views
    cols = ["kernel"]
    if len({v.entry.key.source for v in views}) > 1:
        cols.append("file")
    if len({v.entry.key.target for v in views}) > 1:
        cols.append("target")
    cols += ["status", "speedup", "nvcc", "nvcc-plus"]
    if any(v.capture_share is not None for v in views):
        cols.append("share")
    cols.append("tried")
    for item in headline_items(report.headline):
        if not item.value:
            console.print(f"[dim]{escape(item.label)} ({escape(item.detail)})[/dim]", highlight=False)
            continue
        console.print(f"[bold]{escape(item.value)}[/bold] {escape(item.label)}"
                      + (f" [dim]({escape(item.detail)})[/dim]" if item.detail else ""), highlight=False)
    table = Table(title=f"nvcc-plus: {len(views)} kernel(s)")
    for col in cols:
        table.add_column(col, justify="left" if col in ("kernel", "file", "target", "status") else "right",
                         no_wrap=col != "kernel", overflow="fold" if col == "kernel" else "ellipsis")
    for v in views:
        t = v.timings[-1] if v.timings else None
        cells = {"kernel": v.name, "file": v.file_label, "target": v.entry.key.target, "status": v.status_label,
                 "speedup": f"{_speed(v)}x" if _speed(v) else "-",
                 "nvcc": us(t.baseline["median"]) if t else "-", "nvcc-plus": us(t.candidate["median"]) if t else "-",
                 "share": f"{v.capture_share:.1%}" if v.capture_share is not None else "-",
                 "tried": str(len(v.candidates))}
        table.add_row(*(cells[c] for c in cols))
    console.print(table)
    for v in views:
        for c in v.checks:
            console.print(f"[bold]{escape(v.name)}[/bold]: {escape(c.candidate)}"
                          + (" (kept)" if c.kept else f" ({escape(c.fate)})") + f": {escape(c.headline)}",
                          highlight=False)
            for param, footprint in c.ranges:
                console.print(f"  {escape(param)}: {escape(footprint)}", highlight=False)
            console.print(f"  {escape(c.fast_path)}", highlight=False)
            for u in c.unknown:
                console.print(f"  [dim]not known at {escape(u)}[/dim]", highlight=False)
    if report.replaced:
        console.print(f"{len(report.replaced)} older record(s) of the same (source, target, kernel) replaced by newer ones")


def markdown(records) -> str:
    report = _report(records)
    lines = ["# nvcc-plus report", ""]
    lines += [(f"- **{item.value}** {item.label}" if item.value else f"- {item.label}")
              + (f" ({item.detail})" if item.detail else "") for item in headline_items(report.headline)]
    lines += ["",
             "| kernel | target | status | winner | speedup | nvcc | nvcc-plus | policy | backend | source |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for v in report.views:
        t = v.timings[-1] if v.timings else None
        sp = f"{_speed(v)}×" if _speed(v) else "–"
        lines.append(f"| `{v.name}` | {v.entry.key.target} | {v.status} | {v.kernel.get('winner') or '-'} | {sp} | "
                     f"{us(t.baseline['median']) if t else '–'} | {us(t.candidate['median']) if t else '–'} | "
                     f"{v.kernel.get('policy') or '-'} | {v.kernel.get('backend') or '-'} | `{v.entry.key.source}` |")
    if report.replaced:
        lines += ["", f"{len(report.replaced)} older record(s) of the same (source, target, kernel) were replaced "
                      "by newer ones (newest `created` wins)."]
    for v in report.views:
        lines += ["", f"## `{v.name}`", "", f"**{v.status}** — {v.kernel.get('reason') or ''}", "",
                  f"Source `{v.entry.key.source}`, target {v.entry.key.target}, record `{v.entry.origin}`."]
        if v.candidates:
            lines += ["", "| candidate | fate | speedup | reason |", "|---|---|---|---|"]
            for c in v.candidates:
                sp = f"{c['speedup']:.3f}×" if c.get("speedup") else "–"
                reason = (c.get("reason") or "").replace("|", "\\|").replace("\n", " ")[:160]
                lines.append(f"| {c['id']} | {c.get('fate')} | {sp} | {reason} |")
        if v.phases:
            lines += ["", "Where the search's time went" + (f" ({v.gpu_busy})" if v.gpu_busy else "") + ": "
                      + ", ".join(f"{name} {sec:.2f} s" + (f" ×{n}" if n > 1 else "") for name, sec, n in v.phases)
                      + "."]
        if v.evidence:
            ev = v.evidence
            lines += ["", f"Why it is safe: {ev.verdict} (policy {ev.policy}); {ev.launches}."]
            for s in ev.input_sets:
                bufs = ", ".join(f"{n}[{size}] {dist}" for n, size, dist in s.buffers)
                lines.append(f"- {s.label}: grid {s.grid}, block {s.block}; {s.scalars}; {bufs}")
            if ev.fresh:
                lines.append(f"- re-check on fresh inputs: {ev.fresh}")
            if ev.sanitizer:
                lines.append(f"- compute-sanitizer: {ev.sanitizer}")
        if v.shapes:
            sh = v.shapes
            lines += ["", f"Launch shapes the program may use, timed for `{sh.candidate}` ({sh.fate})"
                          + (f"; weighed by GPU time {sh.weighted:.3f}×" if sh.weighted else "") + ":", "",
                      "| block | grid | from | share | speedup | verdict |", "|---|---|---|---|---|---|"]
            for r in sh.rows:
                verdict = r.verdict.replace("|", "\\|")
                lines.append(f"| {r.block} | {r.grid} | {r.origin} | {r.share} | {r.speedup} | {verdict} |")
        for c in v.checks:
            lines += ["", f"Launch-time no-alias check of `{c.candidate}` ({'kept' if c.kept else c.fate}): "
                          f"{c.headline}; fast body: {c.body}.", ""]
            lines += [f"- `{param}`: {footprint}" for param, footprint in c.ranges]
            lines += [f"- {c.fast_path}"] + [f"- not known at {u}" for u in c.unknown]
            if c.shapes:
                lines += ["", "| grid | block | launches | ms | runs | why | ranges |", "|---|---|---|---|---|---|---|"]
                lines += [f"| {r.grid} | {r.block} | {r.launches} | {r.ms} | {r.path} | "
                          f"{r.detail.replace('|', chr(92) + '|')} | {r.ranges} |" for r in c.shapes]
            if c.shapes_not_listed:
                lines.append(f"- {c.shapes_not_listed} more captured shape(s), counted above, not listed")
        base_ptx = (v.kernel.get("baseline") or {}).get("ptx")
        win_ptx = (v.winner or {}).get("ptx")
        if base_ptx and win_ptx:
            diff = difflib.unified_diff(base_ptx.splitlines(), win_ptx.splitlines(), "nvcc", "nvcc-plus",
                                        lineterm="", n=2)
            lines += ["", "```diff", *diff, "```"]
    return "\n".join(lines) + "\n"


def html_report(records, sass: bool | None = False) -> str:
    from reports.html import render_html
    return render_html(_report(records, sass=sass))
