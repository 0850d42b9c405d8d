// out[i] = x[i - 1] + x[i] + x[i + 1] within each block of 256 (0 beyond its ends), through
// shared memory.
__global__ void stencil3(int n, const int* x, int* out)
{
    __shared__ int s[258];
    int t = threadIdx.x;
    int i = blockIdx.x * 256 + t;
    s[t + 1] = i < n ? x[i] : 0;
    if (t == 0) {
        s[0] = 0;
        s[257] = 0;
    }
    __syncthreads();
    if (i < n) out[i] = s[t] + s[t + 1] + s[t + 2];
}
