#include "core/device/cuda_sampler.h"

#include <cub/device/device_radix_sort.cuh>

#include <cmath>

#include "core/generate/sampling_math.h"

namespace luka::cuda_sampling {

namespace {

constexpr int kThreads = 1024;

struct DeviceResult {
  int id;
  int bad_index;
  double probability;
};

std::size_t align256(std::size_t x) { return (x + 255) / 256 * 256; }

std::size_t sort_temp_bytes(std::int64_t n) {
  std::size_t bytes = 0;
  cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
                                            static_cast<const int*>(nullptr), static_cast<int*>(nullptr), static_cast<int>(n));
  return bytes;
}

// One block: the argmax (sampling::before: ties to the lower id) and the lowest non-finite id.
__global__ void argmax_kernel(const float* __restrict__ logits, long long n, DeviceResult* out) {
  __shared__ float best_v[kThreads];
  __shared__ int best_i[kThreads];
  __shared__ int bad[kThreads];
  const int tid = threadIdx.x;
  float v = -INFINITY;
  int vi = -1, b = INT_MAX;
  for (long long i = tid; i < n; i += blockDim.x) {
    const float x = logits[i];
    if (!isfinite(x)) {
      if (static_cast<int>(i) < b) b = static_cast<int>(i);
      continue;
    }
    if (vi < 0 || sampling::before(x, static_cast<int>(i), v, vi)) {
      v = x;
      vi = static_cast<int>(i);
    }
  }
  best_v[tid] = v;
  best_i[tid] = vi;
  bad[tid] = b;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) {
      const int oi = best_i[tid + s];
      if (oi >= 0 && (best_i[tid] < 0 || sampling::before(best_v[tid + s], oi, best_v[tid], best_i[tid]))) {
        best_v[tid] = best_v[tid + s];
        best_i[tid] = oi;
      }
      bad[tid] = min(bad[tid], bad[tid + s]);
    }
    __syncthreads();
  }
  if (tid == 0) {
    out->id = best_i[0];
    out->bad_index = bad[0] == INT_MAX ? -1 : bad[0];
    out->probability = 0;
  }
}

__global__ void iota_kernel(int* __restrict__ ids, long long n) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x)
    ids[i] = static_cast<int>(i);
}

// The shared draw over the sorted candidates, in one thread: the CPU sampler's exact sequence of
// double operations.
__global__ void pick_kernel(const float* __restrict__ sorted, const int* __restrict__ ids, long long n, int top_k, float temperature,
                            float top_p, double u01, DeviceResult* out) {
  if (out->bad_index >= 0) return;
  out->id = sampling::pick_sorted(sorted, ids, n, top_k, temperature, top_p, u01);
}

// softmax(logits)[id] in double: max, then the sum of exponentials, over one block.
__global__ void probability_kernel(const float* __restrict__ logits, long long n, DeviceResult* out) {
  __shared__ double red[kThreads];
  const int tid = threadIdx.x;
  if (out->bad_index >= 0) return;
  double m = -INFINITY;
  for (long long i = tid; i < n; i += blockDim.x) m = fmax(m, static_cast<double>(logits[i]));
  red[tid] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] = fmax(red[tid], red[tid + s]);
    __syncthreads();
  }
  const double mx = red[0];
  __syncthreads();
  double sum = 0;
  for (long long i = tid; i < n; i += blockDim.x) sum += exp(static_cast<double>(logits[i]) - mx);
  red[tid] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] += red[tid + s];
    __syncthreads();
  }
  if (tid == 0) out->probability = exp(static_cast<double>(logits[out->id]) - mx) / red[0];
}

std::string api(cudaError_t e, const char* what) {
  return e == cudaSuccess ? std::string() : std::string(what) + ": " + cudaGetErrorString(e);
}

}  // namespace

std::size_t workspace_bytes(std::int64_t n) {
  return align256(sizeof(DeviceResult)) + 3 * align256(static_cast<std::size_t>(n) * 4) + align256(sort_temp_bytes(n));
}

std::string sample(const Request& r, void* workspace, std::size_t workspace_size, Result* pinned, void* stream) {
  if (r.n <= 0 || r.n > INT32_MAX) return "sampler: logits length out of range";
  if (workspace_size < workspace_bytes(r.n)) return "sampler: workspace too small";
  const auto s = static_cast<cudaStream_t>(stream);
  char* w = static_cast<char*>(workspace);
  auto* result = reinterpret_cast<DeviceResult*>(w);
  w += align256(sizeof(DeviceResult));
  int* ids_in = reinterpret_cast<int*>(w);
  w += align256(static_cast<std::size_t>(r.n) * 4);
  float* keys_out = reinterpret_cast<float*>(w);
  w += align256(static_cast<std::size_t>(r.n) * 4);
  int* ids_out = reinterpret_cast<int*>(w);
  w += align256(static_cast<std::size_t>(r.n) * 4);
  std::size_t temp = sort_temp_bytes(r.n);

  argmax_kernel<<<1, kThreads, 0, s>>>(r.logits, r.n, result);
  if (!r.greedy) {
    iota_kernel<<<static_cast<unsigned>((r.n + 255) / 256 < 1024 ? (r.n + 255) / 256 : 1024), 256, 0, s>>>(ids_in, r.n);
    if (std::string e = api(cub::DeviceRadixSort::SortPairsDescending(w, temp, r.logits, keys_out, ids_in, ids_out,
                                                                       static_cast<int>(r.n), 0, 32, s),
                            "cub radix sort");
        !e.empty())
      return e;
    pick_kernel<<<1, 1, 0, s>>>(keys_out, ids_out, r.n, r.top_k, r.temperature, r.top_p, r.u01, result);
  }
  if (r.probability) probability_kernel<<<1, kThreads, 0, s>>>(r.logits, r.n, result);
  if (std::string e = api(cudaGetLastError(), "sampler launch"); !e.empty()) return e;
  static_assert(sizeof(Result) == sizeof(DeviceResult), "pinned result layout");
  return api(cudaMemcpyAsync(pinned, result, sizeof(Result), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
}

}  // namespace luka::cuda_sampling
