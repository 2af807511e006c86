// What one attention row says about its head (`luka calibrate`, `luka inspect --heads`, the
// Studio's head scores): how much goes to the first token (the attention sink), how spread it is,
// how far back it looks, whether it copies from the previous token or from the token after an
// earlier occurrence of the query's token (induction), and how much crosses to other topics of an
// interwoven prompt. Plain formulas, tested on hand-made rows.
#pragma once

#include <cstdint>

namespace luka::eval {

struct HeadScores {
  double sink = 0;            // p[0]
  double entropy = 0;         // -sum p log p, in nats
  double locality = 0;        // sum p[k] (q - k): the mean distance back from the query q = T - 1
  double previous_token = 0;  // p[q - 1]; NaN when T = 1
  // Sum of p[j + 1] over the earlier occurrences j <= q - 2 of the query's token (ids[j] == ids[q]):
  // the mass on the tokens that followed it before. NaN without ids or without such an occurrence.
  double induction = 0;
  double cross_topic = 0;     // sum of p[k] over keys in a segment of another topic than the query's; NaN without topics
};

// `row`: the attention of the query at position q = T - 1 over keys 0 .. T-1. `topic` (may be null):
// per position, the topic of its segment, or -1 outside every segment; cross_topic is NaN when it
// is null or the query is outside every segment. `ids` (may be null): the token ids of positions
// 0 .. T-1, for the induction score.
HeadScores head_scores(const float* row, std::int64_t T, const std::int32_t* topic, const std::int32_t* ids = nullptr);

// The same with the query's topic given rather than read from `topic[q]`: a decode query belongs to
// no segment, so its cross-topic mass is measured against a chosen topic (-1: NaN).
HeadScores head_scores(const float* row, std::int64_t T, const std::int32_t* topic, std::int32_t query_topic,
                       const std::int32_t* ids);

// The cross-topic mass alone: sum of row[k] over keys k < T with topic[k] >= 0 and topic[k] !=
// query_topic (the cross-topic leakage of interwoven prompts). NaN when `topic` is null or
// query_topic < 0.
double cross_topic_mass(const float* row, std::int64_t T, const std::int32_t* topic, std::int32_t query_topic);

}  // namespace luka::eval
