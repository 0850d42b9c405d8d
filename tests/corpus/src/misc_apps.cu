// Small applications as found in tutorials and benchmarks: N-body forces,
// Mandelbrot, bitonic sort in shared memory, CSR SpMV (scalar and vector),
// Monte-Carlo pi with a hand-rolled PCG generator, and a complete host program
// with main().
#include <cstdio>
#include <cstdlib>
#include <cstdint>

__global__ void nbody_forces(const float4* __restrict__ pos, float3* __restrict__ acc, int n, float soft2) {
  extern __shared__ float4 sh_pos[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 me = i < n ? pos[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  float3 a = make_float3(0.f, 0.f, 0.f);
  for (int tile = 0; tile < (n + blockDim.x - 1) / blockDim.x; ++tile) {
    int j = tile * blockDim.x + threadIdx.x;
    sh_pos[threadIdx.x] = j < n ? pos[j] : make_float4(0.f, 0.f, 0.f, 0.f);
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < (int)blockDim.x; ++k) {
      float4 o = sh_pos[k];
      float dx = o.x - me.x, dy = o.y - me.y, dz = o.z - me.z;
      float r2 = dx * dx + dy * dy + dz * dz + soft2;
      float inv = rsqrtf(r2);
      float s = o.w * inv * inv * inv;
      a.x += dx * s;
      a.y += dy * s;
      a.z += dz * s;
    }
    __syncthreads();
  }
  if (i < n) acc[i] = a;
}

__global__ void mandelbrot(unsigned char* img, int w, int h, float x0, float y0, float scale, int max_iter) {
  int px = blockIdx.x * blockDim.x + threadIdx.x;
  int py = blockIdx.y * blockDim.y + threadIdx.y;
  if (px >= w || py >= h) return;
  float cr = x0 + px * scale, ci = y0 + py * scale;
  float zr = 0.f, zi = 0.f;
  int it = 0;
  while (zr * zr + zi * zi < 4.0f && it < max_iter) {
    float t = zr * zr - zi * zi + cr;
    zi = 2.0f * zr * zi + ci;
    zr = t;
    ++it;
  }
  img[py * w + px] = (unsigned char)(255 * it / max_iter);
}

template <int N>
__global__ void bitonic_sort_shared(float* data) {
  __shared__ float s[N];
  float* d = data + blockIdx.x * N;
  for (int i = threadIdx.x; i < N; i += blockDim.x) s[i] = d[i];
  __syncthreads();
  for (int k = 2; k <= N; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < N; i += blockDim.x) {
        int ixj = i ^ j;
        if (ixj > i) {
          bool up = (i & k) == 0;
          float a = s[i], b = s[ixj];
          if ((a > b) == up) {
            s[i] = b;
            s[ixj] = a;
          }
        }
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < N; i += blockDim.x) d[i] = s[i];
}
template __global__ void bitonic_sort_shared<1024>(float*);

__global__ void spmv_csr_scalar(int rows, const int* __restrict__ rowptr, const int* __restrict__ colidx,
                                const float* __restrict__ vals, const float* __restrict__ x, float* __restrict__ y) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.0f;
  for (int k = rowptr[r]; k < rowptr[r + 1]; ++k) acc += vals[k] * __ldg(&x[colidx[k]]);
  y[r] = acc;
}

__global__ void spmv_csr_vector(int rows, const int* __restrict__ rowptr, const int* __restrict__ colidx,
                                const float* __restrict__ vals, const float* __restrict__ x, float* __restrict__ y) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
  if (warp >= rows) return;
  float acc = 0.0f;
  for (int k = rowptr[warp] + lane; k < rowptr[warp + 1]; k += 32) acc += vals[k] * x[colidx[k]];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (lane == 0) y[warp] = acc;
}

struct Pcg32 {
  uint64_t state, inc;
  __device__ Pcg32(uint64_t seed, uint64_t seq) : state(0), inc((seq << 1u) | 1u) {
    next();
    state += seed;
    next();
  }
  __device__ uint32_t next() {
    uint64_t old = state;
    state = old * 6364136223846793005ULL + inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
  }
  __device__ float uniform() { return (next() >> 8) * (1.0f / 16777216.0f); }
};

__global__ void monte_carlo_pi(unsigned long long seed, int samples_per_thread, unsigned long long* hits) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  Pcg32 rng(seed, tid);
  unsigned long long local = 0;
  for (int s = 0; s < samples_per_thread; ++s) {
    float x = rng.uniform(), y = rng.uniform();
    local += x * x + y * y <= 1.0f;
  }
  atomicAdd(hits, local);
}

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));        \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

int main() {
  const int n = 1 << 14;
  float4* d_pos;
  float3* d_acc;
  unsigned long long* d_hits;
  CHECK(cudaMalloc(&d_pos, n * sizeof(float4)));
  CHECK(cudaMalloc(&d_acc, n * sizeof(float3)));
  CHECK(cudaMalloc(&d_hits, sizeof(unsigned long long)));
  CHECK(cudaMemset(d_pos, 0, n * sizeof(float4)));
  CHECK(cudaMemset(d_hits, 0, sizeof(unsigned long long)));
  nbody_forces<<<n / 256, 256, 256 * sizeof(float4)>>>(d_pos, d_acc, n, 1e-3f);
  monte_carlo_pi<<<64, 256>>>(1234ull, 1024, d_hits);
  CHECK(cudaGetLastError());
  unsigned long long hits = 0;
  CHECK(cudaMemcpy(&hits, d_hits, sizeof(hits), cudaMemcpyDeviceToHost));
  printf("pi ~ %f\n", 4.0 * hits / (64.0 * 256 * 1024));
  CHECK(cudaFree(d_pos));
  CHECK(cudaFree(d_acc));
  CHECK(cudaFree(d_hits));
  return 0;
}
