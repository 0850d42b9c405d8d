// nvcc-plus: grid=cdiv(n,256) block=256 x:f32[n] in y:f32[n] inout n=4099 a=2.0
__global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
// nvcc-plus: grid=cdiv(n,256) block=256 x:f32[n] in out:f32[n] out n=4099
__global__ void square(int n, const float* x, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * x[i];
}
