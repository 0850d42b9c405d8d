// Kernels for tests/passes/test_cache_hints.py, written the way users write them.
// Regenerate: nvcc -arch=sm_90 -O3 -ptx cache_hints.cu -o cache_hints.ptx

// Loads happen before the only store: they may use the read-only path even though
// x and y may alias (nothing this thread or a synchronised thread wrote can be seen yet).
__global__ void saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Row loop GEMV: every load runs before the final store.
__global__ void gemv_rows(float* y, const float* A, const float* x, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    float s = 0.f;
    for (int c = 0; c < cols; ++c) s += A[r * cols + c] * x[c];
    y[r] = s;
  }
}

// A running sum written back in a loop: every load after the first iteration may read
// what an earlier iteration stored (through an aliasing pointer): none may be .nc.
__global__ void prefix_rows(float* out, const float* in, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.f;
  for (int c = 0; c < cols; ++c) { s += in[r * cols + c]; out[r * cols + c] = s; }
}

// Writes the 'read-only' input itself, then reads it again: the second read must see it.
__global__ void rewrite_then_read(float* data, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = data[i];
    data[i] = 2.f * v;
    out[i] = data[i ^ 1];
  }
}

// A barrier orders other threads' stores before later loads: only the first load may
// become .nc.
__global__ void stage_then_read(float* buf, const float* in, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[i] = in[i] * 2.f;
  __syncthreads();
  out[i] = buf[i ^ 1];
}

// Histogram: the data loads precede the atomics.
__global__ void histogram(unsigned* bins, const unsigned char* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[data[i]], 1u);
}

// Stencil: neighbouring threads read the same elements (not read-once).
__global__ void stencil3(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1) out[i] = in[i - 1] + in[i] + in[i + 1];
}

// In-place update: the buffer is read and written (not write-once).
__global__ void scale_inplace(float* data, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= s;
}
