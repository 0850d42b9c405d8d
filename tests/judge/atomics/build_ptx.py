"""Regenerate the committed PTX of the float-atomic test kernels (needs nvcc 13; no GPU).

    python tests/judge/atomics/build_ptx.py

``atomics.ptx`` is nvcc's code (the baseline); ``<variant>.ptx`` are candidates compiled
with ``-DVARIANT_<NAME>``; ``<name>.ptx`` of ``PTX_EDITS`` are hand edits of the baseline.
"""
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "ptx"

sys.path.insert(0, str(HERE.parent / "kernels"))
from build_ptx import write_hand_edits  # noqa: E402  (the judge kernels' generator, beside this one)

VARIANTS = ("shfl", "drop", "twice", "split", "neighbour")

# (old, new) text edits of atomics.ptx that must each apply exactly once
PTX_EDITS = {
    # order-preserving: the read-only cache path for ddot's inputs
    "ddot_nc": [("ld.global.f64 \t%fd6, [%rd8];", "ld.global.nc.f64 \t%fd6, [%rd8];"),
                ("ld.global.f64 \t%fd7, [%rd7];", "ld.global.nc.f64 \t%fd7, [%rd7];")],
    # the atomic's returned value is read (kept alive by a store of it into the target's
    # neighbour): order-dependent, cannot be judged by contributions
    "bins_used": [("atom.global.add.f32 \t%f2, [%rd9], %f1;",
                   "atom.global.add.f32 \t%f2, [%rd9], %f1;\n\tst.global.f32 \t[%rd7+64], %f2;")],
    # a plain store into the target after the atomics (same contributions)
    "ddot_store": [("atom.global.add.f64 \t%fd12, [%rd9], %fd11;",
                    "atom.global.add.f64 \t%fd12, [%rd9], %fd11;\n\tst.global.f64 \t[%rd9], %fd11;")],
}


def nvcc_ptx(dst: Path, macro: str | None) -> None:
    cmd = ["nvcc", "-arch=sm_90", "-ptx", "-O3", str(HERE / "atomics.cu"), "-o", str(dst)]
    if macro:
        cmd.insert(1, f"-D{macro}")
    subprocess.run(cmd, check=True)


def main() -> int:
    OUT.mkdir(exist_ok=True)
    nvcc_ptx(OUT / "atomics.ptx", None)
    for v in VARIANTS:
        nvcc_ptx(OUT / f"{v}.ptx", f"VARIANT_{v.upper()}")
    write_hand_edits(OUT, "atomics.ptx", PTX_EDITS)
    print(f"wrote {1 + len(VARIANTS) + len(PTX_EDITS)} PTX files to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
