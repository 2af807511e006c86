// What a LuKA layer computes, described once for both executors: the mode and rule enums and the
// per-layer parameters of the lined and clustered modes. core/luka's LayerConfig holds them (and
// parses, validates and prints them, docs/luka-config.md); the CPU core reads them directly, and
// the CUDA layer (kernels/cuda/luka/state.h) takes the same structs, so no enum or parameter is
// declared twice or translated between the two. Plain C++ with the standard library only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace luka {

enum class AttentionMode { kDense, kLined, kClustered, kKascade, kPress, kQuest };
// kvpress's presses (core/press, docs/methods.md): the scorer, and how a budget is spread.
enum class PressMethod { kStreamingLlm, kSnapKv, kTova, kKnorm, kExpectedAttention, kRandom };
enum class PressAllocation { kUniform, kPyramid, kAdaKv };
enum class Selection { kPerHead, kPerGroup, kPerLayer };      // who shares a selection
enum class Compressor { kMean, kAttentionWeighted, kRandom, kGsc };  // gsc: SemantiCache's clusters
enum class SummaryBias { kNone, kFixed, kAdaptive };          // 0, log|c|, log k_eff
enum class RefineRule { kThreshold, kTopK, kTopFrac, kTopP };
enum class RefineMath { kMassPreserving, kExact };
// Which attention feeds `importance` and `h2o_score`: the effective distribution after refinement
// (ours), or the cover softmax before refinement at raw slots only (the authors' code).
enum class ImportanceSource { kEffective, kCover };
enum class BudgetRounding { kCeil, kFloor };                  // ⌈x·T⌉, or max(1, ⌊x·T⌋)
enum class PrefillWindow { kSliding, kFixed };                // lined sparse prefill
enum class PageSchedule { kInterval, kAuthors };
enum class BiasEntropy { kWeights, kImportanceMean };         // what the adaptive bias's entropy is of
enum class RefineOn { kBiased, kUnbiased };                   // the α that selection ranks
enum class PageRank { kMax, kSum };                           // top_frac / top_p over the heads that share
enum class KascadePrefill { kDense, kTopK };                  // exact causal, or each tile its top-k
enum class DarKeys { kPreRope, kPostRope };                   // which keys the DAR probe projects
enum class Segmenter { kFixed, kDelimiter };                  // pages of page_size, or SemantiCache's chunks
enum class DelimiterMatch { kExact, kComposed };              // a token is one delimiter, or a run of them

// Lined (H2O): recent window ∪ the top ⌈rho·T⌉ tokens by h2o_score outside it.
struct LinedConfig {
  std::int64_t window = 128;     // recent tokens always kept
  double window_frac = 0;        // > 0: the window is ⌈window_frac·T⌉ tokens instead
  double rho = 0.125;            // heavy-hitter fraction of the context, in (0, 1]
  Selection selection = Selection::kPerHead;
  double decay = 1.0;            // γ: h2o_score ← γ·h2o_score + attention (1 = none)
  bool sparse_prefill = false;   // the reference implementation's prefill (see sparse_prefill_window)
  // sliding: a query sees keys < 32 and its own window; fixed (the authors' code): the last window
  // of the prompt, causal within it, and queries before it a uniform row over that window.
  PrefillWindow sparse_prefill_window = PrefillWindow::kSliding;
  BudgetRounding rounding = BudgetRounding::kCeil;  // window_frac and rho budgets
  bool heavy_late = false;       // the authors': heavy hitters picked after the previous step
};

// Clustered: pages of raw tokens summarized into one key/value per KV head, refined on demand.
//
// SemantiCache's pages (docs/papers/semanticache.md, docs/methods.md): segmenter `delimiter` cuts what the
// schedule makes due at the last delimiter token (so chunks stay whole) into the paper's chunks,
// and keeps each delimiter token raw; compressor `gsc` splits each chunk (or fixed page) into the
// clusters of greedy seed-based clustering over the keys of every KV head side by side, each
// cluster one page (its tokens need not be contiguous) merged by the mean. A page of one token is
// that token, kept raw and never selected. bias `fixed` is then log |cluster|, the paper's
// proportional attention.
struct ClusteredConfig {
  std::int64_t page_size = 16;   // fixed segmenter; delimiter: the schedule's step, and a chunk at most 4 of them
  Segmenter segmenter = Segmenter::kFixed;
  // delimiter: the token texts that cut chunks (the paper's . , ? ! ; : space tab newline)
  std::vector<std::string> delimiters = {".", ",", "?", "!", ";", ":", " ", "\t", "\n"};
  DelimiterMatch delimiter_match = DelimiterMatch::kExact;
  double gsc_tau = 0.7;          // gsc: a token joins a seed's cluster when their keys' cosine exceeds it
  std::int64_t tail = 128;       // the last `tail` positions are never paged
  std::int64_t interval = 16;    // decode steps between page creations
  PageSchedule schedule = PageSchedule::kInterval;
  std::int64_t page_counter_start = 0;  // authors schedule: the forward counter's start
  bool page_bypass = false;      // authors schedule: a large cover skips the interval gates
  std::int64_t max_pages = 0;    // pages made at one time at most (0: no limit)
  // Defaults: the best measured at pages of 16 and top_k 3 (docs/luka-config.md, bench/results/luka-defaults.md).
  Compressor compressor = Compressor::kAttentionWeighted;
  double tau = 0.25;             // attention_weighted: π = softmax(importance / τ)
  std::uint64_t seed = 0;        // random compressor
  bool zero_v = false;           // summary value 0 (the eviction ablation)
  SummaryBias bias = SummaryBias::kNone;
  BiasEntropy bias_entropy = BiasEntropy::kWeights;  // adaptive: per KV head from π, or the authors'
  RefineRule rule = RefineRule::kTopK;
  double epsilon = 0.01;         // threshold
  std::int64_t top_k = 3;
  double top_frac = 0.125;       // in [0, 1] (0: summaries only, as top_k 0)
  double top_p = 0.5;            // in (0, 1]
  std::int64_t always_refine_first = 0;
  Selection selection = Selection::kPerHead;
  RefineMath math = RefineMath::kExact;
  RefineOn refine_on = RefineOn::kBiased;
  PageRank page_rank = PageRank::kMax;
};

}  // namespace luka
