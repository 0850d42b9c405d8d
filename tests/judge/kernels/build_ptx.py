"""Regenerate the committed PTX of the judge's test kernels (needs nvcc; no GPU).

    python tests/judge/kernels/build_ptx.py
"""
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "ptx"

# variant name -> macro
VARIANTS = {
    "baseline": None,
    "noop": "VARIANT_NOOP",
    "block0": "VARIANT_BLOCK0",
    "off_by_one": "VARIANT_OFF_BY_ONE",
    "ignore_input": "VARIANT_IGNORE_INPUT",
    "hang": "VARIANT_HANG",
    "fma": "VARIANT_FMA",
    "last_lane": "VARIANT_LAST_LANE",
    "uninit_shared": "VARIANT_UNINIT_SHARED",
    "cache": "VARIANT_CACHE",
    "writes_input": "VARIANT_WRITES_INPUT",
    "crash": "VARIANT_CRASH",
    "slow": "VARIANT_SLOW",
    "eq_cuda": "VARIANT_EQ_CUDA",
}


def nvcc_ptx(src: Path, dst: Path, macro: str | None) -> None:
    cmd = ["nvcc", "-arch=sm_90", "-ptx", "-O3", "-fmad=false", str(src), "-o", str(dst)]
    if macro:
        cmd.insert(1, f"-D{macro}")
    subprocess.run(cmd, check=True)


# PTX-level equivalent rewrites of the baseline: (old, new) text edits that must all apply.
PTX_EDITS = {
    # independent instructions reordered
    "eq_reorder": [
        ("\tld.param.u64 \t%rd1, [judge_kernel_param_0];\n\tld.param.u64 \t%rd2, [judge_kernel_param_1];\n",
         "\tld.param.u64 \t%rd2, [judge_kernel_param_1];\n\tld.param.u64 \t%rd1, [judge_kernel_param_0];\n"),
        ("\tmov.u32 \t%r1, %ntid.x;\n\tmov.u32 \t%r6, %ctaid.x;\n\tmov.u32 \t%r2, %tid.x;\n",
         "\tmov.u32 \t%r2, %tid.x;\n\tmov.u32 \t%r6, %ctaid.x;\n\tmov.u32 \t%r1, %ntid.x;\n"),
    ],
    # commutative operands swapped
    "eq_commute": [
        ("mad.lo.s32 \t%r3, %r6, %r1, %r2;", "mad.lo.s32 \t%r3, %r1, %r6, %r2;"),
        ("mul.rn.f32 \t%f6, %f3, %f5;", "mul.rn.f32 \t%f6, %f5, %f3;"),
        ("add.rn.f32 \t%f8, %f6, %f7;", "add.rn.f32 \t%f8, %f7, %f6;"),
    ],
}


def write_hand_edits(out: Path, base: str, edits: dict) -> None:
    """``out/<name>.ptx`` for each ``name: [(old, new), ...]`` of ``edits``: ``out/<base>``
    with every text edit applied, each of which must apply exactly once."""
    original = (out / base).read_text()
    for name, pairs in edits.items():
        text = original
        for old, new in pairs:
            if text.count(old) != 1:
                raise SystemExit(f"{name}: edit does not apply once: {old!r}")
            text = text.replace(old, new)
        (out / f"{name}.ptx").write_text(f"// {name}: hand edit of {base} (build_ptx.py)\n" + text)


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for name, macro in VARIANTS.items():
        nvcc_ptx(HERE / "judge.cu", OUT / f"{name}.ptx", macro)
    write_hand_edits(OUT, "baseline.ptx", PTX_EDITS)
    nvcc_ptx(HERE / "atomic_sum.cu", OUT / "atomic_sum.ptx", None)
    print(f"wrote {len(VARIANTS) + len(PTX_EDITS) + 1} PTX files to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
