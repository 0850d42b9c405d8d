struct P2 { float a; int b; };
struct Big { float a, b, c, d; };
__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void scale2(P2 p, double s, unsigned long long m, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = p.a * (float)s + p.b + (float)m;
}
__global__ void bigs(Big b, float* out) { out[threadIdx.x] = b.a + b.d; }
struct Axpy { int n; float a; const float* x; float* y; };
__global__ void axpy_s(Axpy p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.y[i] = p.a * p.x[i] + 1.f;
}
struct Csr { int rows; const int* row_ptr; const int* col; const float* val; };
__global__ void spmv(Csr m, const float* x, float* y) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= m.rows) return;
  float s = 0.f;
  for (int j = m.row_ptr[r]; j < m.row_ptr[r + 1]; j++) s += m.val[j] * x[m.col[j]];
  y[r] = s;
}
