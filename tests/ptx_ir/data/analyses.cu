// Kernels whose analyses tests/ptx_ir/test_analyses.py checks by hand.
__global__ void saxpy_loop(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.f;
  #pragma unroll 1
  for (int k = 0; k < 10; ++k) acc += x[i + k * n];
  y[i] = a * acc;
}
__global__ void rowsum(float* out, const float* A, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) { float s = 0; for (int c = 0; c < cols; ++c) s += A[r * cols + c]; out[r] = s; }
}
__global__ void diamond(int* out, const int* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  if (v > 0) v = v * 3; else v = -v;
  out[i] = v;
}
__global__ void stencil2d(float* out, const float* in, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x > 0 && y > 0 && x < w - 1 && y < h - 1)
    out[y * w + x] = in[y * w + x - 1] + in[y * w + x + 1] + in[(y - 1) * w + x] + in[(y + 1) * w + x];
}
__global__ void histogram(unsigned* bins, const unsigned char* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[data[i]], 1u);
}
