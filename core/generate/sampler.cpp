#include "core/generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

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

  // Candidates by descending logit, ties by ascending id, so the order is fully deterministic.
  std::vector<std::int32_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto before = [logits](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::size_t keep = order.size();
  if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < keep) {
    keep = static_cast<std::size_t>(params_.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), before);
  } else {
    std::sort(order.begin(), order.end(), before);
  }
  order.resize(keep);

  // Softmax of logits / temperature over the candidates (in double: no overflow, stable sums).
  const double inv_t = 1.0 / params_.temperature;
  const double top = logits[order[0]];
  std::vector<double> p(keep);
  double sum = 0;
  for (std::size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((logits[order[i]] - top) * inv_t);
  for (double& x : p) x /= sum;

  // Nucleus: the smallest prefix whose mass reaches top_p.
  if (params_.top_p < 1.0f) {
    double mass = 0;
    std::size_t cut = keep;
    for (std::size_t i = 0; i < keep; ++i) {
      mass += p[i];
      if (mass >= static_cast<double>(params_.top_p)) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    sum = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  } else {
    sum = 1.0;
  }

  // Uniform in [0, sum) from the top 53 bits: same sequence for a given seed on any platform.
  const double u = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0) * sum;
  double acc = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

double token_probability(const float* logits, std::int64_t n, std::int32_t id) {
  if (id < 0 || id >= n) return 0.0;
  double mx = -std::numeric_limits<double>::infinity();
  for (std::int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return std::exp(static_cast<double>(logits[id]) - mx) / sum;
}

}  // namespace luka
