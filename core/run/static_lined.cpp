// LuKA's lined mode inside the static decode step (static_luka.h): core/luka's decode_lined as
// fixed-shape ops on reserved buffers.
#include <limits>

#include "core/run/static_luka.h"
#include "core/run/static_step.h"
#include "core/util/error.h"
#include "kernels/common/luka_rules.h"

namespace luka {

namespace {

at::Tensor& out_arg(const at::Tensor& t) { return const_cast<at::Tensor&>(t); }

std::int64_t unit_count(Selection s, std::int64_t heads, std::int64_t kv_heads) {
  return s == Selection::kPerHead ? heads : s == Selection::kPerGroup ? kv_heads : 1;
}

}  // namespace

std::string static_luka_reason(const LayerConfig& c) {
  if (c.mode == AttentionMode::kDense || c.mode == AttentionMode::kLined || c.mode == AttentionMode::kClustered ||
      c.mode == AttentionMode::kKascade)
    return "";
  return std::string("mode ") + to_string(c.mode);
}

void fill_selection_constants(const StaticDecodeStep& step) {
  const at::Tensor& counting = step.buffer("counting");
  const std::int64_t S = counting.size(0);
  counting.copy_(at::arange(S, at::kLong));
  step.buffer("tie_break").copy_(at::arange(S, at::kLong).neg().add(std::numeric_limits<std::int32_t>::max()));
  step.buffer("select_constants").copy_(at::tensor({std::int64_t{1} << 32, std::int64_t{0}}, at::kLong));
}

StaticLined::StaticLined(const StaticDecodeStep& step, int layer, const LayerConfig& config) : config_(config) {
  const StepPlan& plan = step.plan();
  heads_ = plan.shape.heads;
  kv_heads_ = plan.shape.kv_heads;
  units_ = unit_count(config.lined.selection, heads_, kv_heads_);
  const std::int64_t T = plan.context;
  table_ = step.buffer("lined_table", layer);
  heavy_ = step.buffer("heavy", layer).narrow(0, 0, units_);
  heavy_keys_ = step.buffer("heavy_keys", layer).narrow(0, 0, units_);
  row_ = step.buffer("lined_row");
  window_start_ = row_[0].narrow(0, 0, 1);
  select_end_ = row_[0].narrow(0, 1, 1);
  heavy_count_ = row_[0].narrow(0, 2, 1);
  // Scratch [units, T], contiguous: the front of the [H, S] buffers.
  keys_ = step.buffer("select_keys").view(-1).narrow(0, 0, units_ * T).view({units_, T});
  score_ = step.buffer("select_score").view(-1).narrow(0, 0, units_ * T).view({units_, T});
  mask_ = step.buffer("select_mask").view(-1).narrow(0, 0, units_ * T).view({units_, T});
  key_mask_ = step.buffer("key_mask").narrow(0, 0, units_);
  const at::Tensor bounds = step.buffer("bounds");
  unselectable_ = bounds[0].narrow(0, 0, T);
  window_ = bounds[1].narrow(0, 0, T);
  rank_mask_ = step.buffer("rank_mask")[0].narrow(0, 0, heavy_.size(1));
  counting_ = step.buffer("counting");
  tie_break_ = step.buffer("tie_break").narrow(0, 0, T);
  two32_ = step.buffer("select_constants").narrow(0, 0, 1);
  fill_selection_constants(step);
  // The cover of every step of the run, at context prompt + s + 1 for step s (0-based).
  const rules::LinedRule rule = to_rule(config.lined);
  const std::int64_t N = plan.run.max_new_tokens;
  at::Tensor table = at::empty({N, 3}, at::kLong);
  for (std::int64_t s = 0; s < N; ++s) {
    const rules::LinedCover c = rules::lined_cover(rule, plan.run.prompt + s + 1);
    if (c.heavy > heavy_.size(1))
      fail("static step", "layer " + std::to_string(layer) + ": more heavy hitters than planned");
    table[s][0] = c.window_start;
    table[s][1] = c.select_end;
    table[s][2] = c.heavy;
  }
  table_.copy_(table);
}

// The cover, then one softmax over it: decode_lined's per-unit selection (the unit's heads' h2o
// rows summed in head order, as it sums them) and its exact softmax over heavy ∪ window.
void StaticLined::attend(const StaticLayerStep& s, const at::Tensor& step_index) {
  const std::int64_t H = heads_, U = units_, T = s.h2o.size(1), K = heavy_.size(1);
  at::index_select_out(row_, table_, 0, step_index);
  const at::Tensor positions = counting_.narrow(0, 0, T);
  // The unit's score: its heads' rows added in order from the first (0 + x is x).
  at::Tensor score = s.h2o;
  if (U != H) {
    const std::int64_t per = H / U;
    const at::Tensor rows = s.h2o.view({U, per, T});
    score_.copy_(rows.select(1, 0));
    for (std::int64_t j = 1; j < per; ++j) score_.add_(rows.select(1, j));
    score = score_;
  }
  // Unique keys: h2o >= 0, so its bits order as int32 do; below them 2^31-1-t puts the lower
  // position first among equal scores. Outside [0, select_end) the key is -1, below every other.
  keys_.copy_(score.view(at::kInt));
  keys_.mul_(two32_);
  keys_.add_(tie_break_);
  at::ge_out(out_arg(unselectable_), positions, select_end_);
  keys_.masked_fill_(unselectable_, -1);
  at::topk_out(out_arg(heavy_keys_), out_arg(heavy_), keys_, K, 1, /*largest=*/true, /*sorted=*/true);
  // The first `heavy` of the ranked keys are the set: a mask over the keys.
  at::lt_out(out_arg(rank_mask_), counting_.narrow(0, 0, K), heavy_count_);
  mask_.zero_();
  mask_.scatter_(1, heavy_, rank_mask_.expand({U, K}));
  at::ge_out(out_arg(window_), positions, window_start_);
  mask_.logical_or_(window_);
  at::logical_not_out(out_arg(key_mask_), mask_);
  // One softmax over the cover per head; the scores outside it are -inf, so its rows are 0 there.
  s.scores.view({U, H / U, T}).masked_fill_(key_mask_.view({U, 1, T}), -std::numeric_limits<double>::infinity());
  at::_softmax_out(out_arg(s.probabilities), s.scores, 1, /*half_to_float=*/false);
  const std::int64_t KV = kv_heads_;
  at::bmm_out(out_arg(s.attention.view({KV, H / KV, s.attention.size(1)})), s.probabilities.view({KV, H / KV, T}),
              s.v_cache);
}

}  // namespace luka
