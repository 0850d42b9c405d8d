// Kernels of the judge's misaligned-set tests (tests/judge/test_judge_misaligned.py); each
// variant is this file compiled with a macro (build_ptx.py regenerates ptx/).
//
// quad_scale: thread i scales x[4i .. 4i+3] in place. nvcc's code makes four 4-byte accesses
// (a float* may point 4 bytes past a 16-byte boundary: quad_scale(x + 1, ...)). VEC4 reads and
// writes them as one float4, assuming the alignment nvcc cannot (a misaligned address there);
// VERSIONED tests the pointer at launch and takes nvcc's path otherwise.
//
// pair_sum: out[i] = a[2i] + a[2i+1] + b[i] over doubles and floats (the misaligned set then
// starts every buffer 8 bytes past a 16-byte boundary: a double's own alignment).
#include <cstdint>

extern "C" __global__ void quad_scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (4 * i + 3 >= n) return;
#if defined(VEC4)
    float4 v = reinterpret_cast<float4*>(x)[i];
    v.x *= a; v.y *= a; v.z *= a; v.w *= a;
    reinterpret_cast<float4*>(x)[i] = v;
#elif defined(VERSIONED)
    if ((reinterpret_cast<uintptr_t>(x) & 15) == 0) {
        float4 v = reinterpret_cast<float4*>(x)[i];
        v.x *= a; v.y *= a; v.z *= a; v.w *= a;
        reinterpret_cast<float4*>(x)[i] = v;
        return;
    }
    x[4 * i] *= a; x[4 * i + 1] *= a; x[4 * i + 2] *= a; x[4 * i + 3] *= a;
#else
    x[4 * i] *= a; x[4 * i + 1] *= a; x[4 * i + 2] *= a; x[4 * i + 3] *= a;
#endif
}

extern "C" __global__ void pair_sum(const double* a, const float* b, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
#if defined(VEC4)
    double2 v = reinterpret_cast<const double2*>(a)[i];
    out[i] = v.x + v.y + b[i];
#else
    out[i] = a[2 * i] + a[2 * i + 1] + b[i];
#endif
}
