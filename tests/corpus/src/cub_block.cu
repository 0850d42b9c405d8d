// CUB block- and warp-level collectives inside user kernels: BlockReduce
// (both algorithms), BlockScan, BlockLoad/BlockStore with transposition,
// BlockRadixSort, WarpReduce and BlockHistogram.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_store.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_histogram.cuh>
#include <cub/warp/warp_reduce.cuh>

template <int BLOCK, cub::BlockReduceAlgorithm ALGO>
__global__ void block_reduce_sum(const float* in, float* out, int n) {
  using BlockReduce = cub::BlockReduce<float, BLOCK, ALGO>;
  __shared__ typename BlockReduce::TempStorage temp;
  int i = blockIdx.x * BLOCK + threadIdx.x;
  float v = i < n ? in[i] : 0.0f;
  float total = BlockReduce(temp).Sum(v);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}
template __global__ void block_reduce_sum<256, cub::BLOCK_REDUCE_WARP_REDUCTIONS>(const float*, float*, int);
template __global__ void block_reduce_sum<128, cub::BLOCK_REDUCE_RAKING>(const float*, float*, int);

__global__ void block_reduce_max_index(const float* in, int* argmax, int n) {
  using Pair = cub::KeyValuePair<int, float>;
  using BlockReduce = cub::BlockReduce<Pair, 256>;
  __shared__ typename BlockReduce::TempStorage temp;
  int i = blockIdx.x * 256 + threadIdx.x;
  Pair p(i, i < n ? in[i] : -INFINITY);
  Pair best = BlockReduce(temp).Reduce(p, cub::ArgMax());
  if (threadIdx.x == 0) argmax[blockIdx.x] = best.key;
}

// 4 items per thread: load (warp-transpose), exclusive scan, store
__global__ void block_scan_items(const int* in, int* out, int* block_totals, int n) {
  constexpr int BLOCK = 128, ITEMS = 4;
  using Load = cub::BlockLoad<int, BLOCK, ITEMS, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Scan = cub::BlockScan<int, BLOCK>;
  using Store = cub::BlockStore<int, BLOCK, ITEMS, cub::BLOCK_STORE_WARP_TRANSPOSE>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Scan::TempStorage scan;
    typename Store::TempStorage store;
  } temp;
  int offset = blockIdx.x * BLOCK * ITEMS;
  int valid = min(BLOCK * ITEMS, n - offset);
  int items[ITEMS];
  Load(temp.load).Load(in + offset, items, valid, 0);
  __syncthreads();
  int total;
  Scan(temp.scan).ExclusiveSum(items, items, total);
  __syncthreads();
  Store(temp.store).Store(out + offset, items, valid);
  if (threadIdx.x == 0) block_totals[blockIdx.x] = total;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
__global__ void block_scan_running_max(const float* in, float* out, int n) {
  using Scan = cub::BlockScan<float, 256, cub::BLOCK_SCAN_RAKING_MEMOIZE>;
  __shared__ typename Scan::TempStorage temp;
  int i = blockIdx.x * 256 + threadIdx.x;
  float v = i < n ? in[i] : -INFINITY;
  Scan(temp).InclusiveScan(v, v, MaxOp());
  if (i < n) out[i] = v;
}

// sort 512 keys with 128 threads x 4 items
__global__ void block_radix_sort_pairs(unsigned* keys, float* vals) {
  using Sort = cub::BlockRadixSort<unsigned, 128, 4, float>;
  __shared__ typename Sort::TempStorage temp;
  unsigned k[4];
  float v[4];
  int base = blockIdx.x * 512 + threadIdx.x * 4;
  for (int t = 0; t < 4; ++t) {
    k[t] = keys[base + t];
    v[t] = vals[base + t];
  }
  Sort(temp).SortBlockedToStriped(k, v);
  for (int t = 0; t < 4; ++t) {
    keys[blockIdx.x * 512 + t * 128 + threadIdx.x] = k[t];
    vals[blockIdx.x * 512 + t * 128 + threadIdx.x] = v[t];
  }
}

__global__ void warp_reduce_segments(const int* in, int* out, const int* heads, int n) {
  using WarpReduce = cub::WarpReduce<int>;
  __shared__ typename WarpReduce::TempStorage temp[4];
  int warp = threadIdx.x / 32;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? in[i] : 0;
  int flag = i < n ? heads[i] : 1;
  int seg = WarpReduce(temp[warp]).HeadSegmentedSum(v, flag);
  int all = WarpReduce(temp[warp]).Sum(v);
  if (i < n) out[i] = flag ? seg : all;
}

__global__ void block_histogram_bytes(const unsigned char* in, unsigned* hist, int n) {
  using Hist = cub::BlockHistogram<unsigned char, 128, 8, 256, cub::BLOCK_HISTO_ATOMIC>;
  __shared__ typename Hist::TempStorage temp;
  __shared__ unsigned smem_hist[256];
  unsigned char items[8];
  int base = blockIdx.x * 1024 + threadIdx.x * 8;
  for (int t = 0; t < 8; ++t) items[t] = base + t < n ? in[base + t] : 0;
  Hist(temp).Histogram(items, smem_hist);
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += 128) atomicAdd(&hist[b], smem_hist[b]);
}
