// 3-D heat equation, Jacobi iteration with a 7-point stencil on a 3-D grid of 3-D blocks
// (HPC mini-app style), and the squared residual between iterates for convergence monitoring
// (grid-stride block reduction in shared memory, one double atomicAdd per block).
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define NX 256
#define NY 256
#define NZ 256
#define BX 32
#define BY 4
#define BZ 4
#define SWEEPS_PER_REP 50
#define CHECK_SWEEPS 2
#define NUM_REPS 12
#define RED_THREADS 512

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, \
              __LINE__);                                                              \
      exit(EXIT_FAILURE);                                                             \
    }                                                                                 \
  } while (0)

#define IDX(i, j, k) ((size_t)(k) * NX * NY + (size_t)(j) * NX + (i))

// Interior points get the weighted 7-point average; boundary points (Dirichlet) are copied.
__global__ void jacobi7(const float *__restrict__ u, float *__restrict__ unew, float c0, float c1) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int j = blockIdx.y * blockDim.y + threadIdx.y;
  int k = blockIdx.z * blockDim.z + threadIdx.z;
  if (i >= NX || j >= NY || k >= NZ) return;
  size_t c = IDX(i, j, k);
  if (i == 0 || j == 0 || k == 0 || i == NX - 1 || j == NY - 1 || k == NZ - 1) {
    unew[c] = u[c];
    return;
  }
  unew[c] = c0 * u[c] + c1 * (u[c - 1] + u[c + 1] + u[c - NX] + u[c + NX] +
                              u[c - (size_t)NX * NY] + u[c + (size_t)NX * NY]);
}

__global__ void residual_sq(const float *a, const float *b, size_t n, double *result) {
  __shared__ double partial[RED_THREADS];
  double sum = 0.0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    double d = (double)a[i] - (double)b[i];
    sum += d * d;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(result, partial[0]);
}

static void cpu_sweep(const std::vector<float> &u, std::vector<float> &unew, float c0, float c1) {
  for (int k = 0; k < NZ; ++k)
    for (int j = 0; j < NY; ++j)
      for (int i = 0; i < NX; ++i) {
        size_t c = IDX(i, j, k);
        if (i == 0 || j == 0 || k == 0 || i == NX - 1 || j == NY - 1 || k == NZ - 1) {
          unew[c] = u[c];
          continue;
        }
        unew[c] = c0 * u[c] + c1 * (u[c - 1] + u[c + 1] + u[c - NX] + u[c + NX] +
                                    u[c - (size_t)NX * NY] + u[c + (size_t)NX * NY]);
      }
}

static uint32_t lcg_state = 4242u;
static inline float lcg_unit() {
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (float)(lcg_state >> 8) * (1.0f / 16777216.0f);
}

int main() {
  const size_t n = (size_t)NX * NY * NZ;
  const float c0 = 0.4f, c1 = 0.1f;
  printf("heat3d: %d x %d x %d, %d sweeps per rep\n", NX, NY, NZ, SWEEPS_PER_REP);
  std::vector<float> h_u(n), h_out(n);
  for (size_t i = 0; i < n; ++i) h_u[i] = 100.0f * lcg_unit();
  float *d_a, *d_b;
  double *d_res;
  CUDA_CHECK(cudaMalloc(&d_a, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_b, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_res, SWEEPS_PER_REP * sizeof(double)));
  CUDA_CHECK(cudaMemcpy(d_a, h_u.data(), n * sizeof(float), cudaMemcpyHostToDevice));

  dim3 block(BX, BY, BZ);
  dim3 grid((NX + BX - 1) / BX, (NY + BY - 1) / BY, (NZ + BZ - 1) / BZ);
  float *src = d_a, *dst = d_b;
  auto sweeps = [&](int count) {
    CUDA_CHECK(cudaMemsetAsync(d_res, 0, count * sizeof(double)));
    for (int s = 0; s < count; ++s) {
      jacobi7<<<grid, block>>>(src, dst, c0, c1);
      residual_sq<<<1056, RED_THREADS>>>(src, dst, n, d_res + s);
      std::swap(src, dst);
    }
  };
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  sweeps(SWEEPS_PER_REP);  // warm-up
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> times;
  for (int r = 0; r < NUM_REPS; ++r) {
    CUDA_CHECK(cudaEventRecord(start));
    sweeps(SWEEPS_PER_REP);
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  CUDA_CHECK(cudaGetLastError());
  std::sort(times.begin(), times.end());
  float median = times[times.size() / 2];

  // Check: CHECK_SWEEPS sweeps from the initial field against the CPU, and their residuals.
  CUDA_CHECK(cudaMemcpy(d_a, h_u.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  src = d_a; dst = d_b;
  sweeps(CHECK_SWEEPS);
  CUDA_CHECK(cudaMemcpy(h_out.data(), src, n * sizeof(float), cudaMemcpyDeviceToHost));
  double g_res[CHECK_SWEEPS];
  CUDA_CHECK(cudaMemcpy(g_res, d_res, sizeof(g_res), cudaMemcpyDeviceToHost));
  std::vector<float> a = h_u, b(n);
  double c_res[CHECK_SWEEPS];
  for (int s = 0; s < CHECK_SWEEPS; ++s) {
    cpu_sweep(a, b, c0, c1);
    double r = 0.0;
    for (size_t i = 0; i < n; ++i) { double d = (double)a[i] - b[i]; r += d * d; }
    c_res[s] = r;
    a.swap(b);
  }
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    if (fabsf(h_out[i] - a[i]) > 1e-4f * (1.0f + fabsf(a[i]))) ++bad;
  for (int s = 0; s < CHECK_SWEEPS; ++s)
    if (fabs(g_res[s] - c_res[s]) > 1e-4 * c_res[s]) {
      printf("heat3d: residual %d GPU %.9g CPU %.9g\n", s, g_res[s], c_res[s]);
      ++bad;
    }
  bool ok = bad == 0;
  if (!ok) printf("heat3d: %zu mismatches\n", bad);
  double gbs = SWEEPS_PER_REP * 4.0 * n * sizeof(float) / (median * 1e-3) / 1e9;
  printf("heat3d: median %.3f ms per rep, %.1f GB/s, residual after sweep 1 %.6g\n", median, gbs,
         g_res[0]);
  printf("NVCC_PLUS_BENCH kernel_ms=%.4f check=%s\n", median, ok ? "PASS" : "FAIL");
  cudaFree(d_a); cudaFree(d_b); cudaFree(d_res);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
