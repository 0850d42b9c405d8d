"""The launch spec a generated kernel is checked with: ``--spec``, or a default.

``--spec`` is a spec file (TOML or JSON, as for ``superopt verify``) or, inline, the items of
a ``// nvcc-plus:`` comment::

    --spec "grid=cdiv(n,256) block=256 a:f32[n] in b:f32[n] in c:f32[n] out n=4099"

Parameters are named as in the signature. Without ``--spec``:

* a CUDA reference gives its own (a ``// nvcc-plus:`` comment beside its kernel, else
  inference from its PTX, as the optimizer does);
* otherwise, a signature with exactly one integer scalar gets the *elementwise* default:
  every buffer holds that many elements, ``const`` pointers are inputs and the others
  outputs, ``grid=cdiv(n,256) block=256``, ``n=4099`` (the check varies it). The record and
  the output say that it was assumed. Anything else needs ``--spec``.
"""
from __future__ import annotations

import os
from dataclasses import replace

from superopt.generate.signature import KernelSignature
from superopt.specs.launch_spec import Buffer, LaunchSpec, Scalar, SpecError, load_spec

__all__ = ["spec_from_option", "default_spec", "check_fits", "ELEMENTWISE_N", "ELEMENTWISE_BLOCK"]

ELEMENTWISE_N = 4099
ELEMENTWISE_BLOCK = 256


class _Param:
    """What :func:`superopt.specs.comments.directive_spec` needs to know of a parameter."""

    def __init__(self, p):
        self.index = p.index
        self.kind = "ptr" if p.pointer else ("float" if p.elem.startswith(("f", "bf")) else "int")
        self.scalar_type = p.elem


def spec_from_option(text: str, sig: KernelSignature) -> LaunchSpec:
    """``--spec``: a file path, or the inline items of a ``// nvcc-plus:`` comment."""
    text = (text or "").strip()
    if not text:
        raise SpecError("--spec is empty")
    if os.path.exists(text) and os.path.isfile(text):
        try:
            spec = load_spec(text, kernel=sig.name)
        except SpecError:
            spec = load_spec(text)           # one spec in the file, under another name
        spec = replace(spec, kernel=sig.name)
    elif text.endswith((".toml", ".json")) and "=" not in text:
        raise SpecError(f"spec file {text!r} does not exist")
    else:
        from superopt.specs.comments import directive_spec
        spec = directive_spec(text, sig.name, [_Param(p) for p in sig.params], [p.name for p in sig.params])
        spec = replace(spec, origin="--spec")
    check_fits(spec, sig)
    return spec


def default_spec(sig: KernelSignature) -> tuple[LaunchSpec, str]:
    """The elementwise default and the note that says it was assumed; SpecError when the
    signature is not of that shape."""
    ints = [p for p in sig.params if not p.pointer and not p.elem.startswith(("f", "bf"))]
    if len(ints) != 1:
        raise SpecError(f"no --spec, and the signature has {len(ints)} integer scalars, so the elementwise "
                        f"default (one size n for every buffer) does not apply: give --spec, e.g. "
                        f"--spec \"grid=cdiv(n,256) block=256 x:f32[n] in y:f32[n] out n=4099\"")
    n = ints[0].name
    params = []
    for p in sig.params:
        if p.pointer:
            params.append(Buffer(p.name, p.elem, n, "in" if p.const else "out"))
        elif p is ints[0]:
            params.append(Scalar(p.name, p.elem, ELEMENTWISE_N))
        else:
            params.append(Scalar(p.name, p.elem, 1.5))
    spec = LaunchSpec(sig.name, grid=(f"cdiv({n}, {ELEMENTWISE_BLOCK})", 1, 1), block=(ELEMENTWISE_BLOCK, 1, 1),
                      params=params, origin="elementwise-default")
    ins = [p.name for p in sig.params if p.pointer and p.const]
    outs = [p.name for p in sig.params if p.pointer and not p.const]
    note = (f"no --spec: assumed an elementwise launch: grid=cdiv({n},{ELEMENTWISE_BLOCK}) "
            f"block={ELEMENTWISE_BLOCK}, every buffer {n} elements ({', '.join(ins) or 'no'} in; "
            f"{', '.join(outs)} out), {n}={ELEMENTWISE_N} and other sizes; give --spec to change it")
    return spec, note


def check_fits(spec: LaunchSpec, sig: KernelSignature, *, names: bool = True) -> None:
    """The spec's parameters are the signature's, in order, pointers as buffers: SpecError if
    not. ``names``: they must also be named as in the signature (a numpy reference is called
    by these names; a CUDA reference's inferred spec may name them otherwise)."""
    if len(spec.params) != len(sig.params):
        raise SpecError(f"the spec has {len(spec.params)} parameters, the signature {len(sig.params)} "
                        f"({sig.text})")
    for sp, p in zip(spec.params, sig.params):
        if names and sp.name != p.name:
            raise SpecError(f"spec parameter {p.index} is named {sp.name!r} where the signature has "
                            f"{p.name!r} (name them as in {sig.text})")
        if isinstance(sp, Buffer) != p.pointer:
            what = "a buffer" if isinstance(sp, Buffer) else "a scalar"
            raise SpecError(f"spec parameter {sp.name!r} is {what} but the signature declares {p.cxx} {p.name}")
        if isinstance(sp, Scalar):
            from superopt.specs.launch_spec import elem_type
            if elem_type(sp.type).size != elem_type(p.elem).size:
                raise SpecError(f"spec scalar {sp.name!r} is {sp.type} but the signature declares {p.cxx}")
