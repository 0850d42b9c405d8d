// A small program in the style of a real one: sizes in the program, static cudart (nvcc's
// default), a 1-D kernel, a 2-D kernel with dynamic shared memory, a launch through
// cudaLaunchKernelEx, a struct by value holding pointers, and a non-zero exit code of its own.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void tile2d(const float* in, float* out, int w, int h) {
  extern __shared__ float t[];
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  int l = threadIdx.y * blockDim.x + threadIdx.x;
  t[l] = (x < w && y < h) ? in[y * w + x] : 0.f;
  __syncthreads();
  if (x < w && y < h) out[y * w + x] = 2.f * t[l];
}

struct Axpy { int n; float a; const float* x; float* y; };   // a params struct by value, with pointers
__global__ void axpy_s(Axpy p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.y[i] = p.a * p.x[i] + 1.f;
}

__global__ void fill(unsigned* p, unsigned v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}

int main() {
  const int n = 1000003, w = 300, h = 200;
  float *x, *y, *a, *b;
  unsigned* u;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMalloc(&a, w * h * sizeof(float));
  cudaMalloc(&b, w * h * sizeof(float));
  cudaMalloc(&u, 4096 * sizeof(unsigned));
  cudaMemset(x, 0, n * sizeof(float));
  cudaMemset(y, 0, n * sizeof(float));
  for (int r = 0; r < 3; r++) saxpy<<<(n + 255) / 256, 256>>>(n, 2.5f, x, y);
  saxpy<<<4, 256>>>(1000, 2.5f, x + 16, y);
  dim3 blk(16, 8), grd((w + 15) / 16, (h + 7) / 8);
  tile2d<<<grd, blk, 16 * 8 * sizeof(float)>>>(a, b, w, h);
  Axpy s = {5000, 0.5f, x + 8, y};
  axpy_s<<<20, 256>>>(s);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(16);
  cfg.blockDim = dim3(256);
  cudaLaunchKernelEx(&cfg, fill, u, 0xabcdu, 4096);
  cudaError_t e = cudaDeviceSynchronize();
  unsigned host[4];
  cudaMemcpy(host, u, sizeof host, cudaMemcpyDeviceToHost);
  printf("app: %s %x\n", cudaGetErrorString(e), host[0]);
  return (e == cudaSuccess && host[0] == 0xabcdu) ? 3 : 1;
}
