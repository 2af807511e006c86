// Kascade inside the static decode step (static_luka.h): core/luka's decode_kascade as fixed-shape
// ops on reserved buffers. An anchor pools its exact rows over each KV head's query heads (or over
// every head when shared), keeps the top-k of the pooled row as a mask over the keys and
// renormalizes its rows over it (layer 0 keeps its dense output); a reuse layer masks its logits
// with its anchor's masks, KV head g taking the anchor's head_map[g], and takes one softmax.
#include <algorithm>
#include <limits>

#include "core/luka/methods/kascade.h"
#include "core/run/static_luka.h"
#include "core/run/static_step.h"
#include "core/util/error.h"

namespace luka {

namespace {

at::Tensor& out_arg(const at::Tensor& t) { return const_cast<at::Tensor&>(t); }

at::Tensor front(const at::Tensor& buffer, std::int64_t rows, std::int64_t width) {
  return buffer.view(-1).narrow(0, 0, rows * width).view({rows, width});
}

}  // namespace

StaticKascade::StaticKascade(const StaticDecodeStep& step, int layer, const LayerConfig& config,
                             const LayerConfig& anchor_config)
    : config_(config) {
  const StepPlan& plan = step.plan();
  const KascadeConfig& c = config.kascade;
  heads_ = plan.shape.heads;
  kv_heads_ = plan.shape.kv_heads;
  context_ = plan.context;
  anchor_ = c.source < 0;
  dense_out_ = anchor_ && layer == 0;
  const std::string where = "static step: layer " + std::to_string(layer);
  if (!anchor_ && (anchor_config.mode != AttentionMode::kKascade || anchor_config.kascade.source >= 0))
    fail(where, "kascade reuses layer " + std::to_string(c.source) + ", which is not a Kascade anchor");
  shared_ = anchor_ ? c.shared : anchor_config.kascade.shared;
  groups_ = anchor_ ? (shared_ ? 1 : kv_heads_) : kv_heads_;
  mask_ = step.buffer("kascade_mask", layer);
  map_ = step.buffer("kascade_map", layer);
  position_mask_ = step.buffer("mask");
  keys_ = front(step.buffer("select_keys"), groups_, context_);
  score_ = front(step.buffer("select_score"), kv_heads_, context_);
  blocked_ = front(step.buffer("key_mask"), groups_, context_);
  row_sum_ = step.buffer("row_sum");
  if (anchor_) {
    selected_ = step.buffer("selected", layer);
    selected_keys_ = step.buffer("selected_keys", layer);
    table_ = step.buffer("kascade_table", layer);
    row_ = step.buffer("kascade_row", layer);
    rank_mask_ = step.buffer("rank_mask")[0].narrow(0, 0, selected_.size(1));
    counting_ = step.buffer("counting");
    tie_break_ = step.buffer("tie_break").narrow(0, 0, context_);
    two32_ = step.buffer("select_constants").narrow(0, 0, 1);
    fill_selection_constants(step);
    KascadeTopK rule;
    rule.count = static_cast<int>(c.top_k);
    rule.fraction = c.top_frac;
    rule.min_count = static_cast<int>(c.min_k);
    const std::int64_t N = plan.run.max_new_tokens;
    at::Tensor table = at::empty({N, 1}, at::kLong);
    for (std::int64_t s = 0; s < N; ++s) {
      const std::int64_t k = rule.size(static_cast<int>(plan.run.prompt + s + 1));
      if (k > selected_.size(1)) fail(where, "a larger top-k than planned");
      table[s][0] = k;
    }
    table_.copy_(table);
  } else {
    // The anchor's set each KV head reads (decode_kascade's set_of_group).
    anchor_mask_ = step.buffer("kascade_mask", static_cast<int>(c.source));
    std::vector<std::int64_t> map(static_cast<std::size_t>(kv_heads_));
    for (std::int64_t g = 0; g < kv_heads_; ++g) {
      if (shared_) {
        map[static_cast<std::size_t>(g)] = 0;
      } else if (c.head_map.empty()) {
        map[static_cast<std::size_t>(g)] = g;
      } else {
        if (static_cast<std::int64_t>(c.head_map.size()) != kv_heads_ || c.head_map[static_cast<std::size_t>(g)] < 0 ||
            c.head_map[static_cast<std::size_t>(g)] >= kv_heads_)
          fail(where, "kascade_head_map must name one of the " + std::to_string(kv_heads_) + " KV heads per KV head");
        map[static_cast<std::size_t>(g)] = c.head_map[static_cast<std::size_t>(g)];
      }
    }
    map_.copy_(at::tensor(map, at::kLong));
  }
}

void StaticKascade::attend(const StaticLayerStep& s, const at::Tensor& step_index) {
  const std::int64_t H = heads_, KV = kv_heads_, G = H / KV, T = context_, D = s.q.size(1);
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const at::Tensor out = s.attention.view({KV, G, D});
  if (!anchor_) {
    at::index_select_out(out_arg(mask_), anchor_mask_, 0, map_);
    at::logical_not_out(out_arg(blocked_), mask_);
    s.scores.view({KV, G, T}).masked_fill_(blocked_.unsqueeze(1), kNegInf);
    at::_softmax_out(out_arg(s.probabilities), s.scores, 1, /*half_to_float=*/false);
    at::bmm_out(out_arg(out), s.probabilities.view({KV, G, T}), s.v_cache);
    return;
  }
  // The exact rows, pooled per KV head over its query heads in head order (then over the KV heads
  // when shared, as anchor_sets adds the groups' pools).
  at::_softmax_out(out_arg(s.probabilities), s.scores, 1, /*half_to_float=*/false);
  const at::Tensor rows = s.probabilities.view({KV, G, T});
  score_.copy_(rows.select(1, 0));
  for (std::int64_t j = 1; j < G; ++j) score_.add_(rows.select(1, j));
  if (shared_)
    for (std::int64_t g = 1; g < KV; ++g) score_[0].add_(score_[g]);
  const at::Tensor pooled = score_.narrow(0, 0, groups_);
  // kascade_top_k over [0, T): unique keys (see static_luka.h), -1 past the position.
  keys_.copy_(pooled.view(at::kInt));
  keys_.mul_(two32_);
  keys_.add_(tie_break_);
  keys_.masked_fill_(position_mask_, -1);
  const std::int64_t K = selected_.size(1);
  at::topk_out(out_arg(selected_keys_), out_arg(selected_), keys_, K, 1, /*largest=*/true, /*sorted=*/true);
  at::index_select_out(out_arg(row_), table_, 0, step_index);
  at::lt_out(out_arg(rank_mask_), counting_.narrow(0, 0, K), row_.view({1}));
  mask_.zero_();
  mask_.scatter_(1, selected_, rank_mask_.expand({groups_, K}));
  if (!dense_out_) {
    // attend_sets(renormalize): the exact rows over the set, divided by their sum.
    at::logical_not_out(out_arg(blocked_), mask_);
    rows.view({groups_, H / groups_, T}).masked_fill_(blocked_.unsqueeze(1), 0);
    const std::int64_t dims[] = {1};
    at::sum_out(out_arg(row_sum_), s.probabilities, at::IntArrayRef(dims), /*keepdim=*/true);
    row_sum_.reciprocal_();
    s.probabilities.mul_(row_sum_);
  }
  at::bmm_out(out_arg(out), rows, s.v_cache);
}

}  // namespace luka
