// Loops written the way users write them, for the unroll and nounroll pass tests
// (tests/passes/test_unroll.py).
// Regenerate the PTX with:
//   nvcc -arch=sm_90 -O3 -ptx unroll_loops.cu -o unroll_loops.ptx

// ---- positive: unroll fires -------------------------------------------------------

// grid-stride loop, int index: exit test lt.s32, register step
__global__ void saxpy_gs(float a, const float* __restrict__ x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = a * x[i] + y[i];
}

// grid-stride loop, unsigned index: exit test lt.u32
__global__ void scale_gs_u(const float* __restrict__ x, float* y, unsigned n, float s) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = x[i] * s;
}

// grid-stride float accumulation: the order of the additions must not change
__global__ void dot_gs(const float* __restrict__ a, const float* __restrict__ b, float* partial, int n) {
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    acc += a[i] * b[i];
  partial[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// 64-bit index with a constant stride (nvcc unrolls it by 4; its main loop is lt.s64)
__global__ void sum_stride64(const float* x, float* out, long n) {
  float acc = 0.f;
  for (long i = threadIdx.x; i < n; i += 256) acc += x[i];
  out[threadIdx.x] = acc;
}

// a loop with an early exit (two exits, several blocks)
__global__ void find_first_negative(const float* __restrict__ x, int* pos, int n) {
  int found = -1;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    if (x[i] < 0.0f) { found = i; break; }
  }
  pos[blockIdx.x * blockDim.x + threadIdx.x] = found;
}

// counting down with a register step (exit test gt/ge.s32 after a subtraction)
__global__ void reverse_gs(const int* __restrict__ x, int* y, int n) {
  int stride = blockDim.x * gridDim.x;
  for (int i = n - 1 - (int)(blockIdx.x * blockDim.x + threadIdx.x); i >= 0; i -= stride)
    y[n - 1 - i] = x[i] * 3 + 1;
}

// ---- negative: unroll must not fire -------------------------------------------------

// a loop with __syncthreads (tiled loop)
__global__ void tiled_sum(const float* x, float* out, int n) {
  __shared__ float tile[256];
  float acc = 0.f;
  for (int base = 0; base < n; base += 256) {
    tile[threadIdx.x] = base + threadIdx.x < n ? x[base + threadIdx.x] : 0.f;
    __syncthreads();
    acc += tile[(threadIdx.x + 1) % 256];
    __syncthreads();
  }
  out[threadIdx.x] = acc;
}

// a loop with a warp shuffle
__global__ void shfl_loop(const float* x, float* out, int n) {
  float acc = 0.f;
  for (int i = threadIdx.x; i < n; i += 32) acc += __shfl_xor_sync(0xffffffffu, x[i], 1);
  out[threadIdx.x] = acc;
}

// a pointer chase: no induction variable
__global__ void chase(const int* next, int* out, int start) {
  int p = start, steps = 0;
  while (p >= 0) { p = next[p]; ++steps; }
  out[threadIdx.x] = steps;
}

// the user asked for no unrolling (nvcc writes .pragma "nounroll")
__global__ void rowsum_nounroll(const float* m, float* out, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.f;
#pragma unroll 1
  for (int c = 0; c < cols; ++c) acc += m[r * cols + c];
  out[r] = acc;
}
