// Thrust on device_vector: sort with a custom comparator, transform_reduce
// (an L2 norm), and count_if with a functor.
#include <thrust/device_vector.h>
#include <thrust/sort.h>
#include <thrust/transform_reduce.h>
#include <thrust/count.h>
#include <thrust/functional.h>

struct square {
  __host__ __device__ float operator()(float x) const { return x * x; }
};
struct is_outlier {
  float limit;
  __host__ __device__ bool operator()(float x) const { return fabsf(x) > limit; }
};

float l2_norm(const thrust::device_vector<float>& v) {
  return sqrtf(thrust::transform_reduce(v.begin(), v.end(), square(), 0.0f, thrust::plus<float>()));
}

void sort_descending(thrust::device_vector<float>& v) { thrust::sort(v.begin(), v.end(), thrust::greater<float>()); }

long count_outliers(const thrust::device_vector<float>& v, float limit) {
  return thrust::count_if(v.begin(), v.end(), is_outlier{limit});
}
