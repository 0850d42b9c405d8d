"""``superopt compare`` and ``superopt gate`` as Markdown (a CI comment) or JSON (a CI step).

The terminal forms stay in :mod:`reports.cli`; these carry the same rows, numbers and
sentences (:func:`reports.compare.row_problems`, :func:`reports.compare.mismatches`), so a
comment says exactly what the gate decided. The JSON documents are versioned
(``schema``/``version``); numbers are plain (speedups as ratios, changes as fractions),
``null`` where a side has no kernel or no known speed.
"""
from __future__ import annotations

import json

from reports.compare import Row, geomean, mismatches, row_problems

COMPARE_SCHEMA, GATE_SCHEMA, VERSION = "nvcc-plus/compare", "nvcc-plus/gate", 1


def _x(v: float | None) -> str:
    return f"{v:.3f}×" if v else "–"


def _change(r: Row) -> str:
    return f"{(r.change - 1) * 100:+.1f}%" if r.change else ""


def _status(r: Row) -> str:
    if r.status_before == r.status_after:
        return r.status_before or "–"
    return f"{r.status_before or 'missing'} → {r.status_after or 'missing'}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _geomeans(rows: list[Row]) -> dict | None:
    common = [r for r in rows if r.before and r.after]
    old, new = geomean(r.before for r in common), geomean(r.after for r in common)
    return {"kernels": len(common), "old": old, "new": new} if old and new else None


def _row_doc(r: Row, max_regression: float | None = None) -> dict:
    doc = {"kernel": r.key.kernel, "label": r.label, "source": r.key.source, "file": r.key.file_name,
           "target": r.key.target, "old": r.before, "new": r.after,
           "change": round(r.change - 1, 6) if r.change else None,
           "status_old": r.status_before, "status_new": r.status_after}
    if max_regression is not None:
        doc["noise_floor"] = r.noise_floor(max_regression)
        doc["problems"] = row_problems(r, max_regression)
    return doc


def _table(rows: list[Row], max_regression: float | None = None) -> list[str]:
    head = "| kernel | file | target | old | new | change | status |"
    rule = "|---|---|---|---:|---:|---:|---|"
    if max_regression is not None:
        head, rule = head + " noise floor | verdict |", rule + "---:|---|"
    lines = [head, rule]
    for r in rows:
        cells = [f"`{_cell(r.label)}`", f"`{_cell(r.key.file_name)}`", r.key.target, _x(r.before), _x(r.after),
                 _change(r), _cell(_status(r))]
        if max_regression is not None:
            cells += [f"{100 * r.noise_floor(max_regression):.1f}%",
                      "**regression**" if row_problems(r, max_regression) else "ok"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _geomean_line(rows: list[Row]) -> list[str]:
    g = _geomeans(rows)
    return [f"Geomean over the {g['kernels']} kernel(s) in both: {_x(g['old'])} → {_x(g['new'])}."] if g else []


def compare_markdown(rows: list[Row], old: str, new: str) -> str:
    lines = [f"### nvcc-plus compare: `{old}` → `{new}`", "", *_table(rows), ""]
    lines += _geomean_line(rows)
    warnings = mismatches(rows)
    if warnings:
        lines += ["", "Measured differently (compared all the same):", *[f"- {_cell(w)}" for w in warnings]]
    return "\n".join(lines).rstrip() + "\n"


def compare_json(rows: list[Row], old: str, new: str) -> str:
    doc = {"schema": COMPARE_SCHEMA, "version": VERSION, "old": old, "new": new,
           "kernels": [_row_doc(r) for r in rows], "geomean": _geomeans(rows), "warnings": mismatches(rows)}
    return json.dumps(doc, indent=1)


def gate_markdown(rows: list[Row], old: str, new: str, max_regression: float, problems: list[str],
                  counts: tuple[int, int]) -> str:
    n_old, n_new = counts
    if problems:
        head = f"### nvcc-plus gate: {len(problems)} regression(s) against `{old}`"
    else:
        head = f"### nvcc-plus gate: no regressions ({n_new} kernel(s) in `{new}`, {n_old} in `{old}`)"
    lines = [head, ""]
    if problems:
        lines += [f"- {_cell(p)}" for p in problems] + [""]
    warnings = mismatches(rows)
    if warnings:
        lines += ["Measured differently (compared all the same):", *[f"- {_cell(w)}" for w in warnings], ""]
    lines += [f"A kernel regresses when its speedup falls by more than its noise floor: the larger of "
              f"--max-regression ({100 * max_regression:.1f}%) and its timings' spread in either record.", ""]
    lines += _table(rows, max_regression) + [""] + _geomean_line(rows)
    return "\n".join(lines).rstrip() + "\n"


def gate_json(rows: list[Row], old: str, new: str, max_regression: float, problems: list[str],
              counts: tuple[int, int], exit_code: int) -> str:
    doc = {"schema": GATE_SCHEMA, "version": VERSION, "old": old, "new": new, "passed": not problems,
           "exit_code": exit_code, "max_regression": max_regression, "regressions": problems,
           "warnings": mismatches(rows), "kernels_old": counts[0], "kernels_new": counts[1],
           "kernels": [_row_doc(r, max_regression) for r in rows], "geomean": _geomeans(rows)}
    return json.dumps(doc, indent=1)
