// Kernels for tests/passes/test_occupancy.py, written the way users write them.
// Regenerate: nvcc -arch=sm_90 -O3 -ptx occupancy.cu -o occupancy.ptx

// Register-hungry: an 8x8 register tile per thread.
__global__ void sgemm_8x8(int M, int N, int K, const float* A, const float* B, float* C) {
  float acc[8][8] = {};
  int row = (blockIdx.y * blockDim.y + threadIdx.y) * 8;
  int col = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  for (int k = 0; k < K; ++k) {
    float a[8], b[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) { a[i] = A[(row + i) * K + k]; b[i] = B[k * N + col + i]; }
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) C[(row + i) * N + col + j] = acc[i][j];
}

// The user's own launch bounds: at most 128 threads, at least 2 blocks per SM.
__global__ void __launch_bounds__(128, 2) bounded(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * in[i];
}
