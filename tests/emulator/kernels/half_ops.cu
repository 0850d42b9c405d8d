// f16 / bf16 arithmetic (scalar and packed x2), min/max with NaN, compares.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

extern "C" __global__ void f16_ops(const unsigned short* A, const unsigned short* B,
                                   const unsigned short* C, unsigned short* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half a = __ushort_as_half(A[i]), b = __ushort_as_half(B[i]), c = __ushort_as_half(C[i]);
  __nv_bfloat16 x = __ushort_as_bfloat16(A[i]), y = __ushort_as_bfloat16(B[i]), z = __ushort_as_bfloat16(C[i]);
  int k = 0;
#define H(v) out[(k++) * n + i] = __half_as_ushort(v)
#define G(v) out[(k++) * n + i] = __bfloat16_as_ushort(v)
#define U(v) out[(k++) * n + i] = (unsigned short)(v)
  H(__hadd(a, b)); H(__hsub(a, b)); H(__hmul(a, b)); H(__hfma(a, b, c)); H(__hadd_sat(a, b));
  H(__hmul_sat(a, b)); H(__hfma_sat(a, b, c)); H(__hmin(a, b)); H(__hmax(a, b));
  H(__hmin_nan(a, b)); H(__hmax_nan(a, b)); H(__hneg(a)); H(__habs(a)); H(__hfma_relu(a, b, c));
  H(__hadd_rn(a, b)); H(__hmul_rn(a, b));
  U(__heq(a, b) | (__hlt(a, b) << 1) | (__hle(a, b) << 2) | (__hgt(a, b) << 3) | (__hge(a, b) << 4) |
    (__hne(a, b) << 5) | (__hequ(a, b) << 6) | (__hltu(a, b) << 7) | (__hisnan(a) << 8) | (__hneu(a, b) << 9));
  G(__hadd(x, y)); G(__hsub(x, y)); G(__hmul(x, y)); G(__hfma(x, y, z)); G(__hmin(x, y));
  G(__hmax(x, y)); G(__hmin_nan(x, y)); G(__hmax_nan(x, y)); G(__hneg(x)); G(__habs(x));
  G(__hfma_relu(x, y, z)); G(__hadd_sat(x, y));
  U(__heq(x, y) | (__hlt(x, y) << 1) | (__hgt(x, y) << 3) | (__hne(x, y) << 5) | (__hisnan(x) << 8));
  {
    __half2 p = __halves2half2(a, b), q = __halves2half2(c, a), r = __halves2half2(b, c);
    __half2 s = __hadd2(p, q), t = __hfma2(p, q, r), u = __hmul2(p, q), v = __hmax2(p, q);
    H(__low2half(s)); H(__high2half(s)); H(__low2half(t)); H(__high2half(t));
    H(__low2half(u)); H(__high2half(u)); H(__low2half(v)); H(__high2half(v));
    __nv_bfloat162 P = __halves2bfloat162(x, y), Q = __halves2bfloat162(z, x), R = __halves2bfloat162(y, z);
    __nv_bfloat162 S = __hadd2(P, Q), T = __hfma2(P, Q, R), V = __hmin2(P, Q);
    G(__low2bfloat16(S)); G(__high2bfloat16(S)); G(__low2bfloat16(T)); G(__high2bfloat16(T));
    G(__low2bfloat16(V)); G(__high2bfloat16(V));
  }
#undef H
#undef G
#undef U
}
