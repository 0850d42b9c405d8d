// The CUDA runtime the bench/restructure programs use, on the CPU, for their tests: a program's
// .cu with `#include <cuda_runtime.h>` replaced by this header and every `kernel<<<grid, block>>>(args)`
// by `fake_launch(grid, block, kernel, args)` compiles with g++ and runs its kernels serially, one
// thread after the other (no __syncthreads: these kernels have none), its host code unchanged:
// the inputs, the repetitions, the timers (a fake clock), the self-checks, the lines and the exit
// code. Device memory is host memory.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define __global__ static

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
static dim3 blockIdx, threadIdx, blockDim, gridDim;

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
struct fake_event { double ms; };
typedef fake_event *cudaEvent_t;
static double fake_clock_ms = 0;

static inline const char *cudaGetErrorString(cudaError_t) { return "fake CUDA error"; }
template <class T> static cudaError_t cudaMalloc(T **p, size_t n) {
  *p = (T *)malloc(n);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
static cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { memcpy(d, s, n); return cudaSuccess; }
static cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
static cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
static cudaError_t cudaGetLastError() { return cudaSuccess; }
static cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = new fake_event{0}; return cudaSuccess; }
static cudaError_t cudaEventRecord(cudaEvent_t e) { e->ms = (fake_clock_ms += 0.25); return cudaSuccess; }
static cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
static cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = (float)(b->ms - a->ms);
  return cudaSuccess;
}
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

template <class K, class... A> static void fake_launch(dim3 g, dim3 b, K kernel, A... args) {
  gridDim = g;
  blockDim = b;
  for (unsigned bz = 0; bz < g.z; ++bz)
    for (unsigned by = 0; by < g.y; ++by)
      for (unsigned bx = 0; bx < g.x; ++bx)
        for (unsigned tz = 0; tz < b.z; ++tz)
          for (unsigned ty = 0; ty < b.y; ++ty)
            for (unsigned tx = 0; tx < b.x; ++tx) {
              blockIdx = dim3(bx, by, bz);
              threadIdx = dim3(tx, ty, tz);
              kernel(args...);
            }
}
