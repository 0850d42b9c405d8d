// Bias gradient of a linear layer, dbias[o] += sum over the B*T rows of dout[row][o], written
// the way the kernel benchmarks of open-source training code write their first, naive version:
// one block per output channel, the threads of a block striding over the rows (reading a column:
// addresses OC floats apart), a double accumulator, a shared-memory tree reduction. Like those
// benchmarks, it is timed at every block size of an array, the block chosen at run time and
// passed down to the launch; each block size has its own cudaEvent timer and its own line.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define B 8
#define T 1024
#define OC 3072
#define ITERS_PER_REP 10
#define NUM_REPS 9

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, \
              __LINE__);                                                              \
      exit(EXIT_FAILURE);                                                             \
    }                                                                                 \
  } while (0)

__global__ void matmul_backward_bias_kernel1(float *dbias, const float *dout, int b, int t, int oc) {
  extern __shared__ float shared[];
  int o = blockIdx.x;            // one block per output channel
  int tid = threadIdx.x;
  int block_size = blockDim.x;
  const float *x = dout + o;
  double sum = 0.0;
  for (int i = tid; i < b * t; i += block_size) sum += x[i * oc];
  shared[tid] = (float)sum;
  __syncthreads();
  for (int stride = block_size / 2; stride >= 1; stride /= 2) {
    __syncthreads();
    if (tid < stride) shared[tid] += shared[tid + stride];
  }
  if (tid == 0) dbias[o] += shared[0];
}

void matmul_backward_bias1(float *dbias, const float *dout, int b, int t, int oc, int block_size) {
  matmul_backward_bias_kernel1<<<oc, block_size, block_size * sizeof(float)>>>(dbias, dout, b, t, oc);
}

static uint32_t lcg_state = 2024u;
static inline float lcg_float() {  // uniform in [-1, 1)
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (float)(lcg_state >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

int main() {
  const int rows = B * T;
  const size_t n = (size_t)rows * OC;
  int block_sizes[] = {32, 64, 128, 256, 512, 1024};
  const int nsizes = sizeof(block_sizes) / sizeof(int);
  printf("biasgrad: dout %d x %d float (%.0f MB), %d block sizes\n", rows, OC, n * 4.0 / 1e6, nsizes);
  std::vector<float> h_dout(n), h_dbias(OC);
  for (size_t i = 0; i < n; ++i) h_dout[i] = lcg_float();
  std::vector<double> ref(OC, 0.0), refabs(OC, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < OC; ++o) {
      ref[o] += h_dout[(size_t)r * OC + o];
      refabs[o] += fabs(h_dout[(size_t)r * OC + o]);
    }
  float *d_dout, *d_dbias;
  CUDA_CHECK(cudaMalloc(&d_dout, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_dbias, OC * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_dout, h_dout.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));

  bool all_ok = true;
  double total_ms = 0.0;
  for (int j = 0; j < nsizes; j++) {
    int block_size = block_sizes[j];
    // the check: one launch from zero against the double CPU sums
    CUDA_CHECK(cudaMemset(d_dbias, 0, OC * sizeof(float)));
    matmul_backward_bias1(d_dbias, d_dout, B, T, OC, block_size);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(h_dbias.data(), d_dbias, OC * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    double max_err = 0.0;
    for (int o = 0; o < OC; ++o) {
      double err = fabs(h_dbias[o] - ref[o]);
      max_err = std::max(max_err, err / (refabs[o] + 1e-30));
      if (err > 1e-5 * refabs[o] + 1e-6) ++bad;
    }
    bool ok = bad == 0;
    all_ok = all_ok && ok;
    // the timer: warm-up, then NUM_REPS repetitions of ITERS_PER_REP launches
    matmul_backward_bias1(d_dbias, d_dout, B, T, OC, block_size);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> times;
    for (int r = 0; r < NUM_REPS; ++r) {
      CUDA_CHECK(cudaEventRecord(start));
      for (int it = 0; it < ITERS_PER_REP; ++it) matmul_backward_bias1(d_dbias, d_dout, B, T, OC, block_size);
      CUDA_CHECK(cudaEventRecord(stop));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float ms;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      times.push_back(ms / ITERS_PER_REP);
    }
    CUDA_CHECK(cudaGetLastError());
    std::sort(times.begin(), times.end());
    float median = times[times.size() / 2];
    total_ms += median;
    if (!ok) printf("biasgrad: block %d: %d of %d channels differ\n", block_size, bad, OC);
    printf("biasgrad: block %4d: %.4f ms per launch, max rel err %.3g\n", block_size, median, max_err);
    printf("NVCC_PLUS_BENCH block=%d kernel_ms=%.5f check=%s\n", block_size, median, ok ? "PASS" : "FAIL");
  }
  printf("NVCC_PLUS_BENCH kernel_ms=%.5f check=%s\n", total_ms, all_ok ? "PASS" : "FAIL");
  cudaFree(d_dout);
  cudaFree(d_dbias);
  return all_ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
