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

What the search needs to know of a pass, the pass says in :func:`register` (adding a pass is
one new file here and its tests, nothing else):

* ``order`` -- where the rule search tries it (lower first; structural passes that change how
  memory is moved come before hints and knobs, since within a budget they are worth more);
* ``launch_params`` -- parameters the search fills from the launch, ``{param: fact}``, facts
  being :data:`LAUNCH_FACTS` (a pass that specialises for the timed block asks
  ``{"block": "timed_block"}``; ``restrict-body`` asks ``{"restrict": "restrict_body"}``, the kernel's
  restrict-compiled PTX, a fact of the module rather than of the launch);
* ``carries_code`` -- its parameters carry code (a model's function body): a lockfile or cache
  entry naming it is applied only after the judge accepts the result against nvcc's code.

Passes are found by importing every module in this package (one pass per file) plus any
user file loaded with :func:`load_pass_file` (``superopt try MY_PASS.py``); a module elsewhere
may register a pass too (the model's ``model-rewrite``, in :mod:`superopt.model.rewrite`).
"""
from __future__ import annotations

import importlib
import importlib.util
import itertools
import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["Change", "PassInfo", "LAUNCH_FACTS", "register", "registry", "get_pass", "load_pass_file",
           "param_grid", "DEFAULT_ORDER"]

#: What the search can tell a pass about the launch it is judged at (``launch_params``):
LAUNCH_FACTS = {
    "timed_block": "the block of the launch spec the search times with (none beside dynamic shared "
                   "memory: a pass's static arrays would add to the launch's); any spec's block is a "
                   "safe choice for a pass that tests %ntid at run time",
    "contract_block": "the largest block of a launch spec a person wrote or the program's captured "
                      "launches (the launch contract; none for inferred specs)",
    # Not of the launch but of the module: the search gives it with the launch facts.
    "restrict_body": "the kernel as cicc compiles the same translation unit with "
                     "-kernel-params-are-restrict (its function's PTX text), made only when the driver "
                     "can (optimize_ptx's config['restrict_variant']) and the kernel writes through one of "
                     "two or more pointer parameters",
}
DEFAULT_ORDER = 100        # passes that do not say: after every built-in structural pass


@dataclass
class Change:
    """One edit a pass made: a sentence for the report, and where."""

    description: str
    at: object = None          # the (old) instruction or block it concerns, if any
    # a fast body the edit put behind a launch-time no-alias check
    # (a superopt.passes._alias_check.FastPath): the candidate's record says which check, and
    # with a capture how often it would pick the fast body (superopt.search.fast_path)
    fast_path: object = None

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
    order: int = DEFAULT_ORDER
    launch_params: dict = field(default_factory=dict)     # param -> a key of LAUNCH_FACTS
    carries_code: bool = False
    # False: not in the search's default set; only where NVCC_PLUS_PASSES (or a search's passes)
    # names it. For a pass not yet sound or not yet faster on a GPU: why, in its docstring.
    default: bool = True

    def __call__(self, fn, **params) -> list[Change]:
        result = self.run(fn, **params)
        return list(result or [])


_REGISTRY: dict[str, PassInfo] = {}
_LOADED = False


def register(*, name: str, summary: str, assumes: str, params: dict | None = None,
             source: str | None = None, order: int = DEFAULT_ORDER, launch_params: dict | None = None,
             carries_code: bool = False, default: bool = True):
    unknown = sorted(set((launch_params or {}).values()) - set(LAUNCH_FACTS))
    if unknown:
        raise ValueError(f"pass {name!r}: unknown launch fact(s) {unknown} (known: {', '.join(LAUNCH_FACTS)})")

    def wrap(func: Callable) -> Callable:
        if name in _REGISTRY and _REGISTRY[name].run is not func:
            raise ValueError(f"two passes are named {name!r} "
                             f"({_REGISTRY[name].source} and {source or func.__module__})")
        _REGISTRY[name] = PassInfo(name, summary, assumes, func, dict(params or {}),
                                   source or func.__module__, order, dict(launch_params or {}), carries_code,
                                   default)
        return func
    return wrap


_DECLARED = re.compile(r"@register\(\s*name=\"([^\"]+)\"")


def declared_names() -> list[str]:
    """The names the built-in pass files register, read from their text without importing
    them (importing every pass costs a GPU-less build more than the rest of its work).
    ``tests/test_layout.py`` checks this against the registry."""
    names = []
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            text = (Path(__path__[0]) / f"{info.name}.py").read_text()
            names += _DECLARED.findall(text)
    return sorted(names)


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
