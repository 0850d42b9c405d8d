#include "common.h"

__global__ void saxpy2(int n, float a, const float *x, const float *y, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

__global__ void poly3(int n, const float *x, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; out[i] = ((0.5f * v - 1.25f) * v + 2.0f) * v - 0.75f; }
}

__global__ void dscale_add(int n, const double *x, double *out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    out[i] = 1.5 * x[i] + out[i];
}

__global__ void gather(int n, const int *idx, const float *x, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[idx[i]];
}

void run_maps(int n, const float *x, const float *y, float *out, const double *dx, double *dout,
              const int *idx, float *gathered) {
  int b = 256, g = (n + b - 1) / b;
  saxpy2<<<g, b>>>(n, 2.5f, x, y, out);
  poly3<<<g, b>>>(n, x, out + n);
  dscale_add<<<1024, 256>>>(n, dx, dout);
  gather<<<g, b>>>(n, idx, x, gathered);
}
