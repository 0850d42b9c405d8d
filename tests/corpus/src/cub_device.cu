// CUB device-wide algorithms called from host code, the way applications use
// them: temp-storage query + call. DeviceReduce::Sum/Max, DeviceRadixSort
// (keys and pairs) and DeviceScan::ExclusiveSum.
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>

cudaError_t sum_floats(const float* d_in, float* d_out, int n, cudaStream_t s) {
  void* temp = nullptr;
  size_t bytes = 0;
  cub::DeviceReduce::Sum(temp, bytes, d_in, d_out, n, s);
  cudaMallocAsync(&temp, bytes, s);
  cudaError_t e = cub::DeviceReduce::Sum(temp, bytes, d_in, d_out, n, s);
  cudaFreeAsync(temp, s);
  return e;
}

cudaError_t max_ints(const int* d_in, int* d_out, int n, cudaStream_t s) {
  void* temp = nullptr;
  size_t bytes = 0;
  cub::DeviceReduce::Max(temp, bytes, d_in, d_out, n, s);
  cudaMallocAsync(&temp, bytes, s);
  cudaError_t e = cub::DeviceReduce::Max(temp, bytes, d_in, d_out, n, s);
  cudaFreeAsync(temp, s);
  return e;
}

cudaError_t sort_pairs(const unsigned* k_in, unsigned* k_out, const int* v_in, int* v_out, int n, cudaStream_t s) {
  void* temp = nullptr;
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(temp, bytes, k_in, k_out, v_in, v_out, n, 0, 32, s);
  cudaMallocAsync(&temp, bytes, s);
  cudaError_t e = cub::DeviceRadixSort::SortPairs(temp, bytes, k_in, k_out, v_in, v_out, n, 0, 32, s);
  cudaFreeAsync(temp, s);
  return e;
}

cudaError_t exclusive_sum(const int* d_in, int* d_out, int n, cudaStream_t s) {
  void* temp = nullptr;
  size_t bytes = 0;
  cub::DeviceScan::ExclusiveSum(temp, bytes, d_in, d_out, n, s);
  cudaMallocAsync(&temp, bytes, s);
  cudaError_t e = cub::DeviceScan::ExclusiveSum(temp, bytes, d_in, d_out, n, s);
  cudaFreeAsync(temp, s);
  return e;
}
