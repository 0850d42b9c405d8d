// Kernels for tests/passes/test_shared_padding.py (the scan fixture is bench/programs/scan).
// Regenerate: cd tests/passes/data && nvcc -ptx -arch=sm_90 -O3 shared_padding.cu -o shared_padding.ptx

// Tiled transpose without the +1 padding column: the column read tile[tx][ty] hits one bank
// 32 times. Launch: block (32, 8), grid (cdiv(cols, 32), cdiv(rows, 32)).
__global__ void transpose32(float *out, const float *in, int rows, int cols) {
  __shared__ float tile[32][32];
  int x = blockIdx.x * 32 + threadIdx.x;
  int y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

// Refused: the array's address leaves the shared window: cvta to a generic pointer that a
// generic load dereferences (the pointer is either into the tile or into global memory).
__global__ void escape_cvta(float *out, const float *in, int pick) {
  __shared__ float buf[256];
  buf[threadIdx.x] = threadIdx.x * 2.0f;
  __syncthreads();
  const float *p = pick ? &buf[(threadIdx.x * 32) % 256] : in + threadIdx.x;
  out[threadIdx.x] = *p;
}

// Refused: the shared address itself is stored to global memory as data.
__global__ void escape_stored(unsigned *addrs, float *out) {
  __shared__ float buf[256];
  buf[threadIdx.x] = threadIdx.x;
  __syncthreads();
  addrs[threadIdx.x] = (unsigned)__cvta_generic_to_shared(&buf[threadIdx.x]);
  out[threadIdx.x] = buf[(threadIdx.x * 32) % 256];
}

// Refused: dynamic (extern, unsized) shared memory.
__global__ void dynamic_shared(float *out) {
  extern __shared__ float dyn[];
  dyn[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = dyn[(threadIdx.x * 32) % blockDim.x];
}

// Refused: a padded-able static tile beside dynamic shared memory. The program sizes the
// dynamic part at launch (up to the device's limit minus the static part), so growing the
// static tile could make its launches fail.
__global__ void static_and_dynamic(float *out) {
  __shared__ float tile[32][32];
  extern __shared__ float dyn2[];
  tile[threadIdx.x % 32][threadIdx.x / 32] = threadIdx.x;
  dyn2[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x / 32][threadIdx.x % 32] + dyn2[(threadIdx.x * 32) % blockDim.x];
}
