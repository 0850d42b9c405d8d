"""Render records: terminal summary (rich), Markdown, self-contained HTML (jinja2)."""
from __future__ import annotations

import difflib
import html

from reports.load import winner_of


def _rows(records: list[dict]) -> list[dict]:
    rows = []
    for r in records:
        for k in r["kernels"]:
            win = winner_of(k)
            cands = k.get("candidates", [])
            fates: dict[str, int] = {}
            for c in cands:
                fates[c.get("fate") or "?"] = fates.get(c.get("fate") or "?", 0) + 1
            base_t = (win or {}).get("timing", {}) or {}
            rows.append({
                "source": r.get("source") or "-",
                "target": k.get("target") or r.get("target"),
                "kernel": k["kernel"],
                "signature": k.get("signature") or k["kernel"],
                "status": k["status"],
                "decision": k.get("decision") or "-",
                "winner": k.get("winner") or "-",
                "speedup": (win or {}).get("speedup"),
                "baseline_us": _us(base_t.get("baseline")),
                "winner_us": _us(base_t.get("candidate")),
                "reason": k.get("reason") or "",
                "fates": fates,
                "candidates": cands,
                "policy": k.get("policy") or "-",
                "backend": k.get("backend") or "-",
                "baseline_ptx": (k.get("baseline") or {}).get("ptx"),
                "winner_ptx": (win or {}).get("ptx"),
                "verdict": (win or {}).get("verdict"),
            })
    return rows


def _us(stats) -> str | None:
    if not stats:
        return None
    return f"{stats['median'] * 1e6:.2f} µs ± {stats['iqr'] * 1e6 / 2:.2f}"


def terminal(records: list[dict], console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    console = console or Console()
    table = Table(title="nvcc-plus: kernels")
    for col in ("kernel", "status", "winner", "speedup", "nvcc", "nvcc-plus", "candidates"):
        table.add_column(col)
    for row in _rows(records):
        sp = f"{row['speedup']:.2f}x" if row["speedup"] else "-"
        fates = ", ".join(f"{n} {f}" for f, n in sorted(row["fates"].items())) or "-"
        table.add_row(row["signature"][:48], row["status"], row["winner"], sp,
                      row["baseline_us"] or "-", row["winner_us"] or "-", fates)
    console.print(table)


def markdown(records: list[dict]) -> str:
    lines = ["# nvcc-plus report", "",
             "| kernel | target | status | winner | speedup | nvcc | nvcc-plus | policy | backend |",
             "|---|---|---|---|---|---|---|---|---|"]
    rows = _rows(records)
    for row in rows:
        sp = f"{row['speedup']:.2f}×" if row["speedup"] else "–"
        lines.append(f"| `{row['signature']}` | {row['target']} | {row['status']} | {row['winner']} | {sp} | "
                     f"{row['baseline_us'] or '–'} | {row['winner_us'] or '–'} | {row['policy']} | {row['backend']} |")
    for row in rows:
        lines += ["", f"## `{row['signature']}`", "", f"**{row['status']}** — {row['reason']}", ""]
        if row["candidates"]:
            lines += ["| candidate | fate | speedup | reason |", "|---|---|---|---|"]
            for c in row["candidates"]:
                sp = f"{c['speedup']:.3f}×" if c.get("speedup") else "–"
                reason = (c.get("reason") or "").replace("|", "\\|").replace("\n", " ")[:160]
                lines.append(f"| {c['id']} | {c.get('fate')} | {sp} | {reason} |")
        if row["verdict"]:
            ev = row["verdict"].get("evidence", {})
            lines += ["", f"Evidence: {row['verdict'].get('reason')} (policy {row['verdict'].get('policy')}, "
                          f"seed {ev.get('seed')}, {len(ev.get('sets', []))} input sets)"]
        if row["baseline_ptx"] and row["winner_ptx"]:
            diff = difflib.unified_diff(row["baseline_ptx"].splitlines(), row["winner_ptx"].splitlines(),
                                        "nvcc", "nvcc-plus", lineterm="", n=2)
            lines += ["", "```diff", *diff, "```"]
    return "\n".join(lines) + "\n"


HTML_TEMPLATE = """<!doctype html>
<html><head><meta charset="utf-8"><title>nvcc-plus report</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;font-size:.9em}
th{background:#f3f3f3}.optimized{color:#075}.kept-baseline{color:#666}.rolled-back{color:#b00}.not-verifiable{color:#a60}
code,pre{font-family:ui-monospace,monospace;font-size:.8em}
table.diff{font-family:ui-monospace,monospace;font-size:.75em}.diff_add{background:#dfd}.diff_chg{background:#ffd}.diff_sub{background:#fdd}
</style></head><body>
<h1>nvcc-plus report</h1>
<svg width="{{ 320 + 10 }}" height="{{ 24 * rows|length + 10 }}" role="img" aria-label="speedups">
{% for row in rows %}{% set w = ((row.speedup or 1.0) * 100)|int %}
<rect x="160" y="{{ 24 * loop.index0 + 5 }}" width="{{ [w, 170]|min }}" height="16" fill="{{ '#2a7' if row.speedup and row.speedup > 1 else '#bbb' }}"/>
<text x="0" y="{{ 24 * loop.index0 + 18 }}" font-size="11">{{ row.signature[:24] }}</text>
<text x="{{ 165 + [w, 170]|min }}" y="{{ 24 * loop.index0 + 18 }}" font-size="11">{{ '%.2f×'|format(row.speedup) if row.speedup else row.status }}</text>
{% endfor %}</svg>
<table><tr><th>kernel</th><th>target</th><th>status</th><th>winner</th><th>speedup</th><th>nvcc</th><th>nvcc-plus</th><th>policy</th><th>backend</th></tr>
{% for row in rows %}<tr><td><a href="#k{{ loop.index }}"><code>{{ row.signature }}</code></a></td><td>{{ row.target }}</td>
<td class="{{ row.status }}">{{ row.status }}</td><td>{{ row.winner }}</td><td>{{ '%.2f×'|format(row.speedup) if row.speedup else '–' }}</td>
<td>{{ row.baseline_us or '–' }}</td><td>{{ row.winner_us or '–' }}</td><td>{{ row.policy }}</td><td>{{ row.backend }}</td></tr>
{% endfor %}</table>
{% for row in rows %}<h2 id="k{{ loop.index }}"><code>{{ row.signature }}</code></h2>
<p><b class="{{ row.status }}">{{ row.status }}</b> — {{ row.reason }}</p>
{% if row.candidates %}<table><tr><th>candidate</th><th>fate</th><th>speedup</th><th>reason</th></tr>
{% for c in row.candidates %}<tr><td>{{ c.id }}</td><td>{{ c.fate }}</td><td>{{ '%.3f×'|format(c.speedup) if c.speedup else '–' }}</td><td>{{ (c.reason or '')[:300] }}</td></tr>{% endfor %}
</table>{% endif %}
{% if row.verdict %}<p>Evidence: {{ row.verdict.reason }} (policy {{ row.verdict.policy }}, seed {{ row.verdict.evidence.seed }})</p>{% endif %}
{% if row.diff %}{{ row.diff|safe }}{% endif %}
{% endfor %}
</body></html>
"""


def html_report(records: list[dict]) -> str:
    import jinja2
    rows = _rows(records)
    for row in rows:
        row["diff"] = None
        if row["baseline_ptx"] and row["winner_ptx"]:
            row["diff"] = difflib.HtmlDiff(wrapcolumn=90).make_table(
                row["baseline_ptx"].splitlines(), row["winner_ptx"].splitlines(),
                "nvcc", "nvcc-plus", context=True, numlines=3)
    env = jinja2.Environment(autoescape=True)
    return env.from_string(HTML_TEMPLATE).render(rows=rows, escape=html.escape)
