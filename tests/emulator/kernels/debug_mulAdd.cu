// Compiled with -G: does ptxas contract mul.f32 + add.f32 (no rounding modifiers) at -O0?
extern "C" __global__ void debug_mul_add(const float* a, const float* b, const float* c,
                                         const double* d, float* out, double* outd, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float t = a[i] * b[i];
  out[i] = t + c[i];
  double u = d[i] * d[n - 1 - i];
  outd[i] = u + d[(i + 1) % n];
}
