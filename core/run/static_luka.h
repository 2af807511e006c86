// LuKA's lined, clustered and Kascade modes inside the static decode step (core/run/static_step.h, issue
// 44): the same cover, selection and refinement as core/luka's decode_lined and decode_clustered,
// written as fixed-shape ATen ops on the step's reserved buffers (core/run/step_plan.h) so that
// nothing is allocated and nothing is read back to the host:
//   - attention runs over every reserved key (and page) with what the cover leaves out masked to
//     -inf, so the effective rows the accumulators take are 0 there, as core/luka's are;
//   - a top-m selection is at::topk_out over int64 keys (the score's bits above 32 bits of
//     2^31-1-position), which are unique, so the set is select_heavy_hitters' and top_indices'
//     exactly: ties go to the lower position whatever order topk visits them in;
//   - what varies with the context (the lined window, the selectable range, the budget) comes from
//     a table of the run's steps indexed by the device's step counter, and what varies with the
//     pages (their count, the paged end) from a device pair the page variant of the step sets.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "core/luka/config.h"
#include "core/run/step_plan.h"

namespace luka {

class StaticDecodeStep;

// Why the static step cannot run a LuKA layer of this config itself ("" when it can): dense mode
// (static_step.cpp) and the lined, clustered and Kascade modes below run in it; the step checks
// the page configs (static_step.cpp's enqueue_layer_pages).
std::string static_luka_reason(const LayerConfig& config);

// Fills the selection's constant buffers (0..S-1, 2^31-1 minus it, 2^32), which every lined and
// clustered layer shares.
void fill_selection_constants(const StaticDecodeStep& step);

// The adaptive summary bias of pages made at once, as core/luka's add_page makes it: per KV head
// the entropy of the compressor's weights π (rules::summary_bias), or with
// bias_entropy=importance_mean the authors' one bias per page for every head, the entropy of
// softmax(importance) over the page averaged over the KV heads. `importance` and `weights` (π, as
// the spread holds it) [KV, count·L] over the pages' positions; `bias` [KV, count] is written;
// `scratch` is the plan's page_scratch [5, >= count·L].
void adaptive_page_bias(const ClusteredConfig& config, const at::Tensor& importance, const at::Tensor& weights,
                        const at::Tensor& bias, const at::Tensor& scratch);

// One layer's step as the mode code sees it: the step's query, the layer's reserved cache and
// state, its key logits (already scaled, with the keys past the position at -inf) and where the
// mode writes its output and its effective rows.
struct StaticLayerStep {
  at::Tensor q;                    // [H, D]
  at::Tensor k_cache, v_cache;     // [KV, T, D]
  at::Tensor h2o, spread;          // [H, T], [KV, T] fp32
  at::Tensor summary_keys, summary_values, summary_bias;  // [KV, P, D], [KV, P, D], [KV, P]
  at::Tensor scores;               // [H, T] fp32, scaled, -inf past the position (read and masked)
  at::Tensor probabilities;        // [H, T] fp32: the effective rows (written)
  at::Tensor attention;            // [H, D] (written)
  at::Tensor scale;                // [1] fp32: 1/sqrt(D)
  // With step records on (StepPlan::records): a clustered layer writes its pages' α before
  // refinement here [H, P], and, where `probabilities` holds the cover rows
  // (importance_source=cover), its effective rows into `effective` [H, T]. Undefined: off.
  at::Tensor record_alpha, record_effective;
};

// Lined (§5.3): the recent window and the heavy hitters by h2o_score outside it.
class StaticLined {
 public:
  StaticLined(const StaticDecodeStep& step, int layer, const LayerConfig& config);
  // `step_index`: the device's step counter [1] (decode steps run so far).
  void attend(const StaticLayerStep& s, const at::Tensor& step_index);

 private:
  LayerConfig config_;
  std::int64_t heads_ = 0, kv_heads_ = 0, units_ = 0;
  at::Tensor table_, row_, window_start_, select_end_, heavy_count_, heavy_, heavy_keys_, keys_, score_, mask_,
      key_mask_, window_, unselectable_, rank_mask_, counting_, tie_break_, two32_;
};

// Clustered (§5.4) with fixed pages: summary logits, α, the pages refined per selection unit (top-k,
// top_frac, top_p or threshold, the first always_refine_first added), then exact or mass-preserving
// refinement.
class StaticClustered {
 public:
  StaticClustered(const StaticDecodeStep& step, int layer, const LayerConfig& config);
  // The pages that exist and the end of the paged positions: set after start() and after the
  // page variant made pages (on the device, as a recorded page variant would).
  void set_pages(std::int64_t pages, std::int64_t paged_end);
  void attend(const StaticLayerStep& s);

 private:
  void select(const at::Tensor& alpha_pages);  // refined_ from α over the pages
  void top_p(const at::Tensor& score);          // top_p's ranks that pass, into passed_

  LayerConfig config_;
  std::int64_t heads_ = 0, kv_heads_ = 0, units_ = 0, pages_ = 0, context_ = 0, page_size_ = 0, top_k_ = 0;
  at::Tensor page_state_, page_of_key_, cover_, alpha_, refined_, weights_, top_, top_keys_, local_, keys_,
      score_, unit_refined_, key_mask_, key_weights_, page_invalid_, before_end_, always_, counting_, tie_break_,
      two32_, threshold_, cover_rows_, budget_, budget_row_, rank_, top_all_, top_all_keys_, sums_, cut_, top_p_,
      passed_, passed_long_, passed_count_, no_mass_;
};

// Kascade (decode_kascade): an anchor's top-k of its pooled exact rows, published as masks over the
// keys; a reuse layer's softmax over its anchor's sets.
class StaticKascade {
 public:
  // `anchor_config`: the config of the layer this one reuses (its own for an anchor).
  StaticKascade(const StaticDecodeStep& step, int layer, const LayerConfig& config, const LayerConfig& anchor_config);
  void attend(const StaticLayerStep& s, const at::Tensor& step_index);

 private:
  LayerConfig config_;
  bool anchor_ = true, dense_out_ = false, shared_ = false;
  std::int64_t heads_ = 0, kv_heads_ = 0, groups_ = 0, context_ = 0;
  at::Tensor mask_, map_, anchor_mask_, position_mask_, keys_, score_, blocked_, row_sum_, selected_, selected_keys_,
      table_, row_, rank_mask_, counting_, tie_break_, two32_;
};

}  // namespace luka
