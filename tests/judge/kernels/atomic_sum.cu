// A baseline whose float result depends on the order of atomics: nondeterministic.
extern "C" __global__ void atomic_sum(const float* __restrict__ x, float* __restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}
