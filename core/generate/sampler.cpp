#include "core/generate/sampler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/generate/sampling_math.h"
#include "core/util/error.h"

namespace luka {

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  if (!(params_.temperature >= 0.0f) || !std::isfinite(params_.temperature))
    fail("sampler", "temperature must be finite and >= 0, got " + std::to_string(params_.temperature));
  if (params_.top_k < 0) fail("sampler", "top_k must be >= 0, got " + std::to_string(params_.top_k));
  if (!(params_.top_p > 0.0f && params_.top_p <= 1.0f))
    fail("sampler", "top_p must be in (0, 1], got " + std::to_string(params_.top_p));
}

std::int32_t Sampler::sample(const float* logits, std::int64_t n) {
  if (n <= 0) fail("sampler", "no logits");
  std::int64_t best = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(logits[i]))
      fail("sampler", "non-finite logit " + std::to_string(logits[i]) + " at id " + std::to_string(i));
    if (logits[i] > logits[best]) best = i;  // strict: ties keep the lowest id
  }
  if (params_.temperature == 0.0f || params_.top_k == 1) return static_cast<std::int32_t>(best);

  // Candidates by descending logit, ties by ascending id (sampling::before), so the order is
  // fully deterministic; then the shared draw (the CUDA plugin's sampler runs the same one).
  std::vector<std::int32_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const auto first = [logits](std::int32_t a, std::int32_t b) { return sampling::before(logits[a], a, logits[b], b); };
  const std::int64_t keep = sampling::kept(n, params_.top_k);
  if (keep < n) {
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), first);
  } else {
    std::sort(order.begin(), order.end(), first);
  }
  std::vector<float> sorted(static_cast<std::size_t>(keep));
  for (std::int64_t i = 0; i < keep; ++i) sorted[static_cast<std::size_t>(i)] = logits[order[static_cast<std::size_t>(i)]];
  // Uniform in [0, 1) from the top 53 bits: the same sequence for a given seed on any platform.
  const double u01 = sampling::unit_from_bits(rng_());
  return sampling::pick_sorted(sorted.data(), order.data(), keep, params_.top_k, params_.temperature, params_.top_p, u01);
}

double token_probability(const float* logits, std::int64_t n, std::int32_t id) {
  if (id < 0 || id >= n) return 0.0;
  double mx = -std::numeric_limits<double>::infinity();
  for (std::int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return std::exp(static_cast<double>(logits[id]) - mx) / sum;
}

namespace {

class CpuTokenSampler final : public TokenSampler {
 public:
  explicit CpuTokenSampler(const SamplingParams& params) : sampler_(params) {}
  std::int32_t sample(const at::Tensor& logits, double* probability) override {
    const at::Tensor l = logits.to(at::kCPU, at::kFloat).contiguous();
    const std::int32_t id = sampler_.sample(l.const_data_ptr<float>(), l.numel());
    if (probability) *probability = token_probability(l.const_data_ptr<float>(), l.numel(), id);
    return id;
  }

 private:
  Sampler sampler_;
};

}  // namespace

std::unique_ptr<TokenSampler> make_cpu_sampler(const SamplingParams& params) { return std::make_unique<CpuTokenSampler>(params); }

}  // namespace luka
