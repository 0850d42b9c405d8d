// Warp-level intrinsics: every __shfl_sync flavour, votes, match, the sm_80
// __reduce_*_sync family, __activemask, __syncwarp and warp-aggregated atomics.
#include <cstdint>

__device__ __forceinline__ float warp_sum_down(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ float warp_max_xor(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

__global__ void shfl_reductions(const float* in, float* sums, float* maxes, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.0f;
  float s = warp_sum_down(v);
  float m = warp_max_xor(i < n ? in[i] : -INFINITY);
  if ((threadIdx.x & 31) == 0) {
    sums[i >> 5] = s;
    maxes[i >> 5] = m;
  }
}

__global__ void shfl_scan_broadcast(const int* in, int* incl, int* bcast, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  int v = i < n ? in[i] : 0;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    int t = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += t;
  }
  int first = __shfl_sync(0xffffffffu, v, 0);
  int from_src = __shfl_sync(0xffffffffu, v, (lane + 5) & 31);
  if (i < n) {
    incl[i] = v;
    bcast[i] = first + from_src;
  }
}

// sub-warp shuffles with width, and 64-bit / double shuffles
__global__ void shfl_width_and_wide(const double* d, const long long* l, double* od, long long* ol, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double x = d[i];
  long long y = l[i];
  for (int off = 8; off > 0; off >>= 1) {
    x += __shfl_down_sync(0xffffffffu, x, off, 16);
    y ^= __shfl_xor_sync(0xffffffffu, y, off, 16);
  }
  od[i] = x + __shfl_up_sync(0xffffffffu, x, 1, 8);
  ol[i] = y + __shfl_sync(0xffffffffu, y, 3, 4);
}

__global__ void votes(const int* pred, unsigned* ballots, int* anys, int* alls, int* counts, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int p = i < n ? pred[i] != 0 : 0;
  unsigned b = __ballot_sync(0xffffffffu, p);
  int any = __any_sync(0xffffffffu, p);
  int all = __all_sync(0xffffffffu, p);
  int lane = threadIdx.x & 31;
  int rank = __popc(b & ((1u << lane) - 1));
  if (lane == 0) {
    ballots[i >> 5] = b;
    anys[i >> 5] = any;
    alls[i >> 5] = all;
  }
  if (p && i < n) counts[i] = rank + __ffs(b);
}

// divergent code: __activemask, partial-mask shuffles, __syncwarp
__global__ void active_mask_divergent(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = in[i];
  if (v & 1) {
    unsigned mask = __activemask();
    int leader = __ffs(mask) - 1;
    int lv = __shfl_sync(mask, v, leader);
    out[i] = lv + __popc(mask);
  } else {
    out[i] = -v;
  }
  __syncwarp();
  unsigned half = 0x0000ffffu;
  if ((threadIdx.x & 31) < 16) {
    int t = __shfl_xor_sync(half, out[i], 1);
    __syncwarp(half);
    out[i] += t;
  }
}

// warp-aggregated atomic increment: one atomic per warp
__global__ void warp_aggregated_append(const float* in, float* out, int* count, float thresh, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = in[i];
  bool keep = v > thresh;
  unsigned mask = __ballot_sync(__activemask(), keep);
  if (!keep) return;
  int lane = threadIdx.x & 31;
  int leader = __ffs(mask) - 1;
  int base = 0;
  if (lane == leader) base = atomicAdd(count, __popc(mask));
  base = __shfl_sync(mask, base, leader);
  out[base + __popc(mask & ((1u << lane) - 1))] = v;
}

__global__ void match_and_reduce(const int* keys, const unsigned* vals, unsigned* out, int* groups, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int k = i < n ? keys[i] : -1;
  unsigned v = i < n ? vals[i] : 0;
  unsigned peers = __match_any_sync(0xffffffffu, k);
  int pred;
  unsigned all_same = __match_all_sync(0xffffffffu, k, &pred);
#if __CUDA_ARCH__ >= 800
  unsigned sum = __reduce_add_sync(0xffffffffu, v);
  unsigned mn = __reduce_min_sync(0xffffffffu, v);
  unsigned mx = __reduce_max_sync(0xffffffffu, v);
  int smax = __reduce_max_sync(0xffffffffu, (int)v - 100);
  unsigned a = __reduce_and_sync(0xffffffffu, v);
  unsigned o = __reduce_or_sync(0xffffffffu, v);
  unsigned x = __reduce_xor_sync(0xffffffffu, v);
#else
  unsigned sum = 0, mn = ~0u, mx = 0, a = ~0u, o = 0, x = 0;
  int smax = 0;
  for (int l = 0; l < 32; ++l) {
    unsigned t = __shfl_sync(0xffffffffu, v, l);
    sum += t; mn = min(mn, t); mx = max(mx, t); a &= t; o |= t; x ^= t;
    smax = max(smax, (int)t - 100);
  }
#endif
  if (i < n) {
    groups[i] = __popc(peers) + (pred ? 1000 : 0) + (all_same ? 1 : 0);
    if ((threadIdx.x & 31) == 0) {
      unsigned* w = out + 8 * (i >> 5);
      w[0] = sum; w[1] = mn; w[2] = mx; w[3] = a; w[4] = o; w[5] = x; w[6] = (unsigned)smax;
    }
  }
}

__global__ void lane_and_warp_ids(int* out) {
  unsigned lane, warp, smid;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  asm("mov.u32 %0, %%warpid;" : "=r"(warp));
  asm("mov.u32 %0, %%smid;" : "=r"(smid));
  unsigned lt;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = (int)(lane + 32 * warp + (smid << 16) + __popc(lt));
}
