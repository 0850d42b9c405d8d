// Per-row normalisation, one thread per row, written the way naive open-source CUDA code writes it
// (plain pointers, the row's statistics in locals, one loop per pass over the row):
//   layernorm_rows: a mean loop, a variance loop, a write loop
//                   y[i][j] = (x[i][j] - mean_i) * rsqrt(var_i + eps) * gamma[j] + beta[j]
//                   (threads past the last row return before the loops)
//   softmax_rows:   a max loop, an exp-sum loop, a write loop y[i][j] = exp(x[i][j] - max_i) / sum_i
// At every iteration a warp touches 32 rows (32 sectors for 32 useful words): the row walks of
// issue 27. ROWS = 8192 + 37 and COLS = 1024 + 3: a partial last block and odd row tails.
// Each kernel has its own cudaEvent timer; the outputs are NaN-filled (untimed) before every
// repetition.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define ROWS (8192 + 37)
#define COLS (1024 + 3)
#define BLOCK 256
#define EPS 1e-5f
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

__global__ void layernorm_rows(const float *x, const float *gamma, const float *beta, float *y, int rows,
                               int cols, float eps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const float *xr = x + i * cols;
  float *yr = y + i * cols;
  float sum = 0.0f;
  for (int j = 0; j < cols; j++) {
    sum += xr[j];
  }
  float mean = sum / cols;
  float var = 0.0f;
  for (int j = 0; j < cols; j++) {
    float d = xr[j] - mean;
    var += d * d;
  }
  var = var / cols;
  float rstd = rsqrtf(var + eps);
  for (int j = 0; j < cols; j++) {
    yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
  }
}

__global__ void softmax_rows(const float *x, float *y, int rows, int cols) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows) {
    const float *xr = x + i * cols;
    float *yr = y + i * cols;
    float m = -INFINITY;
    for (int j = 0; j < cols; j++) {
      m = fmaxf(m, xr[j]);
    }
    float s = 0.0f;
    for (int j = 0; j < cols; j++) {
      s += expf(xr[j] - m);
    }
    for (int j = 0; j < cols; j++) {
      yr[j] = expf(xr[j] - m) / s;
    }
  }
}

static uint32_t lcg_state = 8229u;
static inline float lcg_float() {  // uniform in [-1, 1)
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (float)(lcg_state >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

static float median_of(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  printf("rownorm: %d rows x %d cols (%zu MB), block %d\n", ROWS, COLS, (size_t)ROWS * COLS * sizeof(float) >> 20,
         BLOCK);
  const size_t n = (size_t)ROWS * COLS;
  std::vector<float> x(n), gamma(COLS), beta(COLS);
  for (int i = 0; i < ROWS; i++) {  // every row its own offset in [-2, 2), then noise in [-1, 1)
    float offset = 2.0f * lcg_float();
    for (int j = 0; j < COLS; j++) x[(size_t)i * COLS + j] = offset + lcg_float();
  }
  for (int j = 0; j < COLS; j++) {
    gamma[j] = 1.0f + 0.5f * lcg_float();  // [0.5, 1.5)
    beta[j] = 0.5f * lcg_float();          // [-0.5, 0.5)
  }

  float *x_gpu, *gamma_gpu, *beta_gpu, *yln_gpu, *ysm_gpu;
  CUDA_CHECK(cudaMalloc(&x_gpu, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&gamma_gpu, COLS * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&beta_gpu, COLS * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&yln_gpu, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&ysm_gpu, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(x_gpu, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(gamma_gpu, gamma.data(), COLS * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(beta_gpu, beta.data(), COLS * sizeof(float), cudaMemcpyHostToDevice));

  dim3 block(BLOCK);
  dim3 grid((ROWS + BLOCK - 1) / BLOCK);
  cudaEvent_t ev[4];
  for (auto &e : ev) CUDA_CHECK(cudaEventCreate(&e));
  std::vector<float> t1, t2;
  for (int r = 0; r <= NUM_REPS; ++r) {  // repetition 0 is the warm-up
    CUDA_CHECK(cudaMemset(yln_gpu, 0xff, n * sizeof(float)));  // NaN
    CUDA_CHECK(cudaMemset(ysm_gpu, 0xff, n * sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventRecord(ev[0]));
    layernorm_rows<<<grid, block>>>(x_gpu, gamma_gpu, beta_gpu, yln_gpu, ROWS, COLS, EPS);
    CUDA_CHECK(cudaEventRecord(ev[1]));
    CUDA_CHECK(cudaEventRecord(ev[2]));
    softmax_rows<<<grid, block>>>(x_gpu, ysm_gpu, ROWS, COLS);
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

  std::vector<float> gln(n), gsm(n);
  CUDA_CHECK(cudaMemcpy(gln.data(), yln_gpu, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(gsm.data(), ysm_gpu, n * sizeof(float), cudaMemcpyDeviceToHost));

  // Check: every element against double-precision CPU statistics, the tolerance relative to the
  // sum of the magnitudes of the terms of y:
  //   layernorm: y = g*r*x - g*r*mean + b, the mean's error relative to mean|x|:
  //              tol 1e-5 * (|g| r (|x| + mean|x|) + |b|) + 1e-6
  //   softmax:   y = e_j / sum_k e_k, all terms positive: tol 1e-5 * y + 1e-9
  // (a float32 emulation of the GPU's loops puts the worst error at 0.20 of the layernorm
  // tolerance and 0.22 of the softmax one, with CUDA's 2-ulp expf and rsqrtf taken adversely).
  int bad1 = 0, bad2 = 0;
  for (int i = 0; i < ROWS; i++) {
    const float *xr = x.data() + (size_t)i * COLS;
    double sum = 0, sabs = 0, mx = -INFINITY;
    for (int j = 0; j < COLS; j++) {
      sum += xr[j];
      sabs += fabs((double)xr[j]);
      mx = std::max(mx, (double)xr[j]);
    }
    double mean = sum / COLS, mabs = sabs / COLS, var = 0;
    for (int j = 0; j < COLS; j++) var += ((double)xr[j] - mean) * ((double)xr[j] - mean);
    var /= COLS;
    double rstd = 1.0 / sqrt(var + (double)EPS), es = 0;
    for (int j = 0; j < COLS; j++) es += exp((double)xr[j] - mx);
    for (int j = 0; j < COLS; j++) {
      double ref = ((double)xr[j] - mean) * rstd * gamma[j] + beta[j];
      double tol = 1e-5 * (fabs((double)gamma[j]) * rstd * (fabs((double)xr[j]) + mabs) + fabs((double)beta[j])) + 1e-6;
      float got = gln[(size_t)i * COLS + j];
      if (!(fabs(got - ref) <= tol)) {
        if (bad1 < 5) printf("rownorm: layernorm y[%d][%d] gpu %.9g ref %.9g\n", i, j, got, ref);
        ++bad1;
      }
      double sref = exp((double)xr[j] - mx) / es;
      got = gsm[(size_t)i * COLS + j];
      if (!(fabs(got - sref) <= 1e-5 * sref + 1e-9)) {
        if (bad2 < 5) printf("rownorm: softmax y[%d][%d] gpu %.9g ref %.9g\n", i, j, got, sref);
        ++bad2;
      }
    }
  }
  if (bad1 || bad2) printf("rownorm: %d (layernorm) + %d (softmax) mismatches\n", bad1, bad2);
  printf("rownorm: layernorm_rows %.4f ms, softmax_rows %.4f ms (median of %d)\n", med1, med2, NUM_REPS);
  printf("NVCC_PLUS_BENCH kernel=layernorm_rows kernel_ms=%.5f check=%s\n", med1, bad1 ? "FAIL" : "PASS");
  printf("NVCC_PLUS_BENCH kernel=softmax_rows kernel_ms=%.5f check=%s\n", med2, bad2 ? "FAIL" : "PASS");
  bool ok = !bad1 && !bad2;
  printf("NVCC_PLUS_BENCH kernel_ms=%.5f check=%s\n", med1 + med2, ok ? "PASS" : "FAIL");
  cudaFree(x_gpu); cudaFree(gamma_gpu); cudaFree(beta_gpu); cudaFree(yln_gpu); cudaFree(ysm_gpu);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
