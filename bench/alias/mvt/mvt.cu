// Matrix-vector product and transpose (PolyBench-GPU "mvt"): x1 += A y1 and x2 += A^T y2, written
// as PolyBench-GPU writes it: plain float pointers, one thread per output element, the sum
// accumulated directly in the output vector in global memory (x1[i] += ... inside the loop).
//   mvt_kernel1: one thread per row    (walks a row of A: addresses 1 float apart per thread)
//   mvt_kernel2: one thread per column (walks a column of A: coalesced across the warp)
// Each kernel has its own cudaEvent timer; the outputs are reset (untimed) before every
// repetition, so every repetition computes the same thing from the same inputs.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define N 4096
#define DIM_THREAD_BLOCK_X 256
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

__global__ void mvt_kernel1(float *a, float *x1, float *y_1) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) {
    int j;
    for (j = 0; j < N; j++) {
      x1[i] += a[i * N + j] * y_1[j];
    }
  }
}

__global__ void mvt_kernel2(float *a, float *x2, float *y_2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) {
    int j;
    for (j = 0; j < N; j++) {
      x2[i] += a[j * N + i] * y_2[j];
    }
  }
}

static uint32_t lcg_state = 4096u;
static inline float lcg_float() {  // uniform in [-1, 1)
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (float)(lcg_state >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

static float median_of(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  printf("mvt: N=%d (A %zu MB), block %d\n", N, (size_t)N * N * sizeof(float) >> 20, DIM_THREAD_BLOCK_X);
  std::vector<float> a((size_t)N * N), x1(N), x2(N), y1(N), y2(N);
  for (auto &v : a) v = lcg_float();
  for (int i = 0; i < N; i++) {
    x1[i] = lcg_float();
    x2[i] = lcg_float();
    y1[i] = lcg_float();
    y2[i] = lcg_float();
  }

  float *a_gpu, *x1_gpu, *x2_gpu, *y1_gpu, *y2_gpu, *x1_init, *x2_init;
  CUDA_CHECK(cudaMalloc(&a_gpu, a.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&x1_gpu, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&x2_gpu, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y1_gpu, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y2_gpu, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&x1_init, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&x2_init, N * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(a_gpu, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(x1_init, x1.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(x2_init, x2.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(y1_gpu, y1.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(y2_gpu, y2.data(), N * sizeof(float), cudaMemcpyHostToDevice));

  dim3 block(DIM_THREAD_BLOCK_X, 1);
  dim3 grid((N + DIM_THREAD_BLOCK_X - 1) / DIM_THREAD_BLOCK_X, 1);
  cudaEvent_t ev[4];
  for (auto &e : ev) CUDA_CHECK(cudaEventCreate(&e));
  std::vector<float> t1, t2;
  for (int r = 0; r <= NUM_REPS; ++r) {  // repetition 0 is the warm-up
    CUDA_CHECK(cudaMemcpy(x1_gpu, x1_init, N * sizeof(float), cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemcpy(x2_gpu, x2_init, N * sizeof(float), cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventRecord(ev[0]));
    mvt_kernel1<<<grid, block>>>(a_gpu, x1_gpu, y1_gpu);
    CUDA_CHECK(cudaEventRecord(ev[1]));
    CUDA_CHECK(cudaEventRecord(ev[2]));
    mvt_kernel2<<<grid, block>>>(a_gpu, x2_gpu, y2_gpu);
    CUDA_CHECK(cudaEventRecord(ev[3]));
    CUDA_CHECK(cudaEventSynchronize(ev[3]));
    CUDA_CHECK(cudaGetLastError());
    float ms1, ms2;
    CUDA_CHECK(cudaEventElapsedTime(&ms1, ev[0], ev[1]));
    CUDA_CHECK(cudaEventElapsedTime(&ms2, ev[2], ev[3]));
    if (r > 0) {
      t1.push_back(ms1);
      t2.push_back(ms2);
    }
  }
  float med1 = median_of(t1), med2 = median_of(t2);

  std::vector<float> g1(N), g2(N);
  CUDA_CHECK(cudaMemcpy(g1.data(), x1_gpu, N * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(g2.data(), x2_gpu, N * sizeof(float), cudaMemcpyDeviceToHost));

  // Check: every element against a double-precision CPU sum, the tolerance relative to the sum
  // of the terms' magnitudes (float accumulation over N terms, CPU vs GPU rounding).
  int bad1 = 0, bad2 = 0;
  std::vector<double> r2(N), m2(N);
  for (int i = 0; i < N; i++) {
    r2[i] = x2[i];
    m2[i] = fabs((double)x2[i]);
  }
  for (int i = 0; i < N; i++) {
    double ref = x1[i], mag = fabs((double)x1[i]);
    for (int j = 0; j < N; j++) {
      double t = (double)a[(size_t)i * N + j] * y1[j];
      ref += t;
      mag += fabs(t);
      double u = (double)a[(size_t)i * N + j] * y2[i];  // row i of A feeds x2[j] with y2[i]
      r2[j] += u;
      m2[j] += fabs(u);
    }
    if (!(fabs(g1[i] - ref) <= 1e-5 * mag + 1e-6)) {
      if (bad1 < 5) printf("mvt: x1[%d] gpu %f ref %f\n", i, g1[i], ref);
      ++bad1;
    }
  }
  for (int i = 0; i < N; i++) {
    if (!(fabs(g2[i] - r2[i]) <= 1e-5 * m2[i] + 1e-6)) {
      if (bad2 < 5) printf("mvt: x2[%d] gpu %f ref %f\n", i, g2[i], r2[i]);
      ++bad2;
    }
  }
  if (bad1 || bad2) printf("mvt: %d + %d mismatches\n", bad1, bad2);
  printf("mvt: mvt_kernel1 %.4f ms, mvt_kernel2 %.4f ms (median of %d)\n", med1, med2, NUM_REPS);
  printf("NVCC_PLUS_BENCH kernel=mvt_kernel1 kernel_ms=%.5f check=%s\n", med1, bad1 ? "FAIL" : "PASS");
  printf("NVCC_PLUS_BENCH kernel=mvt_kernel2 kernel_ms=%.5f check=%s\n", med2, bad2 ? "FAIL" : "PASS");
  bool ok = !bad1 && !bad2;
  printf("NVCC_PLUS_BENCH kernel_ms=%.5f check=%s\n", med1 + med2, ok ? "PASS" : "FAIL");
  cudaFree(a_gpu); cudaFree(x1_gpu); cudaFree(x2_gpu); cudaFree(y1_gpu); cudaFree(y2_gpu);
  cudaFree(x1_init); cudaFree(x2_init);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
