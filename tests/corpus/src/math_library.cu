// The CUDA math library: single- and double-precision functions, fast
// intrinsics, rounding-mode intrinsics, integer intrinsics and conversions.
#include <cstdint>

__global__ void float_transcendentals(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float s, c;
  sincosf(v, &s, &c);
  out[0 * n + i] = sinf(v) + cosf(v) * tanf(v);
  out[1 * n + i] = expf(v) + exp2f(v) + exp10f(v) + expm1f(v);
  out[2 * n + i] = logf(fabsf(v) + 1.0f) + log2f(v * v + 1.0f) + log10f(v * v + 2.0f) + log1pf(fabsf(v));
  out[3 * n + i] = powf(fabsf(v), 1.7f) + powf(v, 3.0f);
  out[4 * n + i] = s * c + atan2f(v, 1.5f) + asinf(v * 0.1f) + acosf(v * 0.1f) + atanf(v);
  out[5 * n + i] = sinhf(v) + coshf(v) + tanhf(v) + asinhf(v) + acoshf(fabsf(v) + 1.0f) + atanhf(v * 0.01f);
  out[6 * n + i] = sinpif(v) + cospif(v);
}

__global__ void float_algebraic(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = y[i];
  out[0 * n + i] = sqrtf(fabsf(a)) + rsqrtf(fabsf(b) + 1e-6f) + cbrtf(a) + rcbrtf(b + 2.0f);
  out[1 * n + i] = hypotf(a, b) + norm3df(a, b, 1.0f) + rhypotf(a, b + 1.0f);
  out[2 * n + i] = fmodf(a, b + 3.0f) + remainderf(a, 2.5f) + fdimf(a, b);
  out[3 * n + i] = floorf(a) + ceilf(b) + roundf(a * b) + truncf(b) + rintf(a) + nearbyintf(b);
  out[4 * n + i] = fminf(a, b) + fmaxf(a, b) + copysignf(a, b) + fabsf(b) + ldexpf(a, 3);
  out[5 * n + i] = fmaf(a, b, 1.0f) + a / b;
  int e;
  float m = frexpf(a, &e);
  out[6 * n + i] = m + (float)e + logbf(b) + (float)ilogbf(b + 1.0f) + scalbnf(a, -2);
  out[7 * n + i] = (isnan(a) ? 1.0f : 0.0f) + (isinf(b) ? 2.0f : 0.0f) + (signbit(a) ? 4.0f : 0.0f) +
                   (isfinite(a * b) ? 8.0f : 0.0f);
}

__global__ void float_special(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  out[0 * n + i] = erff(v) + erfcf(v) + erfinvf(v * 0.5f) + erfcinvf(v * 0.5f + 1.0f) + erfcxf(v);
  out[1 * n + i] = lgammaf(fabsf(v) + 0.5f) + tgammaf(fabsf(v) + 0.5f);
  out[2 * n + i] = normcdff(v) + normcdfinvf(0.5f + 0.4f * tanhf(v)) + j0f(v) + y1f(fabsf(v) + 0.1f);
  out[3 * n + i] = cyl_bessel_i0f(v) + cyl_bessel_i1f(v);
}

__global__ void fast_intrinsics(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = y[i];
  out[0 * n + i] = __expf(a) + __logf(fabsf(b) + 1.0f) + __log2f(fabsf(a) + 1.0f) + __log10f(fabsf(b) + 2.0f);
  out[1 * n + i] = __sinf(a) + __cosf(b) + __tanf(a * 0.1f) + __powf(fabsf(a), b);
  float s, c;
  __sincosf(a, &s, &c);
  out[2 * n + i] = __fdividef(a, b) + s * c + __exp10f(b * 0.1f) + __saturatef(a);
  out[3 * n + i] = __fadd_rn(a, b) + __fadd_rz(a, b) + __fmul_ru(a, b) + __fmul_rd(a, b) + __fsub_rn(a, b);
  out[4 * n + i] = __fmaf_rn(a, b, 1.0f) + __fmaf_rz(a, b, 2.0f) + __fmaf_ru(a, b, 3.0f) + __fmaf_rd(a, b, 4.0f);
  out[5 * n + i] = __frcp_rn(b) + __fsqrt_rn(fabsf(a)) + __fsqrt_rd(fabsf(b)) + __frsqrt_rn(fabsf(a) + 1.0f) +
                   __fdiv_rn(a, b) + __fdiv_rz(a, b);
  out[6 * n + i] = __fmaf_ieee_rn(a, b, 0.5f) + __fadd_ru(a, 1.0f);
}

__global__ void double_math(const double* x, const double* y, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double a = x[i], b = y[i];
  double s, c;
  sincos(a, &s, &c);
  out[0 * n + i] = sin(a) + cos(b) + tan(a * 0.1) + s * c + sinpi(a);
  out[1 * n + i] = exp(a) + exp2(b) + expm1(a * 0.5) + log(fabs(a) + 1.0) + log1p(fabs(b)) + log2(b * b + 1.0);
  out[2 * n + i] = pow(fabs(a), b) + sqrt(fabs(b)) + rsqrt(fabs(a) + 1.0) + cbrt(a) + hypot(a, b);
  out[3 * n + i] = erf(a) + erfc(b) + lgamma(fabs(a) + 1.0) + tgamma(fabs(b) + 0.5) + normcdf(a);
  out[4 * n + i] = fma(a, b, 1.0) + a / b + fmod(a, b + 3.0) + floor(a) + ceil(b) + round(a) + trunc(b);
  out[5 * n + i] = atan2(a, b) + asin(a * 0.01) + acos(b * 0.01) + atan(a) + tanh(b) + sinh(a * 0.1);
  out[6 * n + i] = __dadd_rn(a, b) + __dmul_rz(a, b) + __fma_rd(a, b, 1.0) + __drcp_rn(b) + __dsqrt_ru(fabs(a)) +
                   __ddiv_rn(a, b);
}

__global__ void integer_intrinsics(const unsigned* x, const unsigned* y, const unsigned long long* z,
                                   unsigned* out, unsigned long long* out64, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned a = x[i], b = y[i];
  unsigned long long w = z[i];
  out[0 * n + i] = __popc(a) + __clz(b) + __ffs(a) + __brev(b) + __popcll(w) + __clzll(w) + __ffsll(w);
  out[1 * n + i] = __umulhi(a, b) + __mulhi((int)a, (int)b) + __umul24(a, b) + __mul24((int)a, (int)b);
  out[2 * n + i] = __byte_perm(a, b, 0x5140) + __funnelshift_l(a, b, i & 31) + __funnelshift_rc(a, b, 7);
  out[3 * n + i] = __sad((int)a, (int)b, 3u) + __usad(a, b, 1u) + __uhadd(a, b) + __urhadd(a, b) + __hadd((int)a, (int)b);
  out[4 * n + i] = __dp4a(a, b, 1u) + __dp2a_lo(a, b, 2u) + __vabsdiffu4(a, b) + __vadd4(a, b) + __vcmpgtu2(a, b);
  out[5 * n + i] = max(a, b) - min(a, b) + (unsigned)abs((int)a) + (a / (b | 1u)) + (a % (b | 1u));
  out64[i] = __umul64hi(w, a) + __brevll(w) + (unsigned long long)llabs((long long)w) + w / (b | 1u) +
             (unsigned long long)__mul64hi((long long)w, (long long)b);
}

__global__ void conversions(const float* f, const double* d, const int* k, int* oi, float* of, double* od,
                            long long* ol, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = f[i];
  double b = d[i];
  int c = k[i];
  oi[i] = __float2int_rn(a) + __float2int_rz(a) + __float2int_ru(a) + __float2int_rd(a) + (int)__float2uint_rn(a) +
          __float_as_int(a) + __double2int_rn(b) + __double2hiint(b) + __double2loint(b) + (int)a;
  of[i] = __int2float_rn(c) + __int2float_rz(c) + __uint2float_ru((unsigned)c) + __int_as_float(c) +
          __double2float_rn(b) + __double2float_rz(b) + __ll2float_rn((long long)c * 7) + (float)b;
  od[i] = __int2double_rn(c) + __hiloint2double(c, c + 1) + __longlong_as_double((long long)c << 20) +
          __ull2double_rn((unsigned long long)c) + (double)a;
  ol[i] = __float2ll_rn(a) + __double2ll_rz(b) + (long long)__double2ull_ru(fabs(b)) + __double_as_longlong(b) +
          (long long)a + (long long)b;
}
