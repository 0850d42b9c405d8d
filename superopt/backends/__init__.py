"""Backends that run kernels: ``gpu`` (cuda-python, in a child process) and ``emulator``
(CPU, superopt/backends/emulator.py, added later). See :mod:`superopt.backends.base`."""
from superopt.backends.base import (Backend, BackendUnavailable, RunResult, backend_names,
                                    get_backend, register_backend)

__all__ = ["Backend", "BackendUnavailable", "RunResult", "backend_names", "get_backend",
           "register_backend"]
