// State spaces and variables: __device__ globals with initializers (scalars,
// arrays, structs, pointers to other globals), __constant__ tables, __managed__
// variables, extern __shared__ dynamic shared memory, static __shared__ arrays,
// volatile shared memory, and kernel parameters passed by value (structs and
// arrays, which become .param .align N .b8 x[size]).
#include <cstdint>

// --- __device__ globals ------------------------------------------------------
__device__ int g_counter = 0;
__device__ float g_scale = 1.5f;
__device__ double g_eps = 1e-12;
__device__ long long g_big = -9000000000LL;
__device__ unsigned short g_small[4] = {1, 2, 3, 65535};
__device__ char g_name[] = "nvcc-plus";
__device__ float g_weights[8] = {0.125f, 0.25f, 0.5f, 1.0f, -1.0f, -0.5f, -0.25f, -0.125f};
__device__ double g_table2d[2][3] = {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
__device__ float g_zeroed[1024];
struct Config {
  int iterations;
  float tolerance;
  double scale;
  char tag[6];
};
__device__ Config g_config = {100, 1e-3f, 2.0, "cfg01"};
__device__ int* g_ptr_to_counter = &g_counter;  // address initializer
__device__ float* g_ptr_into_array = &g_weights[3];
__device__ const char* g_msg_ptr = g_name;

__global__ void use_device_globals(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = g_weights[i & 7] * g_scale + (float)g_table2d[i & 1][i % 3];
  v += (float)(g_config.scale * g_config.iterations) + g_config.tolerance + g_config.tag[i % 5];
  v += *g_ptr_into_array + (float)g_small[i & 3] + g_msg_ptr[i % 9] + (float)g_eps + (float)(g_big >> 40);
  g_zeroed[i & 1023] = v;
  atomicAdd(g_ptr_to_counter, 1);
  out[i] = v;
}

// --- __constant__ memory -----------------------------------------------------
__constant__ float c_filter[17] = {0.0017f, 0.0052f, 0.0138f, 0.0311f, 0.0605f, 0.1004f, 0.1421f, 0.1716f, 0.1768f,
                                   0.1716f, 0.1421f, 0.1004f, 0.0605f, 0.0311f, 0.0138f, 0.0052f, 0.0017f};
__constant__ int c_lut[256];                   // filled with cudaMemcpyToSymbol
__constant__ double c_poly[4] = {1.0, 0.5, 0.1666666666666667, 0.0416666666666667};
__constant__ struct {
  float lo, hi;
  int mode;
} c_params;

__global__ void constant_filter(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
#pragma unroll
  for (int k = -8; k <= 8; ++k) {
    int j = min(max(i + k, 0), n - 1);
    acc += c_filter[k + 8] * in[j];
  }
  out[i] = fminf(fmaxf(acc, c_params.lo), c_params.hi);
}
__global__ void constant_lookup(const unsigned char* in, int* out, double* poly, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = c_lut[in[i]] * (c_params.mode + 1);
  double x = in[i] / 255.0;
  poly[i] = c_poly[0] + x * (c_poly[1] + x * (c_poly[2] + x * c_poly[3]));
}

// --- __managed__ -------------------------------------------------------------
__managed__ int m_flag = 0;
__managed__ float m_accum[16];
__device__ __managed__ unsigned long long m_ticks;
__global__ void managed_update(const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&m_accum[i & 15], x[i]);
  if (i == 0) {
    m_flag = 1;
    m_ticks = clock64();
  }
}

// --- shared memory -----------------------------------------------------------
// dynamic shared memory, used as two differently-typed arrays
__global__ void dynamic_shared_two_arrays(const float* in, const int* idx, float* out, int n) {
  extern __shared__ float4 dyn_smem[];  // 16-byte aligned base
  float* vals = reinterpret_cast<float*>(dyn_smem);
  int* keys = reinterpret_cast<int*>(vals + blockDim.x);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  vals[threadIdx.x] = i < n ? in[i] : 0.0f;
  keys[threadIdx.x] = i < n ? idx[i] % blockDim.x : 0;
  __syncthreads();
  if (i < n) out[i] = vals[keys[threadIdx.x]] + vals[blockDim.x - 1 - threadIdx.x];
}
template <typename T>
__global__ void dynamic_shared_templated(const T* in, T* out, int n) {
  extern __shared__ __align__(16) unsigned char raw_smem[];
  T* s = reinterpret_cast<T*>(raw_smem);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? in[i] : T(0);
  __syncthreads();
  if (i < n) out[i] = s[(threadIdx.x + 1) % blockDim.x] - s[threadIdx.x];
}
template __global__ void dynamic_shared_templated<double>(const double*, double*, int);
template __global__ void dynamic_shared_templated<short>(const short*, short*, int);

// static shared arrays: 1-D, 2-D, several of different types
__global__ void static_shared_arrays(const float* in, float* out, int width) {
  __shared__ float tile[16][17];
  __shared__ int counts[16];
  __shared__ double dsum;
  int tx = threadIdx.x, ty = threadIdx.y;
  int x = blockIdx.x * 16 + tx, y = blockIdx.y * 16 + ty;
  tile[ty][tx] = in[y * width + x];
  if (ty == 0) counts[tx] = 0;
  if (tx == 0 && ty == 0) dsum = 0.0;
  __syncthreads();
  if (tile[ty][tx] > 0.0f) atomicAdd(&counts[tx], 1);
  atomicAdd(&dsum, (double)tile[tx][ty]);
  __syncthreads();
  out[y * width + x] = tile[tx][ty] * counts[ty] + (float)dsum;
}

// shared memory declared in a device function; volatile shared
__device__ float block_broadcast(float v, int src) {
  __shared__ float slot;
  if ((int)threadIdx.x == src) slot = v;
  __syncthreads();
  float r = slot;
  __syncthreads();
  return r;
}
__global__ void volatile_shared_reduce(const int* in, int* out) {
  __shared__ int s[64];
  s[threadIdx.x] = in[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  if (threadIdx.x < 32) {
    volatile int* vs = s;
    vs[threadIdx.x] += vs[threadIdx.x + 32];
    vs[threadIdx.x] += vs[threadIdx.x + 16];
    vs[threadIdx.x] += vs[threadIdx.x + 8];
    vs[threadIdx.x] += vs[threadIdx.x + 4];
    vs[threadIdx.x] += vs[threadIdx.x + 2];
    vs[threadIdx.x] += vs[threadIdx.x + 1];
  }
  float b = block_broadcast((float)s[0], 0);
  if (threadIdx.x == 0) out[blockIdx.x] = (int)b;
}

// --- parameters by value -----------------------------------------------------
struct Matrix3 {
  float m[3][3];
};
struct Ray {
  float3 origin;
  float3 dir;
  float tmax;
  int id;
};
struct Mixed {
  char c;
  double d;
  short s;
  int i[3];
};
__global__ void struct_params(Matrix3 rot, Ray ray, Mixed mix, float4 color, double2 range, float3* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float t = ray.tmax * i / n;
  float3 p = make_float3(ray.origin.x + t * ray.dir.x, ray.origin.y + t * ray.dir.y, ray.origin.z + t * ray.dir.z);
  float3 r;
  r.x = rot.m[0][0] * p.x + rot.m[0][1] * p.y + rot.m[0][2] * p.z + color.x;
  r.y = rot.m[1][0] * p.x + rot.m[1][1] * p.y + rot.m[1][2] * p.z + color.y * mix.c;
  r.z = rot.m[2][0] * p.x + rot.m[2][1] * p.y + rot.m[2][2] * p.z + (float)(mix.d * range.x + range.y);
  r.z += (float)(mix.s + mix.i[i % 3] + ray.id);
  out[i] = r;
}

__global__ void scalar_param_types(char c, unsigned char uc, short s, unsigned short us, int i, unsigned u, long long ll,
                                   unsigned long long ull, float f, double d, bool b, long long* out) {
  out[threadIdx.x] = c + uc + s + us + i + u + ll + (long long)ull + (long long)f + (long long)d + (b ? 1 : 0);
}

// device functions that take and return structs by value (noinline: .param arrays)
__device__ __noinline__ Matrix3 mat_mul(Matrix3 a, Matrix3 b) {
  Matrix3 r;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      float s = 0.0f;
      for (int k = 0; k < 3; ++k) s += a.m[i][k] * b.m[k][j];
      r.m[i][j] = s;
    }
  return r;
}
__device__ __noinline__ float4 lerp4(float4 a, float4 b, float t) {
  return make_float4(a.x + t * (b.x - a.x), a.y + t * (b.y - a.y), a.z + t * (b.z - a.z), a.w + t * (b.w - a.w));
}
__global__ void struct_returns(const Matrix3* ms, Matrix3* out, const float4* a, const float4* b, float4* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = mat_mul(ms[i], ms[(i + 1) % n]);
  c[i] = lerp4(a[i], b[i], 0.25f);
}

// kernel parameter that is a large array-of-pointers struct (common "batched" idiom)
struct Batch {
  const float* src[8];
  float* dst[8];
  int len[8];
};
__global__ void batched_copy(Batch batch, int count) {
  int b = blockIdx.y;
  if (b >= count) return;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < batch.len[b]; i += blockDim.x * gridDim.x)
    batch.dst[b][i] = batch.src[b][i];
}
