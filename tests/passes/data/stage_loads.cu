// Kernels for tests/passes/test_stage_loads.py (the stage-loads pass: strided global loads
// gathered coalesced into shared memory before the kernel's body runs).
// Regenerate: cd tests/passes/data && nvcc -ptx -arch=sm_90 -O3 stage_loads.cu -o stage_loads.ptx
//
// The read-strided transpose: the input ``in`` is ``w`` rows of ``h`` elements, read down a
// column (``in[x*h + y]``: lanes x are 4*h bytes apart); the output ``out`` is ``h`` rows of
// ``w`` elements, written along a row (coalesced). Every kernel is extern "C".

#define TILE 32
#define ROWS 8

extern "C" {

// ---------------------------------------------------------------- the pass fires (positive)

// Block (32, 8), grid (cdiv(w, 32), cdiv(h, 32)): four loads per thread, each with its own
// bounds check. ``in`` and ``out`` may alias, so nvcc keeps load, store, load, store: loads
// 2..4 can follow the thread's own stores (forwarding).
__global__ void ld_transpose_32x8(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < w && y + j < h) out[(y + j) * w + x] = in[x * h + y + j];
}

// One load per thread. Block (16, 16), grid (cdiv(w, 16), cdiv(h, 16)).
__global__ void ld_transpose_16x16(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = in[x * h + y];
}

// 8-byte elements. Block (32, 8), grid (cdiv(w, 32), cdiv(h, 32)).
__global__ void ld_transpose_f64(double *out, const double *in, int w, int h) {
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < w && y + j < h) out[(y + j) * w + x] = in[x * h + y + j];
}

// 2-byte elements, restrict pointers (no store precedes a load). Block (16, 16).
__global__ void ld_transpose_u16(unsigned short *__restrict__ out,
                                 const unsigned short *__restrict__ in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = in[x * h + y];
}

// A computed value. Block (32, 8) as ld_transpose_32x8.
__global__ void ld_transpose_scale(float *out, const float *in, int w, int h, float alpha,
                                   float beta) {
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < w && y + j < h) out[(y + j) * w + x] = alpha * in[x * h + y + j] + beta;
}

// A select on the loaded value (a value, not a branch: allowed). Block (16, 16).
__global__ void ld_transpose_relu(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    float v = in[x * h + y];
    out[y * w + x] = v > 0.0f ? v : 0.0f;
  }
}

// NHWC -> NCHW over a 3-D grid (the read side is strided: lanes p are 4*c bytes apart).
// Block (32, 8), grid (cdiv(hw, 32), cdiv(c, 8), n).
__global__ void nhwc_to_nchw(float *out, const float *in, int c, int hw) {
  int p = blockIdx.x * 32 + threadIdx.x;
  int ch = blockIdx.y * 8 + threadIdx.y;
  int n = blockIdx.z;
  if (p < hw && ch < c) out[(n * c + ch) * hw + p] = in[(n * hw + p) * c + ch];
}

// Forwarding: the thread stores out[x*h + y] and then reads in[x*h + y + 1024]; called with
// out == in + 1024 it reads back its own store. Race-free when w*h <= 1024. Block (16, 16).
__global__ void ld_reread(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    out[x * h + y] = in[x * h + y];
    out[x * h + y + 1024] = in[x * h + y + 1024] * 2.0f + 1.0f;
  }
}

// ---------------------------------------------------------------- refused (negative)

// Already coalesced loads (%tid.x coefficient == element width; the store is strided).
__global__ void ld_coalesced(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

// A branch on the loaded value.
__global__ void neg_branch_on_load(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    float v = in[x * h + y];
    if (v > 0.0f) out[y * w + x] = v;
  }
}

// A gather: the address of the second load comes from the first.
__global__ void neg_gather(float *out, const int *idx, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = in[idx[x * h + y]];
}

// A store address from a loaded value (a scatter).
__global__ void neg_scatter(float *out, const int *idx, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[idx[x * h + y]] = 1.0f;
}

// A second, coalesced global load beside the strided one (not staged).
__global__ void neg_extra_load(float *out, const float *in, const float *bias, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = in[x * h + y] + bias[x];
}

// A real loop.
__global__ void neg_grid_stride(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 32 + threadIdx.x;
  if (x >= w) return;
  for (int y = blockIdx.y * 8 + threadIdx.y; y < h; y += 8 * gridDim.y)
    out[y * w + x] = in[x * h + y];
}

// Shared memory and a barrier.
__global__ void neg_shared(float *out, const float *in, int w, int h) {
  __shared__ float tile[16][17];
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) tile[threadIdx.y][threadIdx.x] = in[x * h + y];
  __syncthreads();
  if (x < w && y < h) out[y * w + x] = tile[threadIdx.y][threadIdx.x];
}

// An atomic beside the strided load.
__global__ void neg_atomic(float *out, const float *in, int *count, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    out[y * w + x] = in[x * h + y];
    atomicAdd(count, 1);
  }
}

// An 8-byte store before a 4-byte staged load (forwarding would need another width).
__global__ void neg_mixed_width(double *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    out[y * w + x] = in[x * h + y];
    out[y * w + x + 4096] = in[x * h + y + 1024];
  }
}

// A 2-byte load after a store (forwarding a half would need the load's extension).
__global__ void neg_u16_reread(unsigned short *out, const unsigned short *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    out[y * w + x] = in[x * h + y];
    out[y * w + x + 4096] = in[x * h + y + 1024];
  }
}

}  // extern "C"
