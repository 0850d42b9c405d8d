"""The launch contract of a stored decision: performance directives a lockfile or cache entry
adds must not make any launch the program makes fail.

Directives never change what a kernel computes, so the differential check cannot see them;
what they can break is the launch. A ``.maxntid 32`` on a kernel the program launches with 256
threads per block, or a ``.reqntid`` other than the program's block, makes every launch fail
(``CUDA_ERROR_INVALID_VALUE``). A stored entry is data anyone could have written, so before one
is applied the directives of the code it produces are compared with nvcc's:

* ``.maxntid`` / ``.reqntid`` that nvcc's code has (``__launch_bounds__``) changed or dropped: never;
* ``.maxntid`` / ``.reqntid`` added: the program's launch contract must be known
  (an explicit spec -- ``nvcc-plus.toml``, a ``// nvcc-plus:`` comment -- or captured launches;
  inferred blocks are guesses, and the search itself never adds these directives on them), and
  every block of every launch spec in force must fit: at most ``.maxntid`` threads (the
  product of its extents), exactly the ``.reqntid`` shape;
* ``.maxnreg`` raised above what nvcc's code declared (a cap can only lower registers; a
  higher one could exceed the register file at the program's block);
* ``.minnctapersm`` that cannot fit beside the block bound (blocks x threads > 2048 per SM);
* any other launch directive (clusters: ``.reqnctapercluster``, ``.explicitcluster``,
  ``.maxclusterrank``; ``.noreturn``, ...) added, removed or changed: never.

:func:`contract_problem` returns the reason an entry must not be applied, or None.

The judge asks a narrower question of every candidate, before anything runs
(:func:`launch_problem`): does each launch it is about to make fit the candidate's own block
bounds? A ``.reqntid 64`` or ``.maxntid 32`` under a 256-thread launch makes the GPU refuse
the launch (the emulator refuses it the same way, :func:`block_problem`), and a
``.minnctapersm`` that cannot be resident beside its own ``.maxntid``/``.reqntid`` is a bound
ptxas cannot meet. ``.maxnreg`` never makes a launch fail by itself (a lower cap spills, and
whether a higher one exceeds the register file depends on what ptxas allocates: ``ptxas -v``,
which the search runs).
"""
from __future__ import annotations

from math import prod
from typing import Callable, Iterable

MAX_THREADS_PER_SM = 2048
# Directives a stored decision may change, within the rules above; any other difference
# between nvcc's directives and the stored code's is refused.
HINTS = (".maxntid", ".reqntid", ".maxnreg", ".minnctapersm", ".maxnctapersm")
CONTRACT_ORIGINS = ("toml", "comment", "file", "captured")


def _dims(fn, name: str) -> tuple[int, ...] | None:
    d = fn.directive(name)
    if d is None:
        return None
    out = []
    for a in d.args:
        for part in str(a).replace(",", " ").split():
            out.append(int(part))
    return tuple(out)


def _text(fn, name: str) -> str | None:
    d = fn.directive(name)
    return None if d is None else " ".join(str(a) for a in d.args)


def _block3(block) -> tuple[int, int, int]:
    dims = [int(b) for b in (block if isinstance(block, (list, tuple)) else [block])]
    return tuple((dims + [1, 1, 1])[:3])   # type: ignore[return-value]


def contract_problem(base_fn, new_fn, specs_in_force: Callable[[], Iterable]) -> str | None:
    """Why ``new_fn`` (a stored decision's code) would break a launch ``base_fn`` (nvcc's)
    makes, or None. ``specs_in_force()`` gives the launch-spec choices of the kernel (objects
    with ``origin`` and ``specs``, as :func:`superopt.specs.sources.candidates_in_order` makes
    them); it is called only when a block bound changed."""
    names = {d.name for d in base_fn.directives} | {d.name for d in new_fn.directives}
    for name in sorted(names - set(HINTS)):
        if _text(base_fn, name) != _text(new_fn, name) or \
                (base_fn.directive(name) is None) != (new_fn.directive(name) is None):
            return f"changes the launch directive {name} ({_text(base_fn, name)} -> {_text(new_fn, name)})"
    try:
        maxntid, reqntid = _dims(new_fn, ".maxntid"), _dims(new_fn, ".reqntid")
        base_maxntid, base_reqntid = _dims(base_fn, ".maxntid"), _dims(base_fn, ".reqntid")
        maxnreg, base_maxnreg = _dims(new_fn, ".maxnreg"), _dims(base_fn, ".maxnreg")
        minncta = _dims(new_fn, ".minnctapersm")
    except ValueError as exc:
        return f"has a performance directive that is not a number ({exc})"
    if base_maxnreg is not None and (maxnreg is None or prod(maxnreg) > prod(base_maxnreg)):
        return (f"raises .maxnreg from {prod(base_maxnreg)} to "
                f"{'no limit' if maxnreg is None else prod(maxnreg)}")
    bound = prod(reqntid) if reqntid is not None else (prod(maxntid) if maxntid is not None else None)
    if minncta is not None and _dims(base_fn, ".minnctapersm") != minncta and bound is not None \
            and prod(minncta) * bound > MAX_THREADS_PER_SM:
        return (f".minnctapersm {prod(minncta)} x {bound} threads cannot fit on an SM "
                f"({MAX_THREADS_PER_SM} threads)")
    if maxntid == base_maxntid and reqntid == base_reqntid:
        return None
    for name, old, now in ((".maxntid", base_maxntid, maxntid), (".reqntid", base_reqntid, reqntid)):
        if old is not None and now != old:
            # the kernel's own __launch_bounds__: nothing nvcc-plus makes changes or drops it
            return (f"changes the kernel's own {name} {', '.join(map(str, old))} -> "
                    f"{'none' if now is None else ', '.join(map(str, now))}")
    what = ", ".join(f"{name} {', '.join(map(str, now))}"
                     for name, old, now in ((".maxntid", base_maxntid, maxntid), (".reqntid", base_reqntid, reqntid))
                     if now is not None and old is None)
    choices = list(specs_in_force())
    contract = [c for c in choices if str(c.origin).startswith(CONTRACT_ORIGINS)]
    if not contract:
        return (f"sets {what} but no explicit or captured launch spec here says how the program "
                f"launches it (inferred blocks are guesses)")
    for choice in choices:
        # the specs' blocks, and every block a capture saw the program launch it with
        blocks = [spec.block for spec in choice.specs]
        blocks += list(getattr(getattr(choice, "launches", None), "captured_blocks", None) or ())
        for raw in blocks:
            block = _block3(raw)
            threads = prod(block)
            if maxntid is not None and threads > prod(maxntid):
                return (f"sets {what} but the program launches {threads} threads (block {list(block)}, "
                        f"{_short(choice.origin)})")
            if reqntid is not None and block != _block3(reqntid):
                return f"sets {what} but the program launches block {list(block)} ({_short(choice.origin)})"
    return None


def block_problem(fn, block) -> str | None:
    """Why a GPU refuses to launch ``fn`` with ``block`` threads per block (its ``.maxntid`` or
    ``.reqntid``), or None."""
    try:
        maxntid, reqntid = _dims(fn, ".maxntid"), _dims(fn, ".reqntid")
    except ValueError as exc:
        return f"has a launch bound that is not a number ({exc})"
    b = _block3(block)
    threads = prod(b)
    if maxntid is not None and threads > prod(maxntid):
        return (f".maxntid {', '.join(map(str, maxntid))} allows at most {prod(maxntid)} threads per block, "
                f"the launch has {threads} (block {list(b)})")
    if reqntid is not None and b != _block3(reqntid):
        return (f".reqntid {', '.join(map(str, reqntid))} requires block {list(_block3(reqntid))}, "
                f"the launch has block {list(b)}")
    return None


def launch_problem(fn, launches: Iterable[tuple[str, object]]) -> str | None:
    """Why ``fn`` (a candidate) cannot be launched as the judge is about to launch it: the first
    ``(label, block)`` of ``launches`` its ``.maxntid``/``.reqntid`` refuse, or a
    ``.minnctapersm`` that cannot be resident beside its own block bound (more than
    :data:`MAX_THREADS_PER_SM` threads per SM); None when every launch fits."""
    for label, block in launches:
        why = block_problem(fn, block)
        if why:
            return f"{why}, on {label}: a GPU refuses such a launch"
    try:
        maxntid, reqntid, minncta = _dims(fn, ".maxntid"), _dims(fn, ".reqntid"), _dims(fn, ".minnctapersm")
    except ValueError as exc:
        return f"has a performance directive that is not a number ({exc})"
    bound = prod(reqntid) if reqntid is not None else (prod(maxntid) if maxntid is not None else None)
    if minncta is not None and bound is not None and prod(minncta) * bound > MAX_THREADS_PER_SM:
        return (f".minnctapersm {prod(minncta)} x {bound} threads cannot be resident on an SM "
                f"({MAX_THREADS_PER_SM} threads)")
    return None


def _short(origin) -> str:
    """A spec's origin, short enough for a one-line message: ``toml:/a/b/nvcc-plus.toml`` ->
    ``nvcc-plus.toml``."""
    origin = str(origin)
    if origin.startswith("toml:"):
        return origin[5:].rsplit("/", 1)[-1]
    return {"comment": "// nvcc-plus: comment", "captured": "captured launches"}.get(origin, origin)
