// Single-precision GEMM C = alpha*A*B + beta*C, row-major, in the classic textbook / CUDA
// samples "matrixMul" form: a naive kernel and a 16x16 shared-memory tiled kernel, followed by
// a bias + ReLU epilogue as a separate element-wise kernel (as in a small MLP layer).
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define M_DIM 2048
#define N_DIM 2048
#define K_DIM 2048
#define TILE 16
#define NUM_REPS 10

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, \
              __LINE__);                                                              \
      exit(EXIT_FAILURE);                                                             \
    }                                                                                 \
  } while (0)

__global__ void sgemm_naive(int M, int N, int K, float alpha, const float *A, const float *B,
                            float beta, float *C) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = alpha * acc + beta * C[row * N + col];
  }
}

__global__ void sgemm_tiled(int M, int N, int K, float alpha, const float *A, const float *B,
                            float beta, float *C) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty;
  int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    int ak = t * TILE + tx, bk = t * TILE + ty;
    As[ty][tx] = (row < M && ak < K) ? A[row * K + ak] : 0.0f;
    Bs[ty][tx] = (bk < K && col < N) ? B[bk * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = alpha * acc + beta * C[row * N + col];
}

__global__ void bias_relu(float *out, const float *in, const float *bias, int rows, int cols) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < rows * cols) {
    float v = in[idx] + bias[idx % cols];
    out[idx] = v > 0.0f ? v : 0.0f;
  }
}

static uint32_t lcg_state = 2024u;
static inline float lcg_float() {  // uniform in [-1, 1)
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (float)(lcg_state >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

int main() {
  const int M = M_DIM, N = N_DIM, K = K_DIM;
  const float alpha = 1.0f, beta = 0.0f;
  printf("sgemm: M=%d N=%d K=%d, tile %d\n", M, N, K, TILE);
  std::vector<float> hA((size_t)M * K), hB((size_t)K * N), hBias(N);
  std::vector<float> hC1((size_t)M * N), hC2((size_t)M * N), hOut((size_t)M * N);
  for (auto &v : hA) v = lcg_float();
  for (auto &v : hB) v = lcg_float();
  for (auto &v : hBias) v = 0.5f * lcg_float();

  float *dA, *dB, *dC1, *dC2, *dBias, *dOut;
  CUDA_CHECK(cudaMalloc(&dA, hA.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dB, hB.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dC1, hC1.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dC2, hC2.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dOut, hOut.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dBias, hBias.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dA, hA.data(), hA.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dB, hB.data(), hB.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dBias, hBias.data(), hBias.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dC1, 0, hC1.size() * sizeof(float)));
  CUDA_CHECK(cudaMemset(dC2, 0, hC2.size() * sizeof(float)));

  dim3 block(TILE, TILE);
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  int ethreads = 256, eblocks = (M * N + ethreads - 1) / ethreads;
  auto run_once = [&]() {
    sgemm_naive<<<grid, block>>>(M, N, K, alpha, dA, dB, beta, dC1);
    sgemm_tiled<<<grid, block>>>(M, N, K, alpha, dA, dB, beta, dC2);
    bias_relu<<<eblocks, ethreads>>>(dOut, dC2, dBias, M, N);
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
    run_once();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  CUDA_CHECK(cudaGetLastError());
  std::sort(times.begin(), times.end());
  float median = times[times.size() / 2];

  CUDA_CHECK(cudaMemcpy(hC1.data(), dC1, hC1.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(hC2.data(), dC2, hC2.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(hOut.data(), dOut, hOut.size() * sizeof(float), cudaMemcpyDeviceToHost));

  // Check: 2048 sampled entries against a double-precision CPU dot product (error bound scaled
  // by sum |a||b|), the naive and tiled results against each other everywhere, and the epilogue.
  bool ok = true;
  int bad = 0;
  for (int s = 0; s < 2048; ++s) {
    lcg_state = lcg_state * 1664525u + 1013904223u;
    int i = (lcg_state >> 8) % M;
    lcg_state = lcg_state * 1664525u + 1013904223u;
    int j = (lcg_state >> 8) % N;
    double ref = 0.0, mag = 0.0;
    for (int k = 0; k < K; ++k) {
      ref += (double)hA[(size_t)i * K + k] * hB[(size_t)k * N + j];
      mag += fabs((double)hA[(size_t)i * K + k] * hB[(size_t)k * N + j]);
    }
    double tol = 1e-5 * mag + 1e-6;
    if (fabs(hC1[(size_t)i * N + j] - ref) > tol || fabs(hC2[(size_t)i * N + j] - ref) > tol) {
      if (bad < 5) printf("sgemm: C[%d][%d] naive %f tiled %f ref %f\n", i, j, hC1[(size_t)i * N + j],
                          hC2[(size_t)i * N + j], ref);
      ++bad;
    }
  }
  for (size_t idx = 0; idx < hC1.size(); ++idx) {
    float a = hC1[idx], b = hC2[idx];
    if (fabsf(a - b) > 1e-3f * (1.0f + fabsf(a))) ++bad;
    float v = hC2[idx] + hBias[idx % N];
    if (hOut[idx] != (v > 0.0f ? v : 0.0f)) ++bad;
  }
  if (bad) { ok = false; printf("sgemm: %d mismatches\n", bad); }
  double gflop = 2.0 * 2.0 * M * N * (double)K / 1e9;
  printf("sgemm: median %.3f ms per rep (naive + tiled + epilogue), %.1f GFLOP/s average\n", median,
         gflop / (median * 1e-3));
  printf("NVCC_PLUS_BENCH kernel_ms=%.4f check=%s\n", median, ok ? "PASS" : "FAIL");
  cudaFree(dA); cudaFree(dB); cudaFree(dC1); cudaFree(dC2); cudaFree(dOut); cudaFree(dBias);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
