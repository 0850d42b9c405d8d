// Grid-stride loops over 64-bit indices with a register step (size_t, long long), for the
// unroll pass tests (tests/passes/test_unroll.py).
// Regenerate the PTX with:
//   nvcc -arch=sm_90 -O3 -ptx unroll_loops64.cu -o unroll_loops64.ptx
#include <cstddef>

// ---- positive: unroll fires -------------------------------------------------------

// a size_t grid-stride reduction, as heat3d's residual_sq: exit test lt.u64, register step
__global__ void residual_sq_gs64(const float* a, const float* b, size_t n, double* partial) {
  double sum = 0.0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    double d = (double)a[i] - (double)b[i];
    sum += d * d;
  }
  partial[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = sum;
}

// a size_t grid-stride elementwise loop
__global__ void saxpy_gs64(float s, const float* __restrict__ x, float* y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    y[i] = s * x[i] + y[i];
}

// a histogram: integer atomics in a size_t grid-stride loop
__global__ void histogram_gs64(const unsigned char* in, unsigned* hist, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    atomicAdd(&hist[in[i] & 63], 1u);
}

// an inclusive bound: exit test le.u64
__global__ void sum_incl_gs64(const float* x, float* partial, size_t last) {
  float acc = 0.f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i <= last;
       i += (size_t)gridDim.x * blockDim.x)
    acc += x[i];
  partial[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = acc;
}

// the same histogram over a signed 64-bit index: exit test lt.s64
__global__ void histogram_gs_s64(const unsigned char* in, unsigned* hist, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    atomicAdd(&hist[in[i] & 63], 1u);
}

// an early exit over a signed 64-bit index (two exits, several blocks): lt.s64
__global__ void find_first_negative_s64(const float* __restrict__ x, long long* pos, long long n) {
  long long found = -1;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)blockDim.x * gridDim.x) {
    if (x[i] < 0.0f) { found = i; break; }
  }
  pos[blockIdx.x * blockDim.x + threadIdx.x] = found;
}

// an inclusive signed bound: exit test le.s64
__global__ void sum_incl_s64(const float* x, float* partial, long long last) {
  float acc = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i <= last;
       i += (long long)gridDim.x * blockDim.x)
    acc += x[i];
  partial[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = acc;
}

// counting down with a signed 64-bit index and a register step: sub.s64, exit test gt.s64
__global__ void reverse_gs64(const int* __restrict__ x, int* y, long long n) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = n - 1 - (long long)(blockIdx.x * blockDim.x + threadIdx.x); i >= 0; i -= stride)
    y[n - 1 - i] = x[i] * 3 + 1;
}

// ---- probes: each thread runs the loop from its own (start, bound, step) and records
// a hash of the counter values it saw and the trip count, so that tests can drive the
// unrolled path's guard with chosen values (near 2^64 and 2^63, wrapping steps)

#define PROBE(NAME, T, INIT, COND, UPDATE)                                                  \
  __global__ void NAME(const T* p, unsigned long long* out) {                              \
    size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;                              \
    T i = p[3 * t], b = p[3 * t + 1], s = p[3 * t + 2];                                    \
    unsigned long long h = 0, c = 0;                                                       \
    for (INIT; COND; UPDATE) { h = h * 1000003ull + (unsigned long long)i; ++c; }          \
    out[2 * t] = h;                                                                        \
    out[2 * t + 1] = c;                                                                    \
  }

PROBE(probe_lt_u64, unsigned long long, , i < b, i += s)
PROBE(probe_le_u64, unsigned long long, , i <= b, i += s)
PROBE(probe_gt_u64, unsigned long long, , i > b, i -= s)
PROBE(probe_lt_s64, long long, , i < b, i += s)
PROBE(probe_le_s64, long long, , i <= b, i += s)
PROBE(probe_gt_s64, long long, , i > b, i -= s)
PROBE(probe_ge_s64, long long, , i >= b, i += s)

// ---- negative: nvcc unrolled it itself (signed overflow is undefined, so it computed the
// trip count); its main loop's update does not read the counter, its remainder is nounroll

__global__ void scale_gs_s64(const float* __restrict__ x, float* y, long long n, float s) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = x[i] * s;
}
