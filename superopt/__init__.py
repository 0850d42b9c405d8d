"""superopt: make kernels faster, prove nothing broke.

The driver (`nvcc_plus`) reaches this package through exactly one function,
:func:`superopt.api.optimize_ptx`, re-exported here (lazily: the driver also imports
:mod:`superopt.store.discovery` on every compilation, which must stay cheap).
"""

__all__ = ["OptimizeOutcome", "optimize_ptx"]


def __getattr__(name: str):
    if name in __all__:
        from superopt import api
        return getattr(api, name)
    raise AttributeError(f"module 'superopt' has no attribute {name!r}")
