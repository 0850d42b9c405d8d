// Benchmark kernels, written the way users write them (no hand tuning).
// Launch specs: specs.toml beside this file. Runner: python -m bench (bench/kernels/run.py).
#include <cuda_runtime.h>

// 1. Element-wise, each thread handles 4 consecutive elements in a loop.
extern "C" __global__ void scale4(float* __restrict__ y, const float* __restrict__ x, float a, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i + 3 < n) {
#pragma unroll
    for (int k = 0; k < 4; ++k) y[i + k] = a * x[i + k];
  } else {
    for (int k = i; k < n; ++k) y[k] = a * x[k];
  }
}

// 2. axpby with 4 elements per thread, two inputs.
extern "C" __global__ void axpby4(float* __restrict__ z, const float* __restrict__ x, const float* __restrict__ y,
                                  float a, float b, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i + 3 < n) {
#pragma unroll
    for (int k = 0; k < 4; ++k) z[i + k] = a * x[i + k] + b * y[i + k];
  }
}

// 3. Plain SAXPY, one element per thread.
extern "C" __global__ void saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// 4. GEMV, one row per thread (row loop).
extern "C" __global__ void gemv_rows(float* y, const float* A, const float* x, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    float s = 0.f;
    for (int c = 0; c < cols; ++c) s += A[r * cols + c] * x[c];
    y[r] = s;
  }
}

// 5. ATAX second half / BiCG-like column loop: s[j] = sum_i r[i] * A[i][j].
extern "C" __global__ void bicg_cols(float* s, const float* A, const float* r, int rows, int cols) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < cols) {
    float acc = 0.f;
    for (int i = 0; i < rows; ++i) acc += r[i] * A[i * cols + j];
    s[j] = acc;
  }
}

// 6. Naive GEMM C = A * B (row-major, M x K times K x N).
extern "C" __global__ void gemm_naive(float* C, const float* A, const float* B, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}

// 7. Tiled GEMM with 16x16 shared-memory tiles.
#define TILE 16
extern "C" __global__ void gemm_tiled(float* C, const float* A, const float* B, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    int ka = t * TILE + threadIdx.x, kb = t * TILE + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[kb * N + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

// 8. Shared-memory tree reduction, loop down to s > 0 with __syncthreads at every step.
extern "C" __global__ void reduce_tree(float* out, const float* in, int n) {
  __shared__ float sdata[256];
  unsigned tid = threadIdx.x;
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  sdata[tid] = (i < n) ? in[i] : 0.f;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

// 9. Integer reduction with a warp-synchronous volatile tail.
extern "C" __global__ void reduce_int_tail(int* out, const int* in, int n) {
  __shared__ int sdata[256];
  unsigned tid = threadIdx.x;
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  sdata[tid] = (i < n) ? in[i] : 0;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 32; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid < 32) {
    volatile int* v = sdata;
    v[tid] += v[tid + 32]; v[tid] += v[tid + 16]; v[tid] += v[tid + 8];
    v[tid] += v[tid + 4]; v[tid] += v[tid + 2]; v[tid] += v[tid + 1];
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

// 10. Histogram with shared-memory privatization.
extern "C" __global__ void histogram256(unsigned* bins, const unsigned char* data, int n) {
  __shared__ unsigned local[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}

// 11. Naive transpose.
extern "C" __global__ void transpose_naive(float* out, const float* in, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}

// 12. 2-D 5-point stencil.
extern "C" __global__ void stencil2d(float* out, const float* in, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x > 0 && y > 0 && x < w - 1 && y < h - 1)
    out[y * w + x] = 0.2f * (in[y * w + x] + in[y * w + x - 1] + in[y * w + x + 1] + in[(y - 1) * w + x] + in[(y + 1) * w + x]);
}

// 13. 3-D 7-point stencil.
extern "C" __global__ void stencil3d(float* out, const float* in, int nx, int ny, int nz) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x > 0 && y > 0 && z > 0 && x < nx - 1 && y < ny - 1 && z < nz - 1) {
    int i = (z * ny + y) * nx + x;
    out[i] = in[i] * 0.4f + 0.1f * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx] + in[i - nx * ny] + in[i + nx * ny]);
  }
}

// 14. Row softmax, one thread per row (small rows).
extern "C" __global__ void softmax_rows(float* out, const float* in, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* x = in + r * cols;
  float m = x[0];
  for (int c = 1; c < cols; ++c) m = fmaxf(m, x[c]);
  float s = 0.f;
  for (int c = 0; c < cols; ++c) s += __expf(x[c] - m);
  for (int c = 0; c < cols; ++c) out[r * cols + c] = __expf(x[c] - m) / s;
}

// 15. Layernorm, one thread per row.
extern "C" __global__ void layernorm_rows(float* out, const float* in, const float* gamma, const float* beta,
                                          int rows, int cols, float eps) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* x = in + r * cols;
  float mean = 0.f;
  for (int c = 0; c < cols; ++c) mean += x[c];
  mean /= cols;
  float var = 0.f;
  for (int c = 0; c < cols; ++c) { float d = x[c] - mean; var += d * d; }
  var /= cols;
  float inv = rsqrtf(var + eps);
  for (int c = 0; c < cols; ++c) out[r * cols + c] = (x[c] - mean) * inv * gamma[c] + beta[c];
}

// 16. Block-level inclusive scan (Hillis-Steele in shared memory), 256 per block.
extern "C" __global__ void scan_block(int* out, const int* in, int n) {
  __shared__ int buf[2][256];
  int tid = threadIdx.x;
  int i = blockIdx.x * blockDim.x + tid;
  int cur = 0;
  buf[0][tid] = (i < n) ? in[i] : 0;
  __syncthreads();
  for (int off = 1; off < blockDim.x; off <<= 1) {
    int v = buf[cur][tid];
    if (tid >= off) v += buf[cur][tid - off];
    buf[1 - cur][tid] = v;
    cur = 1 - cur;
    __syncthreads();
  }
  if (i < n) out[i] = buf[cur][tid];
}

// 17. 1-D convolution with a small filter.
extern "C" __global__ void conv1d(float* out, const float* in, const float* w, int n, int taps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n - taps + 1) {
    float acc = 0.f;
    for (int t = 0; t < taps; ++t) acc += in[i + t] * w[t];
    out[i] = acc;
  }
}
