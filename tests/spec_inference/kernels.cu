// Kernels for tests/spec_inference: one or more of each family that launch-spec inference
// must cover, plus a few it must refuse ("not verifiable").
// Regenerate the PTX (committed as data/kernels.ptx):
//   nvcc -arch=sm_90 -O3 -ptx tests/spec_inference/kernels.cu -o tests/spec_inference/data/kernels.ptx
#include <cstdint>

// ---------------------------------------------------------------- 1-D element-wise
__global__ void vec_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void saxpy_grid_stride(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = a * x[i] + y[i];
}

__global__ void scale_u64(double* out, const double* in, double s, unsigned long long n) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * s;
}

__global__ void unroll4(const float* __restrict__ in, float* __restrict__ out, int n) {
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    int i = base + k;
    if (i < n) out[i] = in[i] * 2.0f;
  }
}

__global__ void add_float4(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 x = a[i], y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

__global__ void early_return(int* out, const int* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = in[i] * 3 + 1;
}

__global__ void no_guard(float* out, const float* in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i] + 1.0f;
}

__global__ void __launch_bounds__(128) bounded128(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * in[i];
}


// ---------------------------------------------------------------- 2-D / 3-D
__global__ void add2d(float* out, const float* a, const float* b, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = a[y * w + x] + b[y * w + x];
}

__global__ void stencil5(float* out, const float* in, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x > 0 && y > 0 && x < w - 1 && y < h - 1)
    out[y * w + x] = 0.25f * (in[y * w + x - 1] + in[y * w + x + 1] + in[(y - 1) * w + x] + in[(y + 1) * w + x]);
}

__global__ void pitched_copy(float* dst, const float* src, int w, int h, int pitch) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) dst[y * w + x] = src[y * pitch + x];
}

__global__ void add3d(float* out, const float* in, int nx, int ny, int nz) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x < nx && y < ny && z < nz) {
    int i = (z * ny + y) * nx + x;
    out[i] = in[i] + 1.0f;
  }
}

__global__ void stencil7_3d(float* out, const float* in, int nx, int ny, int nz) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x >= 1 && x < nx - 1 && y >= 1 && y < ny - 1 && z >= 1 && z < nz - 1) {
    int i = (z * ny + y) * nx + x;
    int sy = nx, sz = nx * ny;
    out[i] = in[i - 1] + in[i + 1] + in[i - sy] + in[i + sy] + in[i - sz] + in[i + sz] - 6.0f * in[i];
  }
}

__global__ void transpose(float* out, const float* in, int rows, int cols) {
  __shared__ float tile[32][33];
  int x = blockIdx.x * 32 + threadIdx.x;
  int y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

// ---------------------------------------------------------------- row / column loops
__global__ void gemv(float* y, const float* A, const float* x, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    float s = 0.f;
    for (int c = 0; c < cols; ++c) s += A[r * cols + c] * x[c];
    y[r] = s;
  }
}

__global__ void col_sum(float* out, const float* A, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < cols) {
    float s = 0.f;
    for (int r = 0; r < rows; ++r) s += A[r * cols + c];
    out[c] = s;
  }
}

__global__ void row_scale(float* A, const float* scale, int rows, int cols) {
  int r = blockIdx.y;
  if (r >= rows) return;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) A[r * cols + c] *= scale[r];
}

// ---------------------------------------------------------------- GEMM
__global__ void gemm_naive(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}

#define TILE 16
__global__ void gemm_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
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

__global__ void sgemm_alpha_beta(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = alpha * acc + beta * C[row * N + col];
  }
}

// ---------------------------------------------------------------- reductions
__global__ void sum_atomic(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&out[0], in[i]);
}

__global__ void count_positive(unsigned* count, const int* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && in[i] > 0) atomicAdd(count, 1u);
}

__global__ void block_sum(float* partial, const float* in, int n) {
  __shared__ float s[256];
  int tid = threadIdx.x;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[tid] = i < n ? in[i] : 0.f;
  __syncthreads();
  for (int st = blockDim.x / 2; st > 0; st >>= 1) {
    if (tid < st) s[tid] += s[tid + st];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

__global__ void int_sum_grid_stride(int* out, const int* in, int n) {
  int acc = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) acc += in[i];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffff, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

__global__ void minmax(int* out2, const int* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { atomicMin(&out2[0], in[i]); atomicMax(&out2[1], in[i]); }
}

// ---------------------------------------------------------------- histograms
__global__ void hist_u8(unsigned* bins, const unsigned char* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[data[i]], 1u);
}

__global__ void hist_int(int* bins, const int* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[data[i]], 1);
}

__global__ void hist_mod(int* bins, const int* data, int n, int nbins) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int v = data[i];
    if (v >= 0 && v < nbins) atomicAdd(&bins[v], 1);
  }
}

__global__ void hist_shared(unsigned* bins, const unsigned char* data, int n) {
  __shared__ unsigned local[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}

// ---------------------------------------------------------------- gathers
__global__ void gather(float* out, const float* in, const int* idx, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[idx[i]];
}

__global__ void gather_checked(float* out, const float* in, const int* idx, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int j = idx[i];
    out[i] = (j >= 0 && j < m) ? in[j] : 0.f;
  }
}

// ---------------------------------------------------------------- not verifiable
struct Node { float value; Node* next; };
__global__ void pointer_chase(float* out, Node* const* heads, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s = 0.f;
    for (Node* p = heads[i]; p; p = p->next) s += p->value;
    out[i] = s;
  }
}

__global__ void strlen_like(int* out, const char* s) {
  int k = 0;
  while (s[k]) ++k;
  out[0] = k;
}

// ---------------------------------------------------------------- more shapes of the same families
// dynamic shared memory sized by the block
__global__ void dyn_block_sum(float* partial, const float* in, int n) {
  extern __shared__ float s[];
  int tid = threadIdx.x;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[tid] = i < n ? in[i] : 0.f;
  __syncthreads();
  for (int st = blockDim.x / 2; st > 0; st >>= 1) {
    if (tid < st) s[tid] += s[tid + st];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

// a row per block, warp shuffles (block sizes must stay multiples of 32)
__global__ void row_max(float* out, const float* in, int rows, int cols) {
  int r = blockIdx.x;
  if (r >= rows) return;
  float m = -1e30f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[r * cols + c]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
  if ((threadIdx.x & 31) == 0) atomicMax((int*)&out[r], __float_as_int(m));
}

// select between two buffers on data
__global__ void where_select(const bool* c, const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = c[i] ? a[i] : b[i];
}

// an empty functor passed by value
struct Square { __device__ float operator()(float v) const { return v * v; } };
template <class Op>
__global__ void apply_op(Op op, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = op(x[i]);
}
template __global__ void apply_op<Square>(Square, const float*, float*, int);

// CSR sparse matrix-vector product: the loop bounds come from memory (not verifiable)
__global__ void spmv_csr(const int* row_ptr, const int* col, const float* val, const float* x, float* y, int rows) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    float s = 0.f;
    for (int j = row_ptr[r]; j < row_ptr[r + 1]; ++j) s += val[j] * x[col[j]];
    y[r] = s;
  }
}

// explicit specs: a comment (the test also gives one in TOML)
// nvcc-plus: grid=cdiv(n,128) block=128 x:f32[n] in y:f32[n] out n=5000,333 s=2.5
__global__ void commented_scale(const float* x, float* y, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = s * x[i];
}

// float4 loads along rows: the row length must keep rows 16-byte aligned
__global__ void row_sums_vec4(float* out, const float* A, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float4* row = reinterpret_cast<const float4*>(A + (size_t)r * cols);
  float s = 0.f;
  for (int j = 0; j < cols / 4; ++j) { float4 v = row[j]; s += v.x + v.y + v.z + v.w; }
  out[r] = s;
}

// a full-warp shuffle after an early exit: sizes must keep whole warps
__global__ void early_exit_shuffle(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = in[i];
  v += __shfl_down_sync(0xffffffffu, v, 1);
  out[i] = v;
}
