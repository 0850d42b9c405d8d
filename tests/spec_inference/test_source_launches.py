"""The constant blocks a .cu source launches its kernels with, and inference trying them first."""
from __future__ import annotations

from pathlib import Path

import ptx_ir
from superopt.specs.inference import infer_specs
from superopt.specs.source_launches import SourceBlocks, launch_blocks

ROOT = Path(__file__).resolve().parents[2]
SCAN_CU = ROOT / "bench" / "programs" / "scan" / "scan.cu"
SCAN_PTX = ROOT / "tests" / "passes" / "data" / "scan.ptx"


def test_defines_constexpr_and_arithmetic():
    src = """
    #define THREADS 256u   // a comment
    #define WARPS (THREADS / 32)
    constexpr int TILE = 1 << 4;
    static const unsigned ROWS = TILE / 2;
    /* k<<<g, 7>>>() in a comment is no launch */
    __global__ void a(float *x) {}
    void host(int n) {
        a<<<(n + THREADS - 1) / THREADS, THREADS>>>(x);
        b<<<n, WARPS * 32, 0, stream>>>(x);
        c<<<n, dim3(TILE, ROWS)>>>(x);
        d<<<n, {TILE, TILE, 2}>>>(x);
    }
    """
    got = launch_blocks(src)
    assert got["a"] == SourceBlocks(((256, 1, 1),), True)
    assert got["b"].blocks == ((256, 1, 1),)
    assert got["c"].blocks == ((16, 8, 1),)
    assert got["d"].blocks == ((16, 16, 2),)
    assert "k" not in got


def test_dim3_variables_and_templates():
    src = """
    #define BX 32
    const int BY = 8;
    void host(int n) {
        dim3 block(BX, BY);
        dim3 grid((n + BX - 1) / BX, n / BY);
        transpose<<<grid, block>>>(out, in, n);
        scale<float><<<grid, block, 0>>>(out, n);
        dim3 b2 = dim3(128);
        copy<<<grid, b2>>>(out, in);
    }
    """
    got = launch_blocks(src)
    assert got["transpose"].blocks == ((32, 8, 1),)
    assert got["scale"].blocks == ((32, 8, 1),)
    assert got["copy"].blocks == ((128, 1, 1),)


def test_blocks_computed_at_run_time_are_not_constants():
    src = """
    #define T 128
    void host(int n, int threads) {
        k<<<n, threads>>>(x);
        k<<<n, T>>>(x);
        m<<<n, threads>>>(x);
    }
    """
    got = launch_blocks(src)
    assert got["k"] == SourceBlocks(((128, 1, 1),), False)   # one site constant, one not
    assert "m" not in got                                     # nothing constant at all


def test_a_name_defined_twice_differently_is_not_a_constant():
    src = """
    void f() { const int threads = 256; k<<<1, threads>>>(x); }
    void g() { const int threads = 128; k<<<1, threads>>>(x); }
    """
    assert launch_blocks(src) == {}


def test_comment_markers_inside_string_literals_hide_no_launch():
    src = 'void f() { printf("see http://x/*"); k<<<1, 64>>>(x); } // k<<<1, 32>>>(x);'
    assert launch_blocks(src) == {"k": SourceBlocks(((64, 1, 1),), True)}


def test_impossible_blocks_are_dropped():
    src = "#define BIG 2048\nvoid f() { k<<<1, BIG>>>(x); z<<<1, 0>>>(x); }"
    assert launch_blocks(src) == {}


def test_every_benchmark_program_launch_is_read():
    """The programs of bench/programs say their blocks with #defines, constants and dim3s."""
    want = {"scan": {"scan_blocks": (512, 1, 1), "scan_block_sums": (1024, 1, 1), "scatter_flagged": (256, 1, 1)},
            "transpose": {"transposeNaive": (32, 8, 1)},
            "heat3d": {"jacobi7": (32, 4, 4), "residual_sq": (512, 1, 1)},
            "sgemm": {"sgemm_tiled": (16, 16, 1)},
            "rowops": {"layernorm_rows": (256, 1, 1)}}
    for prog, kernels in want.items():
        got = launch_blocks((ROOT / "bench" / "programs" / prog / f"{prog}.cu").read_text())
        for k, block in kernels.items():
            assert got[k].blocks == (block,) and got[k].all_constant, (prog, k, got.get(k))
    sgemm = launch_blocks((ROOT / "bench" / "programs" / "sgemm" / "sgemm.cu").read_text())
    assert "bias_relu" not in sgemm          # launched with a block computed at run time


def test_inference_takes_the_block_the_source_launches_with():
    """scan_blocks is written for 512 threads (1024 elements per block); inference alone
    guesses 256 first (nvcc's own code is then not deterministic). With the source it judges
    the kernel at 512 only."""
    module = ptx_ir.parse(SCAN_PTX.read_text())
    kernel = "_Z11scan_blocksPKiPiS1_i"
    guessed = infer_specs(module, kernel)
    assert guessed.specs and guessed.specs[0].block == (256, 1, 1)
    told = infer_specs(module, kernel, source_text=SCAN_CU.read_text())
    assert [s.block for s in told.specs] == [(512, 1, 1)]
    assert any("every launch in the source" in n for n in told.notes)


def test_a_source_block_the_kernel_cannot_index_is_not_used():
    """A 2-D block for a kernel that only reads threadIdx.x would run threads that repeat
    each other's work: such a source block is skipped."""
    module = ptx_ir.parse(SCAN_PTX.read_text())
    kernel = "_Z15scatter_flaggedPKiS0_Pii"
    src = "void f(int n) { scatter_flagged<<<n, dim3(32, 8)>>>(a, b, c, n); }"
    told = infer_specs(module, kernel, source_text=src)
    assert told.specs and all(s.block[1] == 1 for s in told.specs)
