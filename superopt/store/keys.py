"""The key a kernel's decision is stored under, built in one place.

A decision made for one kernel text, module globals, target, toolchain, policy, set of
passes and least gain (``NVCC_PLUS_MIN_GAIN``: a rewrite kept at 1.5% under a 0% floor is not
one a 2% floor keeps, and a 5% floor's "keep nvcc's code" is not a 0% floor's) is valid for
exactly those; and also for the launch specs it was judged with when a
person wrote them (``explicit``) or the program's launches were captured (``spec``), and for
the GPU model it was measured on when a cluster worker made it (``gpu``). The lockfile's key
leaves the toolchain and those out (a lock travels between machines with the same nvcc).

The digest is the one :func:`superopt.store.cache.decision_key` has always computed (the
qualifiers join the toolchain part as `` explicit=…``, `` gpu=…``, `` spec=…``, `` min_gain=…``,
in that order). A least gain of 0 adds nothing: entries cached before the least gain existed
were made without one and keep their keys; under the default 2% they are not found (searched
again once). The lockfile's key leaves the least gain out with the toolchain: a locked decision
is the project's, applied whatever the floor.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from superopt.store.cache import decision_key


@dataclass(frozen=True)
class DecisionKey:
    kernel_text: str
    globals_text: str
    target: str
    tool: str                       # ptxas version (and the model, when one proposes)
    policy: str
    passes: tuple[str, ...]
    explicit: str | None = None     # the identity of the user's explicit launch specs
    gpu: str | None = None          # the GPU model a cluster worker measured on
    spec: str | None = None         # the identity of the captured launch specs
    min_gain: float = 0.0           # the least gain a rewrite was kept for (NVCC_PLUS_MIN_GAIN)

    def tool_part(self) -> str:
        out = self.tool
        if self.explicit:
            out += f" explicit={self.explicit}"
        if self.gpu is not None:
            out += f" gpu={self.gpu or '?'}"
        if self.spec:
            out += f" spec={self.spec}"
        if self.min_gain:
            out += f" min_gain={self.min_gain:g}"
        return out

    def digest(self) -> str:
        """The cache's key."""
        return decision_key(kernel_text=self.kernel_text, globals_text=self.globals_text, target=self.target,
                            tool=self.tool_part(), policy=self.policy, passes=list(self.passes))

    def lock_digest(self) -> str:
        """The lockfile's key: no toolchain, no spec or GPU qualifiers."""
        return decision_key(kernel_text=self.kernel_text, globals_text=self.globals_text, target=self.target,
                            tool="", policy=self.policy, passes=list(self.passes))

    def on_gpu(self, gpu: str | None) -> "DecisionKey":
        """The key of a decision a cluster worker measured on ``gpu`` (its model)."""
        return replace(self, gpu=gpu or "")

    def at_captured(self, spec_key: str) -> "DecisionKey":
        """The key of a decision made at the program's captured launches (``spec_key``)."""
        return replace(self, spec=spec_key)
