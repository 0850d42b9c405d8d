"""Errors raised by instruction semantics and the emulator."""
from __future__ import annotations


class Unsupported(Exception):
    """An instruction (or a use of one) the CPU emulator does not reproduce exactly.

    ``str(exc)`` is ``"unsupported: <what>"``; ``exc.what`` is the instruction text.
    """

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"unsupported: {what}")


class UndefinedBehavior(Exception):
    """The kernel did something PTX leaves undefined (e.g. shfl from an exited lane)."""


class KernelFault(Exception):
    """What would be a run-time fault on a GPU: illegal or misaligned address, trap."""


class Deadlock(Exception):
    """No thread can make progress (a barrier that never completes, a spin without end)."""
