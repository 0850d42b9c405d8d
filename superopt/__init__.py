"""superopt: make kernels faster, prove nothing broke.

The driver (`nvcc_plus`) reaches this package through exactly one function,
:func:`superopt.api.optimize_ptx`, re-exported here.
"""
from superopt.api import OptimizeOutcome, optimize_ptx

__all__ = ["OptimizeOutcome", "optimize_ptx"]
