"""Never slower in the program: the candidate to keep is timed at the other launch shapes the
program may use, and kept only if it is slower at none.

A candidate is timed at one shape (the first spec). On the H200 a naive bias-gradient
reduction kept ``unroll(factor=4)`` at 1.85x at the inferred block and ran 0.92x of nvcc in
the program, which launches it with seven blocks chosen at run time. So, for the candidate the
search is about to keep (after its confirmation timing, before the sanitizer), and only for
it, :func:`judge_other_shapes`:

* makes the other shapes from what the spec source knows
  (:class:`superopt.specs.program_launches.ProgramLaunches`): the captured shapes with >= 5%
  of the kernel's GPU time; or, without a capture, every block the source launches the kernel
  with, and where some launch computes its block at run time (or the launches are not in the
  source) the usual blocks and the other inferred ones, each inferred from the IR at its block
  (:func:`superopt.specs.inference.infer_specs` with ``blocks=``) and taken to the sizes of the
  timed shape (:func:`superopt.specs.scaled.at_sizes_of`); or the other explicit specs;
* checks the candidate at each new block (at its small, traced size; nvcc's own code first),
  then times it there against nvcc's code;
* keeps it only when it is slower beyond noise at none
  (:func:`superopt.judge.timing.slower_than`), and with a capture when the speedup weighed by
  each shape's share of the kernel's GPU time is above 1 (fate ``slower-elsewhere`` otherwise);
* skips, with a note, a shape nvcc's own code cannot run at (a block ``__launch_bounds__``
  forbids, a grid formula that breaks there, a launch nvcc's code cannot be judged at); a
  candidate that fails or faults where nvcc's code runs is not kept. When the other shapes
  cannot be made at all within ``OTHER_BLOCKS_INFERENCE_S`` (inference timed out) the
  candidate is not kept either: the search cannot say it is not slower there.

Every shape timed goes into the candidate's record (``launch_shapes_timed``: block, grid,
where it comes from, share, the ratio, slower or not, or why it was skipped).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from superopt.store.record import Fate

__all__ = ["judge_other_shapes", "OTHER_BLOCKS_INFERENCE_S"]

OTHER_BLOCKS_INFERENCE_S = 10.0      # inference of the other blocks, per candidate to keep


@dataclass
class _Other:
    timed: object | None             # the spec timed there (None: skipped)
    origin: str                      # "source", "usual", "inferred", "captured", "explicit"
    block: tuple
    small: object | None = None      # a small spec to check the candidate at first (a new block)
    share: float | None = None       # captured: the shape's share of the kernel's GPU time
    skipped: str | None = None       # why it is not timed
    note: str | None = None          # how it was made (the size it is timed at)
    unscaled: object | None = None   # inferred: the block's spec at its inferred sizes (a fallback)


def _block(spec) -> tuple | None:
    block = spec.get("block") if isinstance(spec, dict) else getattr(spec, "block", None)
    try:
        return tuple(int(b) for b in block)
    except (TypeError, ValueError):
        return None


def _grid(spec) -> list | None:
    try:
        return [int(g) for g in spec.resolved().grid]
    except Exception:  # noqa: BLE001 - a grid that does not resolve is shown as written
        grid = spec.get("grid") if isinstance(spec, dict) else getattr(spec, "grid", None)
        return [str(g) for g in grid] if grid is not None else None


def _fmt(block) -> str:
    dims = list(block)
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    return "x".join(map(str, dims))


def _is_scaled(spec) -> bool:
    from superopt.specs.scaled import SCALED_SUFFIX
    return str(getattr(spec, "origin", "") or "").endswith(SCALED_SUFFIX)


def _inferred_others(launches, specs: list, kernel: str, baseline_ptx: str) -> tuple[list[_Other], str | None]:
    """The other blocks of an inferred kernel; (others, why none could be made or None)."""
    from superopt.specs.inference import infer_specs
    from superopt.specs.scaled import at_sizes_of
    timed = specs[0]
    tb = _block(timed)
    small0 = next((s for s in specs if not _is_scaled(s)), None) if _is_scaled(timed) else None
    checked: dict[tuple, object] = {}
    for s in specs:
        if not _is_scaled(s):
            checked.setdefault(_block(s), s)
    wanted: list[tuple] = [tuple(b) for b in launches.source_blocks]
    if launches.runtime:
        wanted += list(checked)
    wanted = [b for b in dict.fromkeys(wanted) if b != tb]
    missing = [b for b in wanted if b not in checked]
    smalls: dict[tuple, object] = {b: checked[b] for b in wanted if b in checked}
    skipped: dict[tuple, str] = {}
    if missing or launches.runtime:
        import ptx_ir
        res = infer_specs(ptx_ir.parse(baseline_ptx), kernel, blocks=missing, usual=launches.runtime,
                          deadline_s=OTHER_BLOCKS_INFERENCE_S)
        if res.reason and not res.specs and not res.skipped_blocks:
            return [], f"the other blocks could not be inferred ({res.reason})"
        for s in res.specs:
            b = _block(s)
            if b != tb and b not in smalls:
                smalls[b] = s
                if b not in wanted:
                    wanted.append(b)              # a usual block
        for b, why in res.skipped_blocks:
            b = tuple(b)
            if b != tb and b not in smalls:
                skipped[b] = why
                if b not in wanted:
                    wanted.append(b)
    source = {tuple(b) for b in launches.source_blocks}
    out = []
    for b in wanted:
        origin = "source" if b in source else ("inferred" if b in checked else "usual")
        if b not in smalls:
            out.append(_Other(None, origin, b, skipped=f"not timed at block {_fmt(b)}: "
                              f"{skipped.get(b, 'inference gave it no spec')}"))
            continue
        small = smalls[b]
        big, note = small, "at the inferred sizes"
        if small0 is not None:
            scaled = at_sizes_of(small, small0, timed)
            if scaled is not None:
                big, note = scaled, "at the timed shape's sizes"
            else:
                note = "at the inferred sizes (the timed shape's sizes do not fit this block's spec)"
        out.append(_Other(big, origin, b, small=None if b in checked else small, note=note,
                          unscaled=small if big is not small else None))
    return out, None


def _captured_others(launches, specs: list) -> list[_Other]:
    checked = {_block(s) for s in specs}
    main = specs[0]
    out = []
    for spec, share in launches.weighted:
        if spec is main or spec.to_dict() == main.to_dict():
            continue
        b = _block(spec)
        out.append(_Other(spec, "captured", b, small=None if b in checked else spec, share=float(share)))
    return out


def _explicit_others(specs: list) -> list[_Other]:
    seen = {_block(specs[0])}
    out = []
    for s in specs[1:]:
        b = _block(s)
        if b not in seen:
            seen.add(b)
            out.append(_Other(s, "explicit", b))
    return out


def _row(other: _Other, timing=None) -> dict:
    row = {"block": list(other.block), "origin": other.origin, "share": other.share}
    if other.timed is not None:
        row["grid"] = _grid(other.timed)
    if other.note:
        row["note"] = other.note
    if other.skipped:
        row["skipped"] = other.skipped
    if timing is not None:
        row.update(status=timing.status, speedup=timing.speedup, slower=bool(getattr(timing, "slower")),
                   faster=bool(timing.faster), reason=timing.reason)
        spread = _spread(timing)
        if spread:
            row["timing"] = spread
    return row


def _spread(timing) -> dict | None:
    """Medians, IQRs and the ratio's interval of a timing: the evidence behind "slower"."""
    d = timing.to_dict() if hasattr(timing, "to_dict") else {}
    out = {}
    for side in ("baseline", "candidate"):
        st = d.get(side)
        if isinstance(st, dict) and "median" in st:
            out[side] = {"median": st["median"], "iqr": st.get("iqr")}
    if d.get("ratio_ci") is not None:
        out["ratio_ci"] = list(d["ratio_ci"])
    return out or None


def _ratios(rows: list[dict]) -> str:
    got = [r["speedup"] for r in rows if r.get("speedup")]
    if not got:
        return ""
    lo, hi = min(got), max(got)
    return f"{lo:.3f}x" if math.isclose(lo, hi, rel_tol=1e-3) else f"{lo:.3f}x-{hi:.3f}x"


def judge_other_shapes(judge, baseline_ptx: str, cand, kernel: str, specs: list, launches, entry: dict, *,
                       min_gain: float = 0.0) -> bool:
    """Time the candidate to keep at the other launch shapes (see the module doc). Records them
    in ``entry["launch_shapes_timed"]`` (the timed shape first, from its confirmation) and, with
    a capture, ``entry["weighted_speedup"]``; False, with the entry's fate and reason, when the
    candidate must not be kept: slower beyond noise at a shape, or, with a capture, its speedup
    weighed by the shapes' GPU time not above 1 or below ``1 + min_gain`` (the least gain a
    rewrite is kept for: the gain in the program, not at one shape)."""
    from superopt.specs.program_launches import from_specs
    launches = launches if launches is not None else from_specs(specs)
    conf = entry.get("confirmation") or {}
    first = {"block": list(_block(specs[0]) or []) or None, "grid": _grid(specs[0]), "origin": "timed",
             "share": None, "status": conf.get("status", "ok"), "speedup": conf.get("speedup"),
             "slower": False, "faster": True, "reason": "the confirmation timing"}
    if first["block"] is None:
        return True                 # a spec the search cannot read (a judge's own object): nothing to vary
    rows = [first]
    entry["launch_shapes_timed"] = rows
    if launches.kind == "captured":
        first["origin"] = "captured"
        main_share = next((sh for sp, sh in launches.weighted if sp is specs[0]), None)
        first["share"] = float(main_share) if main_share is not None else (
            float(launches.weighted[0][1]) if launches.weighted else None)
        others, problem = _captured_others(launches, specs), None
    elif launches.kind == "inferred":
        others, problem = _inferred_others(launches, specs, kernel, baseline_ptx)
    else:
        others, problem = _explicit_others(specs), None
    if problem:
        entry.update(fate=Fate.NOT_TIMED, reason=f"faster at the timed shape, but {problem}: the search cannot "
                                                 f"say it is not slower at the other launches the program may "
                                                 f"make ({launches.describe()}); not kept")
        return False
    for other in others:
        if other.timed is None:
            rows.append(_row(other))
            continue
        where = f"block {_fmt(other.block)} ({other.origin})"
        if other.small is not None:
            own = judge.verify(baseline_ptx, baseline_ptx, other.small)
            if own.status != "accepted":
                other.skipped = f"not timed at {where}: nvcc's own code cannot be judged there ({own.reason})"
                rows.append(_row(other))
                continue
            v = judge.verify(baseline_ptx, cand.ptx, other.small)
            if v.status != "accepted":
                entry["other_shape_verdict"] = v.to_dict()
                fate = Fate.REJECTED_CHECK if v.status == "rejected" else Fate.NOT_JUDGED
                entry.update(fate=fate, reason=f"faster at the timed shape, but at {where}, a block the program "
                                               f"may launch it with: {v.reason}")
                return False
        if other.unscaled is not None:
            # like the timed shape itself (search.loop._with_timing_shape): nvcc's own code must
            # be judgeable at the scaled-up sizes, else the block is timed at its inferred ones
            own = judge.verify(baseline_ptx, baseline_ptx, other.timed)
            if own.status != "accepted":
                other.timed, other.note = other.unscaled, (f"at the inferred sizes: nvcc's own code cannot be "
                                                           f"judged at the timed shape's with this block "
                                                           f"({own.reason})")
        t = judge.time(baseline_ptx, cand.ptx, other.timed, fresh=True)
        if t.status != "ok":
            own = judge.verify(baseline_ptx, baseline_ptx, other.timed)
            if own.status != "accepted":
                other.skipped = f"not timed at {where}: nvcc's own code cannot be judged there ({own.reason})"
                rows.append(_row(other))
                continue
            rows.append(_row(other, t))
            entry.update(fate=Fate.NOT_TIMED, reason=f"faster at the timed shape, but it could not be timed at "
                                                     f"{where}, where nvcc's code runs: {t.reason}")
            return False
        rows.append(_row(other, t))
        if t.slower:
            entry.update(fate=Fate.SLOWER_ELSEWHERE,
                         reason=f"{first['speedup'] or 0:.3f}x at the timed shape, but {t.speedup:.3f}x "
                                f"(slower beyond noise) at {where}: {t.reason}")
            return False
    if launches.kind == "captured":
        weighed = [(r["share"], r["speedup"]) for r in rows if r.get("share") and r.get("speedup")]
        total = sum(w for w, _ in weighed)
        if total > 0:
            ws = total / sum(w / s for w, s in weighed)
            entry["weighted_speedup"] = ws
            if ws <= 1.0:
                entry.update(fate=Fate.SLOWER_ELSEWHERE,
                             reason=f"faster at the most time-consuming captured shape, but {ws:.3f}x weighed by "
                                    f"the {len(weighed)} captured shapes' GPU time: not faster in the program")
                return False
            if ws < 1.0 + min_gain:
                entry.update(fate=Fate.BELOW_MIN_GAIN,
                             reason=f"{ws:.3f}x weighed by the {len(weighed)} captured shapes' GPU time: below the "
                                    f"{100 * min_gain:g}% a rewrite is kept for (NVCC_PLUS_MIN_GAIN)")
                return False
    return True


def summary(entry: dict) -> str:
    """The record reason's part about the other shapes: "; not slower at 6 other launch
    shape(s) (0.99x-1.02x), 1 skipped"."""
    rows = entry.get("launch_shapes_timed") or []
    timed = [r for r in rows[1:] if r.get("speedup")]
    skipped = [r for r in rows[1:] if r.get("skipped")]
    if not timed and not skipped:
        return ""
    out = f"; not slower at {len(timed)} other launch shape(s)" + (f" ({_ratios(timed)})" if timed else "")
    if skipped:
        out += f", {len(skipped)} skipped (see launch_shapes_timed)"
    if entry.get("weighted_speedup"):
        out += f"; {entry['weighted_speedup']:.3f}x weighed by the captured shapes' GPU time"
    return out
