"""The judge kernel (tests/judge/kernels/judge.cu) and its planted variants, shared by the
tests that run them on a backend (the GPU, the CPU emulator): the PTX, the spec, which
variants are equivalent rewrites and what the check must say about each cheat."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from superopt.specs.launch_spec import LaunchSpec, load_spec

KERNELS = Path(__file__).resolve().parent / "kernels"

EQUIVALENT = ["baseline", "eq_reorder", "eq_commute", "eq_cuda"]

# cheat -> a phrase the rejection reason must contain
CHEATS = {
    "noop": "not written",
    "block0": "not written",
    "off_by_one": "outside buffer 'out'",
    "ignore_input": "differs",
    "hang": "timed out",
    "fma": "differs",
    "last_lane": "differs",
    "uninit_shared": "differs",
    "cache": "not written",
    "writes_input": "writes its input buffer 'x'",
    "crash": "crashed",
}


def ptx(name: str) -> str:
    return (KERNELS / "ptx" / f"{name}.ptx").read_text()


def with_n(spec: LaunchSpec, n: int) -> LaunchSpec:
    return replace(spec, params=[replace(p, value=n) if p.name == "n" else p for p in spec.params])


def judge_spec(n: int | None = None) -> LaunchSpec:
    spec = load_spec(str(KERNELS / "judge.toml"))
    return spec if n is None else with_n(spec, n)
