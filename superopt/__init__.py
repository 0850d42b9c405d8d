"""superopt: make kernels faster, prove nothing broke.

The driver (`nvcc_plus`) reaches this package through exactly one function,
:func:`superopt.api.optimize_ptx`, re-exported here (lazily: the driver also imports
:mod:`superopt.store.discovery` on every compilation, which must stay cheap).
"""

__all__ = ["OptimizeOutcome", "optimize_ptx", "load_ipython_extension"]


def load_ipython_extension(ipython) -> None:
    """``%load_ext superopt`` in IPython/Jupyter: the ``%%ptxgen`` cell magic
    (:mod:`superopt.generate.notebook`; needs the ``notebook`` extra)."""
    from superopt.generate.notebook import load_ipython_extension as load
    load(ipython)


def __getattr__(name: str):
    if name in ("OptimizeOutcome", "optimize_ptx"):
        from superopt import api
        return getattr(api, name)
    raise AttributeError(f"module 'superopt' has no attribute {name!r}")
