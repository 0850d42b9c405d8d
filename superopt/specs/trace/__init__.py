"""The bounds tracer (see :mod:`superopt.specs.trace.tracer`)."""
from superopt.specs.trace.tracer import PARAM_STRIDE, BufferAccess, TraceError, TraceResult, trace

__all__ = ["TraceResult", "BufferAccess", "trace", "TraceError", "PARAM_STRIDE"]
