// sq[i] = x[i]^2 and acc[i] = x[i]^2 + x[i - blockDim.x]^2 (the same element of the block
// before; 0 for the first block), in integers.
__global__ void pairsq(int n, const int* x, int* sq, int* acc)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = x[i] * x[i];
    sq[i] = v;
    int w = 0;
    if (blockIdx.x > 0) {
        int u = x[i - blockDim.x];
        w = u * u;
    }
    acc[i] = v + w;
}
