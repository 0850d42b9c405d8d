"""What a report shows of a candidate's launch-time no-alias check, from its record entry alone.

No-alias versioning (``restrict-body``, ``promote-accumulators``) puts a fast body behind a check
that compares the buffers' byte ranges at each launch; nvcc's code runs when they overlap. A
reader needs to know which buffers are compared, the ranges, and how often the program's
captured launches would take the fast body: a speedup measured on disjoint test buffers gains
nothing at launches that alias. The record's ``alias_checks`` (written by
``superopt.search.fast_path``; ``reports/schema.json``, ``$defs/alias_check``) holds all of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from reports.load import winner_of


@dataclass
class CheckShapeRow:
    grid: str
    block: str
    launches: int
    ms: str
    path: str                  # "fast body", "nvcc's code", "not known"
    detail: str                # why (the overlapping pair, a failed condition, why not known)
    ranges: str                # "param_2: bytes 0–1024 of param_2 (1024 B); ..."


@dataclass
class CheckView:
    candidate: str
    fate: str
    kept: bool
    pairs: list[str]                           # "param_2 vs param_1"
    ranges: list[tuple[str, str]]              # (param, footprint in words)
    instructions: int
    body: str
    fast_path: str                             # the sentence the report leads with
    unknown: list[str] = field(default_factory=list)
    shapes: list[CheckShapeRow] = field(default_factory=list)
    shapes_not_listed: int = 0

    @property
    def headline(self) -> str:
        return f"check of {', '.join(self.pairs) or 'no pair'} ({self.instructions} instructions)"


def short_param(name: str, kernel: str) -> str:
    """``_Z3fooPfS_i_param_2`` of kernel ``_Z3fooPfS_i`` -> ``param_2``."""
    return name[len(kernel) + 1:] if kernel and name.startswith(kernel + "_param_") else name


def _dims(v) -> str:
    dims = list(v or [])
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    return "×".join(map(str, dims)) or "–"


def fast_path_sentence(check: dict) -> str:
    """"fast path ran on K of N captured launches (X% of the kernel's captured time)", or why
    nothing is known."""
    cap = check.get("capture")
    if not cap:
        return check.get("capture_note") or "no capture: not known"
    n, k = cap.get("captured_launches", 0), cap.get("fast_path_launches", 0)
    share = cap.get("fast_path_share")
    text = (f"fast path ran on {k} of {n} captured launches "
            + (f"({share:.1%} of the kernel's captured time)" if share is not None
               else "(the capture has no launch times)"))
    if cap.get("unknown_launches"):
        text += f"; not known for {cap['unknown_launches']}"
    return text


def _shape_row(s: dict, kernel: str) -> CheckShapeRow:
    path = {True: "fast body", False: "nvcc's code"}.get(s.get("fast_path"), "not known")
    detail = s.get("reason") or ""
    if s.get("overlaps"):
        detail += ": " + ", ".join(f"{short_param(w, kernel)} overlaps {short_param(o, kernel)}"
                                   for w, o in s["overlaps"])
    ranges = "; ".join(f"{short_param(p, kernel)}: bytes {r['from']}–{r['to']} of "
                       f"{short_param(r['allocation'], kernel)}'s allocation ({r['extent']} B)"
                       for p, r in (s.get("ranges") or {}).items())
    ms = s.get("ms")
    return CheckShapeRow(_dims(s.get("grid")), _dims(s.get("block")), int(s.get("launches") or 0),
                         f"{ms:.3f}" if isinstance(ms, (int, float)) else "–", path, detail, ranges)


def check_views(kernel: dict) -> list[CheckView]:
    """Every no-alias check of the kernel's candidates: the kept candidate's first, then the
    others in the record's order."""
    name = kernel.get("kernel") or ""
    win = winner_of(kernel)
    cands = [c for c in kernel.get("candidates") or [] if c.get("alias_checks")]
    cands.sort(key=lambda c: c is not win)
    out = []
    for c in cands:
        for chk in c["alias_checks"]:
            cap = chk.get("capture") or {}
            out.append(CheckView(
                candidate=c.get("id", "?"), fate=c.get("fate") or "", kept=c is win,
                pairs=[f"{short_param(w, name)} vs {short_param(o, name)}"
                       for w in chk.get("written", []) for o in chk.get("compared", []) if o != w],
                ranges=[(short_param(p, name), r) for p, r in (chk.get("ranges") or {}).items()],
                instructions=int(chk.get("instructions") or 0), body=chk.get("body") or "",
                fast_path=fast_path_sentence(chk),
                unknown=[f"{u['launches']} launch(es): {u['reason']}" for u in cap.get("unknown") or []],
                shapes=[_shape_row(s, name) for s in cap.get("shapes") or []],
                shapes_not_listed=int(cap.get("shapes_not_listed") or 0)))
    return out
