"""A generation record as self-contained HTML (notebooks) or plain text: the verdict, the
task, the evidence, every answer's fate and reason, and the verified PTX."""
from __future__ import annotations

from html import escape

__all__ = ["record_html", "record_text"]

_COLORS = {"accepted": "#1a7f37", "not-verified": "#9a6700", "could-not-judge": "#cf222e"}


def _answers(record: dict) -> list[tuple]:
    rows = []
    for rd in record.get("rounds", []):
        if rd.get("error"):
            rows.append((rd.get("round"), "-", "model error", rd["error"]))
        for r in rd.get("responses", []):
            rows.append((rd.get("round"), r.get("index"), r.get("fate", "?"), r.get("reason", "")))
    return rows


def record_text(record: dict) -> str:
    lines = [f"{record.get('status', '?').upper()}: {record.get('kernel')} -- {record.get('stopped', '')}",
             f"signature: {record.get('signature')}  target: {record.get('target')}",
             f"reference: {(record.get('reference') or {}).get('label')}  judge: {record.get('judge')}"]
    for rnd, idx, fate, reason in _answers(record):
        lines.append(f"  round {rnd}, sample {idx}: {fate}: {str(reason)[:200]}")
    return "\n".join(lines)


def record_html(record: dict, ptx: str | None = None) -> str:
    status = record.get("status") or "?"
    color = _COLORS.get(status, "#57606a")
    res = record.get("result") or {}
    judge = record.get("judge") or {}
    ref = record.get("reference") or {}
    timing = res.get("timing") or {}
    facts = [("description", record.get("description", "")), ("signature", record.get("signature", "")),
             ("target", record.get("target", "")), ("reference", f"{ref.get('kind')}: {ref.get('label')}"),
             ("judge", f"{judge.get('backend')}, policy {judge.get('policy')}, {judge.get('sets')} sets per shape"),
             ("model", (record.get("model") or {}).get("model", "")), ("stopped", record.get("stopped", "")),
             ("seconds", record.get("seconds", ""))]
    if res.get("checked"):
        facts.append(("evidence", res["checked"]))
    if timing:
        facts.append(("timing", f"{timing.get('speedup'):.2f}x the reference" if timing.get("speedup")
                      else timing.get("reason", timing.get("status", ""))))
    for n in record.get("notes", []):
        facts.append(("note", n))
    rows = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{escape(str(k))}</th>"
                   f"<td>{escape(str(v))}</td></tr>" for k, v in facts)
    answers = "".join(f"<tr><td>{escape(str(r))}</td><td>{escape(str(i))}</td><td><b>{escape(str(f))}</b></td>"
                      f"<td>{escape(str(why))[:400]}</td></tr>" for r, i, f, why in _answers(record))
    code = ptx or res.get("ptx")
    parts = [f"<div class='superopt-generate'><div style='font-weight:bold;color:{color}'>"
             f"{escape(status.upper())}: {escape(str(record.get('kernel')))}</div>",
             f"<table>{rows}</table>"]
    if answers:
        parts.append("<details><summary>answers</summary><table><tr><th>round</th><th>sample</th><th>fate</th>"
                     f"<th>reason</th></tr>{answers}</table></details>")
    if code:
        parts.append(f"<details><summary>PTX</summary><pre>{escape(code)}</pre></details>")
    parts.append("</div>")
    return "".join(parts)
