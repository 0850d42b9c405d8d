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
    assert got["k"] == SourceBlocks(((128, 1, 1),), False, runtime=True)   # one site constant, one not
    assert "m" not in got                                     # nothing constant at all


def test_a_name_defined_twice_differently_is_not_a_constant():
    """Not a constant (inference must not take either for the only block), but the program
    may launch with both: they are listed."""
    src = """
    void f() { const int threads = 256; k<<<1, threads>>>(x); }
    void g() { const int threads = 128; k<<<1, threads>>>(x); }
    """
    got = launch_blocks(src)
    assert got["k"].blocks == () and not got["k"].all_constant and not got["k"].runtime
    assert got["k"].listed == ((256, 1, 1), (128, 1, 1))


LLM_C_STYLE = """
int block_sizes[] = {32, 64, 128, 256, 512, 1024};
__global__ void bias_kernel1(float* dbias, const float* dout, int B, int T, int OC) {}
void bias1(float* dbias, const float* dout, int B, int T, int OC, int block_size) {
    bias_kernel1<<<OC, block_size, block_size * sizeof(float)>>>(dbias, dout, B, T, OC);
}
void bias(int kernel_num, float* dbias, float* dout, int B, int T, int OC, int block_size);
void bias(int kernel_num, float* dbias, float* dout, int B, int T, int OC, int block_size) {
    switch (kernel_num) { case 1: bias1(dbias, dout, B, T, OC, block_size); break; }
}
int main(int argc, char **argv) {
    for (int j = 0; j < sizeof(block_sizes) / sizeof(int); j++) {
        int block_size = block_sizes[j];
        bias(1, dbias, d_dout, B, T, OC, block_size);
    }
    for (int bs = 32; bs <= 1024; bs *= 2) doubling<<<10, bs>>>(x);
    for (int b : block_sizes) ranged<<<1, dim3(b)>>>(x);
    int t = 128;
    reassigned<<<1, t>>>(x);
    t = atoi(argv[1]);
    std::vector<int> widths = {64, 96};
    for (int w : widths) vectored<<<1, w>>>(x);
}
"""


def test_blocks_chosen_at_run_time_from_an_array_of_constants_are_listed():
    """The block is a parameter passed down two calls from a loop over an array of constants
    (the style of the kernel benchmarks of open-source training code)."""
    got = launch_blocks(LLM_C_STYLE)
    sizes = tuple((b, 1, 1) for b in (32, 64, 128, 256, 512, 1024))
    assert got["bias_kernel1"] == SourceBlocks((), False, sizes, False)
    assert got["bias_kernel1"].program_blocks == sizes
    assert got["doubling"].listed == sizes          # a counted loop
    assert got["ranged"].listed == sizes            # a range-for over the array, through dim3(b)
    assert got["vectored"].listed == ((64, 1, 1), (96, 1, 1))
    assert "reassigned" not in got                   # one assignment is computed at run time


def test_a_local_of_the_same_name_elsewhere_does_not_count():
    """The kernel's own `int block_size = blockDim.x` is another variable than the host's."""
    src = """
    __global__ void k(float *x) { int block_size = blockDim.x; x[threadIdx.x] = block_size; }
    void launch(float *x, int block_size) { k<<<1, block_size>>>(x); }
    int main() { int sizes[] = {64, 128}; for (int j = 0; j < 2; j++) { int block_size = sizes[j]; launch(x, block_size); } }
    """
    assert launch_blocks(src)["k"].listed == ((64, 1, 1), (128, 1, 1))


def test_the_bias_gradient_benchmark_lists_its_block_sizes():
    got = launch_blocks((ROOT / "bench" / "programs" / "biasgrad" / "biasgrad.cu").read_text())
    k = got["matmul_backward_bias_kernel1"]
    assert k.listed == tuple((b, 1, 1) for b in (32, 64, 128, 256, 512, 1024)) and not k.runtime


def test_listed_blocks_do_not_make_inference_take_one_block():
    """Inference reads only the constant blocks (a listed block is not the only one)."""
    got = launch_blocks(LLM_C_STYLE)["bias_kernel1"]
    assert got.blocks == () and not got.all_constant


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
    # launched with `int ethreads = 256`: not a constant, but the only value it takes
    assert sgemm["bias_relu"].blocks == () and sgemm["bias_relu"].listed == ((256, 1, 1),)


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
