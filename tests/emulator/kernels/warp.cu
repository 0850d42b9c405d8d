// Warp-level intrinsics over full warps (n is a multiple of 32): every shfl flavour with
// widths and predicate outputs, votes, match, redux, and a partial-mask shuffle.
#include <cstdint>
extern "C" __global__ void shfl_ops(const int* V, const int* S, const double* D, int* out,
                                    double* outd, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = V[i], s = S[i];
  int lane = threadIdx.x & 31;
  int k = 0;
#define O(x) out[(k++) * n + i] = (x)
  O(__shfl_sync(0xffffffffu, v, s & 31));
  O(__shfl_sync(0xffffffffu, v, s, 8));
  O(__shfl_sync(0xffffffffu, v, s, 16));
  O(__shfl_up_sync(0xffffffffu, v, s & 7));
  O(__shfl_up_sync(0xffffffffu, v, 3, 8));
  O(__shfl_down_sync(0xffffffffu, v, 5));
  O(__shfl_down_sync(0xffffffffu, v, 2, 4));
  O(__shfl_xor_sync(0xffffffffu, v, 9));
  O(__shfl_xor_sync(0xffffffffu, v, s & 15, 16));
  {
    int r; unsigned p;
    asm("{ .reg .pred q; shfl.sync.up.b32 %0|q, %2, %3, 0, 0xffffffff; selp.u32 %1, 1, 0, q; }"
        : "=r"(r), "=r"(p) : "r"(v), "r"(s & 31));
    O(r); O(p);
    asm("{ .reg .pred q; shfl.sync.down.b32 %0|q, %2, %3, 0x1f, 0xffffffff; selp.u32 %1, 1, 0, q; }"
        : "=r"(r), "=r"(p) : "r"(v), "r"(s & 31));
    O(r); O(p);
    asm("{ .reg .pred q; shfl.sync.idx.b32 %0|q, %2, %3, %4, 0xffffffff; selp.u32 %1, 1, 0, q; }"
        : "=r"(r), "=r"(p) : "r"(v), "r"(s), "r"(s >> 5));
    O(r); O(p);
    asm("{ .reg .pred q; shfl.sync.bfly.b32 %0|q, %2, %3, %4, 0xffffffff; selp.u32 %1, 1, 0, q; }"
        : "=r"(r), "=r"(p) : "r"(v), "r"(s), "r"(s >> 7));
    O(r); O(p);
  }
  // warp reductions
  int sum = v, mx = v;
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_down_sync(0xffffffffu, sum, o);
    mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  }
  O(sum); O(mx);
  int scan = v;
  for (int d = 1; d < 32; d <<= 1) {
    int t = __shfl_up_sync(0xffffffffu, scan, d);
    if (lane >= d) scan += t;
  }
  O(scan);
  // partial mask: the low half-warp only
  int half = 0;
  if (lane < 16) half = __shfl_xor_sync(0x0000ffffu, v, 1) + __shfl_down_sync(0x0000ffffu, v, 1, 16);
  O(half);
  double x = D[i];
  for (int o = 8; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o, 16);
  outd[i] = x + __shfl_up_sync(0xffffffffu, x, 1, 8);
#undef O
}

extern "C" __global__ void vote_ops(const int* V, const int* P, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = V[i], p = P[i];
  int lane = threadIdx.x & 31;
  int k = 0;
#define O(x) out[(k++) * n + i] = (unsigned)(x)
  unsigned b = __ballot_sync(0xffffffffu, p & 1);
  O(b); O(__any_sync(0xffffffffu, p & 2)); O(__all_sync(0xffffffffu, (p & 3) != 0));
  O(__uni_sync(0xffffffffu, p & 4)); O(__activemask()); O(__popc(b & ((1u << lane) - 1)));
  O(__match_any_sync(0xffffffffu, v & 7));
  int pred; O(__match_all_sync(0xffffffffu, v & 1, &pred)); O(pred);
  O(__match_any_sync(0xffffffffu, (long long)(v & 3) << 40));
  O(__reduce_add_sync(0xffffffffu, (unsigned)v)); O(__reduce_min_sync(0xffffffffu, (unsigned)v));
  O(__reduce_max_sync(0xffffffffu, (unsigned)v)); O(__reduce_min_sync(0xffffffffu, v));
  O(__reduce_max_sync(0xffffffffu, v)); O(__reduce_and_sync(0xffffffffu, (unsigned)v));
  O(__reduce_or_sync(0xffffffffu, (unsigned)v)); O(__reduce_xor_sync(0xffffffffu, (unsigned)v));
  unsigned lo = 0;
  if (lane < 16) lo = __ballot_sync(0x0000ffffu, p & 8);
  O(lo);
  unsigned lt; asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt)); O(lt);
  unsigned ge; asm("mov.u32 %0, %%lanemask_ge;" : "=r"(ge)); O(ge);
  unsigned ln; asm("mov.u32 %0, %%laneid;" : "=r"(ln)); O(ln);
#undef O
}
