"""``nvcc-plus --plus-help`` and ``--plus-version``: nvcc-plus's own options, answered by
nvcc-plus itself (exit 0) and never passed to nvcc, whose ``--help``/``--version`` stay
nvcc's (CMake reads ``--version`` to identify the compiler)."""
from __future__ import annotations

USAGE = """\
nvcc-plus: a drop-in nvcc that super-optimizes the PTX of every kernel it compiles,
verifies each rewrite against nvcc's code and keeps only measured wins.
nvcc-plus --plus-version prints its own version; --version and --help are nvcc's
(CMake reads --version to identify the compiler).

Usage:
  nvcc-plus NVCC-ARGS...                compiler mode (make NVCC=nvcc-plus,
                                        cmake -DCMAKE_CUDA_COMPILER=$(which nvcc-plus))
  nvcc-plus /path/to/nvcc NVCC-ARGS...  launcher mode (CMAKE_CUDA_COMPILER_LAUNCHER)

nvcc-plus's own flags (removed before nvcc sees the command line; --plus-KEY VALUE works):
  --plus-help                 this text
  --plus-version              nvcc-plus's version and the nvcc it drives
  --plus-mode=MODE            off | roundtrip | optimize
  --plus-config=FILE          the nvcc-plus.toml to read
  --plus-real-nvcc=PATH       the nvcc to drive
  --plus-timeout=SECONDS      optimizer limit per PTX module (0 = none)
  --plus-build-budget=SECONDS optimizer time for the whole build
  --plus-report-dir=DIR       one JSON record per PTX module
  --plus-progress=WHEN        live progress on stderr: auto | on | off
  --plus-verbose              one line per step with timings

Precedence: flag > environment > nvcc-plus.toml > default. nvcc-plus.toml is looked for
from the working directory, then from each source's folder, up to the project root.
`superopt config` prints the effective settings and where each came from.

"""


def help_text() -> str:
    from superopt.config.settings import plain_text
    return USAGE + "Settings:\n\n" + plain_text()


def version_text(real: str | None) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        ours = version("nvcc-plus")
    except PackageNotFoundError:
        ours = "source checkout"
    return f"nvcc-plus {ours}\nreal nvcc: {real or 'not found (set NVCC_PLUS_REAL_NVCC)'}\n"
