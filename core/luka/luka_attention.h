// The LuKA attention core on CPU (docs/design.md §5): one LukaAttention per layer, plugged into the
// decoder through LayerAttention. It keeps the per-layer state every mode shares — pages with one
// summary key/value per KV head, `importance` [KV, T] and `h2o_score` [H, T] — and updates it every
// step from the effective attention over raw tokens, whatever the mode; so the mode can change at
// any decode step (set_config) and the next step uses it, with nothing recomputed.
//
// The raw K/V are the decoder's KV cache (LuKA never drops a token). Prefill is exact causal
// attention (lined `sparse_prefill` excepted); decode steps run dense, lined or clustered.
//
// The class is defined in core/luka/cpu/, one file per mode: state.cpp (construction, forward,
// decode dispatch, accumulators), dense.cpp, lined.cpp, clustered.cpp, kascade.cpp, press.cpp, and
// pages.cpp (segmenters and summaries).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "core/luka/methods/dar.h"
#include "core/luka/heavy_hitters.h"
#include "core/luka/luka_layer.h"
#include "kernels/common/luka_rules.h"

namespace luka {

class LukaAttention final : public LukaLayer {
 public:
  LukaAttention(int layer, LayerConfig config);

  at::Tensor forward(const AttentionInputs& in) override;
  void reset() override;
  void reserve(std::int64_t tokens) override { reserved_ = tokens; }
  const char* name() const override { return to_string(config_.mode); }

  void set_config(const LayerConfig& config) override;
  const LayerConfig& config() const override { return config_; }

  const std::vector<Page>& pages() const override { return adopted_ ? adopted_pages_ : pages_; }
  std::int64_t paged_end() const { return paged_end_; }
  std::int64_t decode_steps() const { return step_; }
  std::int64_t tokens() const { return tokens_; }
  // Views of the state over the first tokens() positions / pages().size() pages.
  at::Tensor importance() const;       // [KV, T]
  at::Tensor h2o_score() const;        // [H, T]
  at::Tensor summary_keys() const;     // [KV, P, D] fp32
  at::Tensor summary_values() const;   // [KV, P, D] fp32
  at::Tensor summary_bias() const;     // [KV, P] fp32
  at::Tensor spread() const;           // [KV, paged_end]: how an unrefined page's mass spreads (sums to 1 per page)
  const LukaStep& last_step() const override { return last_; }
  LukaState state_view() const override;
  // The CPU core always fills its records; the flag tells a decode engine to make them.
  void set_step_records(bool on) override { records_ = on; }
  bool step_records() const override { return records_; }
  void adopt_step(LukaStep step, std::vector<Page> pages) override;
  int layer() const override { return layer_; }
  void set_kascade_board(std::shared_ptr<KascadeBoard> board) override { board_ = std::move(board); }
  void set_token_texts(std::shared_ptr<const std::vector<std::string>> texts) override;
  // The model's RoPE frequencies (Decoder::rope_frequencies; install_luka sets them), which the DAR
  // probe needs to project keys before RoPE. Without them (a layer used alone) it takes the keys
  // as they come.
  void set_rope(const at::Tensor& inv_freq) { rope_inv_freq_ = inv_freq.to(at::kCPU, at::kFloat); }
  // The model's layer count (install_luka sets it): PyramidKV's budgets depend on the layer's depth.
  void set_layer_count(int layers) { layer_count_ = layers; }
  // Press mode: each KV head's kept prompt positions (ascending) and the prompt's length; empty
  // until a prefill in press mode (positions from the prompt's end on are always attended).
  const std::vector<std::vector<std::int64_t>>& press_kept() const { return press_kept_; }
  std::int64_t press_prompt() const { return press_prompt_; }
  // Press mode with compression during decoding (press_interval): each KV head's cache as kvpress
  // holds it, its positions in kvpress's row order (empty until such a step).
  const std::vector<std::vector<std::int64_t>>& press_rows() const { return press_rows_; }

  // For fidelity experiments: summary logits become the log-sum-exp of their children's logits,
  // so a page's α is exactly its dense mass (an oracle no real summary can reach).
  void set_oracle_summary_logits(bool on) { oracle_ = on; }
  // For tests and benchmarks: lined steps rank every heavy hitter from scratch (the selection
  // before HeavyHitterSet; the same sets, at O(T) per step) instead of updating them.
  void set_incremental_heavy_hitters(bool on) {
    incremental_heavy_ = on;
    heavy_tokens_ = -1;
  }

 private:
  // One decode step's inputs and outputs: the query [H, D] in fp32, the effective rows [H, T]
  // and the output [H, D] the mode fills.
  struct Step {
    const AttentionInputs& in;
    const float* q;
    float scale;
    at::Tensor eff, out;
  };
  void ensure_capacity(std::int64_t tokens, std::int64_t heads, std::int64_t kv_heads);
  at::Tensor prefill(const AttentionInputs& in);
  at::Tensor decode(const AttentionInputs& in);
  void decode_dense(Step& s);
  void decode_lined(Step& s);
  at::Tensor decode_clustered(Step& s);
  void decode_kascade(Step& s);                 // cpu/kascade.cpp
  void decode_press(Step& s);                   // cpu/press.cpp
  void decode_press_decoding(Step& s);          // cpu/press.cpp: press_interval > 0
  void press_compress_rows(const AttentionInputs& in);
  void decode_quest(Step& s);                   // cpu/quest.cpp
  // Press mode: scores the prompt's cache (`in` is the prefill's) and keeps per KV head.
  void press_prompt(const AttentionInputs& in);
  // Press mode, a continuation's prefill after the prompt was compressed: [KV, T] true at the
  // positions the press left out (undefined when none is).
  at::Tensor press_left_out(const AttentionInputs& in) const;
  // Kascade's sparse step: per query head h, an exact softmax over the keys *sets[h] into s.eff
  // and s.out. `renormalize`: s.eff already holds h's exact rows (an anchor's), so the softmax over
  // the set is those rows renormalized over it.
  void attend_sets(Step& s, const std::vector<const std::vector<std::int64_t>*>& sets, bool renormalize);
  at::Tensor prefill_kascade(const AttentionInputs& in);
  // DAR (config_.dar): the cache this forward's attention reads, raw within the window of the
  // last query and projected beyond it, kept up to date a few positions per step.
  AttentionInputs dar_inputs(const AttentionInputs& in);
  KascadeBoard::Published& published(std::int64_t layer);
  const KascadeBoard::Published& reused(const AttentionInputs& in) const;
  // decode_clustered's steps (§5.4), in order.
  at::Tensor clustered_logits(const Step& s) const;                         // ℓ [H, P + R]
  at::Tensor cover_softmax(const at::Tensor& logits) const;                 // α [H, P + R]
  void select_refined_pages(const at::Tensor& logits, const at::Tensor& alpha, std::int64_t group);  // last_.refined
  void refine_and_finalize(Step& s, const at::Tensor& logits, const at::Tensor& alpha);              // s.out, s.eff
  void make_pages(const AttentionInputs& in, std::int64_t decode_step);
  // The pages of [paged_end, end) by the segmenter and compressor: fixed pages, delimiter
  // chunks, GSC clusters. `end` ends a fixed page or a unit of the delimiter segmenter.
  void make_pages_until(const AttentionInputs& in, std::int64_t end);
  // One page from fp32 keys/values `kf`, `vf` [KV, n, D] of positions [first, first + n).
  void add_page(const at::Tensor& kf, const at::Tensor& vf, std::int64_t first, Page page);
  bool is_delimiter(const AttentionInputs& in, std::int64_t position);
  void accumulate(const at::Tensor& rows, std::int64_t group);    // [H, T] for one query

  int layer_;
  LayerConfig config_;
  bool oracle_ = false;
  bool incremental_heavy_ = true;
  std::int64_t step_ = 0;
  std::int64_t tokens_ = 0;
  std::int64_t reserved_ = 0;  // the run's length (reserve): the accumulators' first size, exact
  rules::PageClock clock_;  // the authors' page schedule
  std::vector<Page> pages_;
  std::int64_t paged_end_ = 0;  // pages cover [0, paged_end_)
  // The delimiter segmenter: every id's text, and per id whether it is one of the config's
  // delimiters (-1: not yet looked up; cleared when the config or the texts change).
  std::shared_ptr<const std::vector<std::string>> token_texts_;
  std::vector<std::int8_t> delimiter_of_id_;
  at::Tensor importance_, h2o_, spread_;             // [KV, cap], [H, cap], [KV, cap] fp32
  at::Tensor sum_k_, sum_v_, sum_bias_;              // [KV, pcap, D], [KV, pcap, D], [KV, pcap]
  LukaStep last_;
  bool records_ = false;
  // A decode engine's step adopted (adopt_step): pages() returns its pages until the next forward.
  bool adopted_ = false;
  std::vector<Page> adopted_pages_;
  // Lined: one heavy-hitter set per selection unit, valid for the step after a lined step at
  // heavy_tokens_ tokens (-1: rank from scratch next time).
  std::vector<HeavyHitterSet> heavy_sets_;
  std::int64_t heavy_tokens_ = -1;
  int layer_count_ = 1;
  std::vector<std::vector<std::int64_t>> press_kept_;  // press: per KV head, kept prompt positions
  std::int64_t press_prompt_ = 0;                      // press: the prompt's length (0: none)
  // Press decoding: per KV head the kept positions in kvpress's row order, covering [0,
  // press_rows_end_); the decode steps since the last compression; their queries before RoPE
  // ([H, 1, D] each, at most kPressQueryBuffer: kvpress's hidden_states_buffer_size).
  static constexpr std::int64_t kPressQueryBuffer = 256;
  std::vector<std::vector<std::int64_t>> press_rows_;
  std::int64_t press_rows_end_ = 0, press_steps_ = 0;
  std::vector<at::Tensor> press_queries_;
  // Quest: the bounds of the full pages of [0, quest_paged_) ([KV, pages, D] fp32 min and max).
  at::Tensor quest_min_, quest_max_;
  std::int64_t quest_paged_ = 0, quest_page_size_ = 0;
  std::shared_ptr<KascadeBoard> board_;  // Kascade: this model's, or the layer's own when alone
  // DAR: the basis, and the cache as attention sees it ([KV, cap, D], the cache's dtype), whose
  // positions [0, dar_projected_) hold projections; stale after a config change or a reset.
  std::shared_ptr<const DarBasis> dar_basis_;
  at::Tensor rope_inv_freq_;
  at::Tensor dar_k_, dar_v_;
  std::int64_t dar_projected_ = 0;
  bool dar_stale_ = true;
  const AttentionInputs* raw_ = nullptr;  // during forward with DAR: the cache as it is
};

// The pages a refinement rule picks from per-page scores (α, or its max over the heads that share
// the selection), in ascending order; `always_refine_first` pages are added.
std::vector<std::int64_t> select_pages(const ClusteredConfig& config, const std::vector<float>& score);

// Replaces every layer's attention of `decoder`-like owners: one LukaAttention per layer.
class Decoder;
std::vector<std::shared_ptr<LukaLayer>> install_luka(Decoder& decoder, const LukaConfig& config);

}  // namespace luka
