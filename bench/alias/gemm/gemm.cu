// Naive GEMM C = alpha*A*B + beta*C (PolyBench-GPU "gemm"), written as PolyBench-GPU writes it:
// plain float pointers, a 2-D grid of 32x8 blocks, one thread per element of C, the product
// accumulated directly in C in global memory (c[i*NJ + j] += ... inside the k loop).
// C is reset (untimed) to its initial values before every repetition.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define NI 1024
#define NJ 1024
#define NK 1024
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8
#define ALPHA 32412.0f
#define BETA 2123.0f
#define NUM_REPS 10
#define CHECK_SAMPLES 4096

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, \
              __LINE__);                                                              \
      exit(EXIT_FAILURE);                                                             \
    }                                                                                 \
  } while (0)

__global__ void gemm_kernel(float *a, float *b, float *c) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;

  if ((i < NI) && (j < NJ)) {
    c[i * NJ + j] *= BETA;
    int k;
    for (k = 0; k < NK; k++) {
      c[i * NJ + j] += ALPHA * a[i * NK + k] * b[k * NJ + j];
    }
  }
}

static uint32_t lcg_state = 1024u;
static inline float lcg_float() {  // uniform in [-1, 1)
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (float)(lcg_state >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

int main() {
  printf("gemm: NI=%d NJ=%d NK=%d, blocks %dx%d\n", NI, NJ, NK, DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
  std::vector<float> a((size_t)NI * NK), b((size_t)NK * NJ), c((size_t)NI * NJ), g((size_t)NI * NJ);
  for (auto &v : a) v = lcg_float();
  for (auto &v : b) v = lcg_float();
  for (auto &v : c) v = lcg_float();

  float *a_gpu, *b_gpu, *c_gpu, *c_init;
  CUDA_CHECK(cudaMalloc(&a_gpu, a.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b_gpu, b.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&c_gpu, c.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&c_init, c.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(a_gpu, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b_gpu, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(c_init, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice));

  dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
  dim3 grid((NJ + DIM_THREAD_BLOCK_X - 1) / DIM_THREAD_BLOCK_X, (NI + DIM_THREAD_BLOCK_Y - 1) / DIM_THREAD_BLOCK_Y);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int r = 0; r <= NUM_REPS; ++r) {  // repetition 0 is the warm-up
    CUDA_CHECK(cudaMemcpy(c_gpu, c_init, c.size() * sizeof(float), cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventRecord(start));
    gemm_kernel<<<grid, block>>>(a_gpu, b_gpu, c_gpu);
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaGetLastError());
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r > 0) times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  float median = times[times.size() / 2];
  CUDA_CHECK(cudaMemcpy(g.data(), c_gpu, g.size() * sizeof(float), cudaMemcpyDeviceToHost));

  // Check: sampled entries (the four corners among them) against a double-precision CPU sum,
  // the tolerance relative to the sum of the terms' magnitudes.
  int bad = 0;
  for (int s = 0; s < CHECK_SAMPLES; ++s) {
    int i, j;
    if (s < 4) {
      i = (s & 1) ? NI - 1 : 0;
      j = (s & 2) ? NJ - 1 : 0;
    } else {
      lcg_state = lcg_state * 1664525u + 1013904223u;
      i = (lcg_state >> 8) % NI;
      lcg_state = lcg_state * 1664525u + 1013904223u;
      j = (lcg_state >> 8) % NJ;
    }
    double ref = (double)c[(size_t)i * NJ + j] * BETA, mag = fabs(ref);
    for (int k = 0; k < NK; ++k) {
      double t = (double)ALPHA * a[(size_t)i * NK + k] * b[(size_t)k * NJ + j];
      ref += t;
      mag += fabs(t);
    }
    float got = g[(size_t)i * NJ + j];
    if (!(fabs(got - ref) <= 1e-5 * mag + 1e-6)) {
      if (bad < 5) printf("gemm: C[%d][%d] gpu %f ref %f\n", i, j, got, ref);
      ++bad;
    }
  }
  if (bad) printf("gemm: %d of %d sampled entries wrong\n", bad, CHECK_SAMPLES);
  printf("gemm: gemm_kernel %.4f ms (median of %d), %.1f GFLOP/s\n", median, NUM_REPS,
         2.0 * NI * NJ * (double)NK / 1e9 / (median * 1e-3));
  printf("NVCC_PLUS_BENCH kernel=gemm_kernel kernel_ms=%.5f check=%s\n", median, bad ? "FAIL" : "PASS");
  printf("NVCC_PLUS_BENCH kernel_ms=%.5f check=%s\n", median, bad ? "FAIL" : "PASS");
  cudaFree(a_gpu); cudaFree(b_gpu); cudaFree(c_gpu); cudaFree(c_init);
  return bad ? EXIT_FAILURE : EXIT_SUCCESS;
}
