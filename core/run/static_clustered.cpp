// LuKA's clustered mode inside the static decode step (static_luka.h): core/luka's
// decode_clustered with fixed pages as fixed-shape ops on reserved buffers.
#include <algorithm>
#include <limits>

#include "core/run/static_luka.h"
#include "core/run/static_step.h"
#include "core/util/error.h"
#include "kernels/common/luka_rules.h"

namespace luka {

namespace {

at::Tensor& out_arg(const at::Tensor& t) { return const_cast<at::Tensor&>(t); }

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The front of a reserved [rows, width] buffer as a contiguous [rows', width'] one.
at::Tensor front(const at::Tensor& buffer, std::int64_t rows, std::int64_t width) {
  return buffer.view(-1).narrow(0, 0, rows * width).view({rows, width});
}

}  // namespace

StaticClustered::StaticClustered(const StaticDecodeStep& step, int layer, const LayerConfig& config)
    : config_(config) {
  const StepPlan& plan = step.plan();
  const ClusteredConfig& c = config.clustered;
  heads_ = plan.shape.heads;
  kv_heads_ = plan.shape.kv_heads;
  units_ = c.selection == Selection::kPerHead ? heads_ : c.selection == Selection::kPerGroup ? kv_heads_ : 1;
  context_ = plan.context;
  page_size_ = c.page_size;
  page_state_ = step.buffer("page_state", layer);
  page_of_key_ = step.buffer("page_of_key", layer);
  cover_ = step.buffer("cover", layer);
  alpha_ = step.buffer("cover_alpha", layer);
  refined_ = step.buffer("refined_pages", layer);
  weights_ = step.buffer("summary_weights", layer);
  pages_ = refined_.size(1);
  top_k_ = c.rule == RefineRule::kTopK ? std::min(c.top_k, pages_) : 0;
  // topk writes contiguous rows: the front of the [H, P] buffers.
  top_ = front(step.buffer("page_top", layer), units_, std::max<std::int64_t>(top_k_, 1));
  top_keys_ = front(step.buffer("page_top_keys", layer), units_, top_.size(1));
  if (c.rule == RefineRule::kTopFrac || c.rule == RefineRule::kTopP) {
    top_all_ = front(step.buffer("page_top", layer), units_, pages_);  // every page ranked
    top_all_keys_ = front(step.buffer("page_top_keys", layer), units_, pages_);
  }
  if (c.rule == RefineRule::kTopP) {
    sums_ = step.buffer("page_sums", layer);
    cut_ = front(step.buffer("page_cut", layer)[0], units_, 1);
    top_p_ = step.buffer("refine_top_p", layer);
    top_p_.copy_(at::tensor({c.top_p, 0.0}, at::kDouble));
    passed_ = front(step.buffer("page_passed", layer), units_, pages_);
    const at::Tensor count = step.buffer("page_passed_count", layer).view(-1);
    passed_long_ = count.narrow(0, 0, units_ * pages_).view({units_, pages_});
    passed_count_ = count.narrow(0, units_ * pages_, units_).view({units_, 1});
    no_mass_ = step.buffer("select_mask").view(-1).narrow(0, units_ * pages_, units_).view({units_, 1});
  }
  if (c.rule == RefineRule::kTopFrac) {
    // The first top_frac_count(P) ranked pages refined, P read on the device.
    budget_ = step.buffer("page_budget", layer);
    budget_row_ = step.buffer("page_budget_row", layer);
    rank_ = step.buffer("rank_mask")[0].narrow(0, 0, pages_);
    at::Tensor budget = at::empty({pages_ + 1}, at::kLong);
    for (std::int64_t p = 0; p <= pages_; ++p)
      budget[p] = rules::top_frac_count(c.top_frac, p, c.page_rank == PageRank::kSum);
    budget_.copy_(budget);
  }
  threshold_ = step.buffer("refine_threshold", layer);
  threshold_.fill_(static_cast<float>(c.epsilon));  // α is compared in fp32
  if (c.math == RefineMath::kMassPreserving) local_ = step.buffer("local", layer);
  keys_ = front(step.buffer("select_keys"), units_, pages_);
  score_ = front(step.buffer("select_score"), units_, pages_);
  unit_refined_ = front(step.buffer("select_mask"), units_, pages_);
  cover_rows_ = front(step.buffer("select_score"), heads_, context_);  // after selection
  key_mask_ = step.buffer("key_mask");
  key_weights_ = step.buffer("key_weights");
  const at::Tensor bounds = step.buffer("bounds");
  page_invalid_ = bounds[0].narrow(0, 0, pages_);
  before_end_ = bounds[1].narrow(0, 0, context_);
  counting_ = step.buffer("counting");
  tie_break_ = step.buffer("tie_break").narrow(0, 0, pages_);
  two32_ = step.buffer("select_constants").narrow(0, 0, 1);
  fill_selection_constants(step);
  // Each key's page (fixed pages from position 0); past the last page the last one, whose weight
  // there meets a spread of 0.
  page_of_key_.copy_(at::arange(context_, at::kLong).div(page_size_, "floor").clamp_max(pages_ - 1));
  set_pages(0, 0);
}

void StaticClustered::set_pages(std::int64_t pages, std::int64_t paged_end) {
  if (pages > pages_) fail("static step", "more pages than planned");
  page_state_.narrow(0, 0, 1).fill_(pages);
  page_state_.narrow(0, 1, 1).fill_(paged_end);
}

// decode_clustered's steps: ℓ over the summaries (with their bias) and the raw tail, α its
// softmax, the refined pages, then the weights of the summaries and of the raw keys (refined
// children and the tail) by exact or mass-preserving refinement; the output and the effective
// rows over the raw keys (an unrefined page's weight spread over its tokens) from those.
void StaticClustered::attend(const StaticLayerStep& s) {
  const std::int64_t H = heads_, KV = kv_heads_, G = H / KV, P = pages_, T = context_, D = s.q.size(1);
  const at::Tensor pages = page_state_.narrow(0, 0, 1), paged_end = page_state_.narrow(0, 1, 1);
  at::ge_out(out_arg(page_invalid_), counting_.narrow(0, 0, P), pages);
  at::lt_out(out_arg(before_end_), counting_.narrow(0, 0, T), paged_end);
  // [logits] scale·(q·summary key) + bias per page, then the keys of the raw tail.
  const at::Tensor summary_logits = weights_;  // scratch until the weights are known
  at::bmm_out(out_arg(summary_logits.view({KV, G, P})), s.q.view({KV, G, D}), s.summary_keys.transpose(1, 2));
  summary_logits.mul_(s.scale);
  summary_logits.view({KV, G, P}).add_(s.summary_bias.unsqueeze(1));
  summary_logits.masked_fill_(page_invalid_, kNegInf);
  const at::Tensor cover_pages = cover_.narrow(1, 0, P), cover_keys = cover_.narrow(1, P, T);
  cover_pages.copy_(summary_logits);
  cover_keys.copy_(s.scores);
  cover_keys.masked_fill_(before_end_, kNegInf);
  // [cover softmax, selection] With refine_on=unbiased selection ranks the softmax of the logits
  // less the bias ((ℓ + b) − b, as select_refined_pages forms them).
  const ClusteredConfig& c = config_.clustered;
  const bool unbiased = c.refine_on == RefineOn::kUnbiased && c.bias != SummaryBias::kNone;
  if (unbiased) {
    cover_pages.view({KV, G, P}).sub_(s.summary_bias.unsqueeze(1));
    at::_softmax_out(alpha_, cover_, 1, /*half_to_float=*/false);
    select(alpha_.narrow(1, 0, P));
    cover_pages.copy_(summary_logits);
  }
  at::_softmax_out(alpha_, cover_, 1, /*half_to_float=*/false);
  if (!unbiased) select(alpha_.narrow(1, 0, P));
  if (s.record_alpha.defined()) s.record_alpha.copy_(alpha_.narrow(1, 0, P));
  // importance_source=cover: the accumulators take α at the raw tail (0 elsewhere).
  const bool cover_rows = config_.importance_source == ImportanceSource::kCover;
  if (cover_rows) cover_rows_.copy_(alpha_.narrow(1, P, T));
  // The raw keys of the refined pages.
  at::index_select_out(key_mask_, refined_, 1, page_of_key_);
  key_mask_.logical_and_(before_end_);
  if (c.math == RefineMath::kExact) {
    // One softmax over the unrefined summaries, the refined pages' keys and the tail.
    cover_pages.masked_fill_(refined_, kNegInf);
    key_mask_.logical_not_();
    key_mask_.logical_and_(before_end_);  // paged and not refined
    cover_keys.copy_(s.scores);
    cover_keys.masked_fill_(key_mask_, kNegInf);
    at::_softmax_out(alpha_, cover_, 1, /*half_to_float=*/false);
    weights_.copy_(alpha_.narrow(1, 0, P));
    key_weights_.copy_(alpha_.narrow(1, P, T));
  } else {
    // Mass-preserving: a refined page's α shared among its keys by their own softmax.
    const std::int64_t L = page_size_;
    weights_.copy_(alpha_.narrow(1, 0, P));
    key_weights_.copy_(alpha_.narrow(1, P, T));  // α of the tail, 0 before the paged end
    // The pages' key logits made contiguous first (softmax would copy them), in α's buffer, read
    // out above.
    const at::Tensor paged_logits = alpha_.view(-1).narrow(0, 0, H * P * L).view({H, P, L});
    paged_logits.view({H, P * L}).copy_(s.scores.narrow(1, 0, P * L));
    at::_softmax_out(local_, paged_logits, 2, /*half_to_float=*/false);
    local_.mul_(weights_.unsqueeze(2));
    key_mask_.logical_not_();
    local_.view({H, P * L}).masked_fill_(key_mask_.narrow(1, 0, P * L), 0);  // NaN rows of absent pages too
    key_weights_.narrow(1, 0, P * L).add_(local_.view({H, P * L}));
    weights_.masked_fill_(refined_, 0);
  }
  const at::Tensor out = s.attention.view({KV, G, D});
  at::bmm_out(out_arg(out), weights_.view({KV, G, P}), s.summary_values);
  out.baddbmm_(key_weights_.view({KV, G, T}), s.v_cache);
  // The effective rows: an unrefined page's weight spread over its tokens, plus the raw keys'.
  const at::Tensor& effective = cover_rows ? s.record_effective : s.probabilities;
  if (effective.defined()) {
    at::index_select_out(out_arg(effective), weights_, 1, page_of_key_);
    effective.view({KV, G, T}).mul_(s.spread.unsqueeze(1));
    effective.add_(key_weights_);
  }
  if (cover_rows) s.probabilities.copy_(cover_rows_);
}

// select_pages' top_p over the ranked pages (top_all_), with its running sums in fp64 in its order:
// rank j passes while the sum before it is below p; with page_rank=sum (the authors' rule) the
// first 1 + count(running sum <= p·total) pass, none when the total is 0. Pages not made score 0
// and rank last, and are masked by the caller.
void StaticClustered::top_p(const at::Tensor& score) {
  const std::int64_t P = pages_, U = units_;
  const at::Tensor unsorted = front(sums_[0], U, P), sorted = front(sums_[1], U, P), running = front(sums_[2], U, P),
                   other = front(sums_[3], U, P);
  unsorted.copy_(score);
  at::gather_out(out_arg(sorted), unsorted, 1, top_all_);
  at::cumsum_out(out_arg(running), sorted, 1);
  const at::Tensor p = top_p_.narrow(0, 0, 1), zero = top_p_.narrow(0, 1, 1);
  if (config_.clustered.page_rank != PageRank::kSum) {
    other.narrow(1, 0, 1).zero_();  // the sum before each rank
    if (P > 1) other.narrow(1, 1, P - 1).copy_(running.narrow(1, 0, P - 1));
    at::lt_out(passed_, other, p);
    return;
  }
  at::cumsum_out(out_arg(other), unsorted, 1);  // its last column: the total in page order
  const at::Tensor total = other.narrow(1, P - 1, 1);
  at::mul_out(cut_, total, p);
  at::le_out(passed_, running, cut_);
  passed_long_.copy_(passed_);
  const std::int64_t last[] = {1};
  at::sum_out(passed_count_, passed_long_, at::IntArrayRef(last), /*keepdim=*/true);
  at::le_out(passed_, counting_.narrow(0, 0, P), passed_count_);  // rank <= count
  at::le_out(no_mass_, total, zero);
  passed_.masked_fill_(no_mass_, false);
}

void adaptive_page_bias(const ClusteredConfig& c, const at::Tensor& importance, const at::Tensor& weights,
                        const at::Tensor& bias, const at::Tensor& scratch) {
  const std::int64_t KV = weights.size(0), n = weights.size(1), L = c.page_size, count = n / L;
  const at::Tensor a = scratch[0].narrow(0, 0, n).view({count, L}), b = scratch[1].narrow(0, 0, n).view({count, L});
  const at::Tensor sum = scratch[2].narrow(0, 0, count), acc = scratch[3].narrow(0, 0, count);
  const at::Tensor constant = scratch[4].narrow(0, 0, 1);
  const std::int64_t last[] = {1};
  if (c.bias_entropy == BiasEntropy::kImportanceMean) {
    // −Σ p·log p with log p = log_softmax(importance) per KV head, summed over the heads in order,
    // divided by their count. (p = 0 only where log p is finite, so p·log p is 0 there too.)
    for (std::int64_t g = 0; g < KV; ++g) {
      at::_log_softmax_out(out_arg(a), importance[g].view({count, L}), 1, /*half_to_float=*/false);
      at::exp_out(out_arg(b), a);
      b.mul_(a);
      at::sum_out(out_arg(g == 0 ? acc : sum), b, at::IntArrayRef(last), /*keepdim=*/false);
      if (g > 0) acc.add_(sum);
    }
    constant.fill_(static_cast<double>(KV));
    acc.div_(constant);
    acc.neg_();
    bias.copy_(acc.unsqueeze(0));
    return;
  }
  // −Σ π·log max(π, 1e-30) per KV head.
  constant.fill_(1e-30);
  for (std::int64_t g = 0; g < KV; ++g) {
    const at::Tensor pi = weights[g].view({count, L});
    at::clamp_min_out(out_arg(a), pi, constant);
    a.log_();
    a.mul_(pi);
    at::sum_out(out_arg(bias[g]), a, at::IntArrayRef(last), /*keepdim=*/false);
    bias[g].neg_();
  }
}

// select_refined_pages with fixed pages (none raw): per unit the max of α over its heads, then the
// top-k pages (ties to the lower page) or those above the threshold, the first
// always_refine_first added; a page not yet made is never refined.
void StaticClustered::select(const at::Tensor& alpha_pages) {
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t H = heads_, U = units_, P = pages_;
  at::Tensor score = alpha_pages;
  const bool sum_rank =
      c.page_rank == PageRank::kSum && (c.rule == RefineRule::kTopFrac || c.rule == RefineRule::kTopP);
  if (U != H && sum_rank) {
    // The unit's α summed over its heads in order from the first (0 + x is x).
    const at::Tensor rows = alpha_pages.view({U, H / U, P});
    score_.copy_(rows.select(1, 0));
    for (std::int64_t j = 1; j < H / U; ++j) score_.add_(rows.select(1, j));
    score = score_;
  } else if (U != H) {
    const std::int64_t dims[] = {1};
    at::amax_out(score_, alpha_pages.view({U, H / U, P}), at::IntArrayRef(dims), /*keepdim=*/false);
    score = score_;
  }
  if (c.rule == RefineRule::kThreshold) {
    at::gt_out(unit_refined_, score, threshold_);
  } else if (c.rule == RefineRule::kTopFrac || c.rule == RefineRule::kTopP) {
    keys_.copy_(score.view(at::kInt));
    keys_.mul_(two32_);
    keys_.add_(tie_break_);
    keys_.masked_fill_(page_invalid_, -1);
    at::topk_out(top_all_keys_, top_all_, keys_, P, 1, /*largest=*/true, /*sorted=*/true);
    if (c.rule == RefineRule::kTopFrac) {
      at::index_select_out(budget_row_, budget_, 0, page_state_.narrow(0, 0, 1));
      at::lt_out(rank_, counting_.narrow(0, 0, P), budget_row_);
      unit_refined_.scatter_(1, top_all_, rank_.expand({U, P}));
    } else {
      top_p(score);
      unit_refined_.scatter_(1, top_all_, passed_);
    }
  } else {
    unit_refined_.zero_();
    if (top_k_ > 0) {
      keys_.copy_(score.view(at::kInt));  // α >= 0: its bits order as int32 do
      keys_.mul_(two32_);
      keys_.add_(tie_break_);
      keys_.masked_fill_(page_invalid_, -1);
      at::topk_out(top_keys_, top_, keys_, top_k_, 1, /*largest=*/true, /*sorted=*/false);
      unit_refined_.scatter_(1, top_, true);
    }
  }
  if (c.always_refine_first > 0) unit_refined_.narrow(1, 0, std::min(c.always_refine_first, P)).fill_(true);
  unit_refined_.masked_fill_(page_invalid_, false);
  refined_.view({U, H / U, P}).copy_(unit_refined_.unsqueeze(1));
}

}  // namespace luka
