// Dense linear algebra the way it is first written: naive SGEMM, shared-memory
// tiled SGEMM, register-blocked SGEMM (4x4 per thread), naive DGEMM, batched
// GEMM over blockIdx.z, GEMV with one thread per row and with a warp per row.

__global__ void sgemm_naive(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = alpha * acc + beta * C[row * N + col];
  }
}

template <int TILE>
__global__ void sgemm_tiled(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                            float* __restrict__ C) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    int ka = t * TILE + tx, kb = t * TILE + ty;
    As[ty][tx] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
    Bs[ty][tx] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
template __global__ void sgemm_tiled<16>(int, int, int, const float*, const float*, float*);
template __global__ void sgemm_tiled<32>(int, int, int, const float*, const float*, float*);

// 64x64 block tile, 16x16 threads, each thread computes 4x4 outputs
__global__ void __launch_bounds__(256) sgemm_reg_blocked(int M, int N, int K, const float* __restrict__ A,
                                                        const float* __restrict__ B, float* __restrict__ C) {
  constexpr int BM = 64, BN = 64, BK = 16, TM = 4, TN = 4;
  __shared__ float As[BK][BM];
  __shared__ float Bs[BK][BN];
  int tid = threadIdx.y * 16 + threadIdx.x;
  int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int l = tid; l < BM * BK; l += 256) {
      int r = l / BK, c = l % BK;
      As[c][r] = (row0 + r < M && k0 + c < K) ? A[(row0 + r) * K + k0 + c] : 0.0f;
    }
    for (int l = tid; l < BK * BN; l += 256) {
      int r = l / BN, c = l % BN;
      Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(k0 + r) * N + col0 + c] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k][threadIdx.y * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][threadIdx.x * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      int r = row0 + threadIdx.y * TM + i, c = col0 + threadIdx.x * TN + j;
      if (r < M && c < N) C[r * N + c] = acc[i][j];
    }
}

__global__ void dgemm_naive(int M, int N, int K, const double* A, const double* B, double* C) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  double acc = 0.0;
  for (int k = 0; k < K; ++k) acc = fma(A[k * M + row], B[col * K + k], acc);  // column-major
  C[col * M + row] = acc;
}

__global__ void sgemm_batched(int M, int N, int K, const float* const* As, const float* const* Bs, float* const* Cs) {
  const float* A = As[blockIdx.z];
  const float* B = Bs[blockIdx.z];
  float* C = Cs[blockIdx.z];
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}

// y = A x, one thread per row (row-major, uncoalesced)
__global__ void gemv_row_per_thread(int M, int N, const float* __restrict__ A, const float* __restrict__ x,
                                    float* __restrict__ y) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M) return;
  float acc = 0.0f;
  for (int j = 0; j < N; ++j) acc += A[(size_t)row * N + j] * x[j];
  y[row] = acc;
}

// y = A x, one warp per row with float4 loads and a shuffle reduction
__global__ void gemv_warp_per_row(int M, int N, const float* __restrict__ A, const float* __restrict__ x,
                                  float* __restrict__ y) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  if (warp >= M) return;
  const float* row = A + (size_t)warp * N;
  float acc = 0.0f;
  int n4 = N / 4;
  for (int j = lane; j < n4; j += 32) {
    float4 a = reinterpret_cast<const float4*>(row)[j];
    float4 b = reinterpret_cast<const float4*>(x)[j];
    acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
  }
  for (int j = n4 * 4 + lane; j < N; j += 32) acc += row[j] * x[j];
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) y[warp] = acc;
}

// y = A^T x (column access, coalesced across threads)
__global__ void gemv_transposed(int M, int N, const float* __restrict__ A, const float* __restrict__ x,
                                float* __restrict__ y) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= N) return;
  float acc = 0.0f;
#pragma unroll 4
  for (int i = 0; i < M; ++i) acc += A[(size_t)i * N + col] * x[i];
  y[col] = acc;
}
