// Matrix transpose in the style of the CUDA samples' "transpose": a plain copy (the bandwidth
// reference), a naive transpose and a coalesced one through a padded shared-memory tile.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define TILE_DIM 32
#define BLOCK_ROWS 8
#define SIZE_X 8192
#define SIZE_Y 8192
#define NUM_REPS 15
#define ITERS_PER_REP 8

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, \
              __LINE__);                                                              \
      exit(EXIT_FAILURE);                                                             \
    }                                                                                 \
  } while (0)

__global__ void copyKernel(float *odata, const float *idata, int width, int height) {
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < width && y + j < height)
      odata[(y + j) * width + x] = idata[(y + j) * width + x];
  }
}

__global__ void transposeNaive(float *odata, const float *idata, int width, int height) {
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < width && y + j < height)
      odata[x * height + (y + j)] = idata[(y + j) * width + x];
  }
}

__global__ void transposeCoalesced(float *odata, const float *idata, int width, int height) {
  __shared__ float tile[TILE_DIM][TILE_DIM + 1];
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < width && y + j < height)
      tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];
  }
  __syncthreads();
  x = blockIdx.y * TILE_DIM + threadIdx.x;  // transposed block offset
  y = blockIdx.x * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < height && y + j < width)
      odata[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
  }
}

static uint32_t lcg_state = 12345u;
static inline uint32_t lcg() { lcg_state = lcg_state * 1664525u + 1013904223u; return lcg_state; }

int main(int argc, char **argv) {
  const int width = SIZE_X, height = SIZE_Y;
  const size_t n = (size_t)width * height;
  const size_t bytes = n * sizeof(float);
  printf("transpose: %d x %d floats (%.0f MB per matrix)\n", width, height, bytes / 1e6);

  std::vector<float> h_in(n), h_out(n), h_copy(n);
  for (size_t i = 0; i < n; ++i) h_in[i] = (float)(lcg() >> 8) * (1.0f / 16777216.0f) - 0.5f;

  float *d_in, *d_out, *d_copy;
  CUDA_CHECK(cudaMalloc(&d_in, bytes));
  CUDA_CHECK(cudaMalloc(&d_out, bytes));
  CUDA_CHECK(cudaMalloc(&d_copy, bytes));
  CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), bytes, cudaMemcpyHostToDevice));

  dim3 grid((width + TILE_DIM - 1) / TILE_DIM, (height + TILE_DIM - 1) / TILE_DIM);
  dim3 block(TILE_DIM, BLOCK_ROWS);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));

  auto run_once = [&]() {
    copyKernel<<<grid, block>>>(d_copy, d_in, width, height);
    transposeNaive<<<grid, block>>>(d_out, d_in, width, height);
    transposeCoalesced<<<grid, block>>>(d_out, d_in, width, height);
  };
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

  // Check: the coalesced result (written last) and a fresh naive result against the CPU.
  bool ok = true;
  CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, bytes, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(h_copy.data(), d_copy, bytes, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      if (h_out[(size_t)x * height + y] != h_in[(size_t)y * width + x]) ++bad;
      if (h_copy[(size_t)y * width + x] != h_in[(size_t)y * width + x]) ++bad;
    }
  CUDA_CHECK(cudaMemset(d_out, 0, bytes));
  transposeNaive<<<grid, block>>>(d_out, d_in, width, height);
  CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, bytes, cudaMemcpyDeviceToHost));
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      if (h_out[(size_t)x * height + y] != h_in[(size_t)y * width + x]) ++bad;
  if (bad) { ok = false; printf("transpose: %zu mismatches\n", bad); }

  double gbs = 3.0 * ITERS_PER_REP * 2.0 * bytes / (median * 1e-3) / 1e9;
  printf("transpose: median %.3f ms per rep (%d x 3 kernels), %.1f GB/s average\n", median,
         ITERS_PER_REP, gbs);
  printf("NVCC_PLUS_BENCH kernel_ms=%.4f check=%s\n", median, ok ? "PASS" : "FAIL");
  cudaFree(d_in); cudaFree(d_out); cudaFree(d_copy);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
