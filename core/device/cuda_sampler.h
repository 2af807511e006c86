// The CUDA plugin's token sampling on the device (plain CUDA: pointers, sizes, a stream). Greedy is
// a parallel argmax; sampling sorts the logits (a stable radix sort: descending logit, ascending
// id) and runs the shared draw (core/generate/sampling_math.h) that the CPU sampler runs, so the
// same parameters and uniform draw give the same id. The id, a non-finite logit if any, and the
// chosen id's probability come back through pinned host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace luka::cuda_sampling {

struct Request {
  const float* logits = nullptr;  // device, n float32
  std::int64_t n = 0;
  bool greedy = true;             // argmax, ties to the lowest id
  int top_k = 0;
  float temperature = 1.0f, top_p = 1.0f;
  double u01 = 0;                 // the uniform draw in [0, 1), from the host's generator
  bool probability = false;       // also softmax(logits)[id]
};

struct Result {
  std::int32_t id = -1;
  std::int32_t bad_index = -1;  // the lowest id with a non-finite logit, -1: none
  double probability = 0;
};

// Device workspace for logits of length n.
std::size_t workspace_bytes(std::int64_t n);

// Enqueues the sampling on `stream`; *pinned (cudaHostAlloc'd) holds the result once the stream
// reaches it. Returns "" or the CUDA error.
std::string sample(const Request& request, void* workspace, std::size_t workspace_size, Result* pinned, void* stream);

}  // namespace luka::cuda_sampling
