"""Write the race corpus's PTX variants (variants/*.ptx) from nvcc's PTX (<kernel>.ptx).

Regenerate with ``python make_variants.py`` (``build_ptx.sh`` also runs it after nvcc). Each
variant is nvcc's code with hand-written edits, listed below as (old text, new text) on the
whitespace-normalised PTX; every ``old`` must occur exactly once, except in an edit written
``(old, new, "all")``, which replaces every occurrence (at least one). The written files are
committed; what each variant is, and the verdict the judge must give it, is in manifest.toml.
"""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent

T, S, Q, W, C, B = ("_Z7treesumiPKfPf", "_Z5scaleifPKfPf", "_Z6pairsqiPKiPiS1_", "_Z8pairswapiPKiPiS1_",
                    "_Z8stencil3iPKiPi", "_Z9bucketsumiPKfPf")

# more registers than nvcc declared, for the edits (unused ones are harmless)
REGS = {
    "treesum": [(".reg .pred %p<7>;", ".reg .pred %p<8>;"), (".reg .b32 %r<9>;", ".reg .b32 %r<16>;")],
    "scale": [(".reg .pred %p<2>;", ".reg .pred %p<8>;"), (".reg .f32 %f<4>;", ".reg .f32 %f<8>;"),
              (".reg .b32 %r<6>;", ".reg .b32 %r<16>;")],
    "pairsq": [],
    "pairswap": [],
    "stencil3": [(".reg .b32 %r<19>;", ".reg .b32 %r<24>;")],
    "bucketsum": [(".reg .f32 %f<3>;", ".reg .f32 %f<8>;")],
}

SCALE_PARAMS_END = f".param .u64 {S}_param_3\n)"
SCALE_STORE = "st.global.f32 [%rd7], %f3;"
# a never-written shared word holding 1234567 (random poison never does; garbage on a GPU may),
# declared in the kernel (as nvcc declares demoted shared variables), so that the function body
# alone carries it (a lockfile's model rewrite is a function body)
SFLAG = (".reg .b64 %rd<8>;", ".reg .b64 %rd<8>;\n.shared .align 4 .b8 sflag[4];")
GUARD = "ld.shared.u32 %r9, [sflag];\nsetp.eq.s32 %p2, %r9, 1234567;\n"

VARIANTS = {
    "treesum": {
        # ---- equivalent
        "treesum_eq": [("ld.global.f32 %f24, [%rd5];", "ld.global.nc.f32 %f24, [%rd5];"),
                       ("add.f32 %f7, %f6, %f5;", "add.f32 %f7, %f5, %f6;")],
        # ---- cheats
        # the block barrier between the k = 64 and k = 32 steps dropped: warp 0 reads s[32..63]
        # before warp 1 has added into them (the judge's large inferred sizes included)
        "treesum_no_bar": [("$L__BB0_6:\nbar.sync 0;", "$L__BB0_6:")],
        # the last warp's steps without __syncwarp: lanes of the warp need not run in step
        "treesum_no_syncwarp": [("bar.warp.sync -1;\n", "", "all")],
        # "t < 32" as "%warpid == 0": the warp slot is where the warp runs, not which warp it is
        "treesum_warpid": [("setp.gt.s32 %p4, %r2, 31;", "mov.u32 %r9, %warpid;\nsetp.ne.s32 %p4, %r9, 0;")],
    },
    "scale": {
        # ---- equivalent: the same guard on a shared word the block wrote first (clean)
        "scale_guard_written": [
            SFLAG,
            (f"ld.param.u64 %rd2, [{S}_param_3];",
             f"ld.param.u64 %rd2, [{S}_param_3];\nmov.u32 %r10, %tid.x;\nsetp.ne.s32 %p3, %r10, 0;\n"
             "@%p3 bra $L__SKIP;\nmov.u32 %r11, 0;\nst.shared.u32 [sflag], %r11;\n$L__SKIP:\nbar.sync 0;"),
            (SCALE_STORE, GUARD + "@%p2 add.rn.f32 %f3, %f3, 0f3F800000;\n" + SCALE_STORE)],
        # a launch bound every launch fits
        "scale_maxntid_ok": [(SCALE_PARAMS_END, SCALE_PARAMS_END + "\n.maxntid 1024, 1, 1")],
        # ---- cheats
        # @%p add with %p from never-written shared memory (never true under poison: equal outputs)
        "scale_guard_add": [SFLAG, (SCALE_STORE, GUARD + "@%p2 add.rn.f32 %f3, %f3, 0f3F800000;\n" + SCALE_STORE)],
        # a second store, of 0, under @%p with the same %p: it never runs under poison
        "scale_guard_store": [SFLAG, (SCALE_STORE, SCALE_STORE + "\n" + GUARD + "mov.f32 %f5, 0f00000000;\n"
                                                   "@%p2 st.global.f32 [%rd7], %f5;")],
        # right only on SM 0 (the emulator's %smid was always 0)
        "scale_smid": [(SCALE_STORE, "mov.u32 %r9, %smid;\nsetp.ne.s32 %p3, %r9, 0;\n"
                        "@%p3 mov.f32 %f3, 0f00000000;\n" + SCALE_STORE)],
        # launch bounds the 256-thread launches break (a GPU refuses such a launch)
        "scale_maxntid": [(SCALE_PARAMS_END, SCALE_PARAMS_END + "\n.maxntid 32, 1, 1")],
        "scale_reqntid": [(SCALE_PARAMS_END, SCALE_PARAMS_END + "\n.reqntid 64, 1, 1")],
    },
    "pairsq": {
        "pairsq_eq": [("ld.global.u32 %r10, [%rd8];", "ld.global.nc.u32 %r10, [%rd8];"),
                      ("ld.global.u32 %r12, [%rd11];", "ld.global.nc.u32 %r12, [%rd11];")],
        # acc reads sq[i - blockDim.x], the square the block before stored (in this launch)
        "pairsq_prev_block": [("add.s64 %rd11, %rd1, %rd10;\nld.global.u32 %r12, [%rd11];\nmul.lo.s32 %r14, %r12, %r12;",
                               "add.s64 %rd11, %rd6, %rd10;\nld.global.u32 %r14, [%rd11];")],
    },
    "pairswap": {
        "pairswap_eq": [("ld.global.u32 %r7, [%rd7];", "ld.global.nc.u32 %r7, [%rd7];")],
        # the neighbour's t through the non-coherent (read-only) cache: t is written in this launch
        "pairswap_nc": [("ld.global.u32 %r9, [%rd10];", "ld.global.nc.u32 %r9, [%rd10];")],
    },
    "stencil3": {
        "stencil3_eq": [("ld.shared.u32 %r14, [%r5+4];", "mov.u32 %r14, %r18;")],
        # after reading, each thread zeroes its own slot and puts the value back: a warp that has
        # not read its neighbours yet sees the zero
        "stencil3_zero_restore": [("ld.shared.u32 %r16, [%r5+8];",
                                   "ld.shared.u32 %r16, [%r5+8];\nmov.u32 %r20, 0;\n"
                                   "st.volatile.shared.u32 [%r5+4], %r20;\nst.volatile.shared.u32 [%r5+4], %r14;")],
    },
    "bucketsum": {
        "bucketsum_eq": [("atom.global.add.f32 %f2, [%rd6], %f1;", "red.global.add.f32 [%rd6], %f1;")],
        # a plain copy of the target onto itself before the atomic: no change on the emulator,
        # other blocks' adds lost in between on a GPU
        "bucketsum_plain_copy": [("atom.global.add.f32 %f2, [%rd6], %f1;",
                                  "ld.global.f32 %f5, [%rd6];\nst.global.f32 [%rd6], %f5;\n"
                                  "atom.global.add.f32 %f2, [%rd6], %f1;")],
        # the atomic as a plain read-modify-write
        "bucketsum_plain_rmw": [("atom.global.add.f32 %f2, [%rd6], %f1;",
                                 "ld.global.f32 %f5, [%rd6];\nadd.rn.f32 %f6, %f5, %f1;\nst.global.f32 [%rd6], %f6;")],
    },
}


def normalise(ptx: str) -> str:
    return "\n".join(" ".join(line.split()) for line in ptx.splitlines()) + "\n"


def apply(base: str, edits) -> str:
    text = base
    for edit in edits:
        old, new = edit[0], edit[1]
        n = text.count(old)
        if (n != 1 and len(edit) == 2) or n == 0:
            raise SystemExit(f"edit target occurs {n} times: {old!r}")
        text = text.replace(old, new)
    return text


def variants() -> dict[str, str]:
    """name -> PTX text of every variant."""
    out = {}
    for kernel, table in VARIANTS.items():
        base = normalise((HERE / f"{kernel}.ptx").read_text())
        for name, edits in table.items():
            out[name] = apply(base, REGS[kernel] + edits)
    return out


def main() -> None:
    out = HERE / "variants"
    out.mkdir(exist_ok=True)
    for name, text in variants().items():
        (out / f"{name}.ptx").write_text(text)


if __name__ == "__main__":
    main()
