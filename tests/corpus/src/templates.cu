// Templates as users write them: typed kernels, non-type parameters,
// functors, lambdas, variadic device helpers, variable templates,
// template recursion and explicit instantiation.
#include <cstdint>
#include <cuda_fp16.h>

// --- a typed element-wise kernel, explicitly instantiated --------------------
template <typename T>
__global__ void axpy(T a, const T* __restrict__ x, T* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
template __global__ void axpy<float>(float, const float*, float*, int);
template __global__ void axpy<double>(double, const double*, double*, int);
template __global__ void axpy<int>(int, const int*, int*, int);
template __global__ void axpy<int64_t>(int64_t, const int64_t*, int64_t*, int);
template __global__ void axpy<__half>(__half, const __half*, __half*, int);

// --- non-type parameters: block size and items per thread -------------------
template <typename T, int BLOCK, int ITEMS>
__global__ void block_sum(const T* __restrict__ in, T* __restrict__ out, int n) {
  __shared__ T partial[BLOCK];
  T acc = T(0);
  int base = blockIdx.x * BLOCK * ITEMS + threadIdx.x;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    int i = base + k * BLOCK;
    if (i < n) acc += in[i];
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
#pragma unroll
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}
template __global__ void block_sum<float, 256, 4>(const float*, float*, int);
template __global__ void block_sum<double, 128, 2>(const double*, double*, int);
template __global__ void block_sum<unsigned, 512, 8>(const unsigned*, unsigned*, int);

// --- functors passed by value ------------------------------------------------
struct Saxpy {
  float a;
  __device__ float operator()(float x, float y) const { return a * x + y; }
};
struct Clamp {
  float lo, hi;
  __device__ float operator()(float x, float) const { return fminf(fmaxf(x, lo), hi); }
};
template <typename Op>
__global__ void binary_map(Op op, const float* x, const float* y, float* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = op(x[i], y[i]);
}
template __global__ void binary_map<Saxpy>(Saxpy, const float*, const float*, float*, int);
template __global__ void binary_map<Clamp>(Clamp, const float*, const float*, float*, int);

// --- compile-time recursion --------------------------------------------------
template <int N>
struct Pow {
  __device__ static float eval(float x) { return x * Pow<N - 1>::eval(x); }
};
template <>
struct Pow<0> {
  __device__ static float eval(float) { return 1.0f; }
};
template <int N>
__device__ float horner(const float (&c)[N], float x) {
  float r = c[N - 1];
#pragma unroll
  for (int i = N - 2; i >= 0; --i) r = r * x + c[i];
  return r;
}
__global__ void polynomials(const float* x, float* out, int n) {
  const float coeffs[6] = {1.0f, -0.5f, 0.25f, -0.125f, 0.0625f, -0.03125f};
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = horner(coeffs, x[i]) + Pow<7>::eval(x[i]);
}

// --- variadic templates and fold expressions ---------------------------------
template <typename... Ts>
__device__ auto sum_all(Ts... xs) { return (xs + ... + 0); }
template <typename T, typename... Rest>
__device__ T max_all(T first, Rest... rest) {
  T m = first;
  ((m = rest > m ? rest : m), ...);
  return m;
}
__global__ void variadic(const int* a, const int* b, const int* c, int* s, int* m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    s[i] = sum_all(a[i], b[i], c[i], i);
    m[i] = max_all(a[i], b[i], c[i]);
  }
}

// --- variable templates and template static members --------------------------
template <typename T>
__device__ T g_scale = T(3);
template <typename T>
struct Limits {
  static constexpr T lo = T(-8);
  static constexpr T hi = T(8);
};
template <typename T>
__global__ void scale_and_clip(T* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    T v = data[i] * g_scale<T>;
    data[i] = v < Limits<T>::lo ? Limits<T>::lo : (v > Limits<T>::hi ? Limits<T>::hi : v);
  }
}
template __global__ void scale_and_clip<float>(float*, int);
template __global__ void scale_and_clip<int>(int*, int);

// --- lambdas inside device code and a generic "for_each" ---------------------
template <typename F>
__device__ void for_each_in_tile(int begin, int end, F&& f) {
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) f(i);
}
__global__ void lambda_kernel(float* out, const float* in, float bias, int n) {
  int tile = 1024;
  int begin = blockIdx.x * tile;
  int end = min(begin + tile, n);
  auto relu_bias = [=](float v) { return fmaxf(v + bias, 0.0f); };
  for_each_in_tile(begin, end, [&](int i) { out[i] = relu_bias(in[i]); });
}

// --- templates launched from host code (implicit instantiation) --------------
template <typename T, int TILE>
__global__ void copy_tiles(const T* in, T* out, int n) {
  int i = blockIdx.x * TILE + threadIdx.x;
#pragma unroll
  for (int k = 0; k < TILE; k += 32)
    if (i + k < n) out[i + k] = in[i + k];
}
void launch_all(const float* fi, float* fo, const double* di, double* dout, int n) {
  copy_tiles<float, 128><<<(n + 127) / 128, 32>>>(fi, fo, n);
  copy_tiles<double, 64><<<(n + 63) / 64, 32>>>(di, dout, n);
  copy_tiles<char, 256><<<(n + 255) / 256, 32>>>((const char*)fi, (char*)fo, n);
}
