"""Generate the benchmark project: N small but realistic .cu files, a header and a Makefile."""
from __future__ import annotations

from pathlib import Path

HEADER = """#pragma once
#include <cstdint>
template <typename T> __device__ __forceinline__ T clampv(T v, T lo, T hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}
"""

SOURCE = """#include "common.h"
#include <cstdio>

__global__ void saxpy_{i}(int n, float a, const float* __restrict__ x, float* __restrict__ y) {{
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x)
    y[j] = clampv(a * x[j] + y[j] + {i}.0f, -1e30f, 1e30f);
}}

__global__ void reduce_{i}(const float* x, float* out, int n) {{
  __shared__ float s[256];
  float acc = 0.f;
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) acc += x[j] * {i};
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {{
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }}
  if (threadIdx.x == 0) atomicAdd(out, s[0]);
}}

namespace {{
__global__ void stencil_{i}(const float* in, float* out, int w, int h) {{
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x <= 0 || y <= 0 || x >= w - 1 || y >= h - 1) return;
  out[y * w + x] = 0.25f * (in[y * w + x - 1] + in[y * w + x + 1] + in[(y - 1) * w + x] + in[(y + 1) * w + x]);
}}
}}

void launch_{i}(int n, float* x, float* y, float* out) {{
  saxpy_{i}<<<64, 256>>>(n, 2.0f, x, y);
  reduce_{i}<<<64, 256>>>(y, out, n);
  stencil_{i}<<<dim3(8, 8), dim3(16, 16)>>>(x, y, 128, n / 128);
  if (cudaGetLastError() != cudaSuccess) std::printf("launch_{i} failed\\n");
}}
"""

MAIN = """#include <cstdio>
{decls}
int main() {{
  float *x = nullptr, *y = nullptr, *o = nullptr;
{calls}
  std::printf("done\\n");
  return 0;
}}
"""

MAKEFILE = """NVCC ?= nvcc
NVCCFLAGS ?= -O3 -arch=sm_90
OBJS := {objs} main.o
app: $(OBJS)
\t$(NVCC) $(NVCCFLAGS) $(OBJS) -o $@
%.o: %.cu common.h
\t$(NVCC) $(NVCCFLAGS) -c $< -o $@
clean:
\trm -f $(OBJS) app
"""


def generate(root: Path, files: int = 20) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "common.h").write_text(HEADER)
    names = [f"k{i:02d}" for i in range(files - 1)]
    for i, name in enumerate(names):
        (root / f"{name}.cu").write_text(SOURCE.format(i=i))
    (root / "main.cu").write_text(MAIN.format(
        decls="\n".join(f"void launch_{i}(int, float*, float*, float*);" for i in range(len(names))),
        calls="\n".join(f"  launch_{i}(1 << 20, x, y, o);" for i in range(len(names)))))
    (root / "Makefile").write_text(MAKEFILE.format(objs=" ".join(f"{n}.o" for n in names)))
    return root
