// Inline PTX: scoped { } blocks with local .reg declarations and labels,
// predicates, carry chains, bit-field ops, special registers, cache-hinted
// loads/stores, memory clobbers, and asm inside unrolled loops.
#include <cstdint>

__device__ __forceinline__ int nonzero_to_one(int x) {
  int r;
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %1, 0; selp.b32 %0, 1, 0, p; }" : "=r"(r) : "r"(x));
  return r;
}

__device__ __forceinline__ unsigned lop3_xor_and(unsigned a, unsigned b, unsigned c) {
  unsigned r;
  // (a ^ b) & c  => immLut 0x28
  asm("lop3.b32 %0, %1, %2, %3, 0x28;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

__global__ void predicates_and_lop3(const int* a, const unsigned* b, int* o1, unsigned* o2, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    o1[i] = nonzero_to_one(a[i]) + nonzero_to_one(a[i] & 0xff);
    o2[i] = lop3_xor_and(b[i], (unsigned)a[i], 0x0f0f0f0fu);
  }
}

// 128-bit addition with a carry chain in one scoped block
__device__ __forceinline__ uint4 add128(uint4 a, uint4 b) {
  uint4 r;
  asm("{\n\t"
      ".reg .u32 t0, t1;\n\t"
      "add.cc.u32  %0, %4, %8;\n\t"
      "addc.cc.u32 %1, %5, %9;\n\t"
      "addc.cc.u32 %2, %6, %10;\n\t"
      "addc.u32    %3, %7, %11;\n\t"
      "mov.u32 t0, %0;\n\t"
      "mov.u32 t1, t0;\n\t"
      "}"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y), "r"(b.z), "r"(b.w));
  return r;
}
__device__ __forceinline__ unsigned long long mul_wide(unsigned a, unsigned b) {
  unsigned long long r;
  asm("mul.wide.u32 %0, %1, %2;" : "=l"(r) : "r"(a), "r"(b));
  return r;
}
__global__ void bignum(const uint4* a, const uint4* b, uint4* s, unsigned long long* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    s[i] = add128(a[i], b[i]);
    p[i] = mul_wide(a[i].x, b[i].y);
  }
}

// bfe / bfi / prmt / brev / popc / shf through asm
__global__ void bit_fields(const unsigned* in, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = in[i], f, ins, perm, rot;
  asm("bfe.u32 %0, %1, 8, 12;" : "=r"(f) : "r"(v));
  asm("bfi.b32 %0, %1, %2, 4, 8;" : "=r"(ins) : "r"(f), "r"(v));
  asm("prmt.b32 %0, %1, %2, 0x3210;" : "=r"(perm) : "r"(v), "r"(ins));
  asm("shf.l.wrap.b32 %0, %1, %1, 13;" : "=r"(rot) : "r"(v));
  out[i] = f + ins + perm + rot;
}

// a loop and a label inside a scoped block
__device__ __forceinline__ unsigned count_steps(unsigned x) {
  unsigned steps;
  asm("{\n\t"
      ".reg .pred p, q;\n\t"
      ".reg .u32 v, c;\n\t"
      "mov.u32 v, %1;\n\t"
      "mov.u32 c, 0;\n"
      "LOOP:\n\t"
      "setp.le.u32 p, v, 1;\n\t"
      "@p bra DONE;\n\t"
      "and.b32 %0, v, 1;\n\t"
      "setp.eq.u32 q, %0, 0;\n\t"
      "@q shr.u32 v, v, 1;\n\t"
      "@!q mad.lo.u32 v, v, 3, 1;\n\t"
      "add.u32 c, c, 1;\n\t"
      "setp.lt.u32 p, c, 1000;\n\t"
      "@p bra LOOP;\n"
      "DONE:\n\t"
      "mov.u32 %0, c;\n\t"
      "}"
      : "=r"(steps)
      : "r"(x));
  return steps;
}
__global__ void collatz(const unsigned* in, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = count_steps(in[i]) + count_steps(in[i] + 1);
}

// special registers, clock, globaltimer
__global__ void timing_probe(long long* t, unsigned* ids) {
  long long c0 = clock64();
  unsigned long long gt;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
  unsigned sm, nsm, ctaid;
  asm("mov.u32 %0, %%smid;" : "=r"(sm));
  asm("mov.u32 %0, %%nsmid;" : "=r"(nsm));
  asm("mov.u32 %0, %%ctaid.x;" : "=r"(ctaid));
  long long c1 = clock64();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  t[2 * i] = c1 - c0;
  t[2 * i + 1] = (long long)gt;
  ids[i] = sm * 1000 + nsm + ctaid;
}

// cache-hinted global accesses and memory clobbers
__device__ __forceinline__ float4 ld_nc_v4(const float4* p) {
  float4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
               : "l"(p));
  return r;
}
__device__ __forceinline__ void st_cs_v4(float4* p, float4 v) {
  asm volatile("st.global.cs.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}
__global__ void streaming_copy(const float4* in, float4* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    float4 v = ld_nc_v4(in + i);
    st_cs_v4(out + i, v);
  }
}

__device__ __forceinline__ void st_release(int* p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__global__ void flag_handoff(int* flag, float* data) {
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) {
      data[0] = 3.0f;
      asm volatile("fence.acq_rel.gpu;" ::: "memory");
      st_release(flag, 1);
    }
  } else if (threadIdx.x == 0) {
    while (ld_acquire(flag) == 0) __nanosleep(100);
    data[blockIdx.x] = data[0] * blockIdx.x;
  }
}

// asm with scoped registers inside an unrolled loop (same names, many scopes)
__global__ void unrolled_scoped_asm(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x * 8 + threadIdx.x;
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    int j = i + k * blockDim.x;
    float v = j < n ? x[j] : 0.0f, r;
    asm("{\n\t.reg .f32 t;\n\t.reg .pred neg;\n\t"
        "mul.f32 t, %1, %1;\n\t"
        "setp.lt.f32 neg, %1, 0f00000000;\n\t"
        "@neg neg.f32 t, t;\n\t"
        "add.f32 %0, t, %2;\n\t}"
        : "=f"(r)
        : "f"(v), "f"(acc));
    acc = r;
  }
  if (i < n) y[i] = acc;
}

// double and 16-bit operands ("d" and "h" constraints)
__global__ void typed_constraints(const double* a, const unsigned short* h, double* o, unsigned short* oh, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double r;
  asm("fma.rn.f64 %0, %1, %1, %2;" : "=d"(r) : "d"(a[i]), "d"(1.0));
  o[i] = r;
  unsigned short hv = h[i], hr;
  asm("{ .reg .b16 t; add.u16 t, %1, %1; xor.b16 %0, t, 0x5555; }" : "=h"(hr) : "h"(hv));
  oh[i] = hr;
}
