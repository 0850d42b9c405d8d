// All-pairs gravitational N-body (GPU Gems 3 ch. 31 / CUDA samples "nbody"): accelerations
// computed tile by tile through shared memory (float4 positions, w = mass), then a leapfrog
// integration step whose constants are passed as a by-value struct.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define NUM_BODIES 32768
#define BLOCK_SIZE 256
#define STEPS_PER_REP 4
#define NUM_REPS 10
#define CHECK_SAMPLES 512

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, \
              __LINE__);                                                              \
      exit(EXIT_FAILURE);                                                             \
    }                                                                                 \
  } while (0)

struct SimParams {
  float dt;
  float softening_sq;
  float damping;
  float g;
  int num_bodies;
};

__device__ float3 body_body(float4 bi, float4 bj, float3 ai, float softening_sq) {
  float3 r = make_float3(bj.x - bi.x, bj.y - bi.y, bj.z - bi.z);
  float dist_sq = r.x * r.x + r.y * r.y + r.z * r.z + softening_sq;
  float inv_dist = rsqrtf(dist_sq);
  float s = bj.w * inv_dist * inv_dist * inv_dist;
  ai.x += r.x * s;
  ai.y += r.y * s;
  ai.z += r.z * s;
  return ai;
}

__global__ void compute_accel(const float4 *pos, float4 *accel, int n, float softening_sq) {
  __shared__ float4 tile[BLOCK_SIZE];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 bi = i < n ? pos[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  float3 acc = make_float3(0.f, 0.f, 0.f);
  for (int t = 0; t < (n + BLOCK_SIZE - 1) / BLOCK_SIZE; ++t) {
    int j = t * BLOCK_SIZE + threadIdx.x;
    tile[threadIdx.x] = j < n ? pos[j] : make_float4(0.f, 0.f, 0.f, 0.f);
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < BLOCK_SIZE; ++k) acc = body_body(bi, tile[k], acc, softening_sq);
    __syncthreads();
  }
  if (i < n) accel[i] = make_float4(acc.x, acc.y, acc.z, 0.f);
}

__global__ void integrate(SimParams p, float4 *pos, float4 *vel, const float4 *accel) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.num_bodies) return;
  float4 x = pos[i], v = vel[i], a = accel[i];
  v.x = (v.x + a.x * p.g * p.dt) * p.damping;
  v.y = (v.y + a.y * p.g * p.dt) * p.damping;
  v.z = (v.z + a.z * p.g * p.dt) * p.damping;
  x.x += v.x * p.dt;
  x.y += v.y * p.dt;
  x.z += v.z * p.dt;
  pos[i] = x;
  vel[i] = v;
}

static uint32_t lcg_state = 1618033u;
static inline float lcg_float() {  // uniform in [-1, 1)
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (float)(lcg_state >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

int main() {
  const int n = NUM_BODIES;
  SimParams p{0.001f, 0.01f, 0.995f, 1.0f, n};
  printf("nbody: %d bodies, %d steps per rep\n", n, STEPS_PER_REP);
  std::vector<float4> h_pos(n), h_vel(n), h_acc(n), h_pos1(n), h_vel1(n);
  for (int i = 0; i < n; ++i) {
    float x, y, z;
    do { x = lcg_float(); y = lcg_float(); z = lcg_float(); } while (x * x + y * y + z * z > 1.0f);
    h_pos[i] = make_float4(10.f * x, 10.f * y, 10.f * z, 0.5f + 0.5f * (lcg_float() + 1.0f));
    h_vel[i] = make_float4(0.1f * lcg_float(), 0.1f * lcg_float(), 0.1f * lcg_float(), 0.f);
  }
  float4 *d_pos, *d_vel, *d_acc;
  CUDA_CHECK(cudaMalloc(&d_pos, n * sizeof(float4)));
  CUDA_CHECK(cudaMalloc(&d_vel, n * sizeof(float4)));
  CUDA_CHECK(cudaMalloc(&d_acc, n * sizeof(float4)));
  auto upload = [&]() {
    CUDA_CHECK(cudaMemcpy(d_pos, h_pos.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_vel, h_vel.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
  };
  upload();
  const int blocks = (n + BLOCK_SIZE - 1) / BLOCK_SIZE;
  auto step = [&]() {
    compute_accel<<<blocks, BLOCK_SIZE>>>(d_pos, d_acc, n, p.softening_sq);
    integrate<<<blocks, BLOCK_SIZE>>>(p, d_pos, d_vel, d_acc);
  };
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  step();  // warm-up
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> times;
  for (int r = 0; r < NUM_REPS; ++r) {
    CUDA_CHECK(cudaEventRecord(start));
    for (int s = 0; s < STEPS_PER_REP; ++s) step();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  CUDA_CHECK(cudaGetLastError());
  std::sort(times.begin(), times.end());
  float median = times[times.size() / 2];

  // Check: one step from the initial state; sampled bodies against a double-precision CPU sum.
  upload();
  step();
  CUDA_CHECK(cudaMemcpy(h_acc.data(), d_acc, n * sizeof(float4), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(h_pos1.data(), d_pos, n * sizeof(float4), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(h_vel1.data(), d_vel, n * sizeof(float4), cudaMemcpyDeviceToHost));
  size_t bad = 0;
  double max_rel = 0.0;
  for (int s = 0; s < CHECK_SAMPLES; ++s) {
    int i = (int)(((uint64_t)s * 2654435761u) % n);
    double ax = 0, ay = 0, az = 0, amag = 0;
    for (int j = 0; j < n; ++j) {
      double rx = (double)h_pos[j].x - h_pos[i].x, ry = (double)h_pos[j].y - h_pos[i].y,
             rz = (double)h_pos[j].z - h_pos[i].z;
      double d2 = rx * rx + ry * ry + rz * rz + p.softening_sq;
      double sc = h_pos[j].w / (d2 * sqrt(d2));
      ax += rx * sc; ay += ry * sc; az += rz * sc;
      amag += sqrt(rx * rx + ry * ry + rz * rz) * sc;
    }
    double err = fabs(h_acc[i].x - ax) + fabs(h_acc[i].y - ay) + fabs(h_acc[i].z - az);
    max_rel = std::max(max_rel, err / amag);
    if (err > 1e-4 * amag) ++bad;
    // the integration step from the GPU's own acceleration
    float vx = (h_vel[i].x + h_acc[i].x * p.g * p.dt) * p.damping;
    float px = h_pos[i].x + vx * p.dt;
    if (fabsf(h_vel1[i].x - vx) > 1e-5f * (1.0f + fabsf(vx)) ||
        fabsf(h_pos1[i].x - px) > 1e-5f * (1.0f + fabsf(px)))
      ++bad;
  }
  bool ok = bad == 0;
  if (!ok) printf("nbody: %zu mismatches\n", bad);
  double ginter = (double)n * n * STEPS_PER_REP / 1e9;
  printf("nbody: median %.3f ms per rep, %.1f G interactions/s, max rel err %.3g\n", median,
         ginter / (median * 1e-3), max_rel);
  printf("NVCC_PLUS_BENCH kernel_ms=%.4f check=%s\n", median, ok ? "PASS" : "FAIL");
  cudaFree(d_pos); cudaFree(d_vel); cudaFree(d_acc);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
