"""Rewrite passes and their registry: the pass API.

A pass is a Python function over one function of the IR, registered with
:func:`register`::

    from superopt.passes import register, Change

    @register(
        name="my-pass",
        summary="what it does, one line",
        assumes="what it needs to be true, and how it proves it from the IR",
        params={"factor": [2, 4]},          # the values the search may try
    )
    def my_pass(fn, *, factor=2):
        changes = []
        for inst in list(fn.instructions):
            ...                              # prove the precondition; skip when you cannot
            fn.replace(inst, new_instructions)
            changes.append(Change("replaced X by Y", inst))
        return changes                       # empty list: the pass did not fire here

Rules every pass keeps:
* It mutates ``fn`` (a clone the search made; never the baseline) only through the
  mutation API of :class:`ptx_ir.Function`, so the IR stays valid and re-analysable.
* It fires only where it can prove its precondition from the IR (or inserts a runtime
  check that keeps the old path). A pass that cannot prove it does nothing.
* It keeps the kernel's name, parameters, globals and launch contract.
* It proposes; it never decides. The judge (differential check + timing) decides.

Passes are found by importing every module in this package (one pass per file) plus any
user file loaded with :func:`load_pass_file` (``superopt try MY_PASS.py``).
"""
from __future__ import annotations

import importlib
import importlib.util
import itertools
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["Change", "PassInfo", "register", "registry", "get_pass", "load_pass_file",
           "param_grid"]


@dataclass
class Change:
    """One edit a pass made: a sentence for the report, and where."""

    description: str
    at: object = None          # the (old) instruction or block it concerns, if any

    def __str__(self) -> str:
        return self.description


@dataclass
class PassInfo:
    name: str
    summary: str
    assumes: str
    run: Callable
    params: dict = field(default_factory=dict)
    source: str = "builtin"

    def __call__(self, fn, **params) -> list[Change]:
        result = self.run(fn, **params)
        return list(result or [])


_REGISTRY: dict[str, PassInfo] = {}
_LOADED = False


def register(*, name: str, summary: str, assumes: str, params: dict | None = None,
             source: str | None = None):
    def wrap(func: Callable) -> Callable:
        if name in _REGISTRY and _REGISTRY[name].run is not func:
            raise ValueError(f"two passes are named {name!r} "
                             f"({_REGISTRY[name].source} and {source or func.__module__})")
        _REGISTRY[name] = PassInfo(name, summary, assumes, func, dict(params or {}),
                                   source or func.__module__)
        return func
    return wrap


def _load_builtin() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def registry() -> dict[str, PassInfo]:
    _load_builtin()
    return dict(sorted(_REGISTRY.items()))


def get_pass(name: str) -> PassInfo:
    passes = registry()
    if name not in passes:
        raise KeyError(f"no pass named {name!r} (known: {', '.join(passes)})")
    return passes[name]


def load_pass_file(path: str | Path) -> list[PassInfo]:
    """Import a user's pass file; return the passes it registered."""
    _load_builtin()
    path = Path(path)
    for name in [n for n, p in _REGISTRY.items() if p.source == str(path)]:
        del _REGISTRY[name]          # loading the same file again (in one process) replaces its passes
    before = set(_REGISTRY)
    spec = importlib.util.spec_from_file_location(f"user_pass_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load a pass from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    new = [p for n, p in _REGISTRY.items() if n not in before]
    for p in new:
        p.source = str(path)
    if not new:
        raise ImportError(f"{path} registered no pass (decorate a function with "
                          f"@superopt.passes.register(...))")
    return new


def param_grid(info: PassInfo) -> list[dict]:
    """Every combination of the pass's declared parameter values ([{}] when none)."""
    if not info.params:
        return [{}]
    keys = list(info.params)
    return [dict(zip(keys, values)) for values in itertools.product(*(info.params[k] for k in keys))]
