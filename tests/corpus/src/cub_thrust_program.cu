// A small but complete CUB/Thrust program: generate keys, sort them with
// thrust::sort, reduce them with thrust::reduce, and compute an inclusive
// prefix sum with cub::DeviceScan. Used as the parser speed benchmark.
#include <cstdio>
#include <vector>
#include <cub/device/device_scan.cuh>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/sort.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/transform.h>
#include <thrust/functional.h>

struct hash_key {
  __host__ __device__ unsigned operator()(unsigned x) const {
    x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
    return x;
  }
};

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : (1 << 20);
  thrust::device_vector<unsigned> keys(n);
  thrust::sequence(keys.begin(), keys.end());
  thrust::transform(keys.begin(), keys.end(), keys.begin(), hash_key());

  thrust::sort(keys.begin(), keys.end());
  unsigned long long total = thrust::reduce(keys.begin(), keys.end(), 0ull,
                                            thrust::plus<unsigned long long>());

  thrust::device_vector<unsigned> scanned(n);
  size_t temp_bytes = 0;
  const unsigned* in = thrust::raw_pointer_cast(keys.data());
  unsigned* out = thrust::raw_pointer_cast(scanned.data());
  cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, in, out, n);
  thrust::device_vector<char> temp(temp_bytes);
  cub::DeviceScan::InclusiveSum(thrust::raw_pointer_cast(temp.data()), temp_bytes, in, out, n);

  unsigned last = scanned.back();
  thrust::host_vector<unsigned> head(keys.begin(), keys.begin() + (n < 4 ? n : 4));
  std::printf("n=%d sum=%llu last=%u first=%u\n", n, total, last, head[0]);
  return 0;
}
