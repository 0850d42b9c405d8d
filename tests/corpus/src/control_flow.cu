// Control flow: a dense switch in a __noinline__ interpreter (jump-table
// candidate), a switch that becomes a lookup table, recursion, loops with
// break/continue, goto, local arrays indexed at run time (local depot),
// printf, assert and __trap.
#include <cstdio>
#include <cassert>

enum Op { ADD, SUB, MUL, DIV, MOD, AND, OR, XOR, SHL, SHR, MAX, MIN, POPC, CLZ, BREV, MADD, HALT };

// A tiny bytecode interpreter: a dense 16-case switch over a run-time value.
__device__ __noinline__ int exec_op(int op, int a, int b) {
  switch (op) {
    case ADD: return a + b;
    case SUB: return a - b;
    case MUL: return a * b;
    case DIV: return a / (b | 1);
    case MOD: return a % (b | 1);
    case AND: return a & b;
    case OR: return a | b;
    case XOR: return a ^ b;
    case SHL: return a << (b & 31);
    case SHR: return a >> (b & 31);
    case MAX: return max(a, b);
    case MIN: return min(a, b);
    case POPC: return __popc(a) + b;
    case CLZ: return __clz(a) - b;
    case BREV: return (int)__brev((unsigned)a) ^ b;
    case MADD: return a * a + b;
    default: return 0;
  }
}

__global__ void interpreter(const int* program, int len, const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int acc = in[i];
  for (int pc = 0; pc < len; ++pc) {
    int op = program[2 * pc];
    if (op == HALT) break;
    acc = exec_op(op, acc, program[2 * pc + 1] + i);
  }
  out[i] = acc;
}

// A dense switch with side effects in every case (stores to distinct places).
__device__ float g_stats[32];
__device__ __noinline__ void record_event(int kind, float* buf, float x) {
  switch (kind) {
    case 0: buf[0] += x; break;
    case 1: buf[1] -= x; break;
    case 2: buf[2] *= x; break;
    case 3: buf[3] = fmaxf(buf[3], x); break;
    case 4: buf[4] = fminf(buf[4], x); break;
    case 5: g_stats[5] = x; break;
    case 6: buf[6] = sqrtf(fabsf(x)); break;
    case 7: buf[7] = x * x * x; break;
    case 8: g_stats[8] += 1.0f; break;
    case 9: buf[9] = __expf(x); break;
    case 10: buf[10] = -x; break;
    case 11: buf[11] = x * 0.5f; break;
    case 12: g_stats[12] = buf[0] + x; break;
    case 13: buf[13] = floorf(x); break;
    case 14: buf[14] = ceilf(x); break;
    case 15: buf[15] = x + 15.0f; break;
    case 16: buf[16] = x - 16.0f; break;
    case 17: buf[17] = x / 17.0f; break;
    case 18: g_stats[18] -= x; break;
    case 19: buf[19] = truncf(x); break;
    default: buf[31] = x; break;
  }
}
__global__ void event_log(const int* kinds, const float* xs, float* bufs, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) record_event(kinds[i], bufs + 32 * i, xs[i]);
}

// A switch that yields constants: becomes a table in .global/.const memory.
__device__ int days_in_month(int m, bool leap) {
  switch (m) {
    case 1: return 31; case 2: return leap ? 29 : 28; case 3: return 31; case 4: return 30;
    case 5: return 31; case 6: return 30; case 7: return 31; case 8: return 31;
    case 9: return 30; case 10: return 31; case 11: return 30; case 12: return 31;
    default: return -1;
  }
}
__global__ void calendar(const int* month, const int* year, int* days, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int y = year[i];
    days[i] = days_in_month(month[i], (y % 4 == 0 && y % 100 != 0) || y % 400 == 0);
  }
}

// Recursion: a __noinline__ recursive function (needs a call stack).
__device__ __noinline__ unsigned long long fib(int k) {
  return k < 2 ? (unsigned long long)k : fib(k - 1) + fib(k - 2);
}
__device__ __noinline__ int ackermann_small(int m, int nn) {
  if (m == 0) return nn + 1;
  if (nn == 0) return ackermann_small(m - 1, 1);
  return ackermann_small(m - 1, ackermann_small(m, nn - 1));
}
struct Node {
  int left, right;
  float value;
};
__device__ __noinline__ float tree_sum(const Node* nodes, int idx, int depth) {
  if (idx < 0 || depth > 24) return 0.0f;
  const Node& nd = nodes[idx];
  return nd.value + tree_sum(nodes, nd.left, depth + 1) + tree_sum(nodes, nd.right, depth + 1);
}
__global__ void recursion(const int* ks, unsigned long long* fibs, int* ack, const Node* nodes, float* sums, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  fibs[i] = fib(ks[i] & 15);
  ack[i] = ackermann_small(ks[i] & 1, ks[i] & 3);
  sums[i] = tree_sum(nodes, i, 0);
}

// Local arrays indexed by run-time values: the local memory depot.
__global__ void local_array_dynamic(const int* idx, const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float window[32];
#pragma unroll
  for (int k = 0; k < 32; ++k) window[k] = in[(i + k) % n];
  int j = idx[i] & 31;
  window[j] += 1.0f;
  window[(j * 7) & 31] *= 2.0f;
  float s = 0.0f;
  for (int k = 0; k < (idx[i] >> 5) % 32; ++k) s += window[(j + k) & 31];
  out[i] = s;
}
__global__ void local_insertion_sort(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int a[16];
  for (int k = 0; k < 16; ++k) a[k] = in[(i * 16 + k) % n];
  for (int k = 1; k < 16; ++k) {
    int key = a[k], j = k - 1;
    while (j >= 0 && a[j] > key) {
      a[j + 1] = a[j];
      --j;
    }
    a[j + 1] = key;
  }
  int median = a[8], uniq = 1;
  for (int k = 1; k < 16; ++k) uniq += a[k] != a[k - 1];
  out[i] = median * 100 + uniq;
}

// Loops with break/continue/goto, nested and early exits.
__global__ void loops_break_continue(const int* data, int* first_neg, int* pos_sum, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  int found = -1, sum = 0;
  for (int c = 0; c < cols; ++c) {
    int v = data[r * cols + c];
    if (v == 0) continue;
    if (v < 0) {
      found = c;
      break;
    }
    sum += v;
  }
  int k = 0;
  do {
    sum ^= k;
    if (sum > (1 << 20)) goto done;
    ++k;
  } while (k < 4);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) {
      if (a == b) continue;
      if (((sum >> (a * 3 + b)) & 1) == 0) goto done;
      sum += a * b;
    }
done:
  first_neg[r] = found;
  pos_sum[r] = sum;
}

// printf and assert
__global__ void debug_print(const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && x[i] != x[i]) printf("NaN at %d (block %d, thread %d)\n", i, blockIdx.x, threadIdx.x);
  if (i == 0) printf("n=%d first=%f as double=%e ptr=%p ll=%lld\n", n, x[0], (double)x[0], x, (long long)n << 33);
}
__global__ void checked_divide(const int* a, const int* b, int* q, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  assert(b[i] != 0);
  q[i] = a[i] / b[i];
  if (q[i] < -1000000) __trap();
}

// __builtin_expect / __builtin_assume / unreachable
__global__ void hinted(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  __builtin_assume(n > 0);
  if (__builtin_expect(i >= n, 0)) return;
  int v = x[i];
  switch (v & 3) {
    case 0: y[i] = v; break;
    case 1: y[i] = v * 3; break;
    case 2: y[i] = v - 9; break;
    case 3: y[i] = ~v; break;
    default: __builtin_unreachable();
  }
}
