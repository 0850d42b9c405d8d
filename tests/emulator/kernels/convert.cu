// Conversions between every integer and floating-point type, in every rounding mode.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>

// from f32 (A) and f64 (D): integer results in out32/out64, float bits in out32/out64/out16
extern "C" __global__ void cvt_from_float(const float* A, const double* D, unsigned* o32,
                                          unsigned long long* o64, unsigned short* o16, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = A[i];
  double d = D[i];
  int k = 0, k64 = 0, k16 = 0;
#define O(v) o32[(k++) * n + i] = (unsigned)(v)
#define O64(v) o64[(k64++) * n + i] = (unsigned long long)(v)
#define O16(v) o16[(k16++) * n + i] = (unsigned short)(v)
  O(__float2int_rn(a)); O(__float2int_rz(a)); O(__float2int_ru(a)); O(__float2int_rd(a));
  O(__float2uint_rn(a)); O(__float2uint_rz(a)); O(__float2uint_ru(a)); O(__float2uint_rd(a));
  O(__double2int_rn(d)); O(__double2int_rz(d)); O(__double2int_ru(d)); O(__double2int_rd(d));
  O(__double2uint_rn(d)); O(__double2uint_rz(d)); O(__double2uint_ru(d)); O(__double2uint_rd(d));
  O(__float_as_uint(__double2float_rn(d))); O(__float_as_uint(__double2float_rz(d)));
  O(__float_as_uint(__double2float_ru(d))); O(__float_as_uint(__double2float_rd(d)));
  { unsigned r; asm("cvt.rn.ftz.f32.f64 %0, %1;" : "=r"(r) : "d"(d)); O(r);
    asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(r) : "f"(a)); O(r);
    asm("cvt.rmi.ftz.s32.f32 %0, %1;" : "=r"(r) : "f"(a)); O(r);
    { double q; asm("cvt.rni.f64.f64 %0, %1;" : "=d"(q) : "d"(d)); O64(__double_as_longlong(q)); }
    asm("cvt.rpi.sat.f32.f32 %0, %1;" : "=r"(r) : "f"(a)); O(r);
    unsigned short h;
    asm("cvt.rni.s16.f32 %0, %1;" : "=h"(h) : "f"(a)); O(h);
    asm("cvt.rzi.u8.f32 %0, %1;" : "=h"(h) : "f"(a)); O(h);
    asm("cvt.rni.s8.f64 %0, %1;" : "=h"(h) : "d"(d)); O(h); }
  O64(__float2ll_rn(a)); O64(__float2ll_rz(a)); O64(__float2ll_ru(a)); O64(__float2ll_rd(a));
  O64(__float2ull_rn(a)); O64(__float2ull_rz(a)); O64(__float2ull_ru(a)); O64(__float2ull_rd(a));
  O64(__double2ll_rn(d)); O64(__double2ll_rz(d)); O64(__double2ll_ru(d)); O64(__double2ll_rd(d));
  O64(__double2ull_rn(d)); O64(__double2ull_rz(d)); O64(__double2ull_ru(d)); O64(__double2ull_rd(d));
  O64(__double_as_longlong((double)a));
  O16(__half_as_ushort(__float2half_rn(a))); O16(__half_as_ushort(__float2half_rz(a)));
  O16(__half_as_ushort(__float2half_rd(a))); O16(__half_as_ushort(__float2half_ru(a)));
  O16(__half_as_ushort(__double2half(d)));
  O16(__bfloat16_as_ushort(__float2bfloat16_rn(a))); O16(__bfloat16_as_ushort(__float2bfloat16_rz(a)));
  O16(__bfloat16_as_ushort(__float2bfloat16_rd(a))); O16(__bfloat16_as_ushort(__float2bfloat16_ru(a)));
  { unsigned short h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); O16(h);
    asm("cvt.rz.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); O16(h);
    asm("cvt.rn.bf16.f64 %0, %1;" : "=h"(h) : "d"(d)); O16(h);
    asm("cvt.rn.relu.f16.f32 %0, %1;" : "=h"(h) : "f"(a)); O16(h);
    asm("cvt.rn.relu.bf16.f32 %0, %1;" : "=h"(h) : "f"(a)); O16(h);
    unsigned p; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(a), "f"((float)d)); O(p);
    asm("cvt.rz.bf16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(a), "f"((float)d)); O(p); }
#undef O
#undef O64
#undef O16
}

// from integers: S = int32, L = int64, H = half bits, G = bf16 bits
extern "C" __global__ void cvt_from_int(const int* S, const long long* L, const unsigned short* H,
                                        const unsigned short* G, unsigned* o32,
                                        unsigned long long* o64, unsigned short* o16, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int s = S[i];
  unsigned us = s;
  long long l = L[i];
  unsigned long long ul = l;
  __half h = __ushort_as_half(H[i]);
  __nv_bfloat16 g = __ushort_as_bfloat16(G[i]);
  int k = 0, k64 = 0, k16 = 0;
#define O(v) o32[(k++) * n + i] = (unsigned)(v)
#define F(v) o32[(k++) * n + i] = __float_as_uint(v)
#define O64(v) o64[(k64++) * n + i] = (unsigned long long)(v)
#define D(v) o64[(k64++) * n + i] = (unsigned long long)__double_as_longlong(v)
#define O16(v) o16[(k16++) * n + i] = (unsigned short)(v)
  F(__int2float_rn(s)); F(__int2float_rz(s)); F(__int2float_ru(s)); F(__int2float_rd(s));
  F(__uint2float_rn(us)); F(__uint2float_rz(us)); F(__uint2float_ru(us)); F(__uint2float_rd(us));
  F(__ll2float_rn(l)); F(__ll2float_rz(l)); F(__ll2float_ru(l)); F(__ll2float_rd(l));
  F(__ull2float_rn(ul)); F(__ull2float_rz(ul)); F(__ull2float_ru(ul)); F(__ull2float_rd(ul));
  F(__half2float(h)); F(__bfloat162float(g));
  O(__half2int_rn(h)); O(__half2int_rz(h)); O(__half2int_ru(h)); O(__half2int_rd(h));
  O(__half2uint_rz(h)); O(__bfloat162int_rz(g));
  D(__ll2double_rn(l)); D(__ll2double_rz(l)); D(__ll2double_ru(l)); D(__ll2double_rd(l));
  D(__ull2double_rn(ul)); D(__ull2double_rz(ul)); D(__ull2double_ru(ul)); D(__ull2double_rd(ul));
  D((double)s); D((double)us); D((double)__half2float(h));
  O64(__half2ll_rz(h)); O64(__half2ull_rd(h));
  { double dd; asm("cvt.f64.f16 %0, %1;" : "=d"(dd) : "h"(H[i])); D(dd); }
  O16(__half_as_ushort(__int2half_rn(s))); O16(__half_as_ushort(__int2half_rz(s)));
  O16(__half_as_ushort(__int2half_rd(s))); O16(__half_as_ushort(__int2half_ru(s)));
  O16(__half_as_ushort(__ll2half_rn(l))); O16(__half_as_ushort(__ushort2half_rn((unsigned short)s)));
  O16(__bfloat16_as_ushort(__int2bfloat16_rn(s))); O16(__bfloat16_as_ushort(__ll2bfloat16_rz(l)));
  O16(__bfloat16_as_ushort(__float2bfloat16(__half2float(h))));
  { unsigned short r;
    asm("cvt.rn.bf16.f16 %0, %1;" : "=h"(r) : "h"(H[i])); O16(r);
    asm("cvt.rn.f16.bf16 %0, %1;" : "=h"(r) : "h"(G[i])); O16(r);
    asm("cvt.rzi.f16.f16 %0, %1;" : "=h"(r) : "h"(H[i])); O16(r);
    asm("cvt.rni.bf16.bf16 %0, %1;" : "=h"(r) : "h"(G[i])); O16(r); }
#undef O
#undef F
#undef O64
#undef D
#undef O16
}
