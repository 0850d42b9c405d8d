// Kernels for tests/passes/test_stage_stores.py (the stage-stores pass: uncoalesced global
// stores staged through shared memory and written back coalesced after a barrier).
// Regenerate: cd tests/passes/data && nvcc -ptx -arch=sm_90 -O3 stage_stores.cu -o stage_stores.ptx
//
// Matrices are row-major; ``w`` is the number of columns of the input, ``h`` its rows, so
// the output (the transpose) has ``w`` rows of ``h`` elements. Every kernel is extern "C"
// so the tests can name it plainly.

#include <cstdio>

#define TILE 32
#define ROWS 8

extern "C" {

// ---------------------------------------------------------------- the pass fires (positive)

// The CUDA samples' naive transpose. Launch: block (32, 8), grid (cdiv(w, 32), cdiv(h, 32)).
// Four stores per thread (the j loop unrolled), each with its own bounds check; the
// %tid.x coefficient of the store address is 4*h (strided).
__global__ void transpose_naive_32x8(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < w && y + j < h) out[x * h + y + j] = in[(y + j) * w + x];
}

// One store per thread. Launch: block (16, 16), grid (cdiv(w, 16), cdiv(h, 16)).
__global__ void transpose_naive_16x16(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

// 8-byte elements. Launch: block (32, 8), grid (cdiv(w, 32), cdiv(h, 32)).
__global__ void transpose_naive_f64(double *out, const double *in, int w, int h) {
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < w && y + j < h) out[x * h + y + j] = in[(y + j) * w + x];
}

// Layout permutation NCHW -> NHWC over a 3-D grid, one store per thread; the store's
// %tid.x coefficient is 4*C. Launch: block (32, 8), grid (cdiv(hw, 32), cdiv(c, 8), n).
__global__ void nchw_to_nhwc(float *out, const float *in, int c, int hw) {
  int p = blockIdx.x * 32 + threadIdx.x;      // pixel (h*W + w)
  int ch = blockIdx.y * 8 + threadIdx.y;      // channel
  int n = blockIdx.z;                         // image
  if (p < hw && ch < c) out[(n * hw + p) * c + ch] = in[(n * c + ch) * hw + p];
}

// The stored value is computed (one fma), not copied. Launch as transpose_naive_32x8.
__global__ void transpose_scale(float *out, const float *in, int w, int h, float alpha,
                                float beta) {
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < w && y + j < h) out[x * h + y + j] = alpha * in[(y + j) * w + x] + beta;
}

// Store-to-load forwarding: the second load reads in[d + x*h + y]; called with
// out == in + d (aliased) it reads the element this thread has just stored, which the
// staged path must forward from its own slot. Race-free when d >= w*h and w*h <= 1024:
// the first load's region [0, w*h) is nobody's store, and each thread's stores touch only
// elements no other thread reads. Launch: block (16, 16), grid (cdiv(w, 16), cdiv(h, 16)).
__global__ void transpose_reread(float *out, const float *in, int w, int h, int d) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    out[x * h + y] = in[y * w + x];
    out[x * h + y + 1024] = in[d + x * h + y] * 2.0f + 1.0f;
  }
}

// Two stores of one thread to the same element (the load between them may alias the
// first, so nvcc keeps both): K = 2 with equal offsets. Staged, the write-back must keep
// their order (the second wins); refusing is as good. Launch as transpose_naive_16x16.
__global__ void transpose_overwrite(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    out[x * h + y] = in[y * w + x];
    out[x * h + y] = in[y * w + x + w * h] + 1.0f;
  }
}

// ---------------------------------------------------------------- already coalesced

// The store's %tid.x coefficient is 4 (the element width): nothing to gain, never staged.
__global__ void copy_coalesced(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < w && y + j < h) out[(y + j) * w + x] = in[(y + j) * w + x];
}

// ---------------------------------------------------------------- refused (negative)

// A real loop (grid-stride over rows): the CFG has a cycle.
__global__ void neg_grid_stride(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 32 + threadIdx.x;
  if (x >= w) return;
  for (int y = blockIdx.y * 8 + threadIdx.y; y < h; y += 8 * gridDim.y)
    out[x * h + y] = in[y * w + x];
}

// A barrier (no shared memory).
__global__ void neg_syncthreads(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  float v = 0.0f;
  if (x < w && y < h) v = in[y * w + x];
  __syncthreads();
  if (x < w && y < h) out[x * h + y] = v;
}

// Shared memory and a barrier: the tile is read back in another thread's place.
__global__ void neg_shared(float *out, const float *in, int w, int h) {
  __shared__ float s[16][17];
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  s[threadIdx.y][threadIdx.x] = (x < w && y < h) ? in[y * w + x] : 0.0f;
  __syncthreads();
  if (x < w && y < h) out[x * h + y] = s[threadIdx.y][threadIdx.x] + s[threadIdx.x][threadIdx.y];
}

// Shared memory without a barrier (each thread reads back its own word, through a volatile
// pointer so nvcc keeps the round trip).
__global__ void neg_shared_nobar(float *out, const float *in, int w, int h) {
  __shared__ float s[256];
  volatile float *vs = s;
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  int t = threadIdx.y * 16 + threadIdx.x;
  if (x < w && y < h) {
    vs[t] = in[y * w + x];
    out[x * h + y] = vs[t];
  }
}

// An atomic beside the strided store (the result unused: nvcc emits red.global.add).
__global__ void neg_atomic(float *out, const float *in, int w, int h, int *count) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    out[x * h + y] = in[y * w + x];
    atomicAdd(count, 1);
  }
}

// An atomic whose result is used (atom.global.add) and stored strided.
__global__ void neg_atomic_result(int *out, int *counter, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = atomicAdd(counter + (y * w + x), 1);
}

// 1-byte stores.
__global__ void neg_u8(unsigned char *out, const unsigned char *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

// 2-byte stores (a half-precision layout change). Launch: block (16, 16): 16 halves = one
// 32-byte sector per run, so the pass fires.
__global__ void transpose_u16(unsigned short *out, const unsigned short *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

// 1-byte stores (an image transpose). Launch: block (32, 32): 32 bytes per run, so it fires
// (neg_u8, with a 16-wide tile, has only 16 bytes and is refused).
__global__ void transpose_u8(unsigned char *out, const unsigned char *in, int w, int h) {
  int x = blockIdx.x * 32 + threadIdx.x;
  int y = blockIdx.y * 32 + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

// A byte transpose that reads back what it stored (out == in + d): the pass refuses it, since
// a forwarded byte would have to be zero-extended as the load does.
__global__ void neg_u8_reread(unsigned char *out, const unsigned char *in, int w, int h, int d) {
  int x = blockIdx.x * 32 + threadIdx.x;
  int y = blockIdx.y * 32 + threadIdx.y;
  if (x < w && y < h) {
    out[x * h + y] = in[y * w + x];
    out[x * h + y + d] = in[y * w + x + d];
  }
}

// Mixed widths: a 4-byte and an 8-byte strided store.
__global__ void neg_mixed_width(float *out, long long *idx, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    out[x * h + y] = in[y * w + x];
    idx[x * h + y] = (long long)(y * w + x);
  }
}

// The output pointer is loaded from memory (nvcc still assumes global: st.global, but the
// address is not affine in the launch and parameters).
__global__ void neg_loaded_pointer(float *const *outs, const float *in, int w, int h) {
  float *out = outs[0];
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

// The output pointer passes through inline asm: nvcc cannot tell its space, the store is a
// generic st.f32 (no state space).
__global__ void neg_generic(float *out0, const float *in, int w, int h) {
  float *out;
  asm("mov.b64 %0, %1;" : "=l"(out) : "l"(out0));
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

// A volatile (st.volatile.global) strided store.
__global__ void neg_volatile(volatile float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

// A fence between the strided store and a flag store.
__global__ void neg_fence(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    out[x * h + y] = in[y * w + x];
    __threadfence();
    out[x * h + y + 1024] = 1.0f;
  }
}

// printf (a call of vprintf).
__global__ void neg_printf(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    out[x * h + y] = in[y * w + x];
    if (x == 0 && y == 0) printf("w=%d h=%d\n", w, h);
  }
}

__device__ __noinline__ float neg_helper(float v) { return v * 3.0f; }

// A call of a __noinline__ device function.
__global__ void neg_call(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = neg_helper(in[y * w + x]);
}

// Vector stores (float2 along the strided dimension).
__global__ void neg_vector(float2 *out, const float2 *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

// A trap.
__global__ void neg_trap(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (w < 0) __trap();
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

// The store address depends on loaded data (a gather index), not affine.
__global__ void neg_indirect(float *out, const float *in, const int *perm, int n) {
  int i = blockIdx.x * 256 + threadIdx.x;
  if (i < n) out[perm[i]] = in[i];
}

// A load of another width (8 bytes) after a staged 4-byte store: a partial overlap could not
// be forwarded exactly.
__global__ void neg_wide_load(float *out, const float *in, const double *in2, int w, int h) {
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) {
    out[x * h + y] = in[y * w + x];
    out[x * h + y + 1024] = (float)in2[y * w + x];
  }
}

}  // extern "C"
