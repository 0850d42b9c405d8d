"""Backends that run kernels: ``gpu`` (cuda-python, in a child process) and ``emulator``
(CPU, superopt/judge/backends/emulator.py, added later). See :mod:`superopt.judge.backends.base`."""
from superopt.judge.backends.base import (Backend, BackendUnavailable, RunResult, backend_names,
                                    get_backend, register_backend)

__all__ = ["Backend", "BackendUnavailable", "RunResult", "backend_names", "get_backend",
           "register_backend"]
