// Shared-memory tree reductions written the way users write them, for the
// warp-shuffle-reduction pass tests (tests/passes/test_warp_shuffle.py).
// Regenerate the PTX with:
//   nvcc -arch=sm_90 -O3 -ptx warp_shuffle_reductions.cu -o warp_shuffle_reductions.ptx

// ---- positive: the pass must fire -------------------------------------------------

// 1. loop down to s > 0 with __syncthreads, runtime blockDim, float
__global__ void reduce_loop_f32(const float* in, float* out, int n) {
  extern __shared__ float sdata[];
  unsigned tid = threadIdx.x;
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  sdata[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

// 2. the same with int
__global__ void reduce_loop_i32(const int* in, int* out, int n) {
  extern __shared__ int sdatai[];
  unsigned tid = threadIdx.x;
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  sdatai[tid] = i < n ? in[i] : 0;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sdatai[tid] += sdatai[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdatai[0];
}

// 3. signed indices, blockDim.x >> 1, operands written the other way round
__global__ void reduce_loop_signed(const float* in, float* out, int n) {
  extern __shared__ float sm[];
  int tid = threadIdx.x;
  int i = blockIdx.x * blockDim.x + tid;
  sm[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int s = blockDim.x >> 1; s > 0; s >>= 1) {
    if (tid < s) sm[tid] = sm[tid] + sm[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sm[0];
}

// 4. max-reduction whose result every thread reads (softmax-style broadcast)
__global__ void reduce_max_broadcast(const float* in, float* out, int n) {
  __shared__ float smax[512];
  int tid = threadIdx.x;
  int i = blockIdx.x * blockDim.x + tid;
  float x = i < n ? in[i] : -1e30f;
  smax[tid] = x;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) smax[tid] = fmaxf(smax[tid], smax[tid + s]);
    __syncthreads();
  }
  float m = smax[0];
  if (i < n) out[i] = x - m;
}

// 5. loop down to s > 32, then the warp-synchronous volatile tail
__device__ void warp_reduce(volatile float* s, unsigned tid) {
  s[tid] += s[tid + 32]; s[tid] += s[tid + 16]; s[tid] += s[tid + 8];
  s[tid] += s[tid + 4]; s[tid] += s[tid + 2]; s[tid] += s[tid + 1];
}
__global__ void reduce_volatile_f32(const float* in, float* out, int n) {
  extern __shared__ float sdata[];
  unsigned tid = threadIdx.x;
  unsigned i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
  float v = i < n ? in[i] : 0.0f;
  if (i + blockDim.x < n) v += in[i + blockDim.x];
  sdata[tid] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 32; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid < 32) warp_reduce(sdata, tid);
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

// 6. template block size, fully unrolled, __syncthreads down to s = 1
template <unsigned BLOCK>
__global__ void reduce_tmpl_sync(const float* in, float* out, int n) {
  __shared__ float sdata[BLOCK];
  unsigned tid = threadIdx.x;
  unsigned i = blockIdx.x * BLOCK + threadIdx.x;
  sdata[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
#pragma unroll
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}
template __global__ void reduce_tmpl_sync<256>(const float*, float*, int);

// 7. template block size, explicit steps, volatile int tail
template <unsigned BLOCK>
__global__ void reduce_tmpl_volatile(const int* in, int* out, int n) {
  __shared__ int sdata[BLOCK];
  unsigned tid = threadIdx.x;
  unsigned i = blockIdx.x * BLOCK + threadIdx.x;
  sdata[tid] = i < n ? in[i] : 0;
  __syncthreads();
  if (BLOCK >= 512) { if (tid < 256) sdata[tid] += sdata[tid + 256]; __syncthreads(); }
  if (BLOCK >= 256) { if (tid < 128) sdata[tid] += sdata[tid + 128]; __syncthreads(); }
  if (BLOCK >= 128) { if (tid < 64) sdata[tid] += sdata[tid + 64]; __syncthreads(); }
  if (tid < 32) {
    volatile int* s = sdata;
    s[tid] += s[tid + 32]; s[tid] += s[tid + 16]; s[tid] += s[tid + 8];
    s[tid] += s[tid + 4]; s[tid] += s[tid + 2]; s[tid] += s[tid + 1];
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}
template __global__ void reduce_tmpl_volatile<256>(const int*, int*, int);

// 8. double, constant start, result through atomicAdd
__global__ void dot_double(const double* __restrict__ a, const double* __restrict__ b, double* out, int n) {
  __shared__ double sd[256];
  double acc = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) acc = fma(a[i], b[i], acc);
  sd[threadIdx.x] = acc;
  __syncthreads();
  for (int st = 128; st > 0; st >>= 1) {
    if (threadIdx.x < st) sd[threadIdx.x] += sd[threadIdx.x + st];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, sd[0]);
}

// 9. a block that reduces several rows in turn (the reduction inside an outer loop)
__global__ void rows_sum(const float* in, float* out, int rows, int cols) {
  __shared__ float sr[128];
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    float acc = 0.f;
    for (int c = threadIdx.x; c < cols; c += 128) acc += in[r * cols + c];
    sr[threadIdx.x] = acc;
    __syncthreads();
#pragma unroll
    for (int s = 64; s > 0; s >>= 1) {
      if (threadIdx.x < s) sr[threadIdx.x] += sr[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = sr[0];
    __syncthreads();
  }
}

// 10. partial sums read afterwards: fires with partials=keep only
__global__ void reduce_reads_partials(const float* in, float* out, int n) {
  __shared__ float sp[256];
  int tid = threadIdx.x;
  sp[tid] = in[blockIdx.x * 256 + tid];
  __syncthreads();
#pragma unroll
  for (int s = 128; s > 0; s >>= 1) {
    if (tid < s) sp[tid] += sp[tid + s];
    __syncthreads();
  }
  if (tid < 32) out[blockIdx.x * 32 + tid] = sp[tid];
}

// ---- negative: the pass must not fire ----------------------------------------------

// 11. interleaved addressing (tid % (2*s)): not the sequential tree
__global__ void neg_interleaved(const int* in, int* out, int n) {
  extern __shared__ int sdatai[];
  unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
  sdatai[tid] = i < n ? in[i] : 0;
  __syncthreads();
  for (unsigned s = 1; s < blockDim.x; s *= 2) {
    if (tid % (2 * s) == 0) sdatai[tid] += sdatai[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdatai[0];
}

// 12. a guard that is not tid < s
__global__ void neg_wrong_guard(const float* in, float* out) {
  __shared__ float sw[256];
  int tid = threadIdx.x;
  sw[tid] = in[blockIdx.x * 256 + tid];
  __syncthreads();
#pragma unroll
  for (int s = 128; s > 0; s >>= 1) {
    if (tid <= s / 2) sw[tid] += sw[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sw[0];
}

// 13. 2-D thread index: tid is not %tid.x
__global__ void neg_2d_index(const float* in, float* out) {
  __shared__ float s2[256];
  int tid = threadIdx.y * blockDim.x + threadIdx.x;
  s2[tid] = in[blockIdx.x * 256 + tid];
  __syncthreads();
#pragma unroll
  for (int s = 128; s > 0; s >>= 1) {
    if (tid < s) s2[tid] += s2[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s2[0];
}

// 14. halving loop whose start is not blockDim.x / 2
__global__ void neg_loop_start(const float* in, float* out, int n) {
  extern __shared__ float sdata[];
  unsigned tid = threadIdx.x;
  sdata[tid] = in[blockIdx.x * blockDim.x + tid];
  __syncthreads();
  for (unsigned s = n; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

// 15. already uses shuffles
__global__ void neg_shuffle_already(const float* __restrict__ in, float* out, int n) {
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) acc += in[i];
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}
