"""Which of the program's captured launches a versioned candidate's fast body would run at.

A candidate made by no-alias versioning (``restrict-body``, ``promote-accumulators``) runs its
fast body only when its launch-time check finds every written buffer disjoint from the others
(:mod:`superopt.passes._alias_check`). A speedup measured with disjoint test buffers is worth
nothing at launches where the program passes overlapping ones, so the record says, per check,
at how many captured launches the fast body would run and what share of the kernel's captured
GPU time those are.

The check is not re-derived here: its own instructions run on each captured shape's
parameter bytes and launch dimensions (the straight-line evaluator,
:func:`superopt.passes._loop_tools.run_straight`; the ``ld.param`` of a parameter becomes a
``mov`` of its captured bytes), so the answer is what the GPU would compute. The captured
pointers are the shape's first launch's; the other launches of a shape have the same scalars,
grid, block and, for every pointer, the same allocation extent, offset into it and sharing with
other parameters (what makes them one shape: :mod:`superopt.specs.capture.format`). Each
checked range is the pointer plus offsets computed from the scalars and the launch, so it
moves with its allocation: when two compared ranges lie in one allocation, or each lies inside
its own, every launch of the shape gets the captured launch's answer. A range that reaches
outside its allocation, against another allocation's range, could meet it or not depending on
where the allocator placed them: those launches are "not known", with that reason, as are
launches whose parameters the capture lacks (CUDA graph replays, bytes not recorded).
"""
from __future__ import annotations

from ptx_ir import isa
from ptx_ir.nodes import Imm, Instruction, Sym, type_size
from ptx_ir.printer import emit_statement
from superopt.passes._loop_tools import Unknown, run_straight

__all__ = ["NotEvaluable", "alias_check_entries", "in_capture", "shape_outcome", "run_check",
           "NO_CAPTURE", "MAX_SHAPES_LISTED"]

NO_CAPTURE = "no capture: not known (the search had no captured launches of this kernel)"
MAX_SHAPES_LISTED = 20          # shapes listed one by one in the record; all of them are counted


class NotEvaluable(Exception):
    """The check cannot be evaluated at a captured launch (the message says why)."""


def alias_check_entries(candidate, launches=None) -> list[dict]:
    """The record's ``alias_checks`` of ``candidate`` (one per fast path its plan made), each
    with what the capture in ``launches`` (a :class:`~superopt.specs.program_launches.ProgramLaunches`)
    says, or why nothing is known."""
    capture = getattr(launches, "capture", None)
    out = []
    for fp in getattr(candidate, "fast_paths", None) or ():
        entry = fp.to_dict()
        if capture is None:
            entry.update(capture=None, capture_note=NO_CAPTURE)
        else:
            try:
                entry["capture"] = in_capture(fp, capture)
            except Exception as exc:  # noqa: BLE001 - a malformed capture loses this answer, not the search
                entry.update(capture=None, capture_note=f"not known: the check could not be evaluated on the "
                                                        f"capture ({type(exc).__name__}: {exc})")
        out.append(entry)
    return out


def in_capture(fp, kernel_capture: dict) -> dict:
    """Per captured shape of ``kernel_capture`` (the kernel's entry of an aggregated capture),
    whether the fast body of ``fp`` (a FastPath) would run, and the totals."""
    rows = [shape_outcome(fp, s) for s in kernel_capture.get("shapes") or []]
    unknown: dict[str, int] = {}
    for r in rows:
        if r["fast_path"] is None:
            unknown[r["reason"]] = unknown.get(r["reason"], 0) + r["launches"]
    untracked = kernel_capture.get("untracked") or {}
    if untracked.get("launches"):
        why = ("launched without a launch callback (a CUDA graph replay): its parameters were not "
               "captured")
        unknown[why] = unknown.get(why, 0) + int(untracked["launches"])
    fast = sum(r["launches"] for r in rows if r["fast_path"] is True)
    nvcc = sum(r["launches"] for r in rows if r["fast_path"] is False)
    captured_ms = float(kernel_capture.get("total_ms") or 0.0)
    fast_ms = sum(r["ms"] for r in rows if r["fast_path"] is True)
    return {
        "captured_launches": int(kernel_capture.get("launches") or 0) + int(untracked.get("launches") or 0),
        "fast_path_launches": fast,
        "nvcc_path_launches": nvcc,
        "unknown_launches": sum(unknown.values()),
        "unknown": [{"reason": why, "launches": n} for why, n in unknown.items()],
        "captured_ms": round(captured_ms, 6),
        "fast_path_ms": round(fast_ms, 6),
        # None: the capture has no launch times (a launch's share of time is then not known)
        "fast_path_share": round(fast_ms / captured_ms, 6) if captured_ms > 0 else None,
        "shapes": rows[:MAX_SHAPES_LISTED],
        "shapes_not_listed": max(0, len(rows) - MAX_SHAPES_LISTED),
    }


def shape_outcome(fp, shape: dict) -> dict:
    """One captured shape: ``fast_path`` True (the fast body runs at each of its launches),
    False (nvcc's code does) or None (not known, ``reason`` says why)."""
    row = {"grid": list(shape.get("grid") or []), "block": list(shape.get("block") or []),
           "launches": int(shape.get("count") or 0), "ms": float(shape.get("total_ms") or 0.0),
           "fast_path": None, "reason": None}
    try:
        env = run_check(fp, shape)
        fast = bool(env[fp.check.predicate]) if fp.check.predicate in env else None
        if fast is None:
            raise NotEvaluable(f"the check did not set its predicate {fp.check.predicate}")
        ranges = _ranges(fp, env)
        places = {p: _allocation(fp, shape, p) for p in fp.check.compared}
    except NotEvaluable as exc:
        row["reason"] = str(exc)
        return row
    chose = "the fast body" if fast else "nvcc's code"
    if ranges is None:
        row["reason"] = (f"the check holds no ranges to compare with the captured allocations (made "
                         f"without a footprint); at the captured launch's addresses it chose {chose}")
        return row
    row["ranges"] = {p: {"allocation": fp.params[places[p][0]], "from": lo - places[p][1],
                         "to": hi - places[p][1], "extent": places[p][2]} for p, (lo, hi) in ranges.items()}
    loose = _layout_dependent(fp, ranges, places)
    if loose:
        row["reason"] = f"{loose}; at the captured launch's addresses the check chose {chose}"
        return row
    row["fast_path"] = fast
    if not fast:
        row["overlaps"] = [[w, o] for w in fp.check.written for o in fp.check.compared
                           if o != w and not (ranges[w][1] <= ranges[o][0] or ranges[o][1] <= ranges[w][0])]
        row["reason"] = ("the checked ranges overlap" if row["overlaps"] else
                         "the ranges are disjoint but one of the check's run-time conditions failed "
                         "(an index out of the 32-bit range, or a product too large)")
    return row


def run_check(fp, shape: dict) -> dict:
    """The registers after the check's instructions ran on the shape's captured parameters
    and launch dimensions; :class:`NotEvaluable` when they cannot run."""
    params = shape.get("params") or []
    if len(params) != len(fp.params):
        raise NotEvaluable(f"the capture has {len(params)} parameters, the kernel {len(fp.params)}: "
                           "a different build of the kernel?")
    env: dict = {}
    for i, axis in enumerate("xyz"):
        env[f"%ntid.{axis}"] = int((shape.get("block") or [1, 1, 1])[i])
        env[f"%nctaid.{axis}"] = int((shape.get("grid") or [1, 1, 1])[i])
    code = [_captured_load(inst, fp, params) if inst.opcode == "ld" and inst.space == ".param" else inst
            for inst in fp.check.instructions]
    try:
        return run_straight(code, env, strict=True)
    except Unknown as exc:
        raise NotEvaluable(f"the check's code cannot be evaluated on the CPU ({exc})") from None


def _captured_load(inst: Instruction, fp, params: list) -> Instruction:
    """``ld.param.T r, [p+k]`` as ``mov.T r, <the captured bytes of p at k>``."""
    a = isa.address_operand(inst)
    if a is None or not isinstance(a.base, Sym) or a.base.name not in fp.params:
        raise NotEvaluable(f"`{emit_statement(inst).strip()}` reads no kernel parameter")
    i = fp.params.index(a.base.name)
    raw = _param_bytes(fp, params, i)
    at, size = a.offset or 0, type_size(inst.type)
    if at < 0 or at + size > len(raw):
        raise NotEvaluable(f"`{emit_statement(inst).strip()}` reads past the {len(raw)} captured bytes")
    value = int.from_bytes(raw[at:at + size], "little")
    return Instruction("mov", (inst.type,), (inst.operands[0], Imm(str(value))), inst.guard)


def _param_bytes(fp, params: list, i: int) -> bytes:
    hexb = params[i].get("bytes")
    if hexb is None:
        raise NotEvaluable(f"parameter {i} ({fp.params[i]}): its bytes were not captured")
    return bytes.fromhex(hexb)


def _signed64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def _ranges(fp, env: dict) -> dict | None:
    """param -> [lo, hi) in bytes as the check computed them; None without bounds."""
    bounds = fp.check.bounds
    if not bounds:
        return None

    def value(bound) -> int:
        reg, k = bound
        if reg is None:
            return int(k)
        if reg not in env:
            raise NotEvaluable(f"the check did not compute {reg}, an end of a range")
        return _signed64(int(env[reg])) + int(k)

    missing = [p for p in fp.check.compared if p not in bounds]
    if missing:
        raise NotEvaluable(f"the check holds no range for {', '.join(missing)}")
    return {p: (value(bounds[p][0]), value(bounds[p][1])) for p in fp.check.compared}


def _allocation(fp, shape: dict, param: str) -> tuple[int, int, int]:
    """(index of the first parameter in the same allocation, the allocation's address at the
    captured launch, its extent) of pointer parameter ``param``."""
    params = shape.get("params") or []
    i = fp.params.index(param)
    ptr = params[i].get("pointer")
    if not ptr:
        raise NotEvaluable(f"{param} is not in a device allocation the capture saw (a null, host or pinned "
                           "pointer)")
    value = int.from_bytes(_param_bytes(fp, params, i), "little")
    owner = i if ptr.get("alias") is None else int(ptr["alias"])
    return owner, value - int(ptr["offset"]), int(ptr["extent"])


def _layout_dependent(fp, ranges: dict, places: dict) -> str | None:
    """Why the answer depends on where the allocator put the buffers, or None: a compared pair
    in two allocations of which a non-empty range reaches outside its own."""
    for w in fp.check.written:
        for o in fp.check.compared:
            if o == w or places[w][0] == places[o][0]:
                continue
            for p, other in ((w, o), (o, w)):
                lo, hi = ranges[p]
                _, base, extent = places[p]
                if lo < hi and (lo < base or hi > base + extent):
                    return (f"{p}'s checked range, bytes {lo - base} to {hi - base} of its allocation, leaves "
                            f"the allocation's {extent} bytes: whether it meets {other} depends on where the "
                            "program's allocator put the buffers")
    return None
