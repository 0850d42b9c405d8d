// Exclusive prefix sum of a large integer array (GPU Gems 3 ch. 39 / CUDA samples style):
// 1. every block scans its 2*SCAN_THREADS elements in shared memory (Blelloch up/down sweep)
//    and writes its total; 2. one block scans the block totals, chunk by chunk with a carry;
// 3. every block adds its scanned total to its elements. Then a stream-compaction style use of
// the scan: the indices of the flagged elements are scattered to their output positions.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define N_ELEMS (64 * 1024 * 1024)
#define SCAN_THREADS 512
#define ELEMS_PER_BLOCK (2 * SCAN_THREADS)
#define SUMS_THREADS 1024
#define ITERS_PER_REP 8
#define NUM_REPS 12

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, \
              __LINE__);                                                              \
      exit(EXIT_FAILURE);                                                             \
    }                                                                                 \
  } while (0)

__global__ void scan_blocks(const int *in, int *out, int *block_sums, int n) {
  __shared__ int temp[ELEMS_PER_BLOCK];
  int tid = threadIdx.x;
  int base = blockIdx.x * ELEMS_PER_BLOCK;
  temp[2 * tid] = base + 2 * tid < n ? in[base + 2 * tid] : 0;
  temp[2 * tid + 1] = base + 2 * tid + 1 < n ? in[base + 2 * tid + 1] : 0;
  int offset = 1;
  for (int d = ELEMS_PER_BLOCK >> 1; d > 0; d >>= 1) {  // up-sweep
    __syncthreads();
    if (tid < d) {
      int ai = offset * (2 * tid + 1) - 1, bi = offset * (2 * tid + 2) - 1;
      temp[bi] += temp[ai];
    }
    offset <<= 1;
  }
  if (tid == 0) {
    block_sums[blockIdx.x] = temp[ELEMS_PER_BLOCK - 1];
    temp[ELEMS_PER_BLOCK - 1] = 0;
  }
  for (int d = 1; d < ELEMS_PER_BLOCK; d <<= 1) {  // down-sweep
    offset >>= 1;
    __syncthreads();
    if (tid < d) {
      int ai = offset * (2 * tid + 1) - 1, bi = offset * (2 * tid + 2) - 1;
      int t = temp[ai];
      temp[ai] = temp[bi];
      temp[bi] += t;
    }
  }
  __syncthreads();
  if (base + 2 * tid < n) out[base + 2 * tid] = temp[2 * tid];
  if (base + 2 * tid + 1 < n) out[base + 2 * tid + 1] = temp[2 * tid + 1];
}

// One block: exclusive scan of the block totals in place, SUMS_THREADS at a time.
__global__ void scan_block_sums(int *sums, int count) {
  __shared__ int buf[SUMS_THREADS];
  __shared__ int carry;
  if (threadIdx.x == 0) carry = 0;
  for (int start = 0; start < count; start += SUMS_THREADS) {
    int i = start + threadIdx.x;
    int v = i < count ? sums[i] : 0;
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int off = 1; off < SUMS_THREADS; off <<= 1) {  // inclusive Hillis-Steele
      int t = threadIdx.x >= off ? buf[threadIdx.x - off] : 0;
      __syncthreads();
      buf[threadIdx.x] += t;
      __syncthreads();
    }
    if (i < count) sums[i] = carry + buf[threadIdx.x] - v;
    __syncthreads();
    if (threadIdx.x == SUMS_THREADS - 1) carry += buf[SUMS_THREADS - 1];
    __syncthreads();
  }
}

__global__ void add_block_offsets(int *out, const int *block_offsets, int n) {
  int i = blockIdx.x * ELEMS_PER_BLOCK + threadIdx.x;
  int add = block_offsets[blockIdx.x];
  if (i < n) out[i] += add;
  if (i + SCAN_THREADS < n) out[i + SCAN_THREADS] += add;
}

// Stream compaction: element i is kept when flags[i] != 0; pos is the exclusive scan of flags.
__global__ void scatter_flagged(const int *flags, const int *pos, int *indices, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && flags[i]) indices[pos[i]] = i;
}

static uint32_t lcg_state = 99991u;
static inline uint32_t lcg() { lcg_state = lcg_state * 1664525u + 1013904223u; return lcg_state >> 8; }

int main() {
  const int n = N_ELEMS;
  const int nblocks = (n + ELEMS_PER_BLOCK - 1) / ELEMS_PER_BLOCK;
  printf("scan: %d ints (%.0f MB), %d blocks of %d\n", n, n * 4.0 / 1e6, nblocks, ELEMS_PER_BLOCK);
  std::vector<int> h_in(n), h_out(n);
  for (int i = 0; i < n; ++i) h_in[i] = (lcg() % 8) == 0 ? 1 : 0;  // ~1/8 flagged
  int *d_in, *d_out, *d_sums, *d_idx;
  CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&d_idx, n * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&d_sums, nblocks * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), n * sizeof(int), cudaMemcpyHostToDevice));

  auto run_once = [&]() {
    scan_blocks<<<nblocks, SCAN_THREADS>>>(d_in, d_out, d_sums, n);
    scan_block_sums<<<1, SUMS_THREADS>>>(d_sums, nblocks);
    add_block_offsets<<<nblocks, SCAN_THREADS>>>(d_out, d_sums, n);
    scatter_flagged<<<(n + 255) / 256, 256>>>(d_in, d_out, d_idx, n);
  };
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  run_once();  // warm-up
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> times;
  for (int r = 0; r < NUM_REPS; ++r) {
    CUDA_CHECK(cudaEventRecord(start));
    for (int it = 0; it < ITERS_PER_REP; ++it) run_once();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  CUDA_CHECK(cudaGetLastError());
  std::sort(times.begin(), times.end());
  float median = times[times.size() / 2];

  // Check: the scan and the compacted indices exactly against the CPU.
  CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, n * sizeof(int), cudaMemcpyDeviceToHost));
  long long acc = 0;
  size_t bad = 0;
  std::vector<int> c_idx;
  for (int i = 0; i < n; ++i) {
    if (h_out[i] != acc) ++bad;
    if (h_in[i]) c_idx.push_back(i);
    acc += h_in[i];
  }
  std::vector<int> g_idx(c_idx.size());
  CUDA_CHECK(cudaMemcpy(g_idx.data(), d_idx, g_idx.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (size_t k = 0; k < c_idx.size(); ++k)
    if (g_idx[k] != c_idx[k]) ++bad;
  bool ok = bad == 0;
  if (!ok) printf("scan: %zu mismatches\n", bad);
  printf("scan: median %.3f ms per rep (%d scans + compactions), %lld flagged\n", median,
         ITERS_PER_REP, acc);
  printf("NVCC_PLUS_BENCH kernel_ms=%.4f check=%s\n", median, ok ? "PASS" : "FAIL");
  cudaFree(d_in); cudaFree(d_out); cudaFree(d_idx); cudaFree(d_sums);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
