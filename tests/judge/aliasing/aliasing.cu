// Kernels of the judge's aliasing tests (tests/judge/test_judge_aliasing.py). Each variant is
// this file compiled with a macro (or -restrict); build_ptx.py regenerates tests/judge/aliasing/ptx.
#include <cstddef>

// Row matrix-vector product into a global accumulator: nvcc's code stores and reloads tmp[i]
// every iteration (tmp may alias A or x). -restrict keeps it in a register. CHECKED tests at
// launch that tmp overlaps neither A nor x and only then runs a register loop; CHECKED_OFF is
// the same check off by one at the range end (an overlap of one element counts as disjoint).
extern "C" __global__ void matvec(const float* A, const float* x, float* tmp, int m, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
#if defined(CHECKED) || defined(CHECKED_OFF)
#ifdef CHECKED
    const int slack = 0;
#else
    const int slack = 1;
#endif
    bool disjoint = (tmp + m - slack <= x || x + n - slack <= tmp) &&
                    (tmp + m - slack <= A || A + (size_t)m * n - slack <= tmp);
    if (disjoint) {
        float s = 0.0f;
        for (int j = 0; j < n; j++) s += A[(size_t)i * n + j] * x[j];
        tmp[i] = s;
        return;
    }
#endif
    tmp[i] = 0.0f;
    for (int j = 0; j < n; j++) tmp[i] += A[(size_t)i * n + j] * x[j];
}

// In place: y = a*x + y, then z = x*y. nvcc's code reloads x[i] after the store to y[i] (x may
// be y); -restrict reuses the value loaded before it (a load moved past a store). GUARD_CHEAT
// writes one element past y only when x and y are the same pointer.
extern "C" __global__ void axpy_mul(const float* x, float* y, float* z, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = a * x[i] + y[i];
    z[i] = x[i] * y[i];
#ifdef GUARD_CHEAT
    if ((((size_t)y ^ (size_t)x) >> 2) == 0 && i == n - 1) y[i + 1] = 0.0f;
#endif
}

// A two-point stencil: with its output on its input, in place or shifted, threads read what
// other threads write (every aliased layout races).
extern "C" __global__ void stencil2(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + in[i + 1];
}

// float4 in place: y = 2*x + y through 16-byte vector loads and stores. A layout that shifts y
// by one float from x is no program's input (the vector accesses fault on it); the judge keeps
// its layouts 16-byte aligned for this kernel.
extern "C" __global__ void scale4(const float4* x, float4* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 a = x[i], b = y[i];
    y[i] = make_float4(2.0f * a.x + b.x, 2.0f * a.y + b.y, 2.0f * a.z + b.z, 2.0f * a.w + b.w);
}

// 64 strided sums by one thread, zeroed first and summed in place (nvcc reloads the bins: they
// may alias x; -restrict keeps each in a register and drops the zeroing). The 256-byte bins lie
// in the middle of x only once x is larger (n > 64): the aliased layouts' sizes are chosen so.
extern "C" __global__ void bins64(const float* x, float* bins, int n) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    for (int b = 0; b < 64; b++) bins[b] = 0.0f;
    for (int b = 0; b < 64; b++)
        for (int i = b; i < n; i += 64) bins[b] += x[i];
}

// One warp per row, a layernorm's shape (rowops in the program benchmark): its sizes fixed in
// the spec, so no launch has one thread doing the work, and rsqrtf is an approximate
// instruction the emulator runs only by stand-ins (where nvcc's code is compared with itself).
// With out shifted onto in, a warp writes the first element of the next row while that row's
// warp reads it: a race between warps.
extern "C" __global__ void rownorm(const float* in, float* out, int rows, int cols) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row = blockIdx.x * 2 + warp;
    if (row >= rows) return;
    const float* x = in + (size_t)row * cols;
    float* y = out + (size_t)row * cols;
    float sum = 0.0f;
    for (int c = lane; c < cols; c += 32) sum += x[c];
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float mean = sum / cols;
    float var = 0.0f;
    for (int c = lane; c < cols; c += 32) {
        float d = x[c] - mean;
        var += d * d;
    }
    for (int o = 16; o > 0; o >>= 1) var += __shfl_xor_sync(0xffffffffu, var, o);
    float rstd = rsqrtf(var / cols + 1e-5f);
    for (int c = lane; c < cols; c += 32) y[c] = (x[c] - mean) * rstd;
}
