// Next-token selection: greedy by default; temperature, top-k and top-p with a seed.
#pragma once

#include <cstdint>
#include <memory>
#include <random>

namespace at {
class Tensor;
}

namespace luka {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax; ties go to the lowest id)
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  std::uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // `logits`: float32, `n` entries. Throws luka::Error on non-finite logits.
  std::int32_t sample(const float* logits, std::int64_t n);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

// The probability softmax(logits)[id], computed in double (for per-token confidence).
double token_probability(const float* logits, std::int64_t n, std::int32_t id);

// Chooses tokens from logits where they are: the CPU sampler (below) for logits on the host, the
// CUDA plugin's for logits on a GPU. The same parameters and seed give the same ids on both.
class TokenSampler {
 public:
  virtual ~TokenSampler() = default;
  // The next id from float32 logits [vocab] (a LibTorch tensor, declared here without its header);
  // *probability, when asked for, gets softmax(logits)[id].
  virtual std::int32_t sample(const at::Tensor& logits, double* probability) = 0;
};

std::unique_ptr<TokenSampler> make_cpu_sampler(const SamplingParams& params);

}  // namespace luka
