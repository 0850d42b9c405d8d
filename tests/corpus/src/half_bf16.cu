// Reduced precision: __half / __half2 arithmetic and math, __nv_bfloat16 /
// __nv_bfloat162, FP8 (e4m3/e5m2) conversions, and mixed-precision kernels.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

__global__ void half_arith(const __half* a, const __half* b, __half* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half x = a[i], y = b[i];
  __half s = __hadd(x, y);
  __half p = __hmul(x, y);
  __half f = __hfma(x, y, __float2half(1.0f));
  __half m = __hmax(s, p);
  c[i] = __hsub(f, m) + __hdiv(x, __hadd(y, __float2half(2.0f))) + (x > y ? x : y);
}

__global__ void half2_arith(const __half2* a, const __half2* b, __half2* c, float* dot, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half2 x = a[i], y = b[i];
  __half2 s = __hadd2(x, y);
  __half2 p = __hmul2(x, y);
  __half2 f = __hfma2(x, y, __float2half2_rn(0.5f));
  __half2 r = __hmax2(__hsub2(s, p), __hmin2(f, __hneg2(x)));
  r = __hfma2_relu(r, x, y);
  c[i] = r;
  float2 fr = __half22float2(r);
  dot[i] = fr.x * fr.y + __low2float(x) + __high2float(y);
}

__global__ void half_math(const __half2* a, __half2* out, __half* outh, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half2 x = a[i];
  out[i] = __hadd2(h2exp(x), __hadd2(h2log(__habs2(x)), __hadd2(h2sqrt(__habs2(x)), h2rsqrt(__habs2(x)))));
  __half l = __low2half(x), h = __high2half(x);
  outh[i] = hsin(l) + hcos(h) + hexp2(l) + hlog2(__habs(h)) + hrcp(l) + hceil(h) + hfloor(l) + htrunc(h) + hrint(l);
}

__global__ void half_compare_convert(const float* f, const __half* h, __half2* packed, int* flags, short* ints, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half a = __float2half_rn(f[i]);
  __half b = h[i];
  packed[i] = __halves2half2(a, b);
  __half2 pr = __floats2half2_rn(f[i], f[i] * 2.0f);
  flags[i] = __hlt(a, b) + 2 * __hge(a, b) + 4 * __hisnan(a) + 8 * __hisinf(b) + 16 * __hbeq2(pr, pr) +
             32 * __heq(a, b);
  ints[i] = __half2short_rn(a) + __half2int_rz(b) + __half_as_short(a) + (short)__half2uint_rd(b);
  packed[n + i] = __lowhigh2highlow(__hmul2_sat(pr, __half2half2(b)));
}

__global__ void bf16_arith(const __nv_bfloat16* a, const __nv_bfloat162* b, __nv_bfloat16* c, __nv_bfloat162* d,
                           float* e, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat16 x = a[i];
  __nv_bfloat162 y = b[i];
  __nv_bfloat16 s = __hadd(x, __float2bfloat16(1.5f));
#if __CUDA_ARCH__ >= 800
  c[i] = __hfma(s, x, __low2bfloat16(y));
  __nv_bfloat162 z = __hfma2(y, y, __bfloat162bfloat162(x));
#else  // bf16 FMA is native from sm_80; emulate through float before that
  c[i] = __float2bfloat16(__bfloat162float(s) * __bfloat162float(x) + __low2float(y));
  float2 yf = __bfloat1622float2(y);
  __nv_bfloat162 z = __floats2bfloat162_rn(yf.x * yf.x + __bfloat162float(x), yf.y * yf.y + __bfloat162float(x));
#endif
  d[i] = __hmax2(z, __hmul2(y, __floats2bfloat162_rn(0.25f, -0.25f)));
  e[i] = __bfloat162float(x) + __low2float(z) + __high2float(z) + __bfloat162float(h2exp(y).x);
}

__global__ void bf16_convert(const float* f, const double* g, __nv_bfloat16* o, unsigned short* raw, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat16 a = __float2bfloat16_rn(f[i]);
  __nv_bfloat16 b = __float2bfloat16_rz(f[i]);
  __nv_bfloat16 c = __double2bfloat16(g[i]);
  o[i] = __hadd(__hadd(a, b), c);
  raw[i] = __bfloat16_as_ushort(a) ^ (unsigned short)__bfloat162int_rn(c);
}

// mixed precision: half storage, float accumulation
__global__ void half_dot(const __half2* a, const __half2* b, float* out, int n2) {
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n2; i += blockDim.x * gridDim.x) {
    float2 p = __half22float2(__hmul2(a[i], b[i]));
    acc += p.x + p.y;
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

// half shuffles
__global__ void half_warp_max(const __half2* in, __half2* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  __half2 v = i < n ? in[i] : __float2half2_rn(-65504.0f);
  for (int off = 16; off > 0; off >>= 1) v = __hmax2(v, __shfl_xor_sync(0xffffffffu, v, off));
  if ((threadIdx.x & 31) == 0 && i < n) out[i >> 5] = v;
}

// FP8 quantise / dequantise
__global__ void fp8_quantize(const float* in, __nv_fp8_e4m3* q4, __nv_fp8_e5m2* q5, __nv_fp8x2_e4m3* q2, float* deq,
                             float scale, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = in[i] * scale;
  __nv_fp8_e4m3 a(v);
  __nv_fp8_e5m2 b(v);
  q4[i] = a;
  q5[i] = b;
  q2[i] = __nv_fp8x2_e4m3(make_float2(v, -v));
  deq[i] = (float(a) + float(b)) / scale;
}
