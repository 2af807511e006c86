#include "core/eval/head_scores.h"

#include <cmath>
#include <limits>

namespace luka::eval {

HeadScores head_scores(const float* row, std::int64_t T, const std::int32_t* topic, const std::int32_t* ids) {
  const std::int32_t query_topic = topic != nullptr && T > 0 ? topic[T - 1] : -1;
  return head_scores(row, T, topic, query_topic, ids);
}

HeadScores head_scores(const float* row, std::int64_t T, const std::int32_t* topic, std::int32_t query_topic,
                       const std::int32_t* ids) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  HeadScores s;
  if (T <= 0) return s;
  s.sink = row[0];
  const std::int64_t q = T - 1;
  s.previous_token = q >= 1 ? static_cast<double>(row[q - 1]) : nan;
  s.cross_topic = cross_topic_mass(row, T, topic, query_topic);
  bool earlier = false;
  for (std::int64_t k = 0; k < T; ++k) {
    const double p = row[k];
    if (p > 0) s.entropy -= p * std::log(p);
    s.locality += p * static_cast<double>(q - k);
    // Key k follows an earlier occurrence (k - 1) of the query's token; k < q keeps the query itself out.
    if (ids != nullptr && k >= 1 && k < q && ids[k - 1] == ids[q]) {
      s.induction += p;
      earlier = true;
    }
  }
  if (!earlier) s.induction = nan;
  return s;
}

double cross_topic_mass(const float* row, std::int64_t T, const std::int32_t* topic, std::int32_t query_topic) {
  if (topic == nullptr || query_topic < 0) return std::numeric_limits<double>::quiet_NaN();
  double mass = 0;
  for (std::int64_t k = 0; k < T; ++k)
    if (topic[k] >= 0 && topic[k] != query_topic) mass += row[k];
  return mass;
}

}  // namespace luka::eval
