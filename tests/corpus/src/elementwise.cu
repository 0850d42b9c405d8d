// Benchmark-style element-wise kernels: vector add, SAXPY (plain and
// grid-stride), per-thread unrolled 4 contiguous elements, 4 elements strided
// by blockDim, float4-vectorised, 64-bit indexing, activations (ReLU, GELU,
// SiLU), type conversion, bias broadcast, a fused chain and a memcpy kernel.
#include <cstdint>

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void saxpy_grid_stride(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}

// each thread handles 4 contiguous elements (i*4 + k)
__global__ void scale_unroll4_contiguous(const float* __restrict__ in, float* __restrict__ out, float s, int n) {
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    int i = base + k;
    if (i < n) out[i] = in[i] * s;
  }
}

// each thread handles 4 elements strided by blockDim (coalesced)
__global__ void scale_unroll4_strided(const float* __restrict__ in, float* __restrict__ out, float s, int n) {
  int base = blockIdx.x * blockDim.x * 4 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    int i = base + k * blockDim.x;
    if (i < n) out[i] = in[i] * s;
  }
}

__global__ void add_float4(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 x = a[i], y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

__global__ void add_int64_index(const double* a, const double* b, double* c, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t stride = (int64_t)blockDim.x * gridDim.x;
  for (; i < n; i += stride) c[i] = a[i] + b[i];
}

__global__ void relu(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.0f);
}

__global__ void gelu_tanh(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}

__global__ void gelu_erf(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}

__global__ void silu(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] / (1.0f + __expf(-x[i]));
}

__global__ void int8_dequant(const int8_t* __restrict__ q, const float* __restrict__ scales, float* __restrict__ out,
                             int n, int group) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (float)q[i] * scales[i / group];
}

__global__ void float_to_uint8_clamp(const float* __restrict__ in, uint8_t* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (uint8_t)__float2int_rn(fminf(fmaxf(in[i] * 255.0f, 0.0f), 255.0f));
}

// y[r][c] = x[r][c] + bias[c], 2-D grid
__global__ void bias_add_2d(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                            int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y;
  if (c < cols && r < rows) y[r * cols + c] = x[r * cols + c] + bias[c];
}

// fused: z = relu(a * x + b) * mask, dropout-style scaling
__global__ void fused_chain(const float* __restrict__ x, const uint8_t* __restrict__ mask, float* __restrict__ z,
                            float a, float b, float keep_scale, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = fmaf(a, x[i], b);
    v = v > 0.0f ? v : 0.0f;
    z[i] = mask[i] ? v * keep_scale : 0.0f;
  }
}

__global__ void where_select(const bool* cond, const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = cond[i] ? a[i] : b[i];
}

__global__ void copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, size_t n16) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (size_t)blockDim.x * gridDim.x)
    dst[i] = src[i];
}

__global__ void fill_iota(int* out, int start, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = start + i;
}
