#include "core/eval/head_scores.h"

#include <cmath>
#include <limits>

namespace luka::eval {

HeadScores head_scores(const float* row, std::int64_t T, const std::int32_t* topic) {
  HeadScores s;
  if (T <= 0) return s;
  s.sink = row[0];
  const std::int64_t q = T - 1;
  const bool topics = topic != nullptr && topic[q] >= 0;
  s.cross_topic = topics ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  for (std::int64_t k = 0; k < T; ++k) {
    const double p = row[k];
    if (p > 0) s.entropy -= p * std::log(p);
    s.locality += p * static_cast<double>(q - k);
    if (topics && topic[k] >= 0 && topic[k] != topic[q]) s.cross_topic += p;
  }
  return s;
}

}  // namespace luka::eval
