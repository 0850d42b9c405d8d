// Index math written the way users write it, for the address-arithmetic pass tests
// (tests/passes/test_address_arith.py).
// Regenerate the PTX with:
//   nvcc -arch=sm_90 -O3 -ptx address_arith_loops.cu -o address_arith_loops.ptx

// ---- division by a loop-invariant divisor: fires ------------------------------------

// unsigned quotient and remainder of full-range data by a kernel scalar
__global__ void quot_rem_u(const unsigned* __restrict__ x, unsigned* q, unsigned* r, int n, unsigned w) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    q[i] = x[i] / w;
    r[i] = x[i] % w;
  }
}

// signed quotient and remainder (truncation toward zero)
__global__ void quot_rem_s(const int* __restrict__ x, int* q, int* r, int n, int w) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    q[i] = x[i] / w;
    r[i] = x[i] % w;
  }
}

// 2-D coordinates from a flat index: row = i / width, col = i % width
__global__ void unflatten(const float* __restrict__ in, float* out, int n, int width) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    int row = i / width, col = i % width;
    out[col * (n / width + 1) + row] = in[i];
  }
}

// division by blockDim.x inside a loop
__global__ void per_block_bucket(const unsigned* __restrict__ x, unsigned* out, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    out[i] = x[i] / blockDim.x;
}

// ---- hoisting: fires --------------------------------------------------------------------

// the shared-memory slot address is recomputed in every tile iteration
__global__ void tile_sum(const float4* __restrict__ pos, float* out, int n) {
  extern __shared__ float4 tile[];
  float acc = 0.f;
  for (int t = 0; t < n; t += blockDim.x) {
    int j = t + threadIdx.x;
    tile[threadIdx.x] = j < n ? pos[j] : make_float4(0.f, 0.f, 0.f, 0.f);
    __syncthreads();
    for (int k = 0; k < blockDim.x; ++k) acc += tile[k].x * tile[k].w;
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// ---- must not fire (division) ------------------------------------------------------------

// not in a loop: the one-time magic setup would cost more than the division
__global__ void div_once(const unsigned* x, unsigned* q, unsigned w) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  q[i] = x[i] / w;
}

// constant divisor: nvcc already multiplies by a magic number
__global__ void div_const(const unsigned* x, unsigned* q, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    q[i] = x[i] / 7u;
}

// 64-bit division
__global__ void div_64(const unsigned long long* x, unsigned long long* q, int n, unsigned long long w) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    q[i] = x[i] / w;
}

// the divisor changes in the loop
__global__ void div_varying(const unsigned* x, unsigned* q, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    q[i] = x[i] / (unsigned)(i + 1);
}
