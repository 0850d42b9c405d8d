"""The bounds tracer: which bytes of which buffer can a kernel touch under one launch?

See :mod:`superopt.specs.trace.tracer` for how it works and how the package is split.
"""
from superopt.specs.trace.accesses import BufferAccess, TraceError, TraceResult, TraceTimeout
from superopt.specs.trace.intervals import PARAM_STRIDE
from superopt.specs.trace.tracer import Tracer, trace

__all__ = ["TraceResult", "BufferAccess", "trace", "TraceError", "TraceTimeout", "PARAM_STRIDE", "Tracer"]
