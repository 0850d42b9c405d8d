"""restrict-body: nvcc's own restrict-compiled kernel behind a launch-time no-alias check.

Without ``__restrict__`` nvcc must assume that a kernel's outputs may overlap its inputs: a
naive kernel reloads and stores a global accumulator every iteration and cannot load with
``ld.global.nc``. The same translation unit compiled by cicc with
``-kernel-params-are-restrict`` (what ``nvcc -restrict`` passes) is the code nvcc would have
made had every pointer parameter been ``__restrict__``. That code is exact exactly when the
launch's buffers do not overlap, which the footprint analysis
(:func:`superopt.passes._alias_footprint.alias_check`) turns into a block-uniform check over
the kernel's parameters and launch dimensions. This pass puts the restrict-compiled body behind
that check and keeps nvcc's own body for launches where it fails
(:func:`superopt.passes._versioning.versioned`).

The search gives the pass the restrict-compiled function's PTX text as ``restrict`` (the launch
fact ``restrict_body``, made only when the driver can compile the unit that way: the
``restrict_variant`` key of :func:`superopt.api.optimize_ptx`'s config). Without it, or when
the restrict body is the same code as nvcc's (up to register and label numbering: versioning
gains nothing), or when no check can be built, the pass does nothing.
"""
from __future__ import annotations

import ptx_ir
from superopt.passes import Change, register
from superopt.passes._versioning import VersioningRefused, refusal, same_code, versioned

ORIGIN = "restrict-compiled body from nvcc (cicc -kernel-params-are-restrict)"


def parse_restrict_function(text: str, name: str) -> ptx_ir.Function | None:
    """The function ``name`` of the restrict text (one function's PTX, or a whole module)."""
    if ".version" not in text:
        text = ".version 8.0\n.target sm_90\n.address_size 64\n\n" + text
    try:
        module = ptx_ir.parse(text)
        fn = module.function(name)
    except (ptx_ir.ParseError, KeyError):
        return None
    return None if fn.is_declaration else fn


def alias_check_for(fn):
    """The footprint analysis' check for ``fn``, or None (also when the analysis is not there)."""
    try:
        from superopt.passes import _alias_footprint
    except ImportError:
        return None
    return _alias_footprint.alias_check(fn)


@register(
    name="restrict-body",
    order=12,
    launch_params={"restrict": "restrict_body"},
    carries_code=True,
    summary="run nvcc's own restrict-compiled body (cicc -kernel-params-are-restrict) when a "
            "launch-time check shows the buffers disjoint, nvcc's code otherwise",
    assumes=("restrict (the launch fact restrict_body) is this kernel compiled by cicc from the same "
             "unit with -kernel-params-are-restrict: exact when no written buffer overlaps another. "
             "The footprint analysis proves each pointer parameter's byte range over the grid from the "
             "IR and checks at launch that written ranges are disjoint from all others; when it cannot "
             "build the check, or the signature, entry directives or calls differ, the pass does nothing"),
    params={},
)
def restrict_body(fn, *, restrict: str = "") -> list[Change]:
    if not restrict or not fn.is_entry or fn.body is None:
        return []
    fast = parse_restrict_function(restrict, fn.name)
    if fast is None or refusal(fn, fast) is not None:
        return []
    if same_code(fn, fast):
        return []                          # nvcc already made this code: versioning gains nothing
    check = alias_check_for(fn)
    if check is None:
        return []
    try:
        return versioned(fn, fast, check, origin=ORIGIN)
    except VersioningRefused:
        return []
