// Cooperative groups: thread_block, tiled_partition (static and dynamic),
// tile shuffles, cg::reduce / cg::inclusive_scan, coalesced_threads,
// labeled_partition, and grid-wide sync.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>

namespace cg = cooperative_groups;

template <typename Tile>
__device__ float tile_sum(const Tile& tile, float v) {
#pragma unroll
  for (int off = Tile::num_threads() / 2; off > 0; off >>= 1) v += tile.shfl_down(v, off);
  return v;
}

__global__ void tile_reductions(const float* in, float* out32, float* out16, float* out4, int n) {
  cg::thread_block block = cg::this_thread_block();
  int i = block.group_index().x * block.size() + block.thread_rank();
  float v = i < n ? in[i] : 0.0f;
  auto t32 = cg::tiled_partition<32>(block);
  auto t16 = cg::tiled_partition<16>(block);
  auto t4 = cg::tiled_partition<4>(t16);
  float s32 = tile_sum(t32, v);
  float s16 = tile_sum(t16, v);
  float s4 = tile_sum(t4, v);
  if (t32.thread_rank() == 0) out32[i / 32] = s32;
  if (t16.thread_rank() == 0) out16[i / 16] = s16;
  if (t4.thread_rank() == 0) out4[i / 4] = s4;
}

// cg::reduce with built-in and custom operators, block-level combine via shared memory
__global__ void cg_reduce_block(const int* in, int* sum, int* mx, int n) {
  __shared__ int warp_sums[32];
  __shared__ int warp_max[32];
  cg::thread_block block = cg::this_thread_block();
  auto warp = cg::tiled_partition<32>(block);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? in[i] : 0;
  int ws = cg::reduce(warp, v, cg::plus<int>());
  int wm = cg::reduce(warp, v, cg::greater<int>());
  if (warp.thread_rank() == 0) {
    warp_sums[warp.meta_group_rank()] = ws;
    warp_max[warp.meta_group_rank()] = wm;
  }
  block.sync();
  if (warp.meta_group_rank() == 0) {
    int nw = warp.meta_group_size();
    int a = warp.thread_rank() < nw ? warp_sums[warp.thread_rank()] : 0;
    int b = warp.thread_rank() < nw ? warp_max[warp.thread_rank()] : INT_MIN;
    a = cg::reduce(warp, a, cg::plus<int>());
    b = cg::reduce(warp, b, [](int x, int y) { return x > y ? x : y; });
    if (warp.thread_rank() == 0) {
      atomicAdd(sum, a);
      atomicMax(mx, b);
    }
  }
}

__global__ void cg_scan(const unsigned* in, unsigned* incl, unsigned* excl, int n) {
  auto tile = cg::tiled_partition<32>(cg::this_thread_block());
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned v = i < n ? in[i] : 0u;
  unsigned a = cg::inclusive_scan(tile, v);
  unsigned b = cg::exclusive_scan(tile, v, cg::bit_xor<unsigned>());
  if (i < n) {
    incl[i] = a;
    excl[i] = b;
  }
}

// dynamic (runtime-sized) tiles and coalesced groups in divergent code
__global__ void dynamic_and_coalesced(const int* in, int* out, int* compact, int* count, int tile_size, int n) {
  cg::thread_block block = cg::this_thread_block();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  cg::thread_group tile = cg::tiled_partition(block, tile_size);
  int v = i < n ? in[i] : 0;
  tile.sync();
  out[i < n ? i : 0] = v + (int)tile.thread_rank() * 0 + (int)tile.size();
  if (v > 0 && i < n) {
    cg::coalesced_group active = cg::coalesced_threads();
    int base = 0;
    if (active.thread_rank() == 0) base = atomicAdd(count, (int)active.size());
    base = active.shfl(base, 0);
    compact[base + active.thread_rank()] = v;
  }
}

__global__ void labeled_groups(const int* labels, const float* vals, float* out, int n) {
  auto warp = cg::tiled_partition<32>(cg::this_thread_block());
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int label = i < n ? labels[i] : -1;
  float v = i < n ? vals[i] : 0.0f;
  auto same = cg::labeled_partition(warp, label);
  float s = cg::reduce(same, v, cg::plus<float>());
  bool any_big = warp.any(v > 10.0f);
  unsigned votes = warp.ballot(v < 0.0f);
  if (i < n) out[i] = s + (any_big ? 1.0f : 0.0f) + __popc(votes);
}

// grid-wide synchronisation (cooperative launch): two-phase normalisation
__global__ void grid_sync_normalize(float* data, float* partial, int n) {
  cg::grid_group grid = cg::this_grid();
  cg::thread_block block = cg::this_thread_block();
  __shared__ float s[256];
  float local = 0.0f;
  for (int i = grid.thread_rank(); i < n; i += grid.size()) local += fabsf(data[i]);
  s[block.thread_rank()] = local;
  block.sync();
  for (int st = block.size() / 2; st > 0; st >>= 1) {
    if (block.thread_rank() < st) s[block.thread_rank()] += s[block.thread_rank() + st];
    block.sync();
  }
  if (block.thread_rank() == 0) partial[block.group_index().x] = s[0];
  grid.sync();
  float total = 0.0f;
  for (int b = 0; b < (int)gridDim.x; ++b) total += partial[b];
  for (int i = grid.thread_rank(); i < n; i += grid.size()) data[i] /= total;
}
