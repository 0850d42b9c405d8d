"""CPU emulator of PTX kernels (numpy, SIMT): exact semantics or an explicit Unsupported.

:class:`LoadedModule` loads PTX text into emulated device memory; its ``launch`` runs a
kernel over a grid. Instruction semantics live in :mod:`ptx_ir.semantics`; this package
holds the memory model (:mod:`.memory`), the compiler to closures (:mod:`.program`) and the
SIMT scheduler (:mod:`.executor`). The judge's backend is :mod:`superopt.judge.backends.emulator`.
"""
from ptx_ir.semantics.errors import Deadlock, KernelFault, UndefinedBehavior, Unsupported
from superopt.judge.emulator.executor import RunTimeout
from superopt.judge.emulator.memory import HEAP_BASE, LOCAL_BASE, SHARED_BASE, Heap
from superopt.judge.emulator.runner import LoadedModule

__all__ = ["LoadedModule", "Heap", "Unsupported", "KernelFault", "UndefinedBehavior", "Deadlock",
           "RunTimeout", "HEAP_BASE", "SHARED_BASE", "LOCAL_BASE"]
