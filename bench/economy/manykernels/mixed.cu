#include "common.h"

__global__ void transpose_naive(int w, int h, const float *in, float *out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

__global__ void histogram(int n, const unsigned char *bytes, unsigned *hist) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&hist[bytes[i]], 1u);
}

__global__ void block_sum(int n, const float *x, float *sums) {
  __shared__ float s[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = s[0];
}

__global__ void clamp01(int n, const float *x, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fminf(fmaxf(x[i], 0.0f), 1.0f);
}

void run_mixed(int nbytes, int n, int w, int h, const float *in, float *transposed, const unsigned char *bytes,
               unsigned *hist, const float *x, float *block_sums, float *clamped) {
  dim3 b(32, 8), g((w + 31) / 32, (h + 7) / 8);
  transpose_naive<<<g, b>>>(w, h, in, transposed);
  histogram<<<512, 256>>>(nbytes, bytes, hist);
  block_sum<<<(n + 255) / 256, 256>>>(n, x, block_sums);
  clamp01<<<(n + 255) / 256, 256>>>(n, x, clamped);
}
