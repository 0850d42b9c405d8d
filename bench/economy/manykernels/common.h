// A many-kernel project for the search-economy benchmark: small kernels as application code has
// them (element-wise maps, gathers, row loops, stencils, reductions, a naive transpose, a
// histogram), spread over three translation units, each launched by main.cu at its own size.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, \
              __LINE__);                                                              \
      exit(EXIT_FAILURE);                                                             \
    }                                                                                 \
  } while (0)

// maps.cu
void run_maps(int n, const float *x, const float *y, float *out, const double *dx, double *dout,
              const int *idx, float *gathered);
// rows.cu
void run_rows(int rows, int cols, const float *m, float *row_sum, float *row_max, float *normalized,
              const float *img, float *blurred);
// mixed.cu
void run_mixed(int nbytes, int n, int w, int h, const float *in, float *transposed, const unsigned char *bytes,
               unsigned *hist, const float *x, float *block_sums, float *clamped);
