// Atomics: atomicAdd on int/unsigned/float/double/half2, CAS loops for ops the
// hardware lacks, atomicMax/Min, bitwise atomics, scoped atomics, libcu++
// atomic_ref with memory orders, and a spin lock.
#include <cuda_fp16.h>
#include <cuda/atomic>

__global__ void atomic_add_types(const int* ki, const float* kf, const double* kd, int* si,
                                 unsigned long long* su, float* sf, double* sd, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicAdd(si, ki[i]);                         // result unused: red.global.add
  atomicAdd(su, (unsigned long long)(ki[i] & 0xff));
  atomicAdd(sf, kf[i]);
  atomicAdd(sd, kd[i]);
}

__global__ void atomic_add_returning(int* counter, int* slots, const int* flags, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && flags[i]) {
    int pos = atomicAdd(counter, 1);            // result used: atom.global.add
    slots[pos] = i;
  }
}

__global__ void atomic_half2(__half2* acc, const __half2* v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&acc[i & 63], v[i]);
}

// float max via integer CAS loop (classic idiom)
__device__ float atomicMaxFloat(float* addr, float val) {
  int* iaddr = reinterpret_cast<int*>(addr);
  int old = *iaddr, assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) >= val) break;
    old = atomicCAS(iaddr, assumed, __float_as_int(val));
  } while (assumed != old);
  return __int_as_float(old);
}

// double multiply via 64-bit CAS loop
__device__ double atomicMulDouble(double* addr, double val) {
  unsigned long long* uaddr = reinterpret_cast<unsigned long long*>(addr);
  unsigned long long old = *uaddr, assumed;
  do {
    assumed = old;
    old = atomicCAS(uaddr, assumed, __double_as_longlong(val * __longlong_as_double(assumed)));
  } while (assumed != old);
  return __longlong_as_double(old);
}

__global__ void cas_loops(float* fmax_out, double* prod, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicMaxFloat(fmax_out, x[i]);
    atomicMulDouble(prod, 1.0 + 1e-7 * x[i]);
  }
}

__global__ void minmax_bitwise(const int* v, int* mx, int* mn, unsigned* umx, unsigned* bits_and,
                               unsigned* bits_or, unsigned* bits_xor, long long* lmx, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = v[i];
  atomicMax(mx, x);
  atomicMin(mn, x);
  atomicMax(umx, (unsigned)x);
  atomicAnd(bits_and, (unsigned)x | 0xF0F0F0F0u);
  atomicOr(bits_or, 1u << (x & 31));
  atomicXor(bits_xor, (unsigned)x);
  atomicMax(lmx, (long long)x * 3);
}

__global__ void exch_inc_dec(unsigned* ring, unsigned* head, int* last, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned slot = atomicInc(head, 1023u);     // wraps at 1024
    ring[slot] = i;
    atomicDec(head + 1, 1023u);
    atomicExch(last, i);
    float* f = reinterpret_cast<float*>(last + 1);
    atomicExch(f, (float)i);
  }
}

__global__ void scoped_atomics(int* block_counter, int* sys_counter, float* block_sum, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicAdd_block(block_counter + blockIdx.x, 1);
    atomicAdd_system(sys_counter, 1);
    atomicAdd_block(block_sum + blockIdx.x, x[i]);
    atomicCAS_block(block_counter + gridDim.x, 0, 1);
  }
}

// shared-memory privatised histogram
__global__ void histogram256(const unsigned char* data, unsigned* hist, int n) {
  __shared__ unsigned local[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x)
    if (local[b]) atomicAdd(&hist[b], local[b]);
}

// libcu++ atomic_ref with explicit memory orders and scopes
__global__ void atomic_ref_orders(int* flag, int* data, int* out) {
  cuda::atomic_ref<int, cuda::thread_scope_device> f(*flag);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    data[0] = 42;
    f.store(1, cuda::memory_order_release);
  } else if (threadIdx.x == 0) {
    while (f.load(cuda::memory_order_acquire) == 0) {
    }
    cuda::atomic_ref<int, cuda::thread_scope_system> o(out[blockIdx.x]);
    o.fetch_add(data[0], cuda::memory_order_relaxed);
    int expected = 0;
    o.compare_exchange_strong(expected, 7, cuda::memory_order_acq_rel);
  }
}

// a ticket spin lock protecting a non-atomic update
__device__ int g_lock = 0;
__device__ float g_guarded[4];
__global__ void spin_lock_update(const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || threadIdx.x != 0) return;
  while (atomicCAS(&g_lock, 0, 1) != 0) {
  }
  __threadfence();
  g_guarded[0] += x[i];
  g_guarded[1] = fmaxf(g_guarded[1], x[i]);
  __threadfence();
  atomicExch(&g_lock, 0);
}

// fire-and-forget reductions written directly in PTX (red.*); nvcc itself
// emits atom.* even when the result is unused
__global__ void red_via_asm(unsigned* counter, float* fsum, unsigned long long* wide, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  asm volatile("red.global.add.u32 [%0], %1;" ::"l"(counter), "r"(1u) : "memory");
  asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(fsum), "f"(x[i]) : "memory");
  asm volatile("red.global.max.u64 [%0], %1;" ::"l"(wide), "l"((unsigned long long)i) : "memory");
}
