// Element-wise f32/f64 arithmetic with every rounding mode, ftz, sat, NaN handling,
// min/max, compares and classification. Output column k of n: out[k * n + i].
#include <cstdint>
#define ASM1(op, d, a) asm(op " %0, %1;" : "=f"(d) : "f"(a))
#define ASM2(op, d, a, b) asm(op " %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b))
#define ASM3(op, d, a, b, c) asm(op " %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c))
#define DASM2(op, d, a, b) asm(op " %0, %1, %2;" : "=d"(d) : "d"(a), "d"(b))
#define DASM3(op, d, a, b, c) asm(op " %0, %1, %2, %3;" : "=d"(d) : "d"(a), "d"(b), "d"(c))

__device__ __forceinline__ unsigned cmp_mask_f32(float a, float b) {
  unsigned m = 0, p;
#define C(op, bit) asm("{ .reg .pred q; setp." op ".f32 q, %1, %2; selp.u32 %0, 1, 0, q; }" : "=r"(p) : "f"(a), "f"(b)); m |= p << bit;
  C("eq", 0) C("ne", 1) C("lt", 2) C("le", 3) C("gt", 4) C("ge", 5) C("equ", 6) C("neu", 7)
  C("ltu", 8) C("leu", 9) C("gtu", 10) C("geu", 11) C("num", 12) C("nan", 13)
  C("lt.ftz", 14) C("eq.ftz", 15)
#undef C
#define T(op, bit) asm("{ .reg .pred q; testp." op ".f32 q, %1; selp.u32 %0, 1, 0, q; }" : "=r"(p) : "f"(a)); m |= p << bit;
  T("finite", 16) T("infinite", 17) T("number", 18) T("notanumber", 19) T("normal", 20) T("subnormal", 21)
#undef T
  return m;
}

__device__ __forceinline__ unsigned cmp_mask_f64(double a, double b) {
  unsigned m = 0, p;
#define C(op, bit) asm("{ .reg .pred q; setp." op ".f64 q, %1, %2; selp.u32 %0, 1, 0, q; }" : "=r"(p) : "d"(a), "d"(b)); m |= p << bit;
  C("eq", 0) C("ne", 1) C("lt", 2) C("le", 3) C("gt", 4) C("ge", 5) C("equ", 6) C("neu", 7)
  C("ltu", 8) C("leu", 9) C("gtu", 10) C("geu", 11) C("num", 12) C("nan", 13)
#undef C
#define T(op, bit) asm("{ .reg .pred q; testp." op ".f64 q, %1; selp.u32 %0, 1, 0, q; }" : "=r"(p) : "d"(a)); m |= p << bit;
  T("finite", 16) T("infinite", 17) T("number", 18) T("notanumber", 19) T("normal", 20) T("subnormal", 21)
#undef T
  return m;
}

extern "C" __global__ void f32_ops(const float* A, const float* B, const float* C, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = A[i], b = B[i], c = C[i], t, r;
  int k = 0;
#define O(v) out[(k++) * n + i] = (v)
  O(a + b); O(a - b); O(a * b); O(a / b); O(fmaf(a, b, c)); O(__fadd_rn(__fmul_rn(a, b), c));
  O(sqrtf(a));
  O(__fadd_rz(a, b)); O(__fadd_ru(a, b)); O(__fadd_rd(a, b));
  O(__fsub_rz(a, b)); O(__fsub_ru(a, b)); O(__fsub_rd(a, b));
  O(__fmul_rz(a, b)); O(__fmul_ru(a, b)); O(__fmul_rd(a, b));
  O(__fmaf_rz(a, b, c)); O(__fmaf_ru(a, b, c)); O(__fmaf_rd(a, b, c));
  O(__fdiv_rz(a, b)); O(__fdiv_ru(a, b)); O(__fdiv_rd(a, b));
  O(__fsqrt_rz(a)); O(__fsqrt_ru(a)); O(__fsqrt_rd(a));
  O(__frcp_rn(a)); O(__frcp_rz(a)); O(__frcp_ru(a)); O(__frcp_rd(a));
  O(fminf(a, b)); O(fmaxf(a, b)); O(fabsf(a)); O(-a); O(copysignf(a, b));
  O(floorf(a)); O(ceilf(a)); O(truncf(a)); O(rintf(a)); O(__saturatef(a)); O(roundf(a));
  ASM2("add.ftz.f32", r, a, b); O(r);
  ASM2("mul.ftz.f32", r, a, b); O(r);
  ASM3("fma.rn.ftz.f32", r, a, b, c); O(r);
  ASM2("div.rn.ftz.f32", r, a, b); O(r);
  ASM1("sqrt.rn.ftz.f32", r, a); O(r);
  ASM2("add.sat.f32", r, a, b); O(r);
  ASM3("fma.rn.sat.f32", r, a, b, c); O(r);
  ASM2("min.NaN.f32", r, a, b); O(r);
  ASM2("max.NaN.f32", r, a, b); O(r);
  ASM2("min.ftz.f32", r, a, b); O(r);
  ASM1("abs.ftz.f32", r, a); O(r);
  ASM1("neg.ftz.f32", r, a); O(r);
  ASM2("mul.rz.ftz.f32", r, a, b); O(r);
  ASM2("add.rm.ftz.sat.f32", r, a, b); O(r);
  ASM1("cvt.rni.ftz.f32.f32", r, a); O(r);
  ASM1("cvt.ftz.f32.f32", r, a); O(r);
  // plain mul.f32 feeding plain add.f32 / sub.f32: may ptxas contract them?
  ASM2("mul.f32", t, a, b); ASM2("add.f32", r, t, c); O(r);
  ASM2("mul.f32", t, a, b); ASM2("sub.f32", r, c, t); O(r);
  O(__uint_as_float(cmp_mask_f32(a, b)));
  {
    float d; asm("slct.f32.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c)); O(d);
    asm("slct.ftz.f32.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c)); O(d);
    unsigned s; asm("set.gtu.u32.f32 %0, %1, %2;" : "=r"(s) : "f"(a), "f"(b)); O(__uint_as_float(s));
    asm("set.lt.f32.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b)); O(d);
  }
#undef O
}

extern "C" __global__ void f64_ops(const double* A, const double* B, const double* C, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double a = A[i], b = B[i], c = C[i], t, r;
  int k = 0;
#define O(v) out[(k++) * n + i] = (v)
  O(a + b); O(a - b); O(a * b); O(a / b); O(fma(a, b, c)); O(__dadd_rn(__dmul_rn(a, b), c));
  O(sqrt(a));
  O(__dadd_rz(a, b)); O(__dadd_ru(a, b)); O(__dadd_rd(a, b));
  O(__dsub_rz(a, b)); O(__dsub_ru(a, b)); O(__dsub_rd(a, b));
  O(__dmul_rz(a, b)); O(__dmul_ru(a, b)); O(__dmul_rd(a, b));
  O(__fma_rz(a, b, c)); O(__fma_ru(a, b, c)); O(__fma_rd(a, b, c));
  O(__ddiv_rz(a, b)); O(__ddiv_ru(a, b)); O(__ddiv_rd(a, b));
  O(__dsqrt_rz(a)); O(__dsqrt_ru(a)); O(__dsqrt_rd(a));
  O(__drcp_rn(a)); O(__drcp_rz(a)); O(__drcp_ru(a)); O(__drcp_rd(a));
  O(fmin(a, b)); O(fmax(a, b)); O(fabs(a)); O(-a); O(copysign(a, b));
  O(floor(a)); O(ceil(a)); O(trunc(a)); O(rint(a));
  DASM2("mul.f64", t, a, b); DASM2("add.f64", r, t, c); O(r);
  O(__longlong_as_double((long long)cmp_mask_f64(a, b)));
#undef O
}
