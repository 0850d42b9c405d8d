// Hopper (sm_90 / sm_90a) and later features: thread-block clusters and
// distributed shared memory, __cluster_dims__ / __block_size__ (.reqntid),
// __grid_constant__ parameters, TMA (cp.async.bulk.tensor), programmatic
// dependent launch, elect.sync, and (sm_90a only) wgmma and setmaxnreg.
#include <cooperative_groups.h>
#include <cuda.h>
#include <cuda_fp16.h>

namespace cg = cooperative_groups;

// cluster of 2 CTAs: each CTA reads its neighbour's shared-memory histogram
__global__ void __cluster_dims__(2, 1, 1) cluster_histogram(const int* in, int* out, int n, int bins) {
  extern __shared__ int smem_hist[];
  cg::cluster_group cluster = cg::this_cluster();
  unsigned rank = cluster.block_rank();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) smem_hist[b] = 0;
  cluster.sync();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    int v = in[i];
    int dst_rank = (v / bins) & 1;
    int* dst = cluster.map_shared_rank(smem_hist, dst_rank);
    atomicAdd(dst + (v % bins), 1);
  }
  cluster.sync();
  int* peer = cluster.map_shared_rank(smem_hist, rank ^ 1);
  for (int b = threadIdx.x; b < bins; b += blockDim.x)
    out[(blockIdx.x / 2) * bins * 2 + rank * bins + b] = smem_hist[b] + (peer[b] > 0 ? 0 : 0);
  cluster.sync();
}

// required block size + cluster shape: emits .reqntid and .reqnctapercluster
__global__ void __block_size__((128, 1, 1), (4, 1, 1)) fixed_shape_sum(const float* in, float* out) {
  __shared__ float s[128];
  cg::cluster_group cluster = cg::this_cluster();
  s[threadIdx.x] = in[blockIdx.x * 128 + threadIdx.x];
  __syncthreads();
  for (int st = 64; st > 0; st >>= 1) {
    if (threadIdx.x < st) s[threadIdx.x] += s[threadIdx.x + st];
    __syncthreads();
  }
  cluster.sync();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (unsigned r = 0; r < cluster.num_blocks(); ++r) total += *cluster.map_shared_rank(&s[0], r);
    out[blockIdx.x] = total;
  }
  cluster.sync();
}

// large struct passed as __grid_constant__ (no copy to local memory)
struct Conv3x3Params {
  float w[3][3];
  float bias;
  int width, height;
};
__global__ void grid_constant_conv(const __grid_constant__ Conv3x3Params p, const float* in, float* out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < 1 || y < 1 || x >= p.width - 1 || y >= p.height - 1) return;
  const Conv3x3Params* pp = &p;  // taking the address is what __grid_constant__ allows
  float acc = pp->bias;
#pragma unroll
  for (int dy = -1; dy <= 1; ++dy)
#pragma unroll
    for (int dx = -1; dx <= 1; ++dx) acc += pp->w[dy + 1][dx + 1] * in[(y + dy) * p.width + x + dx];
  out[y * p.width + x] = acc;
}

// TMA: 2-D tile load through a CUtensorMap, completion on an mbarrier
__global__ void tma_tile_load(const __grid_constant__ CUtensorMap tmap, float* out, int tiles_x) {
  __shared__ alignas(128) float tile[32 * 32];
  __shared__ alignas(8) unsigned long long bar;
  unsigned bar_addr = (unsigned)__cvta_generic_to_shared(&bar);
  unsigned tile_addr = (unsigned)__cvta_generic_to_shared(tile);
  int tx = (blockIdx.x % tiles_x) * 32, ty = (blockIdx.x / tiles_x) * 32;
  if (threadIdx.x == 0) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(&tmap) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr), "r"(32 * 32 * 4));
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(tile_addr), "l"(&tmap), "r"(tx), "r"(ty), "r"(bar_addr)
        : "memory");
  }
  __syncthreads();
  asm volatile(
      "{\n\t.reg .pred done;\n"
      "WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n\t"
      "@!done bra WAIT;\n\t}" ::"r"(bar_addr)
      : "memory");
  for (int t = threadIdx.x; t < 32 * 32; t += blockDim.x) out[blockIdx.x * 1024 + t] = tile[t];
}

// programmatic dependent launch + elect.sync leader; launch bounds with a
// max-cluster-size argument (.maxclusterrank)
__global__ void __launch_bounds__(256, 1, 4) pdl_consumer(const float* produced, float* out, int n) {
  cudaGridDependencySynchronize();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = produced[i] * 2.0f;
  unsigned is_leader;
  asm volatile(
      "{\n\t.reg .pred p;\n\t.reg .b32 who;\n\t"
      "elect.sync who|p, 0xffffffff;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(is_leader));
  if (is_leader && i < n) atomicAdd(out + n, 1.0f);
  cudaTriggerProgrammaticLaunchCompletion();
}

// sm_90a: warpgroup MMA (wgmma) with register-sized accumulator and setmaxnreg
__device__ __forceinline__ unsigned long long smem_desc(const void* p) {
  unsigned long long addr = (unsigned long long)__cvta_generic_to_shared(p);
  return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32);  // no swizzle, LBO=16B, SBO=1024B
}
__global__ void __launch_bounds__(128) wgmma_m64n8k16(const half* A, const half* B, float* C) {
  __shared__ alignas(128) half sA[64 * 16];
  __shared__ alignas(128) half sB[16 * 8];
  for (int t = threadIdx.x; t < 64 * 16; t += blockDim.x) sA[t] = A[t];
  for (int t = threadIdx.x; t < 16 * 8; t += blockDim.x) sB[t] = B[t];
  __syncthreads();
  float d[4] = {0.f, 0.f, 0.f, 0.f};
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  unsigned long long da = smem_desc(sA), db = smem_desc(sB);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %6, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(da), "l"(db), "r"(0));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#else
  // portable fallback: each of the 128 threads computes 4 outputs of the 64x8 tile
  for (int e = 0; e < 4; ++e) {
    int idx = threadIdx.x * 4 + e, r = idx / 8, c = idx % 8;
    for (int k = 0; k < 16; ++k) d[e] += __half2float(sA[r * 16 + k]) * __half2float(sB[k * 8 + c]);
  }
#endif
  for (int e = 0; e < 4; ++e) C[threadIdx.x * 4 + e] = d[e];
}

// warp-specialised producer/consumer with setmaxnreg dealloc on producers (sm_90a)
__global__ void __launch_bounds__(256, 1) warp_specialized(const float4* in, float4* out, int n4) {
  __shared__ float4 stage[128];
  int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
#endif
    int i = blockIdx.x * 128 + threadIdx.x;
    stage[threadIdx.x] = i < n4 ? in[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  } else {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
#endif
  }
  __syncthreads();
  if (warpgroup == 1) {
    int t = threadIdx.x - 128;
    int i = blockIdx.x * 128 + t;
    float4 v = stage[t];
    if (i < n4) out[i] = make_float4(v.x * v.x, v.y * v.y, v.z * v.z, v.w * v.w);
  }
}
