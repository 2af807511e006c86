// The LuKA attention core on CPU (DESIGN.md §5): one LukaAttention per layer, plugged into the
// decoder through LayerAttention. It keeps the per-layer state every mode shares — pages with one
// summary key/value per KV head, `importance` [KV, T] and `h2o_score` [H, T] — and updates it every
// step from the effective attention over raw tokens, whatever the mode; so the mode can change at
// any decode step (set_config) and the next step uses it, with nothing recomputed.
//
// The raw K/V are the decoder's KV cache (LuKA never drops a token). Prefill is exact causal
// attention (lined `sparse_prefill` excepted); decode steps run dense, lined or clustered.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "core/luka/config.h"
#include "core/model/attention.h"
#include "kernels/common/luka_rules.h"

namespace luka {

struct Page {
  std::int64_t start = 0, end = 0;  // raw positions [start, end)
  std::int64_t created_step = 0;    // decode step after which it was made (0: after prefill)
};

// What the last decode step did, for captures, the Studio and tests.
struct LukaStep {
  AttentionMode mode = AttentionMode::kDense;
  std::int64_t step = 0;          // decode steps so far in this sequence (1 for the first)
  std::int64_t tokens = 0;        // T: raw tokens attended (including the new one)
  std::int64_t paged_end = 0;     // pages cover [0, paged_end); raw tokens [paged_end, T)
  at::Tensor effective;           // [H, T] fp32: attention over raw tokens; each row sums to 1
  at::Tensor summary_mass;        // clustered: [H, P] fp32, α of each page before refinement
  std::vector<std::vector<std::int64_t>> refined;  // clustered: refined page indices per head
  std::vector<std::vector<std::int64_t>> heavy;    // lined: heavy-hitter positions per head
  std::int64_t window_start = 0;  // lined: the recent window is [window_start, T)
  // Cost of the step: per head, the entries attended (raw tokens, summaries and refined
  // children); and the wall time of the layer's attention in seconds.
  std::vector<std::int64_t> cover_size;
  double seconds = 0;
  // With the dense shadow on: [H, 4] fp32 per head — KL(dense ‖ effective) (effective floored
  // at 1e-10), recall (dense mass on exactly resolved tokens), top-k overlap (k = min(32, T)),
  // relative L2 error of the attention output. Undefined otherwise.
  at::Tensor fidelity;
  // With the dense shadow on: [H, T] fp32, dense attention on the same inputs. Undefined otherwise.
  at::Tensor dense;
};

// Column indices of LukaStep::fidelity.
enum FidelityColumn { kKl = 0, kRecall = 1, kTopkOverlap = 2, kRelL2 = 3 };
constexpr std::int64_t kFidelityTopK = 32;

class LukaAttention final : public LayerAttention {
 public:
  LukaAttention(int layer, LayerConfig config);

  at::Tensor forward(const AttentionInputs& in) override;
  void reset() override;
  const char* name() const override { return to_string(config_.mode); }

  // Takes effect at the next forward call (live switching).
  void set_config(const LayerConfig& config);
  const LayerConfig& config() const { return config_; }

  const std::vector<Page>& pages() const { return pages_; }
  std::int64_t paged_end() const { return pages_.empty() ? 0 : pages_.back().end; }
  std::int64_t decode_steps() const { return step_; }
  std::int64_t tokens() const { return tokens_; }
  // Views of the state over the first tokens() positions / pages().size() pages.
  at::Tensor importance() const;       // [KV, T]
  at::Tensor h2o_score() const;        // [H, T]
  at::Tensor summary_keys() const;     // [KV, P, D] fp32
  at::Tensor summary_values() const;   // [KV, P, D] fp32
  at::Tensor summary_bias() const;     // [KV, P] fp32
  at::Tensor spread() const;           // [KV, paged_end]: how an unrefined page's mass spreads (sums to 1 per page)
  const LukaStep& last_step() const { return last_; }

  // Called during prefill with each block of attention probabilities, for captures: `probs` is
  // [G, m, T] fp32 (contiguous) for heads head0 .. head0+G-1 (one KV group), queries q0 .. q0+m-1
  // over the T keys of the cache (zeros above the diagonal), valid only during the call. The
  // groups of a query block arrive in head order. Empty function: off (the default).
  using PrefillObserver = std::function<void(int layer, std::int64_t q0, std::int64_t head0, const at::Tensor& probs)>;
  void set_prefill_observer(PrefillObserver observer) { prefill_observer_ = std::move(observer); }
  int layer() const { return layer_; }

  // For fidelity experiments: summary logits become the log-sum-exp of their children's logits,
  // so a page's α is exactly its dense mass (an oracle no real summary can reach).
  void set_oracle_summary_logits(bool on) { oracle_ = on; }

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
  void make_pages(const AttentionInputs& in, std::int64_t decode_step);
  void compress_pages(const AttentionInputs& in, std::int64_t count);
  void accumulate(const at::Tensor& rows, std::int64_t group);    // [H, T] for one query
  void shadow(const AttentionInputs& in, const at::Tensor& out);  // fills last_.fidelity

  int layer_;
  LayerConfig config_;
  bool oracle_ = false;
  PrefillObserver prefill_observer_;
  std::int64_t step_ = 0;
  std::int64_t tokens_ = 0;
  rules::PageClock clock_;  // the authors' page schedule
  std::vector<Page> pages_;
  at::Tensor importance_, h2o_, spread_;             // [KV, cap], [H, cap], [KV, cap] fp32
  at::Tensor sum_k_, sum_v_, sum_bias_;              // [KV, pcap, D], [KV, pcap, D], [KV, pcap]
  LukaStep last_;
};

// The pages a refinement rule picks from per-page scores (α, or its max over the heads that share
// the selection), in ascending order; `always_refine_first` pages are added.
std::vector<std::int64_t> select_pages(const ClusteredConfig& config, const std::vector<float>& score);

// Replaces every layer's attention of `decoder`-like owners: one LukaAttention per layer.
class Decoder;
std::vector<std::shared_ptr<LukaAttention>> install_luka(Decoder& decoder, const LukaConfig& config);

}  // namespace luka
