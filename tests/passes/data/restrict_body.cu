// Kernels for tests/passes/test_restrict_body.py (no-alias versioning with a restrict-compiled body).
// Regenerate:
//   nvcc -ptx -arch=sm_90 -O3 restrict_body.cu -o restrict_body.ptx
//   nvcc -ptx -arch=sm_90 -O3 -restrict restrict_body.cu -o restrict_body.restrict.ptx

// Row mat-vec accumulating into tmp: without __restrict__ nvcc reloads and stores tmp[i]
// every iteration and cannot use ld.global.nc for A and x.
__global__ void matvec_rows(const float* A, const float* x, float* tmp, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    for (int j = 0; j < n; j++) tmp[i] += A[i * n + j] * x[j];
}

// One pointer: restrict changes nothing.
__global__ void bump(float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += 1.0f;
}
