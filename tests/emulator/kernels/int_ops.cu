// Element-wise 32-bit integer and bit-manipulation operations, incl. division by zero,
// shifts past the width, and PTX-only instructions through inline asm.
#include <cstdint>
#define A2(op, d, a, b) asm(op " %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b))
#define A3(op, d, a, b, c) asm(op " %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c))

extern "C" __global__ void i32_ops(const int* A, const int* B, const int* C, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int a = A[i], b = B[i], c = C[i];
  unsigned ua = a, ub = b, uc = c, r;
  int k = 0;
#define O(v) out[(k++) * n + i] = (unsigned)(v)
  O(a + b); O(a - b); O(a * b); O(__mulhi(a, b)); O(__umulhi(ua, ub)); O(a * b + c);
  O(a / b); O(a % b); O(ua / ub); O(ua % ub);
  O(min(a, b)); O(max(a, b)); O(min(ua, ub)); O(max(ua, ub)); O(abs(a)); O(-a);
  O(a << (b & 31)); O(a >> (b & 31)); O(ua >> (ub & 31));
  A2("shl.b32", r, ua, ub & 63); O(r);
  A2("shr.u32", r, ua, ub & 63); O(r);
  A2("shr.s32", r, ua, ub & 63); O(r);
  O(__brev(ua)); O(__clz(a)); O(__popc(ua)); O(__ffs(a));
  O(__byte_perm(ua, ub, uc)); O(__funnelshift_l(ua, ub, uc)); O(__funnelshift_r(ua, ub, uc));
  O(__funnelshift_lc(ua, ub, uc)); O(__funnelshift_rc(ua, ub, uc));
  O(__sad(a, b, uc)); O(__usad(ua, ub, uc)); O(__mul24(a, b)); O(__umul24(ua, ub));
  O(__hadd(a, b)); O(__rhadd(a, b)); O(__uhadd(ua, ub)); O(__urhadd(ua, ub));
  A3("bfe.u32", r, ua, ub & 0x3f, uc & 0x3f); O(r);
  A3("bfe.s32", r, ua, ub & 0x3f, uc & 0x3f); O(r);
  A3("bfe.u32", r, ua, ub, uc); O(r);
  asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(ua), "r"(ub), "r"(uc & 0x3f), "r"((uc >> 8) & 0x3f)); O(r);
  asm("bfind.u32 %0, %1;" : "=r"(r) : "r"(ua)); O(r);
  asm("bfind.s32 %0, %1;" : "=r"(r) : "r"(a)); O(r);
  asm("bfind.shiftamt.u32 %0, %1;" : "=r"(r) : "r"(ua)); O(r);
  A3("prmt.b32.f4e", r, ua, ub, uc); O(r);
  A3("prmt.b32.b4e", r, ua, ub, uc); O(r);
  A3("prmt.b32.rc8", r, ua, ub, uc); O(r);
  A3("prmt.b32.ecl", r, ua, ub, uc); O(r);
  A3("prmt.b32.ecr", r, ua, ub, uc); O(r);
  A3("prmt.b32.rc16", r, ua, ub, uc); O(r);
  asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(r) : "r"(ua), "r"(ub), "r"(uc)); O(r);
  asm("lop3.b32 %0, %1, %2, %3, 0xE8;" : "=r"(r) : "r"(ua), "r"(ub), "r"(uc)); O(r);
  asm("lop3.b32 %0, %1, %2, %3, 0x1A;" : "=r"(r) : "r"(ua), "r"(ub), "r"(uc)); O(r);
  A2("add.sat.s32", r, ua, ub); O(r);
  A2("sub.sat.s32", r, ua, ub); O(r);
  A3("mad.hi.s32", r, ua, ub, uc); O(r);
  A3("mad.hi.u32", r, ua, ub, uc); O(r);
  A3("mad.hi.sat.s32", r, ua, ub, uc); O(r);
  A3("mad24.lo.s32", r, ua, ub, uc); O(r);
  A2("mul24.hi.u32", r, ua, ub); O(r);
  A2("mul24.hi.s32", r, ua, ub); O(r);
  {
    unsigned lo, hi;
    asm("add.cc.u32 %0, %2, %3; addc.u32 %1, %4, %5;" : "=r"(lo), "=r"(hi) : "r"(ua), "r"(ub), "r"(uc), "r"(ua));
    O(lo); O(hi);
    asm("sub.cc.u32 %0, %2, %3; subc.u32 %1, %4, %5;" : "=r"(lo), "=r"(hi) : "r"(ua), "r"(ub), "r"(uc), "r"(ua));
    O(lo); O(hi);
    asm("mad.lo.cc.u32 %0, %2, %3, %4; madc.hi.u32 %1, %2, %3, %5;" : "=r"(lo), "=r"(hi) : "r"(ua), "r"(ub), "r"(uc), "r"(ua));
    O(lo); O(hi);
  }
  asm("cnot.b32 %0, %1;" : "=r"(r) : "r"(ua & 3)); O(r);
  A3("slct.s32.s32", r, ua, ub, uc); O(r);
  A2("bmsk.clamp.b32", r, ua & 63, ub & 63); O(r);
  A2("bmsk.wrap.b32", r, ua, ub); O(r);
  A2("szext.clamp.s32", r, ua, ub & 63); O(r);
  A2("szext.wrap.u32", r, ua, ub); O(r);
  A3("dp4a.u32.u32", r, ua, ub, uc); O(r);
  A3("dp4a.s32.s32", r, ua, ub, uc); O(r);
  A3("dp4a.s32.u32", r, ua, ub, uc); O(r);
  A3("dp2a.lo.s32.s32", r, ua, ub, uc); O(r);
  A3("dp2a.hi.u32.u32", r, ua, ub, uc); O(r);
  {
    unsigned m = 0, p;
#define C(op, bit) asm("{ .reg .pred q; setp." op " q, %1, %2; selp.u32 %0, 1, 0, q; }" : "=r"(p) : "r"(ua), "r"(ub)); m |= p << bit;
    C("eq.s32", 0) C("ne.s32", 1) C("lt.s32", 2) C("le.s32", 3) C("gt.s32", 4) C("ge.s32", 5)
    C("lo.u32", 6) C("ls.u32", 7) C("hi.u32", 8) C("hs.u32", 9) C("lt.u32", 10) C("ne.b32", 11)
#undef C
    O(m);
    unsigned s; asm("set.lt.u32.s32 %0, %1, %2;" : "=r"(s) : "r"(ua), "r"(ub)); O(s);
    short h = (short)a, g = (short)b;
    O((unsigned)(unsigned short)(h * g)); O((unsigned)(h / (g | 1))); O((unsigned)(unsigned short)(h + g));
  }
#undef O
}

extern "C" __global__ void i64_ops(const long long* A, const long long* B, const long long* C,
                                   unsigned long long* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  long long a = A[i], b = B[i], c = C[i];
  unsigned long long ua = a, ub = b, uc = c, r;
  int k = 0;
#define O(v) out[(k++) * n + i] = (unsigned long long)(v)
  O(a + b); O(a - b); O(a * b); O(__mul64hi(a, b)); O(__umul64hi(ua, ub)); O(a * b + c);
  O(a / b); O(a % b); O(ua / ub); O(ua % ub);
  O(min(a, b)); O(max(a, b)); O(min(ua, ub)); O(max(ua, ub)); O(llabs(a)); O(-a);
  asm("shl.b64 %0, %1, %2;" : "=l"(r) : "l"(ua), "r"((unsigned)ub & 127)); O(r);
  asm("shr.u64 %0, %1, %2;" : "=l"(r) : "l"(ua), "r"((unsigned)ub & 127)); O(r);
  asm("shr.s64 %0, %1, %2;" : "=l"(r) : "l"(ua), "r"((unsigned)ub & 127)); O(r);
  O(__brevll(ua)); O(__clzll(a)); O(__popcll(ua)); O(__ffsll(a));
  asm("bfe.u64 %0, %1, %2, %3;" : "=l"(r) : "l"(ua), "r"((unsigned)ub & 127), "r"((unsigned)uc & 127)); O(r);
  asm("bfe.s64 %0, %1, %2, %3;" : "=l"(r) : "l"(ua), "r"((unsigned)ub & 127), "r"((unsigned)uc & 127)); O(r);
  asm("bfi.b64 %0, %1, %2, %3, %4;" : "=l"(r) : "l"(ua), "l"(ub), "r"((unsigned)uc & 127), "r"((unsigned)(uc >> 8) & 127)); O(r);
  { unsigned q; asm("bfind.u64 %0, %1;" : "=r"(q) : "l"(ua)); O(q);
    asm("bfind.s64 %0, %1;" : "=r"(q) : "l"(ua)); O(q); }
  O((long long)(int)a * (long long)(int)b);
  O((unsigned long long)(unsigned)ua * (unsigned long long)(unsigned)ub + uc);
  { unsigned long long lo, hi;
    asm("add.cc.u64 %0, %2, %3; addc.u64 %1, %4, %5;" : "=l"(lo), "=l"(hi) : "l"(ua), "l"(ub), "l"(uc), "l"(ua));
    O(lo); O(hi); }
  O((int)a); O((unsigned)(unsigned char)a); O((long long)(short)a); O((long long)(signed char)b);
  { unsigned q; asm("cvt.sat.u32.s64 %0, %1;" : "=r"(q) : "l"(a)); O(q);
    asm("cvt.sat.s32.s64 %0, %1;" : "=r"(q) : "l"(a)); O(q);
    asm("cvt.sat.s32.u64 %0, %1;" : "=r"(q) : "l"(a)); O(q);
    int s32 = (int)a; unsigned short h;
    asm("cvt.sat.u16.s32 %0, %1;" : "=h"(h) : "r"(s32)); O(h);
    asm("cvt.sat.s8.s32 %0, %1;" : "=h"(h) : "r"(s32)); O(h);
    asm("cvt.s8.s32 %0, %1;" : "=r"(q) : "r"(s32)); O(q);
    asm("cvt.u8.u64 %0, %1;" : "=r"(q) : "l"(a)); O(q);
    unsigned m = 0, p;
#define C(op, bit) asm("{ .reg .pred q; setp." op " q, %1, %2; selp.u32 %0, 1, 0, q; }" : "=r"(p) : "l"(ua), "l"(ub)); m |= p << bit;
    C("eq.s64", 0) C("ne.s64", 1) C("lt.s64", 2) C("le.s64", 3) C("gt.s64", 4) C("ge.s64", 5)
    C("lo.u64", 6) C("ls.u64", 7) C("hi.u64", 8) C("hs.u64", 9)
#undef C
    O(m); }
#undef O
}
