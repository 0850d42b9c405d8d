// Naive GEMM C = A B, written the way naive open-source CUDA code writes it: plain pointers, 2-D
// blocks of 16x16, one thread per element of C, the dot product accumulated in a local:
//   for (k = 0; k < K; k++) acc += A[row*K + k] * B[k*N + col];
// The 16 threads of a block row all load the same A[row*K + k], the 16 threads of a block column
// the same B[k*N + col]: the shared operands of issue 27.
//   naive_gemm: launched at 1024 x 1024 x 1024 and at 1000 x 1000 x 1000 (not a multiple of the
//               16x16 tile: partial blocks on the right and at the bottom, a k tail). The second
//               launch reads the first 1000*1000 elements of the same A and B buffers.
// Each launch has its own cudaEvent timer; the kernel's time in a repetition is the sum of its two
// launches. C is NaN-filled (untimed) before every repetition.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define M1 1024
#define N1 1024
#define K1 1024
#define M2 1000
#define N2 1000
#define K2 1000
#define TILE 16
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

__global__ void naive_gemm(const float *A, const float *B, float *C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
      acc += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
  }
}

static uint32_t lcg_state = 1000u;
static inline uint32_t lcg_next() {
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return lcg_state >> 8;
}
static inline float lcg_float() {  // uniform in [-1, 1)
  return (float)lcg_next() * (2.0f / 16777216.0f) - 1.0f;
}

static float median_of(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One entry of C (M x N, from A M x K and B K x N) against a double-precision CPU sum, the
// tolerance relative to the sum of the terms' magnitudes (float32 over 1024 terms: a float32
// emulation of the GPU's fma chain puts the worst checked error at 0.02 of it).
static bool entry_ok(const float *a, const float *b, const float *c, int N, int K, int i, int j, const char *what,
                     int *bad) {
  double ref = 0, mag = 0;
  for (int k = 0; k < K; ++k) {
    double t = (double)a[(size_t)i * K + k] * b[(size_t)k * N + j];
    ref += t;
    mag += fabs(t);
  }
  float got = c[(size_t)i * N + j];
  if (!(fabs(got - ref) <= 1e-5 * mag + 1e-6)) {
    if (*bad < 5) printf("naivegemm: %s C[%d][%d] gpu %.9g ref %.9g\n", what, i, j, got, ref);
    ++*bad;
    return false;
  }
  return true;
}

// Every entry finite (none left NaN), rows 0 and M-1 and columns 0 and N-1 whole, and
// CHECK_SAMPLES entries drawn from the LCG. Returns the number of mismatches.
static int check_c(const float *a, const float *b, const float *c, int M, int N, int K, const char *what) {
  int bad = 0, unwritten = 0;
  for (size_t e = 0; e < (size_t)M * N; ++e)
    if (!std::isfinite(c[e])) ++unwritten;
  if (unwritten) printf("naivegemm: %s %d entries not finite (not written)\n", what, unwritten);
  for (int j = 0; j < N; ++j) {
    entry_ok(a, b, c, N, K, 0, j, what, &bad);
    entry_ok(a, b, c, N, K, M - 1, j, what, &bad);
  }
  for (int i = 1; i < M - 1; ++i) {
    entry_ok(a, b, c, N, K, i, 0, what, &bad);
    entry_ok(a, b, c, N, K, i, N - 1, what, &bad);
  }
  for (int s = 0; s < CHECK_SAMPLES; ++s) {
    int i = lcg_next() % M, j = lcg_next() % N;
    entry_ok(a, b, c, N, K, i, j, what, &bad);
  }
  return bad + unwritten;
}

int main() {
  printf("naivegemm: %dx%dx%d and %dx%dx%d, blocks %dx%d\n", M1, N1, K1, M2, N2, K2, TILE, TILE);
  std::vector<float> a((size_t)M1 * K1), b((size_t)K1 * N1);
  for (auto &v : a) v = lcg_float();
  for (auto &v : b) v = lcg_float();

  float *a_gpu, *b_gpu, *c1_gpu, *c2_gpu;
  CUDA_CHECK(cudaMalloc(&a_gpu, a.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b_gpu, b.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&c1_gpu, (size_t)M1 * N1 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&c2_gpu, (size_t)M2 * N2 * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(a_gpu, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b_gpu, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));

  dim3 block(TILE, TILE);
  dim3 grid1((N1 + TILE - 1) / TILE, (M1 + TILE - 1) / TILE), grid2((N2 + TILE - 1) / TILE, (M2 + TILE - 1) / TILE);
  cudaEvent_t ev[4];
  for (auto &e : ev) CUDA_CHECK(cudaEventCreate(&e));
  std::vector<float> t, t1, t2;
  for (int r = 0; r <= NUM_REPS; ++r) {  // repetition 0 is the warm-up
    CUDA_CHECK(cudaMemset(c1_gpu, 0xff, (size_t)M1 * N1 * sizeof(float)));  // NaN
    CUDA_CHECK(cudaMemset(c2_gpu, 0xff, (size_t)M2 * N2 * sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventRecord(ev[0]));
    naive_gemm<<<grid1, block>>>(a_gpu, b_gpu, c1_gpu, M1, N1, K1);
    CUDA_CHECK(cudaEventRecord(ev[1]));
    CUDA_CHECK(cudaEventRecord(ev[2]));
    naive_gemm<<<grid2, block>>>(a_gpu, b_gpu, c2_gpu, M2, N2, K2);
    CUDA_CHECK(cudaEventRecord(ev[3]));
    CUDA_CHECK(cudaEventSynchronize(ev[3]));
    CUDA_CHECK(cudaGetLastError());
    float ms1, ms2;
    CUDA_CHECK(cudaEventElapsedTime(&ms1, ev[0], ev[1]));
    CUDA_CHECK(cudaEventElapsedTime(&ms2, ev[2], ev[3]));
    if (r > 0) {
      t1.push_back(ms1);
      t2.push_back(ms2);
      t.push_back(ms1 + ms2);
    }
  }
  float med = median_of(t), med1 = median_of(t1), med2 = median_of(t2);

  std::vector<float> g1((size_t)M1 * N1), g2((size_t)M2 * N2);
  CUDA_CHECK(cudaMemcpy(g1.data(), c1_gpu, g1.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(g2.data(), c2_gpu, g2.size() * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = check_c(a.data(), b.data(), g1.data(), M1, N1, K1, "launch 1");
  bad += check_c(a.data(), b.data(), g2.data(), M2, N2, K2, "launch 2");
  if (bad) printf("naivegemm: %d mismatches\n", bad);
  printf("naivegemm: naive_gemm %.4f ms (%dx%dx%d %.4f ms, %.1f GFLOP/s; %dx%dx%d %.4f ms) (median of %d)\n", med,
         M1, N1, K1, med1, 2.0 * M1 * N1 * (double)K1 / 1e9 / (med1 * 1e-3), M2, N2, K2, med2, NUM_REPS);
  printf("NVCC_PLUS_BENCH kernel=naive_gemm kernel_ms=%.5f check=%s\n", med, bad ? "FAIL" : "PASS");
  printf("NVCC_PLUS_BENCH kernel_ms=%.5f check=%s\n", med, bad ? "FAIL" : "PASS");
  cudaFree(a_gpu); cudaFree(b_gpu); cudaFree(c1_gpu); cudaFree(c2_gpu);
  return bad ? EXIT_FAILURE : EXIT_SUCCESS;
}
