#include "common.h"

// one thread per row (the row loops of naive normalisation code)
__global__ void row_sum(int rows, int cols, const float *m, float *out) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0.0f;
  for (int c = 0; c < cols; ++c) s += m[(size_t)r * cols + c];
  out[r] = s;
}

__global__ void row_max(int rows, int cols, const float *m, float *out) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float v = m[(size_t)r * cols];
  for (int c = 1; c < cols; ++c) v = fmaxf(v, m[(size_t)r * cols + c]);
  out[r] = v;
}

__global__ void row_normalize(int rows, int cols, const float *m, const float *sums, float *out) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y;
  if (c < cols && r < rows) out[(size_t)r * cols + c] = m[(size_t)r * cols + c] / (sums[r] + 1.0f);
}

__global__ void blur3x3(int w, int h, const float *in, float *out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < 1 || y < 1 || x >= w - 1 || y >= h - 1) return;
  float s = 0.0f;
  for (int dy = -1; dy <= 1; ++dy)
    for (int dx = -1; dx <= 1; ++dx) s += in[(y + dy) * w + (x + dx)];
  out[y * w + x] = s * (1.0f / 9.0f);
}

void run_rows(int rows, int cols, const float *m, float *row_sum_out, float *row_max_out, float *normalized,
              const float *img, float *blurred) {
  row_sum<<<(rows + 127) / 128, 128>>>(rows, cols, m, row_sum_out);
  row_max<<<(rows + 127) / 128, 128>>>(rows, cols, m, row_max_out);
  row_normalize<<<dim3((cols + 255) / 256, rows), 256>>>(rows, cols, m, row_sum_out, normalized);
  dim3 b(32, 8), g((cols + 31) / 32, (rows + 7) / 8);
  blur3x3<<<g, b>>>(cols, rows, img, blurred);
}
