// BiCG sub-kernels (PolyBench-GPU "bicg"): s = A^T r and q = A p, written as PolyBench-GPU
// writes them: plain float pointers, one thread per output element, the output zeroed and the
// sum accumulated directly in it in global memory (s[j] += ... inside the loop).
//   bicg_kernel1: one thread per column of A (s[j] += A[i*NY + j] * r[i]: coalesced)
//   bicg_kernel2: one thread per row of A    (q[i] += A[i*NY + j] * p[j]: a row per thread)
// Each kernel has its own cudaEvent timer.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define NX 4096
#define NY 4096
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

__global__ void bicg_kernel1(float *A, float *r, float *s) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;

  if (j < NY) {
    s[j] = 0.0f;
    int i;
    for (i = 0; i < NX; i++) {
      s[j] += A[i * NY + j] * r[i];
    }
  }
}

__global__ void bicg_kernel2(float *A, float *p, float *q) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;

  if (i < NX) {
    q[i] = 0.0f;
    int j;
    for (j = 0; j < NY; j++) {
      q[i] += A[i * NY + j] * p[j];
    }
  }
}

static uint32_t lcg_state = 8192u;
static inline float lcg_float() {  // uniform in [-1, 1)
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (float)(lcg_state >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

static float median_of(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  printf("bicg: NX=%d NY=%d (A %zu MB), block %d\n", NX, NY, (size_t)NX * NY * sizeof(float) >> 20,
         DIM_THREAD_BLOCK_X);
  std::vector<float> A((size_t)NX * NY), r(NX), p(NY);
  for (auto &v : A) v = lcg_float();
  for (auto &v : r) v = lcg_float();
  for (auto &v : p) v = lcg_float();

  float *A_gpu, *r_gpu, *p_gpu, *s_gpu, *q_gpu;
  CUDA_CHECK(cudaMalloc(&A_gpu, A.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&r_gpu, NX * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&p_gpu, NY * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&s_gpu, NY * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&q_gpu, NX * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(A_gpu, A.data(), A.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(r_gpu, r.data(), NX * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(p_gpu, p.data(), NY * sizeof(float), cudaMemcpyHostToDevice));

  dim3 block(DIM_THREAD_BLOCK_X, 1);
  dim3 grid1((NY + DIM_THREAD_BLOCK_X - 1) / DIM_THREAD_BLOCK_X, 1);
  dim3 grid2((NX + DIM_THREAD_BLOCK_X - 1) / DIM_THREAD_BLOCK_X, 1);
  cudaEvent_t ev[4];
  for (auto &e : ev) CUDA_CHECK(cudaEventCreate(&e));
  std::vector<float> t1, t2;
  for (int rep = 0; rep <= NUM_REPS; ++rep) {  // repetition 0 is the warm-up
    CUDA_CHECK(cudaMemset(s_gpu, 0xff, NY * sizeof(float)));  // NaN: the kernels must overwrite
    CUDA_CHECK(cudaMemset(q_gpu, 0xff, NX * sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventRecord(ev[0]));
    bicg_kernel1<<<grid1, block>>>(A_gpu, r_gpu, s_gpu);
    CUDA_CHECK(cudaEventRecord(ev[1]));
    CUDA_CHECK(cudaEventRecord(ev[2]));
    bicg_kernel2<<<grid2, block>>>(A_gpu, p_gpu, q_gpu);
    CUDA_CHECK(cudaEventRecord(ev[3]));
    CUDA_CHECK(cudaEventSynchronize(ev[3]));
    CUDA_CHECK(cudaGetLastError());
    float ms1, ms2;
    CUDA_CHECK(cudaEventElapsedTime(&ms1, ev[0], ev[1]));
    CUDA_CHECK(cudaEventElapsedTime(&ms2, ev[2], ev[3]));
    if (rep > 0) {
      t1.push_back(ms1);
      t2.push_back(ms2);
    }
  }
  float med1 = median_of(t1), med2 = median_of(t2);

  std::vector<float> gs(NY), gq(NX);
  CUDA_CHECK(cudaMemcpy(gs.data(), s_gpu, NY * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(gq.data(), q_gpu, NX * sizeof(float), cudaMemcpyDeviceToHost));

  // Check: every element against a double-precision CPU sum, the tolerance relative to the sum
  // of the terms' magnitudes.
  int bad1 = 0, bad2 = 0;
  std::vector<double> rs(NY, 0.0), ms(NY, 0.0);
  for (int i = 0; i < NX; i++) {
    double ref = 0.0, mag = 0.0;
    for (int j = 0; j < NY; j++) {
      double t = (double)A[(size_t)i * NY + j] * p[j];
      ref += t;
      mag += fabs(t);
      double u = (double)A[(size_t)i * NY + j] * r[i];
      rs[j] += u;
      ms[j] += fabs(u);
    }
    if (!(fabs(gq[i] - ref) <= 1e-5 * mag + 1e-6)) {
      if (bad2 < 5) printf("bicg: q[%d] gpu %f ref %f\n", i, gq[i], ref);
      ++bad2;
    }
  }
  for (int j = 0; j < NY; j++) {
    if (!(fabs(gs[j] - rs[j]) <= 1e-5 * ms[j] + 1e-6)) {
      if (bad1 < 5) printf("bicg: s[%d] gpu %f ref %f\n", j, gs[j], rs[j]);
      ++bad1;
    }
  }
  if (bad1 || bad2) printf("bicg: %d + %d mismatches\n", bad1, bad2);
  printf("bicg: bicg_kernel1 %.4f ms, bicg_kernel2 %.4f ms (median of %d)\n", med1, med2, NUM_REPS);
  printf("NVCC_PLUS_BENCH kernel=bicg_kernel1 kernel_ms=%.5f check=%s\n", med1, bad1 ? "FAIL" : "PASS");
  printf("NVCC_PLUS_BENCH kernel=bicg_kernel2 kernel_ms=%.5f check=%s\n", med2, bad2 ? "FAIL" : "PASS");
  bool ok = !bad1 && !bad2;
  printf("NVCC_PLUS_BENCH kernel_ms=%.5f check=%s\n", med1 + med2, ok ? "PASS" : "FAIL");
  cudaFree(A_gpu); cudaFree(r_gpu); cudaFree(p_gpu); cudaFree(s_gpu); cudaFree(q_gpu);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
