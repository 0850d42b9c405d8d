// Fixtures of tests/passes/test_stage_shared_operands.py (regenerate:
// cd tests/passes/data && nvcc -ptx -arch=sm_90 -O3 stage_shared_operands.cu -o stage_shared_operands.ptx)

// naive GEMM: A[row*K + k] is shared by a block row (independent of tid.x), B[k*N + col] by a column
extern "C" __global__ void gemm_f32(const float *A, const float *B, float *C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; k++) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}

extern "C" __global__ void gemm_f64(const double *A, const double *B, double *C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    double acc = 0.0;
    for (int k = 0; k < K; k++) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}

// 16-bit operands widened as they load (the tile keeps the load's own type and extension)
extern "C" __global__ void gemm_s16(const short *A, const short *B, int *C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    int acc = 0;
    for (int k = 0; k < K; k++) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}

// matrix-vector, one thread per row: x[j] is shared by the whole block
extern "C" __global__ void matvec(const float *A, const float *x, float *y, int M, int K) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M) return;                       // threads exit before the loop
  float acc = 0.0f;
  for (int j = 0; j < K; j++) acc += A[row * K + j] * x[j];
  y[row] = acc;
}

// refusals
extern "C" __global__ void neg_store_in_loop(const float *A, const float *B, float *C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; k++) { acc += A[row * K + k] * B[k * N + col]; C[row * N + col] = acc; }
  }
}

extern "C" __global__ void neg_gather_in_loop(const float *A, const int *idx, float *C, int M, int K) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M) {
    float acc = 0.0f;
    for (int k = 0; k < K; k++) acc += A[idx[k]];
    C[row] = acc;
  }
}

extern "C" __global__ void neg_private(const float *A, float *C, int M, int K) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M) {
    float acc = 0.0f;
    for (int k = 0; k < K; k++) acc += A[k * M + row];
    C[row] = acc;
  }
}
