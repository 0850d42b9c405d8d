"""Is a candidate right, and is it faster? ptxas, inputs, the differential check, timing,
compute-sanitizer, the GPU lock, and the backends (GPU, CPU emulator) that run kernels.

The search sees all of it through one interface, :class:`superopt.judge.protocol.Judge`;
:class:`superopt.judge.judge.BackendJudge` is the real one and
:class:`superopt.judge.cache.CachingJudge` remembers its answers by (baseline, candidate, spec).

The names are loaded on first use (PEP 562): a build that only applies stored decisions reads
small modules of this package (devices, ptxas, policy) without loading the check and numpy.
"""
from __future__ import annotations

import importlib

__all__ = ["BackendJudge", "CachingJudge", "Judge"]

_HOMES = {"BackendJudge": "superopt.judge.judge", "CachingJudge": "superopt.judge.cache",
          "Judge": "superopt.judge.protocol"}


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'superopt.judge' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
