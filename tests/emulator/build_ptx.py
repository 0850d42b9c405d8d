"""Regenerate tests/emulator/golden/*.ptx from kernels/*.cu (nvcc 13.0, no GPU needed).

    python tests/emulator/build_ptx.py [--check]

The fixtures in golden/fixtures/ were recorded from exactly these PTX files: after a
regeneration that changes a file, re-record its cases on a GPU (record_golden.py).
``--check`` compiles into a temporary directory and reports files that would change.
"""
from __future__ import annotations

import filecmp
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# output stem -> (source, extra nvcc flags)
BUILDS = {
    "float_ops": ("kernels/float_ops.cu", []),
    "int_ops": ("kernels/int_ops.cu", []),
    "convert": ("kernels/convert.cu", []),
    "half_ops": ("kernels/half_ops.cu", []),
    "warp": ("kernels/warp.cu", []),
    "shared": ("kernels/shared.cu", []),
    "atomics": ("kernels/atomics.cu", []),
    "control": ("kernels/control.cu", []),
    "memory": ("kernels/memory.cu", []),
    "features": ("kernels/features.cu", []),
    "debug_mul_add": ("kernels/debug_mulAdd.cu", ["-G"]),
    "bench_kernels": (os.path.join(ROOT, "bench", "kernels", "kernels.cu"), ["-O3"]),
}


def build(outdir: str) -> None:
    for stem, (src, flags) in BUILDS.items():
        src = src if os.path.isabs(src) else os.path.join(HERE, src)
        # run in the source's folder with a relative name: -G embeds the path it is given
        cmd = ["nvcc", "-arch=sm_90", "-ptx", *flags, os.path.basename(src), "-o",
               os.path.abspath(os.path.join(outdir, f"{stem}.ptx"))]
        subprocess.run(cmd, check=True, cwd=os.path.dirname(src))


def main(argv: list[str]) -> int:
    golden = os.path.join(HERE, "golden")
    if "--check" in argv:
        with tempfile.TemporaryDirectory() as tmp:
            build(tmp)
            stale = [s for s in BUILDS if not filecmp.cmp(os.path.join(tmp, f"{s}.ptx"),
                                                          os.path.join(golden, f"{s}.ptx"), shallow=False)]
        print("stale:", ", ".join(stale) if stale else "none")
        return 1 if stale else 0
    build(golden)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
