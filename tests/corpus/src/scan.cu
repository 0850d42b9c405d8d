// Prefix sums: Hillis-Steele (double-buffered shared memory), Blelloch
// work-efficient scan with bank-conflict padding, warp-shuffle block scan,
// uniform add for multi-block scans, and stream compaction built on a scan.

__global__ void scan_hillis_steele(const float* in, float* out, int n) {
  extern __shared__ float tmp[];  // 2 * blockDim.x
  int tid = threadIdx.x;
  int pout = 0, pin = 1;
  tmp[pout * n + tid] = tid > 0 ? in[tid - 1] : 0.0f;  // exclusive
  __syncthreads();
  for (int off = 1; off < n; off *= 2) {
    pout = 1 - pout;
    pin = 1 - pout;
    if (tid >= off)
      tmp[pout * n + tid] = tmp[pin * n + tid] + tmp[pin * n + tid - off];
    else
      tmp[pout * n + tid] = tmp[pin * n + tid];
    __syncthreads();
  }
  out[tid] = tmp[pout * n + tid];
}

#define LOG_BANKS 5
#define PAD(i) ((i) >> LOG_BANKS)
__global__ void scan_blelloch(const int* in, int* out, int* block_sums, int n) {
  extern __shared__ int temp[];
  int tid = threadIdx.x;
  int base = blockIdx.x * blockDim.x * 2;
  int ai = tid, bi = tid + blockDim.x;
  temp[ai + PAD(ai)] = base + ai < n ? in[base + ai] : 0;
  temp[bi + PAD(bi)] = base + bi < n ? in[base + bi] : 0;
  int offset = 1;
  for (int d = blockDim.x; d > 0; d >>= 1) {
    __syncthreads();
    if (tid < d) {
      int a = offset * (2 * tid + 1) - 1, b = offset * (2 * tid + 2) - 1;
      temp[b + PAD(b)] += temp[a + PAD(a)];
    }
    offset *= 2;
  }
  int last = 2 * blockDim.x - 1;
  if (tid == 0) {
    block_sums[blockIdx.x] = temp[last + PAD(last)];
    temp[last + PAD(last)] = 0;
  }
  for (int d = 1; d < 2 * (int)blockDim.x; d *= 2) {
    offset >>= 1;
    __syncthreads();
    if (tid < d) {
      int a = offset * (2 * tid + 1) - 1, b = offset * (2 * tid + 2) - 1;
      int t = temp[a + PAD(a)];
      temp[a + PAD(a)] = temp[b + PAD(b)];
      temp[b + PAD(b)] += t;
    }
  }
  __syncthreads();
  if (base + ai < n) out[base + ai] = temp[ai + PAD(ai)];
  if (base + bi < n) out[base + bi] = temp[bi + PAD(bi)];
}

__global__ void uniform_add(int* data, const int* block_offsets, int n) {
  int i = blockIdx.x * blockDim.x * 2 + threadIdx.x;
  int add = block_offsets[blockIdx.x];
  if (i < n) data[i] += add;
  if (i + blockDim.x < n) data[i + blockDim.x] += add;
}

__device__ __forceinline__ unsigned warp_inclusive_scan(unsigned v) {
  int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    unsigned t = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += t;
  }
  return v;
}
__global__ void scan_warp_shuffle(const unsigned* in, unsigned* out, unsigned* block_sums, int n) {
  __shared__ unsigned warp_totals[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned v = i < n ? in[i] : 0u;
  v = warp_inclusive_scan(v);
  if (lane == 31) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    unsigned t = lane < (int)(blockDim.x >> 5) ? warp_totals[lane] : 0u;
    warp_totals[lane] = warp_inclusive_scan(t) - t;
  }
  __syncthreads();
  v += warp_totals[warp];
  if (i < n) out[i] = v;
  if (threadIdx.x == blockDim.x - 1) block_sums[blockIdx.x] = v;
}

// compaction: flags -> scan -> scatter
__global__ void compact_scatter(const float* in, const unsigned* excl_scan, const unsigned* flags, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && flags[i]) out[excl_scan[i]] = in[i];
}
__global__ void compact_flags(const float* in, unsigned* flags, float thresh, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) flags[i] = in[i] > thresh ? 1u : 0u;
}

// segmented scan over rows of a matrix (one block per row, sequential chunks)
__global__ void row_cumsum(const double* in, double* out, int cols) {
  __shared__ double carry;
  __shared__ double part[1024];
  const double* r = in + (size_t)blockIdx.x * cols;
  double* o = out + (size_t)blockIdx.x * cols;
  if (threadIdx.x == 0) carry = 0.0;
  for (int c0 = 0; c0 < cols; c0 += blockDim.x) {
    int c = c0 + threadIdx.x;
    part[threadIdx.x] = c < cols ? r[c] : 0.0;
    __syncthreads();
    for (int off = 1; off < (int)blockDim.x; off <<= 1) {
      double t = threadIdx.x >= off ? part[threadIdx.x - off] : 0.0;
      __syncthreads();
      part[threadIdx.x] += t;
      __syncthreads();
    }
    if (c < cols) o[c] = part[threadIdx.x] + carry;
    __syncthreads();
    if (threadIdx.x == blockDim.x - 1) carry += part[threadIdx.x];
    __syncthreads();
  }
}
