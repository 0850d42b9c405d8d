// Data movement and row-wise normalisation: naive and shared-memory tiled
// transpose (padded, bank-conflict free), batched transpose, row softmax
// (warp per row, block per row, online), log-softmax and layer norm.
#include <cfloat>

__global__ void transpose_naive(const float* in, float* out, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}

template <int TILE, int ROWS>
__global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
template __global__ void transpose_tiled<32, 8>(const float*, float*, int, int);

// [batch, rows, cols] -> [batch, cols, rows] for half-sized 16-bit elements
__global__ void transpose_batched_u16(const unsigned short* in, unsigned short* out, int rows, int cols) {
  __shared__ unsigned short tile[32][33];
  size_t off = (size_t)blockIdx.z * rows * cols;
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[off + (size_t)(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < rows && y + j < cols) out[off + (size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// one warp per row, three passes over the row
__global__ void softmax_warp_per_row(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* xr = x + (size_t)row * cols;
  float* yr = y + (size_t)row * cols;
  float m = -FLT_MAX;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
  m = warp_max(m);
  float s = 0.0f;
  for (int c = lane; c < cols; c += 32) s += expf(xr[c] - m);
  s = warp_sum(s);
  float inv = 1.0f / s;
  for (int c = lane; c < cols; c += 32) yr[c] = expf(xr[c] - m) * inv;
}

// one block per row with shared-memory reductions
__global__ void softmax_block_per_row(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float red[32];
  __shared__ float bcast;
  const float* xr = x + (size_t)blockIdx.x * cols;
  float* yr = y + (size_t)blockIdx.x * cols;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  float m = -FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = warp_max(m);
  if (lane == 0) red[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = warp_max(lane < nwarps ? red[lane] : -FLT_MAX);
    if (lane == 0) bcast = m;
  }
  __syncthreads();
  m = bcast;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(xr[c] - m);
  s = warp_sum(s);
  __syncthreads();
  if (lane == 0) red[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = warp_sum(lane < nwarps ? red[lane] : 0.0f);
    if (lane == 0) bcast = s;
  }
  __syncthreads();
  float inv = __fdividef(1.0f, bcast);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __expf(xr[c] - m) * inv;
}

// online softmax: running max and rescaled sum in one pass
__global__ void softmax_online(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* xr = x + (size_t)row * cols;
  float m = -FLT_MAX, d = 0.0f;
  for (int c = lane; c < cols; c += 32) {
    float v = xr[c];
    float nm = fmaxf(m, v);
    d = d * expf(m - nm) + expf(v - nm);
    m = nm;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float om = __shfl_xor_sync(0xffffffffu, m, o);
    float od = __shfl_xor_sync(0xffffffffu, d, o);
    float nm = fmaxf(m, om);
    d = d * expf(m - nm) + od * expf(om - nm);
    m = nm;
  }
  for (int c = lane; c < cols; c += 32) y[(size_t)row * cols + c] = expf(xr[c] - m) / d;
}

__global__ void log_softmax(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* xr = x + (size_t)row * cols;
  float m = -FLT_MAX;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
  m = warp_max(m);
  float s = 0.0f;
  for (int c = lane; c < cols; c += 32) s += expf(xr[c] - m);
  float lse = m + logf(warp_sum(s));
  for (int c = lane; c < cols; c += 32) y[(size_t)row * cols + c] = xr[c] - lse;
}

__global__ void layer_norm(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                           float* __restrict__ y, int rows, int cols, float eps) {
  int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* xr = x + (size_t)row * cols;
  float s = 0.0f, ss = 0.0f;
  for (int c = lane; c < cols; c += 32) {
    float v = xr[c];
    s += v;
    ss += v * v;
  }
  s = warp_sum(s);
  ss = warp_sum(ss);
  float mean = s / cols;
  float rstd = rsqrtf(ss / cols - mean * mean + eps);
  for (int c = lane; c < cols; c += 32) y[(size_t)row * cols + c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
}
