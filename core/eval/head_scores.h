// What one attention row says about its head (`luka calibrate`, the Studio's head scores): how much
// goes to the first token (the attention sink), how spread it is, how far back it looks, and how
// much crosses to other topics of an interwoven prompt. Plain formulas, tested on hand-made rows.
#pragma once

#include <cstdint>

namespace luka::eval {

struct HeadScores {
  double sink = 0;         // p[0]
  double entropy = 0;      // -sum p log p, in nats
  double locality = 0;     // sum p[k] (q - k): the mean distance back from the query q = T - 1
  double cross_topic = 0;  // sum of p[k] over keys in a segment of another topic than the query's; NaN without topics
};

// `row`: the attention of the query at position T - 1 over keys 0 .. T-1. `topic` (may be null):
// per position, the topic of its segment, or -1 outside every segment; cross_topic is NaN when it
// is null or the query is outside every segment.
HeadScores head_scores(const float* row, std::int64_t T, const std::int32_t* topic);

}  // namespace luka::eval
