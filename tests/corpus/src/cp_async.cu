// Asynchronous copies global -> shared (sm_80+): the __pipeline_* primitives,
// cuda::memcpy_async with cuda::pipeline and cuda::barrier, cooperative_groups
// memcpy_async, and a double-buffered tiled kernel.
#include <cuda_pipeline.h>
#include <cuda/pipeline>
#include <cuda/barrier>
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>

namespace cg = cooperative_groups;

// block-scope pipeline/barrier state lives in static __shared__ memory
#pragma nv_diag_suppress static_var_with_dynamic_init

// primitives: 4-, 8- and 16-byte cp.async, commit, wait_prior
__global__ void pipeline_primitives(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ alignas(16) float s4[256];
  __shared__ alignas(16) float2 s8[256];
  __shared__ alignas(16) float4 s16[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i * 4 + 3 < n) {
    __pipeline_memcpy_async(&s4[threadIdx.x], in + i, sizeof(float));
    __pipeline_memcpy_async(&s8[threadIdx.x], reinterpret_cast<const float2*>(in) + i, sizeof(float2));
    __pipeline_memcpy_async(&s16[threadIdx.x], reinterpret_cast<const float4*>(in) + i, sizeof(float4));
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  if (i * 4 + 3 < n) {
    float4 v = s16[(threadIdx.x + 1) % blockDim.x];
    out[i] = s4[threadIdx.x] + s8[threadIdx.x].x + v.x + v.w;
  }
}

// zero-fill for the ragged tail (src_size < cp_size)
__global__ void pipeline_zero_fill(const float4* in, float4* out, int n_floats) {
  __shared__ alignas(16) float4 tile[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int remaining = n_floats - i * 4;
  size_t valid = remaining >= 4 ? 16 : (remaining > 0 ? remaining * 4 : 0);
  __pipeline_memcpy_async(&tile[threadIdx.x], in + (valid ? i : 0), 16, 16 - valid);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  if (valid) out[i] = tile[threadIdx.x];
}

// double-buffered 1-D convolution: load tile k+1 while computing tile k
template <int TILE>
__global__ void double_buffered_conv(const float* __restrict__ in, const float* __restrict__ w, float* __restrict__ out,
                                     int ntiles) {
  __shared__ alignas(16) float buf[2][TILE + 4];
  int t = threadIdx.x;
  const float* base = in + blockIdx.x * ntiles * TILE;
  float* obase = out + blockIdx.x * ntiles * TILE;
  __pipeline_memcpy_async(&buf[0][t], base + t, sizeof(float));
  if (t < 4) __pipeline_memcpy_async(&buf[0][TILE + t], base + TILE + t, sizeof(float));
  __pipeline_commit();
  for (int k = 0; k < ntiles; ++k) {
    int cur = k & 1;
    if (k + 1 < ntiles) {
      const float* nxt = base + (k + 1) * TILE;
      __pipeline_memcpy_async(&buf[cur ^ 1][t], nxt + t, sizeof(float));
      if (t < 4) __pipeline_memcpy_async(&buf[cur ^ 1][TILE + t], nxt + TILE + t, sizeof(float));
    }
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __syncthreads();
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < 5; ++j) acc += w[j] * buf[cur][t + j];
    obase[k * TILE + t] = acc;
    __syncthreads();
  }
}
template __global__ void double_buffered_conv<128>(const float*, const float*, float*, int);

// cuda::pipeline with a multi-stage producer/consumer loop
__global__ void cuda_pipeline_stages(const int* __restrict__ in, int* __restrict__ out, int tiles) {
  constexpr int STAGES = 2;
  constexpr int TILE = 256;
  __shared__ alignas(16) int smem[STAGES][TILE];
  auto block = cg::this_thread_block();
  __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, STAGES> state;
  auto pipe = cuda::make_pipeline(block, &state);
  const int* src = in + blockIdx.x * tiles * TILE;
  int fetch = 0;
  long long acc = 0;
  for (int compute = 0; compute < tiles; ++compute) {
    for (; fetch < tiles && fetch < compute + STAGES; ++fetch) {
      pipe.producer_acquire();
      cuda::memcpy_async(block, smem[fetch % STAGES], src + fetch * TILE, cuda::aligned_size_t<16>(sizeof(int) * TILE),
                         pipe);
      pipe.producer_commit();
    }
    pipe.consumer_wait();
    acc += smem[compute % STAGES][threadIdx.x];
    pipe.consumer_release();
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = (int)acc;
}

// cuda::barrier + cuda::memcpy_async (bulk copies with mbarrier on sm_90)
__global__ void barrier_memcpy(const float4* __restrict__ in, float4* __restrict__ out, int n4) {
  __shared__ alignas(128) float4 tile[512];
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  const float4* src = in + blockIdx.x * 512;
  cuda::memcpy_async(block, tile, src, cuda::aligned_size_t<128>(sizeof(float4) * 512), bar);
  bar.arrive_and_wait();
  int j = blockIdx.x * 512 + threadIdx.x;
  if (j < n4) {
    float4 v = tile[threadIdx.x];
    out[j] = make_float4(v.w, v.z, v.y, v.x);
  }
}

// cooperative_groups::memcpy_async + cg::wait
__global__ void cg_memcpy_async(const double* in, double* out, int n) {
  extern __shared__ double dyn[];
  auto block = cg::this_thread_block();
  int base = blockIdx.x * blockDim.x;
  int count = min((int)blockDim.x, n - base);
  cg::memcpy_async(block, dyn, in + base, sizeof(double) * count);
  cg::wait(block);
  if ((int)threadIdx.x < count) out[base + threadIdx.x] = dyn[count - 1 - threadIdx.x] * 2.0;
}
