// Vector types: float4/float2/int2/int4/double2/uchar4/short2 loads and stores,
// reinterpret_cast vectorisation, aligned structs, __ldg and cache-hint loads.
#include <cstdint>

__global__ void float4_scale(const float4* __restrict__ in, float4* __restrict__ out, float s, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = in[i];
    out[i] = make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
  }
}

// scalar pointers, vectorised body with a scalar tail
__global__ void vectorized_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i + 3 < n) {
    float4 x = *reinterpret_cast<const float4*>(a + i);
    float4 y = *reinterpret_cast<const float4*>(b + i);
    *reinterpret_cast<float4*>(c + i) = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  } else {
    for (; i < n; ++i) c[i] = a[i] + b[i];
  }
}

__global__ void int2_int4_ops(const int2* p, const int4* q, int2* op, int4* oq, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int2 a = p[i];
  int4 b = q[i];
  op[i] = make_int2(a.x + b.z, a.y - b.w);
  oq[i] = make_int4(b.x * a.x, b.y * a.y, b.z ^ a.x, b.w | a.y);
}

__global__ void double2_complex_mul(const double2* a, const double2* b, double2* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    double2 x = a[i], y = b[i];
    c[i] = make_double2(x.x * y.x - x.y * y.y, x.x * y.y + x.y * y.x);
  }
}

__global__ void float2_complex_axpy(float2 alpha, const float2* x, float2* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float2 v = x[i], w = y[i];
    w.x += alpha.x * v.x - alpha.y * v.y;
    w.y += alpha.x * v.y + alpha.y * v.x;
    y[i] = w;
  }
}

// RGBA image with uchar4, grayscale to uchar; short2 pairs
__global__ void rgba_to_gray(const uchar4* rgba, unsigned char* gray, short2* grad, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  uchar4 p = rgba[y * w + x];
  float g = 0.299f * p.x + 0.587f * p.y + 0.114f * p.z;
  gray[y * w + x] = (unsigned char)fminf(g * (p.w / 255.0f), 255.0f);
  uchar4 r = rgba[y * w + min(x + 1, w - 1)];
  uchar4 d = rgba[min(y + 1, h - 1) * w + x];
  grad[y * w + x] = make_short2((short)r.x - (short)p.x, (short)d.x - (short)p.x);
}

struct __align__(16) Particle {
  float3 pos;
  float mass;
};
struct __align__(8) Pair {
  int key;
  float val;
};
__global__ void particles(const Particle* in, Particle* out, const Pair* pairs, float dt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Particle p = in[i];
  Pair q = pairs[i];
  p.pos.x += dt * q.val;
  p.pos.y += dt * (float)q.key;
  p.pos.z -= dt * p.mass;
  out[i] = p;
}

__global__ void ldg_and_cache_hints(const float4* __restrict__ in, const float2* src, float4* out, float2* dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 a = __ldg(in + i);
  float4 b = __ldcs(in + ((i + 1) % n));
  float2 c = __ldcg(src + i);
  float2 d = __ldlu(src + ((i + 7) % n));
  float2 e = __ldca(src + ((i + 3) % n));
  __stcs(out + i, make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w));
  __stwt(dst + i, make_float2(c.x + d.x + e.x, c.y + d.y + e.y));
  __stcg(dst + n + i, c);
}

// 16-byte vector over shorts/bytes and 8-byte over halves (reinterpretation)
__global__ void bytes_via_uint4(const uint8_t* __restrict__ in, uint8_t* __restrict__ out, int nbytes) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 16;
  if (i + 15 < nbytes) {
    uint4 v = *reinterpret_cast<const uint4*>(in + i);
    v.x = __vadd4(v.x, 0x01010101u);
    v.y = __vsub4(v.y, 0x01010101u);
    v.z = __vmaxu4(v.z, 0x40404040u);
    v.w = __vminu4(v.w, 0xC0C0C0C0u);
    *reinterpret_cast<uint4*>(out + i) = v;
  }
}

__global__ void longlong2_and_ulonglong(const longlong2* a, ulonglong2* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    longlong2 v = a[i];
    b[i] = make_ulonglong2((unsigned long long)(v.x + v.y), (unsigned long long)(v.x - v.y));
  }
}
