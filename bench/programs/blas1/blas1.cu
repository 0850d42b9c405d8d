// Level-1 BLAS in double precision, as written in HPC mini-apps (HPCG / mini-CG style):
// waxpby, daxpy, dscal (element-wise, grid-stride) and ddot / dnrm2 (grid-stride partial sums,
// block reduction in shared memory or with warp shuffles, one atomicAdd per block).
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define DEFAULT_N (16 * 1024 * 1024)
#define THREADS 256
#define ITERS_PER_REP 10
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

__global__ void waxpby(int n, double alpha, const double *x, double beta, const double *y,
                       double *w) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    w[i] = alpha * x[i] + beta * y[i];
}

__global__ void daxpy(int n, double a, const double *x, double *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void dscal(int n, double a, double *x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

__global__ void ddot(int n, const double *x, const double *y, double *result) {
  __shared__ double cache[THREADS];
  double temp = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    temp += x[i] * y[i];
  cache[threadIdx.x] = temp;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) cache[threadIdx.x] += cache[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(result, cache[0]);
}

__inline__ __device__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void dnrm2_sq(int n, const double *x, double *result) {
  __shared__ double warp_partial[THREADS / 32];
  double temp = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    temp += x[i] * x[i];
  temp = warp_sum(temp);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_partial[warp] = temp;
  __syncthreads();
  if (warp == 0) {
    temp = lane < blockDim.x / 32 ? warp_partial[lane] : 0.0;
    temp = warp_sum(temp);
    if (lane == 0) atomicAdd(result, temp);
  }
}

static uint64_t lcg_state = 88172645463325252ull;
static inline double lcg_double() {  // uniform in [-1, 1)
  lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(lcg_state >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : DEFAULT_N;
  printf("blas1: n = %d doubles (%.0f MB per vector)\n", n, n * 8.0 / 1e6);
  std::vector<double> hx(n), hy(n), hw(n), hx2(n), hy2(n);
  for (int i = 0; i < n; ++i) { hx[i] = lcg_double(); hy[i] = lcg_double(); }
  double *dx, *dy, *dw, *dres;
  CUDA_CHECK(cudaMalloc(&dx, n * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&dy, n * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&dw, n * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&dres, 2 * ITERS_PER_REP * sizeof(double)));
  auto upload = [&]() {
    CUDA_CHECK(cudaMemcpy(dx, hx.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dy, hy.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  };
  upload();
  int dev, sms;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int red_blocks = sms * 8;
  const int blocks = (n + THREADS - 1) / THREADS;
  const double alpha = 0.75, beta = -0.5, a = 0.125, s = 0.9990234375;
  // One iteration: w = alpha x + beta y; y += a w; x *= s; dot(x, y); |w|^2
  auto iteration = [&](int it) {
    waxpby<<<red_blocks, THREADS>>>(n, alpha, dx, beta, dy, dw);
    daxpy<<<blocks, THREADS>>>(n, a, dw, dy);
    dscal<<<blocks, THREADS>>>(n, s, dx);
    ddot<<<red_blocks, THREADS>>>(n, dx, dy, dres + 2 * it);
    dnrm2_sq<<<red_blocks, THREADS>>>(n, dw, dres + 2 * it + 1);
  };
  auto rep = [&]() {
    CUDA_CHECK(cudaMemsetAsync(dres, 0, 2 * ITERS_PER_REP * sizeof(double)));
    for (int it = 0; it < ITERS_PER_REP; ++it) iteration(it);
  };
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  rep();  // warm-up
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> times;
  for (int r = 0; r < NUM_REPS; ++r) {
    CUDA_CHECK(cudaEventRecord(start));
    rep();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  CUDA_CHECK(cudaGetLastError());
  std::sort(times.begin(), times.end());
  float median = times[times.size() / 2];

  // Check: two iterations from the initial vectors against the CPU.
  const int check_iters = 2;
  upload();
  CUDA_CHECK(cudaMemset(dres, 0, 2 * check_iters * sizeof(double)));
  for (int it = 0; it < check_iters; ++it) iteration(it);
  double gres[2 * check_iters];
  CUDA_CHECK(cudaMemcpy(gres, dres, sizeof(gres), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(hx2.data(), dx, n * sizeof(double), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(hy2.data(), dy, n * sizeof(double), cudaMemcpyDeviceToHost));
  size_t bad = 0;
  double cres[2 * check_iters];
  for (int it = 0; it < check_iters; ++it) {
    double dot = 0.0, nrm = 0.0;
    for (int i = 0; i < n; ++i) {
      hw[i] = alpha * hx[i] + beta * hy[i];
      hy[i] = a * hw[i] + hy[i];
      hx[i] *= s;
      dot += hx[i] * hy[i];
      nrm += hw[i] * hw[i];
    }
    cres[2 * it] = dot;
    cres[2 * it + 1] = nrm;
  }
  for (int i = 0; i < n; ++i) {
    if (fabs(hx2[i] - hx[i]) > 1e-12 * (1.0 + fabs(hx[i]))) ++bad;
    if (fabs(hy2[i] - hy[i]) > 1e-12 * (1.0 + fabs(hy[i]))) ++bad;
  }
  // Sums of n terms in a different order: relative to the sum of magnitudes (~n/3).
  for (int k = 0; k < 2 * check_iters; ++k)
    if (fabs(gres[k] - cres[k]) > 1e-9 * n) {
      printf("blas1: reduction %d GPU %.12g CPU %.12g\n", k, gres[k], cres[k]);
      ++bad;
    }
  bool ok = bad == 0;
  if (!ok) printf("blas1: %zu mismatches\n", bad);
  double bytes = ITERS_PER_REP * (3.0 + 3.0 + 2.0 + 2.0 + 1.0) * n * sizeof(double);
  printf("blas1: median %.3f ms per rep, %.1f GB/s, dot %.9g nrm2^2 %.9g\n", median,
         bytes / (median * 1e-3) / 1e9, gres[0], gres[1]);
  printf("NVCC_PLUS_BENCH kernel_ms=%.4f check=%s\n", median, ok ? "PASS" : "FAIL");
  cudaFree(dx); cudaFree(dy); cudaFree(dw); cudaFree(dres);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
