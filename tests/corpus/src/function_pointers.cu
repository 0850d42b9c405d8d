// Indirect calls: __device__ function-pointer tables (address initializers),
// calls through a pointer chosen at run time (.callprototype), virtual
// functions on objects built in device memory, device-side new/delete.
#include <cstdio>
#include <new>

typedef float (*unary_fn)(float);
typedef float (*binary_fn)(float, float, int);

__device__ __noinline__ float op_square(float x) { return x * x; }
__device__ __noinline__ float op_negate(float x) { return -x; }
__device__ __noinline__ float op_exp(float x) { return expf(x); }
__device__ __noinline__ float op_relu(float x) { return fmaxf(x, 0.0f); }

__device__ unary_fn d_unary_table[4] = {op_square, op_negate, op_exp, op_relu};

__global__ void apply_table(const int* which, const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = d_unary_table[which[i] & 3](in[i]);
}

__device__ float blend(float a, float b, int k) { return a + (b - a) * (k / 8.0f); }
__device__ float pick_max(float a, float b, int k) { return k & 1 ? fmaxf(a, b) : fminf(a, b); }
__device__ binary_fn d_blend_ptr = blend;
__device__ binary_fn d_max_ptr = pick_max;

__global__ void apply_pointer_param(binary_fn f, const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = f(a[i], b[i], i & 7);
}

// host fetches a device function address with cudaMemcpyFromSymbol
binary_fn get_blend_on_host() {
  binary_fn h = nullptr;
  cudaMemcpyFromSymbol(&h, d_blend_ptr, sizeof(h));
  return h;
}

// a function pointer that also returns a struct and takes many arguments
struct Hit {
  float t;
  int id;
};
typedef Hit (*intersect_fn)(float3, float3, const float*, int);
__device__ __noinline__ Hit intersect_sphere(float3 o, float3 d, const float* p, int id) {
  float3 oc = make_float3(o.x - p[0], o.y - p[1], o.z - p[2]);
  float b = oc.x * d.x + oc.y * d.y + oc.z * d.z;
  float c = oc.x * oc.x + oc.y * oc.y + oc.z * oc.z - p[3] * p[3];
  float disc = b * b - c;
  return disc < 0.0f ? Hit{INFINITY, -1} : Hit{-b - sqrtf(disc), id};
}
__device__ __noinline__ Hit intersect_plane(float3 o, float3 d, const float* p, int id) {
  float denom = d.x * p[0] + d.y * p[1] + d.z * p[2];
  float t = -(o.x * p[0] + o.y * p[1] + o.z * p[2] + p[3]) / denom;
  return t > 0.0f ? Hit{t, id} : Hit{INFINITY, -1};
}
__device__ intersect_fn d_shapes[2] = {intersect_sphere, intersect_plane};
__global__ void trace(const int* kinds, const float* params, int nshapes, const float3* dirs, float* depth, int* ids,
                      int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Hit best{INFINITY, -1};
  for (int s = 0; s < nshapes; ++s) {
    Hit h = d_shapes[kinds[s] & 1](make_float3(0.f, 0.f, 0.f), dirs[i], params + 4 * s, s);
    if (h.t < best.t) best = h;
  }
  depth[i] = best.t;
  ids[i] = best.id;
}

// --- virtual functions ---------------------------------------------------------
struct Shape {
  __device__ virtual float area() const = 0;
  __device__ virtual float perimeter() const { return 0.0f; }
  __device__ virtual ~Shape() {}
};
struct Circle : Shape {
  float r;
  __device__ explicit Circle(float r_) : r(r_) {}
  __device__ float area() const override { return 3.14159265f * r * r; }
  __device__ float perimeter() const override { return 2.0f * 3.14159265f * r; }
};
struct Rect : Shape {
  float w, h;
  __device__ Rect(float w_, float h_) : w(w_), h(h_) {}
  __device__ float area() const override { return w * h; }
  __device__ float perimeter() const override { return 2.0f * (w + h); }
};
struct Square : Rect {
  __device__ explicit Square(float s) : Rect(s, s) {}
  __device__ float perimeter() const override { return 4.0f * w; }
};

__global__ void build_shapes(Shape** shapes, const int* kinds, const float* dims, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  switch (kinds[i] % 3) {
    case 0: shapes[i] = new Circle(dims[i]); break;
    case 1: shapes[i] = new Rect(dims[i], dims[i] + 1.0f); break;
    default: shapes[i] = new Square(dims[i]); break;
  }
}
__global__ void measure_shapes(Shape* const* shapes, float* area, float* perim, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    area[i] = shapes[i]->area();
    perim[i] = shapes[i]->perimeter();
  }
}
__global__ void destroy_shapes(Shape** shapes, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    delete shapes[i];
    shapes[i] = nullptr;
  }
}

// placement new into a local buffer and a call through the vtable
__global__ void local_polymorphism(const int* kinds, const float* dims, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  alignas(16) unsigned char storage[sizeof(Rect) > sizeof(Circle) ? sizeof(Rect) : sizeof(Circle)];
  Shape* s = (kinds[i] & 1) ? static_cast<Shape*>(new (storage) Circle(dims[i]))
                            : static_cast<Shape*>(new (storage) Rect(dims[i], 2.0f));
  out[i] = s->area() + s->perimeter();
  s->~Shape();
}

// device-side malloc/free of scratch space
__global__ void device_malloc_scratch(const int* sizes, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int m = sizes[i] & 63;
  float* tmp = static_cast<float*>(malloc(sizeof(float) * (m + 1)));
  if (!tmp) {
    printf("malloc failed in thread %d\n", i);
    return;
  }
  for (int k = 0; k <= m; ++k) tmp[k] = k * 0.5f;
  float s = 0.0f;
  for (int k = m; k >= 0; --k) s += tmp[k];
  out[i] = s;
  free(tmp);
}
