"""occupancy: per-kernel performance directives ``.maxnreg``, ``.minnctapersm``, ``.maxntid``.

These directives only steer ptxas's register allocation (fewer registers per thread, more
resident blocks per SM, or the reverse); they never change what a kernel computes. The one
thing they can break is the *launch*: a block larger than ``.maxntid``/``.reqntid`` fails
to launch. So the pass:

* does nothing without ``block`` — the launch spec's block shape, which the search fills
  in and which must bound every block the user's program launches this kernel with (the
  ``nvcc-plus.toml`` / ``// nvcc-plus:`` spec is the user's word for it);
* never adds a ``.maxntid``/``.reqntid`` smaller than that block (it writes ``.maxntid`` equal
  to the block's thread count, and only when the kernel has neither directive: an existing
  ``__launch_bounds__`` is the user's own contract and is kept as written);
* does nothing when the kernel's own ``.maxntid``/``.reqntid`` is smaller than ``block`` (the
  spec contradicts the kernel: that launch cannot happen);
* adds ``.maxntid`` only where ``.minnctapersm`` needs it (ptxas ignores ``.minnctapersm``
  without one) and skips ``minnctapersm`` values that cannot fit (blocks x threads > 2048
  threads per SM);
* never raises the register budget a kernel declared (an existing smaller ``.maxnreg`` is
  kept) — a larger one could make ``block`` x registers exceed the register file;
* leaves kernels that contain a ``call`` alone: ptxas rejects a register cap below a
  separately compiled callee's count (``-rdc``, function pointers, virtual calls).

Directives live in ``fn.directives`` (not in the body), so the pass edits that list and
calls ``fn.invalidate()``.
"""
from __future__ import annotations

from math import prod

from ptx_ir.nodes import Directive
from superopt.passes import Change, register

__all__ = ["occupancy"]

MAX_THREADS_PER_SM = 2048      # sm_70 .. sm_90 (and later): the bound minnctapersm must fit
MAX_THREADS_PER_BLOCK = 1024
ORDER = (".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg")


def block_threads(block) -> int | None:
    """Threads in a block given as an int or a 1-3 element sequence; None if not usable."""
    if block is None:
        return None
    if isinstance(block, int):
        dims = [block]
    else:
        try:
            dims = [int(d) for d in block]
        except (TypeError, ValueError):
            return None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        return None
    n = prod(dims)
    return n if n <= MAX_THREADS_PER_BLOCK else None


def _threads(d: Directive | None) -> int | None:
    if d is None:
        return None
    return prod(int(str(a)) for a in d.args if str(a).strip() not in (",", ""))


def _set(fn, name: str, values: list[int]) -> None:
    new = Directive(name, [str(v) for v in values], terminated=False)
    for i, d in enumerate(fn.directives):
        if d.name == name:
            fn.directives[i] = new
            break
    else:
        fn.directives.append(new)
    fn.directives.sort(key=lambda d: ORDER.index(d.name) if d.name in ORDER else len(ORDER))
    fn.invalidate()


@register(
    name="occupancy",
    order=60,
    launch_params={"block": "contract_block"},
    summary="set .maxnreg / .minnctapersm (with .maxntid from the launch block) to trade "
            "registers for occupancy",
    assumes=("block (from the launch spec, filled in by the search) bounds every block the "
             "program launches this kernel with; without it the pass does nothing. Never "
             "adds a .maxntid smaller than block, never replaces the user's __launch_bounds__, "
             "never raises a declared .maxnreg. Directives cannot change results."),
    params={"maxnreg": [None, 32, 64, 128], "minnctapersm": [None, 2, 4]},
)
def occupancy(fn, *, block=None, maxnreg: int | None = None,
              minnctapersm: int | None = None) -> list[Change]:
    if fn.body is None or not fn.is_entry:
        return []
    threads = block_threads(block)
    if threads is None:
        return []
    if any(i.opcode == "call" for i in fn.instructions):
        # A register cap below a callee's own count is a ptxas error when the callee is
        # compiled separately (-rdc, indirect calls): leave calling kernels alone.
        return []
    maxntid = _threads(fn.directive(".maxntid"))
    reqntid = _threads(fn.directive(".reqntid"))
    declared = reqntid if reqntid is not None else maxntid
    if declared is not None and declared < threads:
        return []                                  # the spec's block cannot be launched
    changes: list[Change] = []
    if maxnreg is not None:
        maxnreg = int(maxnreg)
        old = fn.directive(".maxnreg")
        old_n = _threads(old)
        if not 16 <= maxnreg <= 255:
            raise ValueError(f"occupancy: maxnreg must be in 16..255, not {maxnreg}")
        if old_n is None or maxnreg < old_n:
            _set(fn, ".maxnreg", [maxnreg])
            changes.append(Change(f".maxnreg {maxnreg}" + (f" (was {old_n})" if old_n else "")))
    if minnctapersm is not None:
        minnctapersm = int(minnctapersm)
        bound = declared if declared is not None else threads
        old = _threads(fn.directive(".minnctapersm"))
        if minnctapersm >= 1 and minnctapersm * bound <= MAX_THREADS_PER_SM and old != minnctapersm:
            if declared is None:
                _set(fn, ".maxntid", [threads])
                changes.append(Change(f".maxntid {threads} (the launch spec's block; needed by "
                                      f".minnctapersm)"))
            _set(fn, ".minnctapersm", [minnctapersm])
            changes.append(Change(f".minnctapersm {minnctapersm}" + (f" (was {old})" if old else "")))
    return changes
