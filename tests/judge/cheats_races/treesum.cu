// One float per block of 256: a tree reduction in shared memory, block barriers between the
// cross-warp steps, then the last warp alone with __syncwarp between its steps.
__global__ void treesum(int n, const float* x, float* out)
{
    __shared__ float s[256];
    int t = threadIdx.x;
    int i = blockIdx.x * 256 + t;
    s[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int k = 128; k >= 32; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t < 32) {
        float v = s[t];
        for (int k = 16; k > 0; k >>= 1) {
            v += s[t + k];
            __syncwarp();
            s[t] = v;
            __syncwarp();
        }
        if (t == 0) out[blockIdx.x] = v;
    }
}
