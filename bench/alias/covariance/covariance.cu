// Covariance of the M columns of an N x M data matrix (PolyBench-GPU "covariance"), written as
// PolyBench-GPU writes it: plain float pointers, one thread per output, the sums accumulated
// directly in global memory:
//   mean_kernel:   one thread per column j, mean[j] += data[i*M + j] over the rows, then / N
//   reduce_kernel: 2-D grid of 32x8 blocks, data[i*M + j] -= mean[j]           (no accumulation)
//   covar_kernel:  one thread per column j1, for j2 = j1 .. M-1:
//                  symmat[j1*M + j2] += data[i*M + j1] * data[i*M + j2] over the rows, then the
//                  mirror symmat[j2*M + j1] = symmat[j1*M + j2]
// Each kernel has its own cudaEvent timer; the data matrix is reset (untimed) before every
// repetition (reduce_kernel centres it in place).
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define M 512
#define N 512
#define FLOAT_N ((float)N)
#define DIM_THREAD_BLOCK_KERNEL_1_X 256
#define DIM_THREAD_BLOCK_KERNEL_2_X 32
#define DIM_THREAD_BLOCK_KERNEL_2_Y 8
#define DIM_THREAD_BLOCK_KERNEL_3_X 256
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

__global__ void mean_kernel(float *mean, float *data) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;

  if (j < M) {
    mean[j] = 0.0f;
    int i;
    for (i = 0; i < N; i++) {
      mean[j] += data[i * M + j];
    }
    mean[j] /= FLOAT_N;
  }
}

__global__ void reduce_kernel(float *mean, float *data) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;

  if ((i < N) && (j < M)) {
    data[i * M + j] -= mean[j];
  }
}

__global__ void covar_kernel(float *symmat, float *data) {
  int j1 = blockIdx.x * blockDim.x + threadIdx.x;
  int i, j2;

  if (j1 < M) {
    for (j2 = j1; j2 < M; j2++) {
      symmat[j1 * M + j2] = 0.0f;
      for (i = 0; i < N; i++) {
        symmat[j1 * M + j2] += data[i * M + j1] * data[i * M + j2];
      }
      symmat[j2 * M + j1] = symmat[j1 * M + j2];
    }
  }
}

static uint32_t lcg_state = 512u;
static inline float lcg_float01() {  // uniform in [0, 1)
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (float)(lcg_state >> 8) * (1.0f / 16777216.0f);
}

static float median_of(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  printf("covariance: N=%d rows x M=%d columns\n", N, M);
  std::vector<float> data((size_t)N * M);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < M; j++) data[(size_t)i * M + j] = lcg_float01() + 0.25f * (j % 5);

  float *data_gpu, *data_init, *mean_gpu, *symmat_gpu;
  CUDA_CHECK(cudaMalloc(&data_gpu, data.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&data_init, data.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&mean_gpu, M * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&symmat_gpu, (size_t)M * M * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(data_init, data.data(), data.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(symmat_gpu, 0, (size_t)M * M * sizeof(float)));

  dim3 block1(DIM_THREAD_BLOCK_KERNEL_1_X, 1);
  dim3 grid1((M + DIM_THREAD_BLOCK_KERNEL_1_X - 1) / DIM_THREAD_BLOCK_KERNEL_1_X, 1);
  dim3 block2(DIM_THREAD_BLOCK_KERNEL_2_X, DIM_THREAD_BLOCK_KERNEL_2_Y);
  dim3 grid2((M + DIM_THREAD_BLOCK_KERNEL_2_X - 1) / DIM_THREAD_BLOCK_KERNEL_2_X,
             (N + DIM_THREAD_BLOCK_KERNEL_2_Y - 1) / DIM_THREAD_BLOCK_KERNEL_2_Y);
  dim3 block3(DIM_THREAD_BLOCK_KERNEL_3_X, 1);
  dim3 grid3((M + DIM_THREAD_BLOCK_KERNEL_3_X - 1) / DIM_THREAD_BLOCK_KERNEL_3_X, 1);

  cudaEvent_t ev[6];
  for (auto &e : ev) CUDA_CHECK(cudaEventCreate(&e));
  std::vector<float> t1, t2, t3;
  for (int r = 0; r <= NUM_REPS; ++r) {  // repetition 0 is the warm-up
    CUDA_CHECK(cudaMemcpy(data_gpu, data_init, data.size() * sizeof(float), cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventRecord(ev[0]));
    mean_kernel<<<grid1, block1>>>(mean_gpu, data_gpu);
    CUDA_CHECK(cudaEventRecord(ev[1]));
    CUDA_CHECK(cudaEventRecord(ev[2]));
    reduce_kernel<<<grid2, block2>>>(mean_gpu, data_gpu);
    CUDA_CHECK(cudaEventRecord(ev[3]));
    CUDA_CHECK(cudaEventRecord(ev[4]));
    covar_kernel<<<grid3, block3>>>(symmat_gpu, data_gpu);
    CUDA_CHECK(cudaEventRecord(ev[5]));
    CUDA_CHECK(cudaEventSynchronize(ev[5]));
    CUDA_CHECK(cudaGetLastError());
    float ms1, ms2, ms3;
    CUDA_CHECK(cudaEventElapsedTime(&ms1, ev[0], ev[1]));
    CUDA_CHECK(cudaEventElapsedTime(&ms2, ev[2], ev[3]));
    CUDA_CHECK(cudaEventElapsedTime(&ms3, ev[4], ev[5]));
    if (r > 0) {
      t1.push_back(ms1);
      t2.push_back(ms2);
      t3.push_back(ms3);
    }
  }
  float med1 = median_of(t1), med2 = median_of(t2), med3 = median_of(t3);

  std::vector<float> gmean(M), gdata((size_t)N * M), gsym((size_t)M * M);
  CUDA_CHECK(cudaMemcpy(gmean.data(), mean_gpu, M * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(gdata.data(), data_gpu, gdata.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(gsym.data(), symmat_gpu, gsym.size() * sizeof(float), cudaMemcpyDeviceToHost));

  // Check each kernel against a double-precision CPU reference from that kernel's own inputs
  // (the GPU's mean for the centring, the GPU's centred data for the covariance), the
  // tolerances relative to the sum of the terms' magnitudes.
  int bad1 = 0, bad2 = 0, bad3 = 0;
  for (int j = 0; j < M; j++) {
    double ref = 0.0, mag = 0.0;
    for (int i = 0; i < N; i++) {
      ref += data[(size_t)i * M + j];
      mag += fabs((double)data[(size_t)i * M + j]);
    }
    ref /= N;
    if (!(fabs(gmean[j] - ref) <= (3e-5 * mag + 1e-6) / N + 1e-7 * fabs(ref))) {
      if (bad1 < 5) printf("covariance: mean[%d] gpu %f ref %f\n", j, gmean[j], ref);
      ++bad1;
    }
  }
  for (size_t idx = 0; idx < gdata.size(); idx++) {
    int j = (int)(idx % M);
    double ref = (double)data[idx] - gmean[j];
    if (!(fabs(gdata[idx] - ref) <= 1e-6 * (fabs((double)data[idx]) + fabs((double)gmean[j])))) {
      if (bad2 < 5) printf("covariance: data[%zu] gpu %f ref %f\n", idx, gdata[idx], ref);
      ++bad2;
    }
  }
  for (int j1 = 0; j1 < M; j1++) {
    for (int j2 = j1; j2 < M; j2++) {
      double ref = 0.0, mag = 0.0;
      for (int i = 0; i < N; i++) {
        double t = (double)gdata[(size_t)i * M + j1] * gdata[(size_t)i * M + j2];
        ref += t;
        mag += fabs(t);
      }
      float got = gsym[(size_t)j1 * M + j2];
      if (!(fabs(got - ref) <= 1e-5 * mag + 1e-6) || gsym[(size_t)j2 * M + j1] != got) {
        if (bad3 < 5) printf("covariance: symmat[%d][%d] gpu %f (mirror %f) ref %f\n", j1, j2, got,
                             gsym[(size_t)j2 * M + j1], ref);
        ++bad3;
      }
    }
  }
  if (bad1 || bad2 || bad3) printf("covariance: %d + %d + %d mismatches\n", bad1, bad2, bad3);
  printf("covariance: mean_kernel %.4f ms, reduce_kernel %.4f ms, covar_kernel %.4f ms (median of %d)\n",
         med1, med2, med3, NUM_REPS);
  printf("NVCC_PLUS_BENCH kernel=mean_kernel kernel_ms=%.5f check=%s\n", med1, bad1 ? "FAIL" : "PASS");
  printf("NVCC_PLUS_BENCH kernel=reduce_kernel kernel_ms=%.5f check=%s\n", med2, bad2 ? "FAIL" : "PASS");
  printf("NVCC_PLUS_BENCH kernel=covar_kernel kernel_ms=%.5f check=%s\n", med3, bad3 ? "FAIL" : "PASS");
  bool ok = !bad1 && !bad2 && !bad3;
  printf("NVCC_PLUS_BENCH kernel_ms=%.5f check=%s\n", med1 + med2 + med3, ok ? "PASS" : "FAIL");
  cudaFree(data_gpu); cudaFree(data_init); cudaFree(mean_gpu); cudaFree(symmat_gpu);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
