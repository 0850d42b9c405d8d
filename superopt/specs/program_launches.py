"""What the search can know of the launches a program may make, beside the one it times.

A kernel is timed at one launch shape (the first spec: the captured one, or the inferred one
scaled up). A rewrite faster there can be slower at a launch the program also makes: a kernel
benchmark that picks its block at run time among 32 ... 1024, a capture whose second shape
takes a third of the kernel's time. :class:`ProgramLaunches` says which other launches the
spec source knows of, so that the rewrite to keep is timed at each
(:mod:`superopt.search.launch_shapes`):

* **captured**: every captured shape with at least 5% of the kernel's GPU time, with its share
  (:attr:`superopt.specs.capture.specs.CapturedSpecs.weighted`), and every block the capture saw;
* **inferred**: the blocks the .cu source launches the kernel with (constants, or chosen at
  run time among constants: :mod:`superopt.specs.source_launches`); and where some launch
  computes its block at run time, or the source does not show the launches, the usual blocks
  (:data:`superopt.specs.inference.USUAL_BLOCKS`) and the other inferred ones;
* **explicit** (a toml table, a ``// nvcc-plus:`` comment): the user's specs are the launches.

It is data (a cluster worker receives it with the spec choice).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ProgramLaunches", "from_inference", "from_capture", "from_specs"]


@dataclass(frozen=True)
class ProgramLaunches:
    kind: str                         # "captured" | "inferred" | "explicit"
    source_blocks: tuple = ()         # blocks the source launches the kernel with
    runtime: bool = True              # a block computed at run time, or launches not in the source
    weighted: tuple = ()              # (LaunchSpec, share of the kernel's GPU time), main shape first
    captured_blocks: tuple = ()       # every block the capture saw
    # the kernel's entry of the capture (every shape with its parameters, launches and GPU time;
    # superopt.specs.capture.format): at which launches a versioned candidate's fast body would
    # run (superopt.search.fast_path). None without a capture.
    capture: dict | None = None

    def describe(self) -> str:
        if self.kind == "captured":
            return f"{len(self.weighted)} captured shape(s) with >= 5% of the kernel's GPU time"
        if self.kind == "explicit":
            return "the explicit launch specs"
        parts = []
        if self.source_blocks:
            parts.append(f"the source's blocks {', '.join(_fmt(b) for b in self.source_blocks)}")
        if self.runtime:
            parts.append("the usual blocks (the block is computed at run time or the launches are not "
                         "in the source)")
        return " and ".join(parts) or "no other launch"


def _fmt(block) -> str:
    dims = [int(d) for d in block]
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    return "x".join(map(str, dims))


def from_inference(result) -> ProgramLaunches:
    """The launches of an inferred spec source (an :class:`~superopt.specs.inference.InferenceResult`)."""
    sb = getattr(result, "source_blocks", None)
    if sb is None:
        return ProgramLaunches("inferred", (), True)
    return ProgramLaunches("inferred", tuple(sb.program_blocks), bool(sb.runtime))


def from_capture(captured) -> ProgramLaunches:
    """The launches of a captured spec source (a :class:`~superopt.specs.capture.specs.CapturedSpecs`)."""
    return ProgramLaunches("captured", weighted=tuple(captured.weighted), runtime=False,
                           captured_blocks=tuple(captured.blocks), capture=captured.kernel_capture)


def from_specs(specs: list) -> ProgramLaunches:
    """What the specs alone say, for a search given specs without their source (``superopt try``,
    tests): inferred specs know nothing of the program's launches (the usual blocks are timed);
    captured ones without the capture's shares are the timed shape alone; any other spec list
    is the launches."""
    if not all(hasattr(s, "block") for s in specs):
        return ProgramLaunches("explicit", runtime=False)
    origins = {str(getattr(s, "origin", None) or "") for s in specs}
    if specs and all(o.startswith("inferred") for o in origins):
        return ProgramLaunches("inferred", (), True)
    if specs and getattr(specs[0], "origin", None) == "captured":
        return ProgramLaunches("captured", weighted=((specs[0], 1.0),), runtime=False,
                               captured_blocks=tuple(dict.fromkeys(tuple(s.block) for s in specs
                                                                   if s.origin == "captured")))
    return ProgramLaunches("explicit", runtime=False)
