// Separate compilation (-rdc=true only): extern __device__ functions and
// variables defined in another translation unit (.extern), internal-linkage
// statics, weak template instances, and dynamic parallelism (device-side
// kernel launches through the device runtime).
#include <cstdio>

// defined in another translation unit
extern __device__ float external_transform(float x, int mode);
extern __device__ int external_counter;
extern __device__ float external_table[];

// internal linkage: names get a per-module prefix in -rdc builds
static __device__ float local_helper(float x) { return x * 0.5f + 1.0f; }
namespace {
__device__ int anon_hits = 0;
__global__ void anon_kernel(float* p) { p[threadIdx.x] = local_helper(p[threadIdx.x]); }
}  // namespace

// visible definitions other TUs can link against
__device__ float shared_scale = 2.0f;
__device__ __noinline__ float exported_helper(float x) { return external_transform(x, 1) * shared_scale; }

template <typename T>
__device__ __noinline__ T twice(T x) {
  return x + x;
}

__global__ void uses_externals(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = external_transform(in[i], i & 3) + external_table[i & 15];
  out[i] = exported_helper(v) + local_helper(v) + twice(v) + (float)twice(i);
  atomicAdd(&external_counter, 1);
  atomicAdd(&anon_hits, 1);
}

// dynamic parallelism: a parent launches children per segment
__global__ void child_fill(float* seg, int len, float value) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < len) seg[i] = value + i;
}
__global__ void parent_launch(float* data, const int* offsets, int nseg) {
  int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= nseg) return;
  int begin = offsets[s], len = offsets[s + 1] - begin;
  if (len > 0) child_fill<<<(len + 127) / 128, 128>>>(data + begin, len, (float)s);
  if (s == 0) {
    anon_kernel<<<1, 32, 0, cudaStreamFireAndForget>>>(data);
    child_fill<<<1, 32, 0, cudaStreamTailLaunch>>>(data, 32, -1.0f);
  }
}

// recursive dynamic parallelism: quicksort-style partition tree depth
__global__ void recursive_launch(int* depth_hist, int depth, int max_depth) {
  atomicAdd(&depth_hist[depth], 1);
  if (depth + 1 < max_depth && threadIdx.x == 0) {
    recursive_launch<<<2, 1>>>(depth_hist, depth + 1, max_depth);
    if (cudaGetLastError() != cudaSuccess) printf("launch failed at depth %d\n", depth);
  }
}
