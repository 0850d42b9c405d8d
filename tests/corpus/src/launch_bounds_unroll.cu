// Occupancy and loop directives: __launch_bounds__ (max threads, min blocks),
// __maxnreg__, #pragma unroll with counts, full unroll and "unroll 1"
// (.pragma "nounroll"), and __restrict__ versus aliasing pointers.

__global__ void __launch_bounds__(256) bounded_256(const float* __restrict__ a, float* __restrict__ b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i] * 2.0f + 1.0f;
}

__global__ void __launch_bounds__(128, 4) bounded_128_min4(const float* __restrict__ a, float* __restrict__ b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
#pragma unroll 4
  for (int k = 0; k < 64; ++k) acc += a[(i + k * 97) % n] * (float)k;
  if (i < n) b[i] = acc;
}

__global__ void __launch_bounds__(1024, 1) bounded_1024(double* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = sqrt(x[i]) + 1.0;
}

__global__ void __maxnreg__(40) reg_capped(const float* __restrict__ a, float* __restrict__ b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float r[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) r[k] = a[(i * 16 + k) % n];
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < 16; ++k) s += r[k] * r[15 - k];
  b[i] = s;
}

__global__ void __maxnreg__(128) reg_capped_128(float4* v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 t = v[i];
    v[i] = make_float4(t.y, t.z, t.w, t.x);
  }
}

// "#pragma unroll 1" keeps the loop rolled: .pragma "nounroll"
__global__ void nounroll_loops(const float* a, float* b, int n, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = a[i];
#pragma unroll 1
  for (int r = 0; r < reps; ++r) x = x * 0.999f + 0.001f;
#pragma unroll 1
  for (int k = 0; k < 32; ++k) x += b[(i + k) % n];
  b[i] = x;
}

// constant trip counts: full unroll, partial unroll, default heuristics
__global__ void unroll_variants(const float* __restrict__ a, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s0 += a[(i + k) % n];
#pragma unroll 2
  for (int k = 0; k < 10; ++k) s1 += a[(i + 3 * k) % n];
  for (int k = 0; k < 6; ++k) s2 += a[(i + 5 * k) % n];
  int m = n & 63;
#pragma unroll 8
  for (int k = 0; k < m; ++k) s2 -= a[k];
  out[i] = s0 + s1 + s2;
}

// the same kernel with and without __restrict__
__global__ void aliasing_update(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    c[i] = a[i] + b[i];
    c[i] += a[i] * b[i];
    c[i] *= a[i];
  }
}
__global__ void restrict_update(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    c[i] = a[i] + b[i];
    c[i] += a[i] * b[i];
    c[i] *= a[i];
  }
}

// launch bounds given through a template parameter
template <int THREADS>
__global__ void __launch_bounds__(THREADS) templated_bounds(int* out) {
  out[blockIdx.x * THREADS + threadIdx.x] = THREADS;
}
template __global__ void templated_bounds<64>(int*);
template __global__ void templated_bounds<512>(int*);
