// Atomics whose final memory contents do not depend on the order of application.
extern "C" __global__ void histo(const int* in, unsigned* gh, unsigned* words,
                                 unsigned long long* w64, float* fsum, double* dsum, int n, int bins) {
  __shared__ unsigned sh[64];
  int tid = threadIdx.x;
  if (tid < 64) sh[tid] = 0;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + tid;
  if (i < n) {
    int v = in[i];
    unsigned b = (unsigned)v % bins;
    atomicAdd(&gh[b], 1u);
    atomicAdd(&sh[b & 63], (unsigned)(v & 0xff));
    atomicMax((int*)&words[0], v);
    atomicMin((int*)&words[1], v);
    atomicMax(&words[2], (unsigned)v);
    atomicMin(&words[3], (unsigned)v);
    atomicAnd(&words[4], (unsigned)v | 0x80000001u);
    atomicOr(&words[5], (unsigned)v & 0x10204081u);
    atomicXor(&words[6], (unsigned)v);
    atomicInc(&words[7], 1000u);
    atomicDec(&words[8], 77u);
    atomicAdd(&w64[0], (unsigned long long)(unsigned)v * 3ull);
    atomicMax((long long*)&w64[1], (long long)v * -5ll);
    atomicAdd(&fsum[0], (float)(v & 1023));                 // exact sums
    atomicAdd(&fsum[1], __int_as_float(v & 0x7ff));         // subnormal addends
    atomicAdd(&dsum[0], (double)v);
    // CAS loop: float max
    float fv = (float)(v % 100000) * 0.25f;
    unsigned* fm = &words[9];
    unsigned old = *fm, assumed;
    do {
      assumed = old;
      if (__uint_as_float(assumed) >= fv) break;
      old = atomicCAS(fm, assumed, __float_as_uint(fv));
    } while (old != assumed);
    if (i == 777) atomicExch(&words[10], (unsigned)v);
  }
  __syncthreads();
  if (tid < 64) atomicAdd(&gh[bins + tid], sh[tid]);
}

// the "last block" pattern: partial sums, a fence, a ticket; the last block adds them up
__device__ unsigned int g_ticket = 0;
extern "C" __global__ void last_block_sum(const int* in, int* partial, int* total, int n) {
  __shared__ int s[128];
  __shared__ bool last;
  int tid = threadIdx.x;
  int i = blockIdx.x * blockDim.x + tid;
  s[tid] = i < n ? in[i] : 0;
  __syncthreads();
  for (int k = 64; k > 0; k >>= 1) {
    if (tid < k) s[tid] += s[tid + k];
    __syncthreads();
  }
  if (tid == 0) {
    partial[blockIdx.x] = s[0];
    __threadfence();
    unsigned t = atomicInc(&g_ticket, gridDim.x);
    last = (t == gridDim.x - 1);
  }
  __syncthreads();
  if (last && tid == 0) {
    int sum = 0;
    for (int b = 0; b < gridDim.x; ++b) sum += ((volatile int*)partial)[b];
    *total = sum;
    g_ticket = 0;
  }
}
