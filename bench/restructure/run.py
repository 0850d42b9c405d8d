"""Loop-level memory restructuring benchmark (issue 27): naive programs whose loops walk memory
badly, per kernel and per program, plain nvcc vs nvcc-plus without and with a capture.

    python -m bench.restructure.run [--program NAME ...] [--modes nvcc,plus,capture] [--reps 5]
                                    [--budget 5] [--deadline 540] [--out FILE] [--fresh] [--dry-run]

Every program under bench/restructure/<name>/ is written the way naive open-source CUDA code
writes these shapes (plain pointers, one thread per output, sums in locals), has its own
Makefile, its own cudaEvent timer per kernel and its own self-check, and prints one line per
kernel ``NVCC_PLUS_BENCH kernel=<name> kernel_ms=<median ms> check=...`` and, last, the
program's line. ``programs.toml`` says which kernels are *row-walk* (one thread per row walking
its row) and *shared-operand* (naive GEMM, stencil: neighbours loading the same inputs).

The machinery is bench/alias's (:func:`bench.alias.run.main` on :data:`SUITE`): the builds, the
capture and the interleaved runs of bench/programs, never_slower's verdict per kernel x mode and
per program x mode, the deadline, the merged result file
(``bench/results/<date>-restructure-<gpu>.json``). On top of bench/alias's records: per kernel
``kind`` and ``goal_speedup``; top level ``min_speedup_by_kind``, ``below_goal`` and
``program_geomean_speedup``; ``goal_met``: with a capture >= 3x on every row-walk kernel and
>= 2x on the naive GEMM (a program's ``goal`` in programs.toml overrides its kind's), none
slower in any mode, all checks pass, and the geomean of the programs' speedups with a capture
>= 1.5x.
"""
from __future__ import annotations

import sys
from pathlib import Path

from bench.alias import run as base

HERE = Path(__file__).resolve().parent
GOALS = {"row-walk": 3.0, "shared-operand": 2.0}
GEOMEAN_GOAL = 1.5

SUITE = base.Suite(
    name="restructure", here=HERE, goals=GOALS, flag="targeted",
    benchmark="bench/restructure: naive programs whose loops walk memory badly (one thread per row, "
              "neighbours loading the same operands), per kernel, plain nvcc vs nvcc-plus without and with "
              "capture (loop-level memory restructuring, issue 27)",
    description=__doc__.split("\n\n")[0],
    goal_modes=("capture",), geomean_goal=GEOMEAN_GOAL, geomean_mode="capture",
    list_note="kinds from programs.toml (row-walk >= 3x, shared-operand >= 2x with a capture; "
              "a program's goal overrides)",
    goal_text=">= 3x on every row-walk kernel and >= 2x on every shared-operand kernel (a program's goal "
              "overrides) with a capture, none slower in any mode, all checks pass, geomean of the programs' "
              f"speedups with a capture >= {GEOMEAN_GOAL:g}x")


def manifest() -> dict:
    return base.manifest(SUITE)


def program_names() -> list[str]:
    return base.program_names(SUITE)


def kinds(name: str) -> dict[str, str]:
    return base.kinds(name, SUITE)


def kernels(name: str) -> dict[str, bool]:
    return base.kernels(name, SUITE)


def goal_of(name: str, kernel: str) -> float | None:
    return base.goal_of(name, kernel, SUITE)


def expected_seconds(name: str, reps: int, budget: float, modes: list[str], timeout: float | None,
                     dry_run: bool = False) -> float:
    return base.expected_seconds(name, reps, budget, modes, timeout, dry_run, suite=SUITE)


def judge(row: dict) -> dict:
    return base.judge(row, SUITE)


def finish(result: dict) -> dict:
    return base.finish(result, SUITE)


def table(result: dict) -> str:
    return base.table(result, SUITE)


def main(argv: list[str] | None = None) -> int:
    return base.main(argv, suite=SUITE)


if __name__ == "__main__":
    sys.exit(main())
