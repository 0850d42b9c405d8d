// Memory spaces: __constant__ tables, initialized __device__ arrays, vector and narrow
// loads and stores, __ldg, generic pointers into shared / global / local memory.
#include <cstdint>
__constant__ int c_table[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
__device__ float g_coef[4] = {0.5f, -1.25f, 3.0f, 1e-3f};
__device__ unsigned char g_bytes[8] = {1, 2, 250, 4, 5, 6, 7, 8};

__device__ __noinline__ float sum_via_generic(const float* p, int count) {
  float s = 0.0f;
  for (int j = 0; j < count; ++j) s += p[j] * (float)(j + 1);
  return s;
}

__device__ __noinline__ void fill_local(int* p, int count, int seed) {
  for (int j = 0; j < count; ++j) p[j] = seed * (j + 1) ^ (j << 4);
}

extern "C" __global__ void memory_ops(const float4* v4, const int2* v2, const double2* d2,
                                      const unsigned char* bytes, const short* shorts,
                                      float* outf, int* outi, unsigned char* outb, int n) {
  __shared__ float sm[128];
  int tid = threadIdx.x;
  int i = blockIdx.x * blockDim.x + tid;
  float4 a = v4[i];
  int2 b = __ldg(&v2[i]);
  double2 d = d2[i];
  unsigned char u = bytes[i];
  short s = shorts[i];
  sm[tid] = a.x + a.y;
  __syncthreads();
  int k = 0;
#define OI(x) outi[(k++) * n + i] = (x)
  outf[i] = a.x * g_coef[0] + a.y * g_coef[1] + a.z * g_coef[2] + a.w * g_coef[3];
  outf[n + i] = sum_via_generic(&sm[(tid / 4) * 4], 4);           // generic -> shared
  outf[2 * n + i] = sum_via_generic((const float*)&v4[i], 4);     // generic -> global
  outf[3 * n + i] = (float)(d.x - d.y);
  OI(c_table[b.x & 15] + c_table[(b.y >> 4) & 15]);
  OI(b.x ^ b.y);
  OI((int)u * 3 + (int)s);
  OI(g_bytes[u & 7]);
  int loc[8];
  fill_local(loc, 8, b.x);                                       // generic -> local
  OI(loc[u & 7] + loc[(u >> 3) & 7]);
  float4 w = make_float4(a.w, a.z, a.y, a.x);
  reinterpret_cast<float4*>(outf + 4 * n)[i] = w;
  outb[i] = (unsigned char)(u + (unsigned char)s);
  outb[n + i] = (unsigned char)min(255, (int)u + 100);
#undef OI
}
