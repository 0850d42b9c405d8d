// Reductions, from the classic sequence of optimisations: interleaved,
// sequential addressing, first-add-during-load, unrolled last warp (volatile),
// grid-stride + shuffle + atomic, plus dot product, argmin and a
// global-atomic histogram.

__global__ void reduce_interleaved(const int* in, int* out, int n) {
  extern __shared__ int sdata[];
  unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
  sdata[tid] = i < n ? in[i] : 0;
  __syncthreads();
  for (unsigned s = 1; s < blockDim.x; s *= 2) {
    if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

__global__ void reduce_sequential(const int* in, int* out, int n) {
  extern __shared__ int sdata[];
  unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x * 2 + threadIdx.x;
  int v = i < n ? in[i] : 0;
  if (i + blockDim.x < n) v += in[i + blockDim.x];
  sdata[tid] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

__device__ void warp_reduce_volatile(volatile float* s, unsigned tid) {
  s[tid] += s[tid + 32];
  s[tid] += s[tid + 16];
  s[tid] += s[tid + 8];
  s[tid] += s[tid + 4];
  s[tid] += s[tid + 2];
  s[tid] += s[tid + 1];
}
template <unsigned BLOCK>
__global__ void reduce_unrolled(const float* in, float* out, unsigned n) {
  __shared__ float sdata[BLOCK];
  unsigned tid = threadIdx.x;
  unsigned i = blockIdx.x * (BLOCK * 2) + tid;
  unsigned grid = BLOCK * 2 * gridDim.x;
  float acc = 0.0f;
  while (i < n) {
    acc += in[i];
    if (i + BLOCK < n) acc += in[i + BLOCK];
    i += grid;
  }
  sdata[tid] = acc;
  __syncthreads();
  if (BLOCK >= 512) { if (tid < 256) sdata[tid] += sdata[tid + 256]; __syncthreads(); }
  if (BLOCK >= 256) { if (tid < 128) sdata[tid] += sdata[tid + 128]; __syncthreads(); }
  if (BLOCK >= 128) { if (tid < 64) sdata[tid] += sdata[tid + 64]; __syncthreads(); }
  if (tid < 32) warp_reduce_volatile(sdata, tid);
  if (tid == 0) out[blockIdx.x] = sdata[0];
}
template __global__ void reduce_unrolled<256>(const float*, float*, unsigned);
template __global__ void reduce_unrolled<512>(const float*, float*, unsigned);

__global__ void reduce_shuffle_atomic(const float* __restrict__ in, float* out, int n) {
  __shared__ float warp_sums[32];
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) acc += in[i];
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) atomicAdd(out, acc);
  }
}

__global__ void dot_product_double(const double* __restrict__ a, const double* __restrict__ b, double* out, int n) {
  __shared__ double s[256];
  double acc = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) acc = fma(a[i], b[i], acc);
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int st = 128; st > 0; st >>= 1) {
    if (threadIdx.x < st) s[threadIdx.x] += s[threadIdx.x + st];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

// argmin with (value, index) pairs packed in 64-bit for atomicMin
__global__ void argmin_packed(const float* in, unsigned long long* best, int n) {
  unsigned long long local = ~0ull;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    unsigned bits = __float_as_uint(in[i]);
    bits = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;  // order-preserving
    unsigned long long key = ((unsigned long long)bits << 32) | (unsigned)i;
    local = min(local, key);
  }
  for (int off = 16; off > 0; off >>= 1) local = min(local, __shfl_down_sync(0xffffffffu, local, off));
  if ((threadIdx.x & 31) == 0) atomicMin(best, local);
}

// mean and variance in one pass (Welford per thread, then Chan's merge)
__global__ void welford_mean_var(const float* in, float* mean_out, float* var_out, int rows, int cols) {
  int r = blockIdx.x;
  if (r >= rows) return;
  float mean = 0.0f, m2 = 0.0f, count = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float x = in[r * cols + c];
    count += 1.0f;
    float d = x - mean;
    mean += d / count;
    m2 += d * (x - mean);
  }
  for (int off = 16; off > 0; off >>= 1) {
    float om = __shfl_down_sync(0xffffffffu, mean, off);
    float om2 = __shfl_down_sync(0xffffffffu, m2, off);
    float oc = __shfl_down_sync(0xffffffffu, count, off);
    float nc = count + oc;
    float d = om - mean;
    float f = nc > 0.0f ? oc / nc : 0.0f;
    mean += d * f;
    m2 += om2 + d * d * count * f;
    count = nc;
  }
  if (threadIdx.x == 0) {
    mean_out[r] = mean;
    var_out[r] = count > 1.0f ? m2 / (count - 1.0f) : 0.0f;
  }
}

__global__ void histogram_global_atomics(const float* x, int* bins, int nbins, float lo, float hi, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    int b = (int)((x[i] - lo) / (hi - lo) * nbins);
    b = min(max(b, 0), nbins - 1);
    atomicAdd(&bins[b], 1);
  }
}
