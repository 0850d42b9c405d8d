// The sum of each block's elements added to out[blockIdx.x] with float atomics (out holds
// initial values: an accumulator).
__global__ void bucketsum(int n, const float* x, float* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&out[blockIdx.x], x[i]);
}
