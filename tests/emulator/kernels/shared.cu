// Shared memory and barriers: tree reductions (static and dynamic shared memory),
// __syncthreads_count/and/or, a tiled transpose with a 2-D block, and a loop whose
// iterations hold divergent work between two barriers.
extern "C" __global__ void tree_reduce(const int* in, const float* fin, int* out, float* fout, int n) {
  __shared__ int s[256];
  __shared__ float f[256];
  int tid = threadIdx.x;
  int i = blockIdx.x * blockDim.x + tid;
  s[tid] = i < n ? in[i] : 0;
  f[tid] = i < n ? fin[i] : 0.0f;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) {
      s[tid] += s[tid + k];
      f[tid] += f[tid + k];
    }
    __syncthreads();
  }
  if (tid == 0) {
    out[blockIdx.x] = s[0];
    fout[blockIdx.x] = f[0];
  }
}

extern "C" __global__ void dyn_reduce(const double* in, double* out, int* counts, int n) {
  extern __shared__ double sd[];
  int tid = threadIdx.x;
  int i = blockIdx.x * blockDim.x + tid;
  double v = i < n ? in[i] : 0.0;
  sd[tid] = v;
  int c = __syncthreads_count(v > 0.0);
  int a = __syncthreads_and(v > -100.0);
  int o = __syncthreads_or(v > 100.0);
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sd[tid] = sd[tid] + sd[tid + k];
    __syncthreads();
  }
  if (tid == 0) {
    out[blockIdx.x] = sd[0];
    counts[3 * blockIdx.x] = c;
    counts[3 * blockIdx.x + 1] = a;
    counts[3 * blockIdx.x + 2] = o;
  }
}

extern "C" __global__ void transpose(const float* in, float* out, int w, int h) {
  __shared__ float tile[32][33];
  int x = blockIdx.x * 32 + threadIdx.x;
  int y = blockIdx.y * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < w && y + j < h) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int j = 0; j < 32; j += 8)
    if (x < h && y + j < w) out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}

extern "C" __global__ void barrier_loop(const int* in, int* out, int iters) {
  __shared__ int s[128];
  int tid = threadIdx.x;
  int x = in[blockIdx.x * blockDim.x + tid];
  s[tid] = x;
  for (int it = 0; it < iters; ++it) {
    __syncthreads();
    int v = s[(tid + it + 1) % blockDim.x];
    if (tid % 3 == 0) {
      int steps = (v & 15) + it;
      for (int j = 0; j < steps; ++j) v = v * 1103515245 + 12345 + j;
    } else if (tid % 3 == 1) {
      v ^= v >> 7;
    }
    __syncthreads();
    s[tid] = v + x;
    x += v & 0xff;
  }
  __syncthreads();
  out[blockIdx.x * blockDim.x + tid] = s[tid] ^ x;
}
