// Kernels for tests/passes/test_vectorize.py, written the way users write them.
// Regenerate: nvcc -arch=sm_90 -O3 -ptx vectorize.cu -o vectorize.ptx

// Per-thread 4 contiguous floats; in/out may alias (no __restrict__): vectorizable only
// under a runtime alignment test (both pointers 16-byte aligned), loads and stores.
__global__ void scale4(float* out, const float* in, float s, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i + 3 < n) {
#pragma unroll
    for (int k = 0; k < 4; ++k) out[i + k] = in[i + k] * s;
  }
}

// Row-per-thread GEMV: the unrolled loop walks two pointer recurrences.
__global__ void gemv_rows(float* y, const float* A, const float* x, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    float s = 0.f;
    for (int c = 0; c < cols; ++c) s += A[r * cols + c] * x[c];
    y[r] = s;
  }
}

// Starts one element past a 16-byte boundary: never a v4 at the first element, but the
// middle pair is 8-byte aligned when the pointer is.
__global__ void shifted(float* out, const float* in, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4 + 1;
  if (i + 3 < n) out[i] = in[i] + in[i + 1] + in[i + 2] + in[i + 3];
}

// A store through an index loaded from memory sits between the loads: it may hit any of
// them, so nothing may move across it.
__global__ void scatter_between(float* out, const int* idx, float* data, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 2;
  if (i + 1 < n) {
    float a = data[i];
    data[idx[i]] = 0.f;
    float b = data[i + 1];
    out[i / 2] = a + b;
  }
}

// A barrier between the shared-memory loads: they must not be merged across it.
__global__ void barrier_between(float* out, const float* in) {
  __shared__ float tile[1024];
  int t = threadIdx.x;
  for (int k = 0; k < 4; ++k) tile[t * 4 + k] = in[blockIdx.x * 1024 + t * 4 + k];
  __syncthreads();
  float a = tile[(t * 4 + 4) % 1024];
  __syncthreads();
  float b = tile[(t * 4 + 5) % 1024];
  out[blockIdx.x * blockDim.x + t] = a + b;
}

// Shared-memory tile: a row of As per thread (contiguous after unrolling).
template <int T>
__global__ void sgemm_tiled(int M, int N, int K, const float* A, const float* B, float* C) {
  __shared__ float As[T][T], Bs[T][T];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += T) {
    As[ty][tx] = A[row * K + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * N + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * N + col] = acc;
}
template __global__ void sgemm_tiled<16>(int, int, int, const float*, const float*, float*);

// Two bytes and two shorts per thread.
__global__ void bytes_and_shorts(unsigned char* ob, const unsigned char* ib, short* os, const short* is, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned char a = ib[2 * i], b = ib[2 * i + 1];
    ob[2 * i] = b; ob[2 * i + 1] = a;
    short c = is[2 * i], d = is[2 * i + 1];
    os[2 * i] = d; os[2 * i + 1] = c;
  }
}

// Doubles in pairs, zero-filling with immediates.
__global__ void double_pairs(double* out, const double* in, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 2;
  if (i + 1 < n) {
    double a = in[i], b = in[i + 1];
    out[i] = a + b; out[i + 1] = a - b;
    out[n + i] = 0.0; out[n + i + 1] = 0.0;
  }
}
