// One-thread-per-row matrix-vector product y = A x, written the way naive open-source CUDA code
// writes it: plain pointers, one thread per row, the row's sum accumulated in a local and stored
// once:  for (j = 0; j < cols; j++) acc += A[i*cols + j] * x[j];
// At every iteration a warp touches 32 rows (32 sectors for 32 useful words), and every thread of
// the block loads the same x[j]: the row walk of issue 27.
//   rowmv_f32: float,  launched at ROWS x COLS (4096 x 4096) and at ODD_ROWS x ODD_COLS (3001 x 3003)
//   rowmv_f64: double, the same two launches
// The odd launch reads the first ODD_ROWS * ODD_COLS elements of the same matrix buffer as an
// ODD_ROWS x ODD_COLS matrix (rows and columns not multiples of 32: tails and a partial block).
// Each launch has its own cudaEvent timer; a kernel's time in a repetition is the sum of its two
// launches. The outputs are NaN-filled (untimed) before every repetition.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define ROWS 4096
#define COLS 4096
#define ODD_ROWS 3001
#define ODD_COLS 3003
#define BLOCK 256
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

__global__ void rowmv_f32(const float *A, const float *x, float *y, int rows, int cols) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows) {
    float acc = 0.0f;
    for (int j = 0; j < cols; j++) {
      acc += A[i * cols + j] * x[j];
    }
    y[i] = acc;
  }
}

__global__ void rowmv_f64(const double *A, const double *x, double *y, int rows, int cols) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows) {
    double acc = 0.0;
    for (int j = 0; j < cols; j++) {
      acc += A[i * cols + j] * x[j];
    }
    y[i] = acc;
  }
}

static uint32_t lcg_state = 27027u;
static inline uint32_t lcg_next() {
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return lcg_state >> 8;  // 24 bits
}
static inline float lcg_float() {  // uniform in [-1, 1)
  return (float)lcg_next() * (2.0f / 16777216.0f) - 1.0f;
}
static inline double lcg_double() {  // uniform in [-1, 1), 48 random bits
  double hi = (double)lcg_next(), lo = (double)lcg_next();
  return (hi + lo / 16777216.0) * (2.0 / 16777216.0) - 1.0;
}

static float median_of(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Every element of y (rows x cols of A, row stride cols) against a CPU sum in higher precision,
// the tolerance relative to the sum of the terms' magnitudes. Returns the number of mismatches.
template <typename T, typename R>
static int check_rows(const char *what, const T *a, const T *x, const T *g, int rows, int cols,
                      double rel, double abs_tol) {
  int bad = 0;
  for (int i = 0; i < rows; i++) {
    R ref = 0, mag = 0;
    const T *row = a + (size_t)i * cols;
    for (int j = 0; j < cols; j++) {
      R t = (R)row[j] * (R)x[j];
      ref += t;
      mag += t < 0 ? -t : t;
    }
    double err = fabs((double)g[i] - (double)ref);
    if (!(err <= rel * (double)mag + abs_tol)) {
      if (bad < 5) printf("rowmv: %s y[%d] gpu %.17g ref %.17g (tol %.3g)\n", what, i, (double)g[i], (double)ref,
                          rel * (double)mag + abs_tol);
      ++bad;
    }
  }
  return bad;
}

int main() {
  printf("rowmv: %d x %d and %d x %d, f32 and f64, block %d\n", ROWS, COLS, ODD_ROWS, ODD_COLS, BLOCK);
  const size_t na = (size_t)ROWS * COLS;
  std::vector<float> a32(na), x32(COLS);
  std::vector<double> a64(na), x64(COLS);
  for (auto &v : a32) v = lcg_float();
  for (auto &v : x32) v = lcg_float();
  for (auto &v : a64) v = lcg_double();
  for (auto &v : x64) v = lcg_double();

  float *a32_gpu, *x32_gpu, *y32_gpu, *y32o_gpu;
  double *a64_gpu, *x64_gpu, *y64_gpu, *y64o_gpu;
  CUDA_CHECK(cudaMalloc(&a32_gpu, na * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&x32_gpu, COLS * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y32_gpu, ROWS * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y32o_gpu, ODD_ROWS * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&a64_gpu, na * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&x64_gpu, COLS * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&y64_gpu, ROWS * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&y64o_gpu, ODD_ROWS * sizeof(double)));
  CUDA_CHECK(cudaMemcpy(a32_gpu, a32.data(), na * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(x32_gpu, x32.data(), COLS * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(a64_gpu, a64.data(), na * sizeof(double), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(x64_gpu, x64.data(), COLS * sizeof(double), cudaMemcpyHostToDevice));

  dim3 block(BLOCK);
  dim3 grid((ROWS + BLOCK - 1) / BLOCK), grid_odd((ODD_ROWS + BLOCK - 1) / BLOCK);
  cudaEvent_t ev[8];
  for (auto &e : ev) CUDA_CHECK(cudaEventCreate(&e));
  std::vector<float> t32, t32big, t32odd, t64, t64big, t64odd;
  for (int r = 0; r <= NUM_REPS; ++r) {  // repetition 0 is the warm-up
    CUDA_CHECK(cudaMemset(y32_gpu, 0xff, ROWS * sizeof(float)));  // NaN
    CUDA_CHECK(cudaMemset(y32o_gpu, 0xff, ODD_ROWS * sizeof(float)));
    CUDA_CHECK(cudaMemset(y64_gpu, 0xff, ROWS * sizeof(double)));
    CUDA_CHECK(cudaMemset(y64o_gpu, 0xff, ODD_ROWS * sizeof(double)));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventRecord(ev[0]));
    rowmv_f32<<<grid, block>>>(a32_gpu, x32_gpu, y32_gpu, ROWS, COLS);
    CUDA_CHECK(cudaEventRecord(ev[1]));
    CUDA_CHECK(cudaEventRecord(ev[2]));
    rowmv_f32<<<grid_odd, block>>>(a32_gpu, x32_gpu, y32o_gpu, ODD_ROWS, ODD_COLS);
    CUDA_CHECK(cudaEventRecord(ev[3]));
    CUDA_CHECK(cudaEventRecord(ev[4]));
    rowmv_f64<<<grid, block>>>(a64_gpu, x64_gpu, y64_gpu, ROWS, COLS);
    CUDA_CHECK(cudaEventRecord(ev[5]));
    CUDA_CHECK(cudaEventRecord(ev[6]));
    rowmv_f64<<<grid_odd, block>>>(a64_gpu, x64_gpu, y64o_gpu, ODD_ROWS, ODD_COLS);
    CUDA_CHECK(cudaEventRecord(ev[7]));
    CUDA_CHECK(cudaEventSynchronize(ev[7]));
    CUDA_CHECK(cudaGetLastError());
    float ms[4];
    for (int k = 0; k < 4; ++k) CUDA_CHECK(cudaEventElapsedTime(&ms[k], ev[2 * k], ev[2 * k + 1]));
    if (r > 0) {
      t32big.push_back(ms[0]);
      t32odd.push_back(ms[1]);
      t32.push_back(ms[0] + ms[1]);
      t64big.push_back(ms[2]);
      t64odd.push_back(ms[3]);
      t64.push_back(ms[2] + ms[3]);
    }
  }
  float med32 = median_of(t32), med64 = median_of(t64);

  std::vector<float> g32(ROWS), g32o(ODD_ROWS);
  std::vector<double> g64(ROWS), g64o(ODD_ROWS);
  CUDA_CHECK(cudaMemcpy(g32.data(), y32_gpu, ROWS * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(g32o.data(), y32o_gpu, ODD_ROWS * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(g64.data(), y64_gpu, ROWS * sizeof(double), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(g64o.data(), y64o_gpu, ODD_ROWS * sizeof(double), cudaMemcpyDeviceToHost));

  // Check: every element. f32 against a double sum, tol 1e-5 * sum|terms| (a float32 emulation of
  // the GPU's fma chain puts the worst error at 0.016 of it); f64 against a long double sum, tol
  // 1e-12 * sum|terms|, above the worst-case bound of a sequential double sum over 4096 terms
  // (4096 * 2^-53 = 4.5e-13) and far below what a float computation would give.
  int bad32 = check_rows<float, double>("f32", a32.data(), x32.data(), g32.data(), ROWS, COLS, 1e-5, 1e-6);
  bad32 += check_rows<float, double>("f32 odd", a32.data(), x32.data(), g32o.data(), ODD_ROWS, ODD_COLS, 1e-5, 1e-6);
  int bad64 = check_rows<double, long double>("f64", a64.data(), x64.data(), g64.data(), ROWS, COLS, 1e-12, 1e-15);
  bad64 += check_rows<double, long double>("f64 odd", a64.data(), x64.data(), g64o.data(), ODD_ROWS, ODD_COLS,
                                           1e-12, 1e-15);
  if (bad32 || bad64) printf("rowmv: %d (f32) + %d (f64) mismatches\n", bad32, bad64);
  printf("rowmv: rowmv_f32 %.4f ms (%dx%d %.4f, %dx%d %.4f), rowmv_f64 %.4f ms (%.4f, %.4f) (median of %d)\n",
         med32, ROWS, COLS, median_of(t32big), ODD_ROWS, ODD_COLS, median_of(t32odd), med64, median_of(t64big),
         median_of(t64odd), NUM_REPS);
  printf("NVCC_PLUS_BENCH kernel=rowmv_f32 kernel_ms=%.5f check=%s\n", med32, bad32 ? "FAIL" : "PASS");
  printf("NVCC_PLUS_BENCH kernel=rowmv_f64 kernel_ms=%.5f check=%s\n", med64, bad64 ? "FAIL" : "PASS");
  bool ok = !bad32 && !bad64;
  printf("NVCC_PLUS_BENCH kernel_ms=%.5f check=%s\n", med32 + med64, ok ? "PASS" : "FAIL");
  cudaFree(a32_gpu); cudaFree(x32_gpu); cudaFree(y32_gpu); cudaFree(y32o_gpu);
  cudaFree(a64_gpu); cudaFree(x64_gpu); cudaFree(y64_gpu); cudaFree(y64o_gpu);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
