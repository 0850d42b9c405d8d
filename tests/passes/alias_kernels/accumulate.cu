extern "C" __global__ void mvt_row(const float *A, const float *x, float *tmp, int nx, int ny) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < nx) { tmp[i] = 0; for (int j = 0; j < ny; j++) tmp[i] += A[i * ny + j] * x[j]; }
}
extern "C" __global__ void mvt_col(const float *A, const float *t, float *y, int nx, int ny) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < ny) { for (int i = 0; i < nx; i++) y[j] += A[i * ny + j] * t[i]; }
}
extern "C" __global__ void gemm(int ni, int nj, int nk, float alpha, float beta, float *a, float *b, float *c) {
  int j = blockIdx.x * blockDim.x + threadIdx.x; int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < ni && j < nj) { c[i * nj + j] *= beta; for (int k = 0; k < nk; k++) c[i * nj + j] += alpha * a[i * nk + k] * b[k * nj + j]; }
}
extern "C" __global__ void covar(int m, int n, float *symmat, const float *data) {
  int j1 = blockIdx.x * blockDim.x + threadIdx.x;
  if (j1 < m) {
    for (int j2 = j1; j2 < m; j2++) {
      symmat[j1 * m + j2] = 0.0f;
      for (int i = 0; i < n; i++) symmat[j1 * m + j2] += data[i * m + j1] * data[i * m + j2];
      symmat[j2 * m + j1] = symmat[j1 * m + j2];
    }
  }
}
extern "C" __global__ void early_exit(const float *a, float *acc, int n, float limit) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  for (int j = 0; j < n; j++) { acc[i] += a[j * n + i]; if (acc[i] > limit) return; }
}
extern "C" __global__ void gather(const float *a, const int *idx, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[idx[i]];
}
// Refused by promote-accumulators: another access to the accumulator's buffer in the loop.
extern "C" __global__ void same_buffer(float *y, const float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) for (int j = 0; j < n; j++) y[i] += a[j] * y[(i + j) % n];
}
