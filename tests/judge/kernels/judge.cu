// One baseline kernel and its planted cheats / equivalent rewrites, selected by -DVARIANT_*.
// Every variant is extern "C" judge_kernel with the same signature, so that each can be
// judged against the baseline with the same launch spec (judge.toml).
//
//   out[i] = a * tile[mirror(i)] + y[i]      (mul then add, each rounded: no fma)
//
// where tile is the block's slice of x in shared memory, read back in reverse order
// within the block (threads past n store 0 there).

#ifndef VARIANT_NAME
#define VARIANT_NAME baseline
#endif

#ifdef VARIANT_CACHE
__device__ int judge_already_done = 0;
#endif

extern "C" __global__ void judge_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                        float* __restrict__ out, float a, int n)
{
#ifdef VARIANT_NOOP
    return;
#endif
#ifdef VARIANT_HANG
    if (n > 0) {
        for (;;) { __nanosleep(1000); }
    }
#endif
#ifdef VARIANT_CACHE
    if (judge_already_done) return;           // "results are already there"
#endif
#ifdef VARIANT_BLOCK0
    if (blockIdx.x != 0) return;
#endif
    __shared__ float tile[256];
#ifdef VARIANT_EQ_CUDA
    int i = threadIdx.x + blockDim.x * blockIdx.x;
#else
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#endif

#ifdef VARIANT_OFF_BY_ONE
    bool in_range = i <= n;
#else
    bool in_range = i < n;
#endif

#ifdef VARIANT_UNINIT_SHARED
    if (in_range) tile[threadIdx.x] = x[i];   // "padding is zero anyway": it is not
#else
    tile[threadIdx.x] = in_range ? x[i] : 0.0f;
#endif
    __syncthreads();
    float w = tile[blockDim.x - 1 - threadIdx.x];
    if (in_range) {
#if defined(VARIANT_FMA)
        float r = fmaf(a, w, y[i]);
#elif defined(VARIANT_IGNORE_INPUT)
        float r = __fmul_rn(a, w);            // right only when y == 0
#elif defined(VARIANT_EQ_CUDA)
        float r = __fadd_rn(y[i], __fmul_rn(w, a));
#else
        float r = __fadd_rn(__fmul_rn(a, w), y[i]);
#endif
#ifdef VARIANT_LAST_LANE
        if (threadIdx.x == 255) r = __int_as_float(__float_as_int(r) ^ 1);
#endif
#ifdef VARIANT_SLOW
        __nanosleep(20000);
#endif
        out[i] = r;
#ifdef VARIANT_WRITES_INPUT
        ((float*)x)[i] = 0.0f;
#endif
    }
#ifdef VARIANT_CRASH
    if (i == 0) *(volatile int*)(0x10) = 1;   // illegal address
#endif
#ifdef VARIANT_CACHE
    if (i == 0) judge_already_done = 1;
#endif
}
