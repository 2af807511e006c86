// What every LuKA layer offers its callers, on any device: the per-layer config (changed live
// between steps), the pages made so far, and the records of the last decode step that captures,
// the Studio and tests read. The CPU core (LukaAttention) and the GPU one (CudaLukaAttention, in
// the CUDA plugin) implement it; the run loop and the capture recorder see only this.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "core/luka/config.h"
#include "core/model/attention.h"
#include "core/util/error.h"

namespace luka {

struct Page {
  std::int64_t start = 0, end = 0;  // raw positions [start, end): its tokens, or the span of `members`
  std::int64_t created_step = 0;    // decode step after which it was made (0: after prefill)
  // A SemantiCache cluster (compressor gsc) lists its positions, ascending, which need not be
  // contiguous; empty: the page holds every position of [start, end).
  std::vector<std::int64_t> members;
  // One token kept as it is (a delimiter, or a cluster of one): its summary is the token itself,
  // so it is never selected for refinement and counts as exactly resolved.
  bool raw = false;

  std::int64_t size() const { return members.empty() ? end - start : static_cast<std::int64_t>(members.size()); }
  bool contiguous() const { return members.empty(); }
  template <typename F>
  void for_each_position(F&& f) const {
    if (members.empty()) {
      for (std::int64_t t = start; t < end; ++t) f(t);
    } else {
      for (const std::int64_t t : members) f(t);
    }
  }
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
  // kascade: the keys each head attended (its top-k set, ascending; every key when the layer's
  // output is dense), the layer whose top-k it used (itself for an anchor) and, per KV head, the
  // head of that layer whose set it used (empty for a shared top-k).
  std::vector<std::vector<std::int64_t>> selected;
  std::int64_t kascade_source = -1;
  std::vector<std::int64_t> head_map;
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

// What Kascade anchors publish at each forward for the layers that reuse them: one board per model,
// shared by its layers (install_luka). A set lists key positions, ascending.
struct KascadeBoard {
  struct Published {
    std::int64_t tokens = -1;      // the cache length of the forward that published (-1: none yet)
    std::int64_t q_pos0 = 0, queries = 0;
    std::int64_t tile = 1;         // queries per tile (1 for a decode step)
    bool shared = false;           // one set for every head (kascade_shared)
    // sets[tile][set]: per tile of queries, one set per KV head (one when the anchor shares)
    std::vector<std::vector<std::vector<std::int64_t>>> sets;
  };
  std::vector<Published> layers;   // by layer
};

// A LuKA layer's state after its last forward, for a decode engine that continues the sequence
// (core/run/static_step): views on the layer's device, valid until its next forward or reset.
struct LukaState {
  std::int64_t tokens = 0;                  // positions accumulated
  std::int64_t pages = 0, paged_end = 0;    // pages made, covering [0, paged_end)
  at::Tensor importance;                    // [KV, tokens] fp32
  at::Tensor h2o;                           // [H, tokens] fp32
  at::Tensor spread;                        // [KV, paged_end] fp32 (undefined without pages)
  at::Tensor summary_keys, summary_values;  // [KV, pages, D] fp32 (undefined without pages)
  at::Tensor summary_bias;                  // [KV, pages] fp32 (undefined without pages)
};

class LukaLayer : public LayerAttention {
 public:
  virtual int layer() const = 0;
  // Takes effect at the next forward call (live switching).
  virtual void set_config(const LayerConfig& config) = 0;
  virtual const LayerConfig& config() const = 0;
  virtual const std::vector<Page>& pages() const = 0;
  // The last decode step's records (CPU tensors). A layer fills the effective rows, covers and
  // refined pages only while records are on (the CPU core always does; the GPU copies them back).
  virtual const LukaStep& last_step() const = 0;
  // The accumulators and pages so far (the CPU core and the GPU one both offer them).
  virtual LukaState state_view() const { fail("luka layer " + std::to_string(layer()), "offers no state view"); }
  virtual void set_step_records(bool on) { (void)on; }
  // Whether set_step_records asked for records: a decode engine that runs the layer's steps
  // itself (core/run/static_step) makes them only then.
  virtual bool step_records() const { return false; }
  // Such an engine ran the layer's decode step on its own copy of the state: the step's records
  // and the layer's pages after it, which last_step() and pages() return until the layer's next
  // forward or reset (the layer's own state stays where the engine took it over).
  virtual void adopt_step(LukaStep step, std::vector<Page> pages) {
    (void)step;
    (void)pages;
    fail("luka layer " + std::to_string(layer()), "takes no step records from a decode engine");
  }
  // The board a model's Kascade layers share (install_luka sets one for every layer).
  virtual void set_kascade_board(std::shared_ptr<KascadeBoard> board) { (void)board; }
  // The text of every token id (Tokenizer::token_bytes, decoded: " the", ".\n"), which the
  // delimiter segmenter matches against its delimiters. Layers that need them and have none fail
  // at their first page.
  virtual void set_token_texts(std::shared_ptr<const std::vector<std::string>> texts) { (void)texts; }

  // Called during prefill with each block of attention probabilities, for captures: `probs` is
  // [G, m, T] fp32 (contiguous, on the CPU) for heads head0 .. head0+G-1 (one KV group), queries
  // q0 .. q0+m-1 over the T keys of the cache (zeros above the diagonal), valid only during the
  // call. The groups of a query block arrive in head order. Empty function: off (the default).
  //
  // pool_level k > 0 asks for the blocks max-pooled by p = 2^k over queries and keys, on the
  // device that computed them: `probs` is then [G, ⌈m/p⌉, ⌈T/p⌉] with q0 a multiple of p, and
  // cell (i, j) is the largest probability of queries q0 + i·p .. q0 + i·p + p - 1 over keys
  // j·p .. j·p + p - 1 (a cell cut by the end of the block or cache: the largest of what
  // exists). That is level k of the capture pyramid (captures/pyramid.h), p² times less to move.
  // A block's m is p·rows but for the prompt's last block. It is a request: a layer may hand a
  // finer level (the CPU core hands level 0, which the capture pools fastest itself), and the
  // block's width tells which.
  using PrefillObserver = std::function<void(int layer, std::int64_t q0, std::int64_t head0, const at::Tensor& probs)>;
  void set_prefill_observer(PrefillObserver observer, int pool_level = 0) {
    if (pool_level < 0 || pool_level > 30) fail("luka layer", "prefill pool level " + std::to_string(pool_level) + " is outside 0..30");
    prefill_observer_ = std::move(observer);
    prefill_pool_level_ = pool_level;
  }

 protected:
  PrefillObserver prefill_observer_;
  int prefill_pool_level_ = 0;
};

// Hands every layer the text of each token id (Tokenizer::all_token_bytes), one shared copy.
inline void set_token_texts(const std::vector<std::shared_ptr<LukaLayer>>& layers, const std::vector<std::string>& texts) {
  const auto shared = std::make_shared<const std::vector<std::string>>(texts);
  for (const auto& layer : layers) layer->set_token_texts(shared);
}

}  // namespace luka
