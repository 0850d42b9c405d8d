"""Regenerate the PTX of the aliasing tests' kernels (needs nvcc; no GPU).

    python tests/judge/aliasing/build_ptx.py
"""
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "ptx"

# file -> extra nvcc flags
VARIANTS = {
    "baseline": [],
    "restrict": ["-restrict"],
    "checked": ["-DCHECKED"],
    "checked_off": ["-DCHECKED_OFF"],
    "guard_cheat": ["-DGUARD_CHEAT"],
}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, flags in VARIANTS.items():
        subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-O3", *flags, str(HERE / "aliasing.cu"),
                        "-o", str(OUT / f"{name}.ptx")], check=True)


if __name__ == "__main__":
    main()
