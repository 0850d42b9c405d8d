// Tensor cores: nvcuda::wmma (half, bf16, tf32, int8, double fragments) and
// mma.sync / ldmatrix through inline PTX (sm_80+).
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>

using namespace nvcuda;

// C[M,N] = A[M,K] * B[K,N], one warp per 16x16 output tile, half in / float acc
__global__ void wmma_gemm_f16(const half* A, const half* B, float* C, int M, int N, int K) {
  int warp_m = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int warp_n = blockIdx.y * blockDim.y + threadIdx.y;
  if (warp_m * 16 >= M || warp_n * 16 >= N) return;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + warp_m * 16 * K + k, K);
    wmma::load_matrix_sync(b, B + warp_n * 16 * K + k, K);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C + warp_m * 16 * N + warp_n * 16, acc, N, wmma::mem_row_major);
}

// half accumulator, 32x8x16 shape, scaled epilogue through the fragment
__global__ void wmma_f16_acc_32x8(const half* A, const half* B, half* C, half alpha, int K) {
  wmma::fragment<wmma::matrix_a, 32, 8, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 32, 8, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 32, 8, 16, half> acc;
  wmma::fill_fragment(acc, __float2half(0.0f));
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + k, K);
    wmma::load_matrix_sync(b, B + k * 8, 8);
    wmma::mma_sync(acc, a, b, acc);
  }
  for (int t = 0; t < acc.num_elements; ++t) acc.x[t] = __hmul(acc.x[t], alpha);
  wmma::store_matrix_sync(C + blockIdx.x * 32 * 8, acc, 8, wmma::mem_row_major);
}

// tf32: m16n16k8 with float inputs rounded to tf32
__global__ void wmma_tf32(const float* A, const float* B, float* C, int K) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 8) {
    wmma::load_matrix_sync(a, A + k, K);
    wmma::load_matrix_sync(b, B + k * 16, 16);
#pragma unroll
    for (int t = 0; t < a.num_elements; ++t) a.x[t] = wmma::__float_to_tf32(a.x[t]);
#pragma unroll
    for (int t = 0; t < b.num_elements; ++t) b.x[t] = wmma::__float_to_tf32(b.x[t]);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C + blockIdx.x * 256, acc, 16, wmma::mem_col_major);
}

// bf16 inputs
__global__ void wmma_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int K) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(acc, C + blockIdx.x * 256, 16, wmma::mem_row_major);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + k, K);
    wmma::load_matrix_sync(b, B + k, K);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C + blockIdx.x * 256, acc, 16, wmma::mem_row_major);
}

// int8 inputs, int32 accumulation
__global__ void wmma_int8(const signed char* A, const signed char* B, int* C, int K) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> acc;
  wmma::fill_fragment(acc, 0);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + k, K);
    wmma::load_matrix_sync(b, B + k, K);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C + blockIdx.x * 256, acc, 16, wmma::mem_row_major);
}

// fp64 m8n8k4
__global__ void wmma_f64(const double* A, const double* B, double* C, int K) {
  wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 8, 8, 4, double> acc;
  wmma::fill_fragment(acc, 0.0);
  for (int k = 0; k < K; k += 4) {
    wmma::load_matrix_sync(a, A + k, K);
    wmma::load_matrix_sync(b, B + k, K);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C + blockIdx.x * 64, acc, 8, wmma::mem_row_major);
}

// --- raw mma.sync and ldmatrix through inline PTX ----------------------------
__device__ __forceinline__ void mma_m16n8k16_f16f32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                                    const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem) {
  unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned (&r)[2], const void* smem) {
  unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// one warp computes a 16x8 tile of C over K, staging A/B tiles in shared memory
__global__ void mma_ptx_gemm(const half* A, const half* B, float* C, int K) {
  __shared__ alignas(16) half sA[16 * 16];
  __shared__ alignas(16) half sB[16 * 8];
  int lane = threadIdx.x & 31;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k = 0; k < K; k += 16) {
    for (int t = lane; t < 16 * 16; t += 32) sA[t] = A[(t / 16) * K + k + (t % 16)];
    for (int t = lane; t < 16 * 8; t += 32) sB[t] = B[(k + t / 8) * 8 + (t % 8)];
    __syncwarp();
    unsigned a[4], b[2];
    ldmatrix_x4(a, &sA[(lane % 16) * 16 + (lane / 16) * 8]);
    ldmatrix_x2_trans(b, &sB[(lane % 16) * 8]);
    float c[4] = {acc[0], acc[1], acc[2], acc[3]};
    mma_m16n8k16_f16f32(acc, a, b, c);
    __syncwarp();
  }
  int row = lane / 4, col = (lane % 4) * 2;
  C[row * 8 + col] = acc[0];
  C[row * 8 + col + 1] = acc[1];
  C[(row + 8) * 8 + col] = acc[2];
  C[(row + 8) * 8 + col + 1] = acc[3];
}

// int8 mma.sync m16n8k32 and tf32 m16n8k8 through PTX
__global__ void mma_ptx_int8_tf32(const int* a8, const int* b8, int* c32, const float* af, const float* bf, float* cf) {
  int lane = threadIdx.x & 31;
  int d[4];
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a8[lane * 4]), "r"(a8[lane * 4 + 1]), "r"(a8[lane * 4 + 2]), "r"(a8[lane * 4 + 3]), "r"(b8[lane * 2]),
        "r"(b8[lane * 2 + 1]), "r"(0), "r"(0), "r"(0), "r"(0));
  for (int t = 0; t < 4; ++t) c32[lane * 4 + t] = d[t];
  unsigned ta[4], tb[2];
  for (int t = 0; t < 4; ++t) asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(ta[t]) : "f"(af[lane * 4 + t]));
  for (int t = 0; t < 2; ++t) asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(tb[t]) : "f"(bf[lane * 2 + t]));
  float e[4];
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=f"(e[0]), "=f"(e[1]), "=f"(e[2]), "=f"(e[3])
      : "r"(ta[0]), "r"(ta[1]), "r"(ta[2]), "r"(ta[3]), "r"(tb[0]), "r"(tb[1]), "f"(0.0f));
  for (int t = 0; t < 4; ++t) cf[lane * 4 + t] = e[t];
}
