// Stencils: 1-D three-point, 2-D five-point Jacobi (global and shared-memory
// tiles with halos), 2-D convolution with a __constant__ mask, 3-D seven-point
// stencil marching in z with registers, and a 2-D heat-equation step.

__global__ void stencil1d_3pt(const float* __restrict__ in, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1) out[i] = 0.25f * in[i - 1] + 0.5f * in[i] + 0.25f * in[i + 1];
}

__global__ void jacobi2d_global(const float* __restrict__ u, float* __restrict__ v, int nx, int ny) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < 1 || y < 1 || x >= nx - 1 || y >= ny - 1) return;
  int c = y * nx + x;
  v[c] = 0.25f * (u[c - 1] + u[c + 1] + u[c - nx] + u[c + nx]);
}

template <int BX, int BY>
__global__ void jacobi2d_shared(const float* __restrict__ u, float* __restrict__ v, int nx, int ny) {
  __shared__ float tile[BY + 2][BX + 2];
  int tx = threadIdx.x, ty = threadIdx.y;
  int x = blockIdx.x * BX + tx, y = blockIdx.y * BY + ty;
  auto at = [&](int xx, int yy) { return (xx >= 0 && yy >= 0 && xx < nx && yy < ny) ? u[yy * nx + xx] : 0.0f; };
  tile[ty + 1][tx + 1] = at(x, y);
  if (tx == 0) tile[ty + 1][0] = at(x - 1, y);
  if (tx == BX - 1) tile[ty + 1][BX + 1] = at(x + 1, y);
  if (ty == 0) tile[0][tx + 1] = at(x, y - 1);
  if (ty == BY - 1) tile[BY + 1][tx + 1] = at(x, y + 1);
  __syncthreads();
  if (x > 0 && y > 0 && x < nx - 1 && y < ny - 1)
    v[y * nx + x] = 0.25f * (tile[ty + 1][tx] + tile[ty + 1][tx + 2] + tile[ty][tx + 1] + tile[ty + 2][tx + 1]);
}
template __global__ void jacobi2d_shared<32, 8>(const float*, float*, int, int);
template __global__ void jacobi2d_shared<16, 16>(const float*, float*, int, int);

#define MASK_R 2
__constant__ float c_mask[2 * MASK_R + 1][2 * MASK_R + 1];
__global__ void conv2d_constant_mask(const float* __restrict__ img, float* __restrict__ out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float acc = 0.0f;
#pragma unroll
  for (int dy = -MASK_R; dy <= MASK_R; ++dy)
#pragma unroll
    for (int dx = -MASK_R; dx <= MASK_R; ++dx) {
      int xx = min(max(x + dx, 0), w - 1), yy = min(max(y + dy, 0), h - 1);
      acc += c_mask[dy + MASK_R][dx + MASK_R] * img[yy * w + xx];
    }
  out[y * w + x] = acc;
}

// 3-D 7-point stencil: each thread walks z, keeping z-1/z/z+1 in registers
__global__ void stencil3d_7pt(const float* __restrict__ in, float* __restrict__ out, int nx, int ny, int nz, float c0,
                              float c1) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < 1 || y < 1 || x >= nx - 1 || y >= ny - 1) return;
  size_t plane = (size_t)nx * ny;
  size_t idx = (size_t)y * nx + x;
  float below = in[idx], cur = in[idx + plane];
  for (int z = 1; z < nz - 1; ++z) {
    float above = in[idx + (z + 1) * plane];
    size_t c = idx + z * plane;
    out[c] = c0 * cur + c1 * (in[c - 1] + in[c + 1] + in[c - nx] + in[c + nx] + below + above);
    below = cur;
    cur = above;
  }
}

// 3-D 27-point stencil, direct form with a 3-D grid
__global__ void stencil3d_27pt(const double* __restrict__ in, double* __restrict__ out, int nx, int ny, int nz) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x < 1 || y < 1 || z < 1 || x >= nx - 1 || y >= ny - 1 || z >= nz - 1) return;
  double acc = 0.0;
#pragma unroll
  for (int dz = -1; dz <= 1; ++dz)
#pragma unroll
    for (int dy = -1; dy <= 1; ++dy)
#pragma unroll
      for (int dx = -1; dx <= 1; ++dx) {
        double w = (dx == 0 && dy == 0 && dz == 0) ? -26.0 : 1.0;
        acc += w * in[((size_t)(z + dz) * ny + (y + dy)) * nx + (x + dx)];
      }
  out[((size_t)z * ny + y) * nx + x] = acc / 26.0;
}

// explicit heat equation with Neumann boundaries
__global__ void heat_step(const float* __restrict__ t, float* __restrict__ tn, int nx, int ny, float alpha) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= nx || y >= ny) return;
  int xm = x > 0 ? x - 1 : x + 1, xp = x < nx - 1 ? x + 1 : x - 1;
  int ym = y > 0 ? y - 1 : y + 1, yp = y < ny - 1 ? y + 1 : y - 1;
  float c = t[y * nx + x];
  float lap = t[y * nx + xm] + t[y * nx + xp] + t[ym * nx + x] + t[yp * nx + x] - 4.0f * c;
  tn[y * nx + x] = c + alpha * lap;
}
