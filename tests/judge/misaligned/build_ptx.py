"""Regenerate the PTX of the misaligned-set tests' kernels (needs nvcc; no GPU).

    python tests/judge/misaligned/build_ptx.py
"""
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "ptx"

# file -> extra nvcc flags
VARIANTS = {"baseline": [], "vec4": ["-DVEC4"], "versioned": ["-DVERSIONED"]}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, flags in VARIANTS.items():
        subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-O3", *flags, str(HERE / "quad.cu"),
                        "-o", str(OUT / f"{name}.ptx")], check=True)


if __name__ == "__main__":
    main()
