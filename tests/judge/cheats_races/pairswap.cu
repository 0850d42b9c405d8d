// t[i] = 3 * x[i]; after the block's barrier each thread reads its neighbour's element of t
// (written by another thread of the block earlier in the launch): out[i] = t[i ^ 1] + 1.
__global__ void pairswap(int n, const int* x, int* t, int* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t[i] = 3 * x[i];
    __syncthreads();
    int j = i ^ 1;
    if (i < n && j < n) out[i] = t[j] + 1;
}
