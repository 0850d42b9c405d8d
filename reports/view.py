"""What a report shows of one kernel, gathered from its record once for every renderer.

The record is the only input (plus SASS when the CUDA tools are installed): evidence of safety
(input sets, value distributions, sizes, launches, largest differences, the re-check on fresh
inputs, the sanitizer), timings as distributions, resources with the occupancy they allow,
the code before and after, the source lines behind it, and the launch-time no-alias checks of
versioned candidates (:mod:`reports.alias_checks`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from reports.alias_checks import CheckView, check_views
from reports.keyed import KernelEntry, kept_speedup
from reports.lineinfo import SourceLines, source_lines
from reports.load import winner_of
from reports.occupancy import Occupancy, occupancy
from reports.sass import Sass
from reports.sass_diff import MixRow, instruction_mix, normalise_pair
from reports.sidebyside import DiffRow, changed_lines, side_by_side

STATUS_LABEL = {
    "kept-baseline": "nvcc's code kept",
    "not-verifiable": "not verifiable",
    "rolled-back": "rolled back",
    "error": "optimizer error",
    "locked": "locked",
    "cached": "cached",
    "optimized": "optimized",
}


def us(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e6:.2f} µs"


@dataclass
class InputSet:
    label: str
    grid: str
    block: str
    scalars: str
    buffers: list[tuple[str, int | None, str]]      # name, elements, distribution


@dataclass
class Evidence:
    policy: str
    verdict: str
    input_sets: list[InputSet]
    max_diff: list[tuple[str, str, str]]             # output, max |abs| diff, max ulp diff
    launches: str
    fresh: str | None                                # re-check of the kept code on fresh inputs
    sanitizer: str | None
    sanitizer_runs: list[tuple[str, str, str]]       # tool, nvcc's code, the rewrite
    device: str | None
    spec_origin: str | None
    specs: list[str]
    notes: list[str]


@dataclass
class TimingView:
    title: str                                       # "search" or "confirmation"
    baseline: dict
    candidate: dict
    speedup: float | None
    ratio_ci: list[float] | None
    reps: int | None
    flush_l2: bool | None
    method: str
    reason: str
    bandwidth: tuple[float, float, float] | None     # baseline, candidate, peak bytes/s


@dataclass
class ShapeRow:
    """One launch shape the kept (or last refused) candidate was timed at (``launch_shapes_timed``)."""
    block: str
    grid: str
    origin: str
    share: str
    speedup: str
    verdict: str                                     # "slower", "not slower", "skipped: why"
    note: str


@dataclass
class ShapesView:
    candidate: str
    fate: str
    rows: list[ShapeRow]
    weighted: float | None


@dataclass
class ResourceRow:
    name: str
    baseline: str
    optimized: str
    changed: bool


@dataclass
class CodeView:
    title: str
    rows: list[DiffRow] | None                       # side by side when both sides exist
    left: str | None                                 # only nvcc's code (nothing kept)
    note: str
    removed: int = 0
    added: int = 0
    mix: list[MixRow] = field(default_factory=list)      # SASS: opcode counts before and after
    raw: tuple[str, str] | None = None                    # SASS: both listings as the tools printed them


@dataclass
class KernelView:
    entry: KernelEntry
    anchor: str
    name: str                                        # demangled signature, else the PTX name
    status: str
    status_label: str
    speedup: float | None
    winner: dict | None
    evidence: Evidence | None
    timings: list[TimingView]
    resources: list[ResourceRow]
    occupancy_note: str
    code: list[CodeView]
    lines: SourceLines
    candidates: list[dict]
    capture_share: float | None
    notes: list[str] = field(default_factory=list)
    file_label: str = ""                             # the source as the report names it
    shapes: ShapesView | None = None                 # the launch shapes the program may use, timed
    phases: list[tuple[str, float, int]] = field(default_factory=list)   # (phase, seconds, count), longest first
    gpu_busy: str = ""                               # "GPU busy 0.42 s of 0.45 s held (93%)"
    checks: list[CheckView] = field(default_factory=list)   # candidates' launch-time no-alias checks

    @property
    def kernel(self) -> dict:
        return self.entry.kernel

    @property
    def kept(self) -> bool:
        return self.winner is not None and self.status in ("optimized", "locked", "cached")

    def resource(self, prefix: str) -> ResourceRow | None:
        return next((r for r in self.resources if r.name.startswith(prefix)), None)

    @property
    def speedup_spread(self) -> tuple[float, float] | None:
        """The kept speedup's interquartile range: nvcc's first quartile over the rewrite's
        third, and nvcc's third over the rewrite's first, from the timing the speedup is
        (the confirmation, else the search's); None when the record holds no quartiles."""
        if not self.kept:
            return None
        return quartile_spread(self.winner)

    @property
    def chart_label(self) -> str:
        return f"{self.speedup:.2f}×" if self.kept and self.speedup else self.status_label


def _dims(v) -> str:
    return "×".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v)


def _evidence(kernel: dict, win: dict | None) -> Evidence | None:
    verdict = (win or {}).get("verdict")
    if not verdict:
        return None
    ev = verdict.get("evidence") or {}
    sets = []
    for s in ev.get("sets", []):
        lengths, dists = s.get("lengths") or {}, s.get("distributions") or {}
        buffers = [(name, lengths.get(name), dists.get(name, "–")) for name in {**lengths, **dists}]
        scalars = ", ".join(f"{k}={v}" for k, v in (s.get("scalars") or {}).items())
        sets.append(InputSet(s.get("label") or f"set {s.get('set')}", _dims(s.get("grid", "–")),
                             _dims(s.get("block", "–")), scalars or "–", buffers))
    max_diff = [(name, str(d.get("max_abs_diff", "–")), str(d.get("max_ulp_diff", "–")))
                for name, d in (ev.get("max_diff") or {}).items()]
    base_runs, cand_runs = ev.get("baseline_seconds") or [], ev.get("candidate_seconds") or []
    launches = verdict.get("reason") or ""
    if cand_runs:
        launches = f"{len(cand_runs)} launches of the rewrite, {len(base_runs)} of nvcc's code"
    shapes = win.get("launch_shapes_checked")
    if shapes:
        launches += f"; {shapes} launch shape(s) of the spec"
    fresh = win.get("fresh_verdict")
    sanitizer = win.get("sanitizer")
    runs = []
    for tool, sides in ((sanitizer or {}).get("runs") or {}).items():
        def side(name):
            r = sides.get(name) or {}
            if not r:
                return "–"
            return f"{r.get('status', '?')}, {r.get('errors', 0)} error(s)" + (f" ({r['detail'][:120]})" if r.get("detail") else "")
        runs.append((tool, side("baseline"), side("candidate")))
    device = (ev.get("backend") or {}).get("name")
    specs = []
    for spec in kernel.get("spec") or []:
        specs.append(f"grid {_dims(spec.get('grid'))}, block {_dims(spec.get('block'))}"
                     + (f", {spec['shared_bytes']} B dynamic shared" if spec.get("shared_bytes") else "")
                     + f" — {spec.get('origin', '?')}")
    return Evidence(
        policy=verdict.get("policy") or kernel.get("policy") or "–",
        verdict=verdict.get("reason") or verdict.get("status", ""),
        input_sets=sets, max_diff=max_diff, launches=launches,
        fresh=(f"{fresh.get('status')}: {fresh.get('reason')}" if fresh else None),
        sanitizer=(f"{sanitizer.get('status')}: {sanitizer.get('reason', '')}" if sanitizer else None),
        sanitizer_runs=runs, device=device, spec_origin=kernel.get("spec_origin"), specs=specs,
        notes=list(ev.get("notes") or []))


def quartile_spread(win: dict | None) -> tuple[float, float] | None:
    """(nvcc's q1 / the rewrite's q3, nvcc's q3 / the rewrite's q1) of the winner's confirmation
    timing (else its search timing), when both sides have quartiles."""
    for key in ("confirmation", "timing"):
        t = (win or {}).get(key)
        if not isinstance(t, dict):
            continue
        b, c = t.get("baseline"), t.get("candidate")
        if not (isinstance(b, dict) and isinstance(c, dict)):
            continue
        q = [side.get(name) for side in (b, c) for name in ("q1", "q3")]
        if all(isinstance(v, (int, float)) and v > 0 for v in q):
            return q[0] / q[3], q[1] / q[2]
        return None
    return None


def _stats(d: dict | None) -> dict | None:
    """Timing statistics with every field a plot needs; quartiles and extremes a record lacks
    collapse onto the median (drawn as a line, not invented spread). None without a median."""
    if not isinstance(d, dict) or not isinstance(d.get("median"), (int, float)):
        return None
    med = d["median"]
    q1, q3 = d.get("q1", med), d.get("q3", med)
    return {"n": d.get("n", "?"), "median": med, "q1": q1, "q3": q3, "iqr": d.get("iqr", q3 - q1),
            "min": d.get("min", q1), "max": d.get("max", q3)}


def _timings(win: dict | None) -> list[TimingView]:
    out = []
    for key, title in (("timing", "search"), ("confirmation", "confirmation")):
        t = dict((win or {}).get(key) or {})
        t["baseline"], t["candidate"] = _stats(t.get("baseline")), _stats(t.get("candidate"))
        if not t["baseline"] or not t["candidate"]:
            continue
        bw = t.get("implied_bytes_per_s") or {}
        bandwidth = (bw["baseline"], bw["candidate"], t.get("peak_bytes_per_s") or 0.0) \
            if bw.get("baseline") and bw.get("candidate") else None
        out.append(TimingView(title, t["baseline"], t["candidate"], t.get("speedup"), t.get("ratio_ci"),
                              t.get("reps"), t.get("flush_l2"), t.get("method") or "", t.get("reason") or "",
                              bandwidth))
    return out


def _short_dims(v) -> str:
    """``[512, 1, 1]`` -> ``512``, ``[32, 8, 1]`` -> ``32×8``."""
    if not isinstance(v, (list, tuple)) or not v:
        return "–"
    dims = list(v)
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    return _dims(dims)


def _shapes(kernel: dict, win: dict | None) -> ShapesView | None:
    """The winner's launch shapes timed, else those of the candidate refused for one of them."""
    c = win if win and win.get("launch_shapes_timed") else next(
        (c for c in kernel.get("candidates", []) if c.get("launch_shapes_timed")), None)
    if c is None:
        return None
    rows = []
    for r in c["launch_shapes_timed"]:
        if r.get("skipped"):
            verdict = f"skipped: {r['skipped']}"
        elif r.get("speedup") is None:
            verdict = r.get("reason") or r.get("status") or "–"
        else:
            verdict = "slower" if r.get("slower") else "not slower"
        rows.append(ShapeRow(_short_dims(r.get("block")), _short_dims(r.get("grid")), r.get("origin", "?"),
                             f"{100 * r['share']:.0f}%" if r.get("share") is not None else "–",
                             f"{r['speedup']:.3f}×" if r.get("speedup") else "–", verdict, r.get("note") or ""))
    return ShapesView(c["id"], c.get("fate") or "", rows, c.get("weighted_speedup"))


def threads_per_block(kernel: dict, win: dict | None) -> int | None:
    """Threads per block of the timed launch: the first input set's, else the spec's if it is
    a number."""
    sets = ((((win or {}).get("verdict") or {}).get("evidence") or {}).get("sets")) or []
    block = sets[0].get("block") if sets else None
    if block is None and kernel.get("spec"):
        block = kernel["spec"][0].get("block")
    if isinstance(block, (list, tuple)) and all(isinstance(v, int) for v in block):
        return math.prod(block)
    return None


def dynamic_shared(kernel: dict) -> int:
    spec = (kernel.get("spec") or [{}])[0]
    return spec.get("shared_bytes") if isinstance(spec.get("shared_bytes"), int) else 0


def _occ_text(occ: Occupancy | None) -> str:
    return "–" if occ is None else f"{occ.fraction:.0%} ({occ.blocks_per_sm} blocks, {occ.limited_by})"


def _resources(kernel: dict, win: dict | None, target: str, sass: tuple[Sass | None, Sass | None]) -> tuple[list[ResourceRow], str]:
    base = (kernel.get("baseline") or {}).get("resources") or {}
    opt = (win or {}).get("resources") or {}
    if not base and not opt:
        return [], "the record holds no resource usage (ptxas -v) for this kernel"
    rows = []
    for field_, name in (("registers", "registers / thread"), ("spill_stores", "spill stores (B)"),
                         ("spill_loads", "spill loads (B)"), ("shared_bytes", "static shared memory (B)"),
                         ("stack_bytes", "stack frame (B)")):
        b, o = base.get(field_), opt.get(field_) if win else None
        rows.append(ResourceRow(name, "–" if b is None else str(b), "–" if o is None else str(o),
                                win is not None and b != o))
    threads = threads_per_block(kernel, win)
    dyn = dynamic_shared(kernel)
    note = ""
    if threads is None:
        note = "occupancy not computed: the timed launch's block size is not a number in the record"
    else:
        ob = occupancy(target, threads, base.get("registers"), (base.get("shared_bytes") or 0) + dyn)
        oo = occupancy(target, threads, opt.get("registers"), (opt.get("shared_bytes") or 0) + dyn) if win else None
        if ob is None and threads:
            note = f"occupancy not computed: no SM limits known for target {target}"
        else:
            rows.append(ResourceRow(f"theoretical occupancy ({threads} threads/block)", _occ_text(ob),
                                    _occ_text(oo) if win else "–", win is not None and _occ_text(ob) != _occ_text(oo)))
    counts = [len(s.text.splitlines()) if s and s.text else None for s in sass]
    if counts[0] is not None:
        rows.append(ResourceRow("SASS instructions", str(counts[0]), "–" if counts[1] is None else str(counts[1]),
                                counts[1] is not None and counts[0] != counts[1]))
    return rows, note


def _code(kernel: dict, win: dict | None, sass: tuple[Sass | None, Sass | None]) -> list[CodeView]:
    base_ptx = (kernel.get("baseline") or {}).get("ptx")
    win_ptx = (win or {}).get("ptx")
    out = []
    if base_ptx and win_ptx:
        rows = side_by_side(base_ptx, win_ptx)
        out.append(CodeView("PTX", rows, None, "", *changed_lines(rows)))
    elif base_ptx:
        out.append(CodeView("PTX", None, base_ptx, "nvcc's code was kept: nothing to compare against"))
    else:
        out.append(CodeView("PTX", None, None, "the record holds no PTX for this kernel"))
    base_sass, win_sass = sass
    if base_sass is None and win_sass is None:
        if base_ptx:
            out.append(CodeView("SASS", None, None, "SASS not rendered (--no-sass)"))
        return out
    if base_sass and base_sass.text and win_sass and win_sass.text:
        left, right = normalise_pair(base_sass.text, win_sass.text)
        rows = side_by_side("\n".join(left), "\n".join(right))
        note = (f"{base_sass.note}; addresses stripped, registers and branch targets renamed in order of "
                "appearance (the rewrite's after their counterparts in nvcc's), so that only what ptxas "
                "did differently shows")
        out.append(CodeView("SASS", rows, None, note, *changed_lines(rows),
                            mix=instruction_mix(base_sass.text, win_sass.text), raw=(base_sass.text, win_sass.text)))
    elif base_sass and base_sass.text and not win_ptx:
        out.append(CodeView("SASS", None, base_sass.text, base_sass.note))
    else:
        notes = {s.note for s in (base_sass, win_sass) if s and not s.text}
        out.append(CodeView("SASS", None, base_sass.text if base_sass else None, "; ".join(sorted(notes))))
    return out


def kernel_view(entry: KernelEntry, index: int, sass: tuple[Sass | None, Sass | None] = (None, None)) -> KernelView:
    k = entry.kernel
    win = winner_of(k)
    status = k["status"]
    resources, occ_note = _resources(k, win, entry.key.target, sass)
    candidates = sorted(k.get("candidates", []), key=lambda c: -(c.get("speedup") or 0))
    return KernelView(
        entry=entry, anchor=f"k{index}", name=k.get("signature") or k["kernel"], status=status,
        # NVCC_PLUS_SEARCH=deferred: nvcc's code in this build, a search queued for after it
        status_label="queued (nvcc's code kept)" if k.get("queued") else STATUS_LABEL.get(status, status),
        speedup=kept_speedup(k), winner=win,
        evidence=_evidence(k, win), timings=_timings(win), resources=resources, occupancy_note=occ_note,
        code=_code(k, win, sass),
        lines=source_lines((k.get("baseline") or {}).get("ptx"), (win or {}).get("ptx")),
        candidates=candidates, capture_share=k.get("capture_share"), notes=list(k.get("notes") or []),
        shapes=_shapes(k, win), phases=phase_rows(k.get("phases")), gpu_busy=gpu_busy_text(k.get("phases")),
        checks=check_views(k))


def phase_rows(phases: dict | None) -> list[tuple[str, float, int]]:
    """A record's ``phases`` as (phase, seconds, count) rows, longest first (superopt.judge.phases)."""
    rows = []
    for key, value in (phases or {}).items():
        if key.endswith("_s") and key != "gpu_busy_s":
            name = key[:-2]
            rows.append((name, float(value), int((phases or {}).get(f"{name}_n") or 0)))
    return sorted(rows, key=lambda r: -r[1])


def gpu_busy_text(phases: dict | None) -> str:
    p = phases or {}
    if not p.get("lease_s"):
        return ""
    return (f"GPU busy {p.get('gpu_busy_s', 0):.2f} s of {p['lease_s']:.2f} s held "
            f"({100 * p.get('gpu_busy_fraction', 0):.0f}%), {p.get('gpu_wait_s', 0):.2f} s waiting for it")
