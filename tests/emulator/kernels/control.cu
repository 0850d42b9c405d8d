// Control flow: divergent branches and loops, break/continue, a switch, device-function
// calls (multiple arguments, a struct returned by value), recursion of per-thread depth,
// local arrays indexed at run time, calls through function pointers, brx.idx, a
// grid-stride loop and a 2-D grid.
#include <cstdint>

struct Pair { int a; float b; long long c; };

__device__ __noinline__ Pair make_pair(int x, float y, long long z, int w) {
  Pair p;
  p.a = x * w + 1;
  p.b = y * 0.5f + (float)w;
  p.c = z ^ ((long long)x << 33);
  return p;
}

__device__ __noinline__ int ackermann_like(int m, int n) {
  if (m == 0) return n + 1;
  if (n == 0) return ackermann_like(m - 1, 1);
  return ackermann_like(m - 1, ackermann_like(m, n - 1));
}

__device__ __noinline__ unsigned long long fib(int k) {
  return k < 2 ? (unsigned long long)k : fib(k - 1) + fib(k - 2);
}

__device__ __noinline__ int op_add(int a, int b) { return a + b; }
__device__ __noinline__ int op_mul(int a, int b) { return a * b; }
__device__ __noinline__ int op_xor(int a, int b) { return a ^ (b << 3); }
__device__ __noinline__ int op_sub(int a, int b) { return a - 2 * b; }
typedef int (*binop)(int, int);

__device__ __noinline__ int jump_table(int sel, int x) {
  int r;
  asm("{\n\t"
      ".reg .u32 %%ix;\n\t"
      "and.b32 %%ix, %1, 3;\n\t"
      "$Ltab: .branchtargets $L0, $L1, $L2, $L3;\n\t"
      "brx.idx %%ix, $Ltab;\n\t"
      "$L0: add.s32 %0, %2, 100; bra.uni $Lend;\n\t"
      "$L1: mul.lo.s32 %0, %2, 3; bra.uni $Lend;\n\t"
      "$L2: xor.b32 %0, %2, 0x5555; bra.uni $Lend;\n\t"
      "$L3: sub.s32 %0, 0, %2;\n\t"
      "$Lend:\n\t"
      "}" : "=r"(r) : "r"(sel), "r"(x));
  return r;
}

extern "C" __global__ void control(const int* in, int* out, long long* out64, float* outf, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;                       // early exit: partial last block
  int v = in[i];
  int k = 0;
#define O(x) out[(k++) * n + i] = (x)
  // collatz: data-dependent trip count
  unsigned c = (unsigned)(v & 0xffff) + 1;
  int steps = 0;
  while (c != 1 && steps < 300) { c = (c & 1) ? 3 * c + 1 : c >> 1; ++steps; }
  O(steps);
  // nested loops with break / continue
  int acc = 0;
  for (int a = 0; a < (v & 7) + 2; ++a) {
    if (((v >> a) & 3) == 1) continue;
    for (int b = 0; b < 10; ++b) {
      if (b * a > (v & 31)) break;
      acc += a * 7 + b;
    }
    if (acc > 200) break;
  }
  O(acc);
  // if / else-if chains
  int r;
  if (v < -1000) r = 1;
  else if (v < 0) r = 2;
  else if (v & 1) r = v % 7;
  else r = -v / 3;
  O(r);
  // switch
  switch ((v >> 4) & 15) {
    case 0: r = v + 1; break;
    case 1: r = v * 2; break;
    case 2: r = v ^ 0xff; break;
    case 3: r = v >> 3; break;
    case 5: r = ~v; break;
    case 8: r = v - 77; break;
    case 13: r = v * v; break;
    default: r = 42;
  }
  O(r);
  // calls
  Pair p = make_pair(v, (float)v * 1.25f, (long long)v * 1000003ll, i);
  O(p.a); outf[i] = p.b; out64[2 * i] = p.c;
  O(ackermann_like(v & 1 ? 1 : 2, v & 3));
  out64[2 * i + 1] = (long long)fib((v & 7) + 1);
  // local array with run-time indices: insertion sort of 12 values
  int arr[12];
  for (int j = 0; j < 12; ++j) arr[j] = (v * (j + 3)) ^ (j * 2654435761u);
  for (int j = 1; j < 12; ++j) {
    int x = arr[j], m = j - 1;
    while (m >= 0 && arr[m] > x) { arr[m + 1] = arr[m]; --m; }
    arr[m + 1] = x;
  }
  O(arr[(v & 7) + 2] ^ arr[0]);
  // function pointers
  binop ops[4] = {op_add, op_mul, op_xor, op_sub};
  O(ops[v & 3](v, i));
  // brx.idx
  O(jump_table(v >> 2, v));
  // goto
  int g = v & 63;
again:
  g = g * 3 + 1;
  if (g < 1000) goto again;
  O(g);
#undef O
}

extern "C" __global__ void grid2d(const float* in, float* out, int w, int h, int reps) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float s = 0.0f;
  for (int dy = -1; dy <= 1; ++dy)
    for (int dx = -1; dx <= 1; ++dx) {
      int xx = min(max(x + dx, 0), w - 1), yy = min(max(y + dy, 0), h - 1);
      s += in[yy * w + xx] * (float)(3 + dx + 2 * dy);
    }
  out[y * w + x] = s;
  // grid-stride loop over a second output of reps images
  int tid = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x;
  for (int j = tid; j < w * h * reps; j += gridDim.x * blockDim.x * gridDim.y * blockDim.y)
    out[w * h + j] = s * 0.125f + (float)j;
}
