// Texture and surface objects (bindless): tex1Dfetch on a linear buffer,
// filtered tex2D / tex3D / layered / LOD fetches, tex2Dgather, and surface
// reads/writes. (Legacy texture references no longer exist in CUDA 12+.)
#include <cuda_runtime.h>

__global__ void tex1d_fetch(cudaTextureObject_t tex, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(tex, i) + tex1Dfetch<float>(tex, max(i - 1, 0));
}

__global__ void tex1d_fetch_vec(cudaTextureObject_t tex4, cudaTextureObject_t texi, float4* out, int* oi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = tex1Dfetch<float4>(tex4, i);
    oi[i] = tex1Dfetch<int>(texi, n - 1 - i);
  }
}

// bilinear resampling with normalised coordinates
__global__ void tex2d_resample(cudaTextureObject_t tex, float* out, int w, int h, float angle) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float u = x / (float)w - 0.5f, v = y / (float)h - 0.5f;
  float s, c;
  __sincosf(angle, &s, &c);
  float tu = u * c - v * s + 0.5f, tv = v * c + u * s + 0.5f;
  out[y * w + x] = tex2D<float>(tex, tu, tv);
}

__global__ void tex2d_lod_grad_gather(cudaTextureObject_t tex, float4* out, float* lod, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float u = (x + 0.5f) / w, v = (y + 0.5f) / h;
  float4 g = tex2Dgather<float4>(tex, u, v, 0);
  float l = tex2DLod<float>(tex, u, v, 1.5f);
  float d = tex2DGrad<float>(tex, u, v, make_float2(1.0f / w, 0.0f), make_float2(0.0f, 1.0f / h));
  out[y * w + x] = g;
  lod[y * w + x] = l + d;
}

__global__ void tex3d_and_layered(cudaTextureObject_t vol, cudaTextureObject_t layers, float* out, int w, int h, int d) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float acc = 0.0f;
  for (int z = 0; z < d; ++z) acc += tex3D<float>(vol, x + 0.5f, y + 0.5f, z + 0.5f);
  acc += tex2DLayered<float>(layers, x + 0.5f, y + 0.5f, y % 4);
  out[y * w + x] = acc / d;
}

// integer texture with element-type read mode (uchar4 -> float4 normalised)
__global__ void tex_normalized_uchar(cudaTextureObject_t tex, float4* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float4>(tex, (float)x, (float)y);
}

// surfaces: box blur read from one surface, write to another
__global__ void surface_blur(cudaSurfaceObject_t src, cudaSurfaceObject_t dst, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float acc = 0.0f;
  for (int dy = -1; dy <= 1; ++dy)
    for (int dx = -1; dx <= 1; ++dx) {
      float v;
      surf2Dread(&v, src, min(max(x + dx, 0), w - 1) * (int)sizeof(float), min(max(y + dy, 0), h - 1),
                 cudaBoundaryModeClamp);
      acc += v;
    }
  surf2Dwrite(acc / 9.0f, dst, x * (int)sizeof(float), y);
}

__global__ void surface_rgba(cudaSurfaceObject_t surf, int w, int h, unsigned frame) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  uchar4 p = surf2Dread<uchar4>(surf, x * 4, y, cudaBoundaryModeZero);
  p.x = (unsigned char)(p.x + frame);
  p.w = 255;
  surf2Dwrite(p, surf, x * 4, y);
  surf1Dwrite(make_float2((float)x, (float)y), surf, x * 8, cudaBoundaryModeTrap);
}

// host-side creation of the texture object used by tex1d_fetch
cudaTextureObject_t make_linear_texture(float* d_buf, size_t n) {
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeLinear;
  res.res.linear.devPtr = d_buf;
  res.res.linear.desc = cudaCreateChannelDesc<float>();
  res.res.linear.sizeInBytes = n * sizeof(float);
  cudaTextureDesc td = {};
  td.readMode = cudaReadModeElementType;
  cudaTextureObject_t t = 0;
  cudaCreateTextureObject(&t, &res, &td, nullptr);
  return t;
}
