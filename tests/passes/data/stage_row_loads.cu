// Fixture for tests/passes/test_stage_row_loads.py: one thread per row, the thread walks its
// row in a loop (regenerate: nvcc -ptx -arch=sm_90 -O3 stage_row_loads.cu -o stage_row_loads.ptx).

// y = A x, A m rows of n; threads past the last row return before the loop
extern "C" __global__ void row_matvec_f32(const float* A, const float* x, float* y, int m, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  float acc = 0.f;
  for (int j = 0; j < n; j++) acc += A[row * n + j] * x[j];
  y[row] = acc;
}

extern "C" __global__ void row_matvec_f64(const double* __restrict__ A, const double* __restrict__ x,
                                          double* __restrict__ y, int m, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  double acc = 0.0;
  for (int j = 0; j < n; j++) acc += A[(size_t)row * n + j] * x[j];
  y[row] = acc;
}

// per-row sum, rows guarded by an if (no early return)
extern "C" __global__ void row_sum(const float* __restrict__ A, float* __restrict__ out, int m, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < m) {
    float s = 0.f;
    for (int j = 0; j < n; j++) s += A[(size_t)row * n + j];
    out[row] = s;
  }
}

// per-row max
extern "C" __global__ void row_max(const float* __restrict__ A, float* __restrict__ out, int m, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  float v = -__int_as_float(0x7f800000);
  for (int j = 0; j < n; j++) v = fmaxf(v, A[(size_t)row * n + j]);
  out[row] = v;
}

// per-row mean and variance (two accumulators in one loop)
extern "C" __global__ void row_mean_var(const float* __restrict__ A, float* __restrict__ mean,
                                        float* __restrict__ var, int m, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  float s = 0.f, q = 0.f;
  for (int j = 0; j < n; j++) {
    float a = A[(size_t)row * n + j];
    s += a;
    q += a * a;
  }
  float mu = s / n;
  mean[row] = mu;
  var[row] = __fsub_rn(q / n, __fmul_rn(mu, mu));   // no contraction: the emulator judges it
}

// per-thread trip counts: row r has len[r] elements (start computed from r)
extern "C" __global__ void row_sum_ragged(const float* __restrict__ A, const int* __restrict__ len,
                                          float* __restrict__ out, int m, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  int k = len[row];
  if (k > n) k = n;
  float s = 0.f;
  for (int j = 0; j < k; j++) s += A[(size_t)row * n + j];
  out[row] = s;
}

// the loop kept rolled: one staged load per iteration
extern "C" __global__ void row_sum_rolled(const double* __restrict__ A, double* __restrict__ out, int m, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  double s = 0.0;
#pragma unroll 1
  for (int j = 0; j < n; j++) s += A[(size_t)row * n + j];
  out[row] = s;
}

// ---- must be refused

// the accumulator lives in global memory: a store in the loop may alias A
extern "C" __global__ void neg_store_in_loop(const float* A, const float* x, float* y, int m, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  y[row] = 0.f;
  for (int j = 0; j < n; j++) y[row] += A[row * n + j] * x[j];
}

// the loop stops at a loaded value (control depends on a load)
extern "C" __global__ void neg_break_on_value(const float* __restrict__ A, float* __restrict__ out, int m, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  float s = 0.f;
  for (int j = 0; j < n; j++) {
    float a = A[(size_t)row * n + j];
    if (a < 0.f) break;
    s += a;
  }
  out[row] = s;
}

// column walk: already coalesced across the warp
extern "C" __global__ void neg_column_sum(const float* __restrict__ A, float* __restrict__ out, int m, int n) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= n) return;
  float s = 0.f;
  for (int i = 0; i < m; i++) s += A[(size_t)i * n + col];
  out[col] = s;
}

// a grid-stride loop (one element per iteration, already coalesced)
extern "C" __global__ void neg_grid_stride(const float* __restrict__ A, float* __restrict__ out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) out[i] = 2.f * A[i];
}

// a row walk with a barrier in the kernel
extern "C" __global__ void neg_barrier(const float* __restrict__ A, float* __restrict__ out, int m, int n) {
  __shared__ float t[256];
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.f;
  if (row < m)
    for (int j = 0; j < n; j++) s += A[(size_t)row * n + j];
  t[threadIdx.x] = s;
  __syncthreads();
  if (row < m) out[row] = t[threadIdx.x ^ 1];
}

// a gather through a row of indices: the index walk is staged, the gather (its address is a
// loaded value) stays a global load in phase B
extern "C" __global__ void row_gather(const float* __restrict__ A, const int* __restrict__ idx,
                                      float* __restrict__ out, int m, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m) return;
  float s = 0.f;
  for (int j = 0; j < n; j++) s += A[(size_t)row * n + idx[(size_t)row * n + j]];
  out[row] = s;
}
