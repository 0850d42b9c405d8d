// Kernels that end in floating-point atomics, for tests/judge/test_atomic_log.py.
// Variants (macros) are candidates the judge must accept or reject; build_ptx.py makes them.
#define THREADS 256

// ddot as HPC mini-apps write it: grid-stride partial sums, a shared-memory tree in the
// block, one double atomicAdd per block.
extern "C" __global__ void ddot(int n, const double *x, const double *y, double *result) {
  __shared__ double cache[THREADS];
  double temp = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    temp += x[i] * y[i];
#ifdef VARIANT_SHFL
  // reassociated: a warp-shuffle tree, then the warps' sums (other partial sums)
  for (int o = 16; o > 0; o >>= 1) temp += __shfl_down_sync(0xffffffffu, temp, o);
  if (threadIdx.x % 32 == 0) cache[threadIdx.x / 32] = temp;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (int w = 0; w < blockDim.x / 32; ++w) s += cache[w];
    atomicAdd(result, s);
  }
#else
  cache[threadIdx.x] = temp;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) cache[threadIdx.x] += cache[threadIdx.x + s];
    __syncthreads();
  }
#if defined(VARIANT_DROP)
  if (threadIdx.x == 0 && blockIdx.x != 1) atomicAdd(result, cache[0]);   // block 1's partial lost
#elif defined(VARIANT_TWICE)
  if (threadIdx.x == 0) { atomicAdd(result, cache[0]); if (blockIdx.x == 0) atomicAdd(result, cache[0]); }
#elif defined(VARIANT_SPLIT)
  // the same total in two adds per block: other contributions
  if (threadIdx.x == 0) { atomicAdd(result, cache[0] - 1.0); atomicAdd(result, 1.0); }
#else
  if (threadIdx.x == 0) atomicAdd(result, cache[0]);
#endif
#endif
}

// Per-thread float atomicAdd into bins (a histogram of weights).
extern "C" __global__ void bins(int n, const float *v, const int *k, float *hist) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef VARIANT_NEIGHBOUR
  if (i < n) atomicAdd(&hist[i == 7 ? (k[i] + 1) % 16 : k[i]], v[i]);   // one weight in another bin
#else
  if (i < n) atomicAdd(&hist[k[i]], v[i]);
#endif
}
