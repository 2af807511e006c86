// The bytes one decode step of one layer moves through DRAM, kernel by kernel, for the attention
// kernels of kernels/cuda/luka (docs/kernels-v2.md): what each kernel reads and writes for a model
// shape, a context length and the kernel's launch parameters. Decode attention is bound by these
// bytes, so the model is what a kernel's design is checked against before any GPU runs it; the
// GPU benchmark divides the same counts by measured times for its bandwidth column.
//
// Counted: every array a kernel must touch at least once (K/V rows, summaries, split states,
// accumulators, index lists, records). Not counted: re-reads a cache absorbs inside one kernel
// (a block reading its own tile twice), launch arguments. MB in the reports is 10^6 bytes, as in
// bench/results/cuda-decode.md. Plain C++, standard library only, host only.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace luka::budget {

// One layer's attention shape (a model's config: heads, KV heads, head dim) and storage widths.
struct Shape {
  std::int64_t q_heads = 16;
  std::int64_t kv_heads = 8;
  std::int64_t head_dim = 128;
  std::int64_t kv_bytes = 2;     // K/V cache element (bf16)
  std::int64_t io_bytes = 2;     // the query in and the output out
  std::int64_t accum_bytes = 4;  // importance / h2o_score (fp32)
  std::int64_t group() const { return kv_heads > 0 ? q_heads / kv_heads : 0; }
};

// DRAM bytes: arrays that outlive the step (K/V, summaries, accumulators, query, output). Scratch
// bytes: what one kernel of the step writes for the next (split states, logits, candidates);
// scratch is one buffer shared by every layer, a few hundred KB against an L2 of 50 MB, so it is
// rewritten while resident and costs L2 bandwidth, not DRAM. Both are reported; the bandwidth
// bound of a step is its DRAM bytes.
struct Traffic {
  std::string kernel;
  double read = 0, written = 0;                  // DRAM
  double scratch_read = 0, scratch_written = 0;  // step-local, L2-resident
  double total() const { return read + written; }
};

struct Budget {
  std::vector<Traffic> kernels;
  double read() const { return sum(&Traffic::read); }
  double written() const { return sum(&Traffic::written); }
  double scratch() const { return sum(&Traffic::scratch_read) + sum(&Traffic::scratch_written); }
  double total() const { return read() + written(); }  // DRAM bytes of the step

 private:
  double sum(double Traffic::*field) const {
    double s = 0;
    for (const Traffic& k : kernels) s += k.*field;
    return s;
  }
};

// The split-K partial state of one head in one split: the running max, the sum of exponentials
// (fp32 each) and the unnormalised output row (fp32).
inline double split_state_bytes(const Shape& s) { return 4.0 * static_cast<double>(s.head_dim + 2); }

// ===== dense ==================================================================================

struct DenseLaunch {
  std::int64_t splits = 16;  // split-K blocks per KV head
  bool accumulators = true;  // importance and h2o_score updated in the combine
};

// Dense v2: one split pass (a GQA group's heads per block, K/V read once per group) writing each
// split's state and, with accumulators, the raw logits; then the combine, which merges the states
// and folds the accumulator update in (p = exp(l − M)/Z per token, h2o and importance read and
// written once).
inline Budget dense_v2(const Shape& s, std::int64_t T, const DenseLaunch& l) {
  const double H = static_cast<double>(s.q_heads), KV = static_cast<double>(s.kv_heads);
  const double D = static_cast<double>(s.head_dim), t = static_cast<double>(T), S = static_cast<double>(l.splits);
  const double a = static_cast<double>(s.accum_bytes), io = static_cast<double>(s.io_bytes);
  const double states = H * S * split_state_bytes(s), logits = l.accumulators ? H * t * 4.0 : 0.0;
  const double acc = l.accumulators ? (H + KV) * t * a : 0.0;
  Traffic split{"dense_split"}, combine{"dense_combine"};
  split.read = 2 * KV * t * D * static_cast<double>(s.kv_bytes) + H * D * io;
  split.scratch_written = states + logits;
  combine.scratch_read = states + logits;
  combine.read = acc;
  combine.written = H * D * io + acc;
  return {{split, combine}};
}

// ===== lined ==================================================================================

struct LinedLaunch {
  std::int64_t window = 128;
  double rho = 0.125;
  std::int64_t unit_heads = 1;  // heads sharing one heavy set (1: per head, the default)
  std::int64_t changes = 4;     // positions the incremental heavy set updates per step
};

// Lined v2: the incremental heavy set (kernels/common/heavy_set.h) touches a few entries per unit
// (a score of each of its heads, a heap path of log2 T entries read and written, and the list);
// the attention reads each unit's cover list and the cover's K/V rows once per unit and KV head it
// spans, and updates importance and h2o_score on the cover only (every other score is frozen,
// kernels/common/page_accumulators.h).
inline Budget lined_v2(const Shape& s, std::int64_t T, const LinedLaunch& l) {
  const double H = static_cast<double>(s.q_heads), KV = static_cast<double>(s.kv_heads),
               D = static_cast<double>(s.head_dim);
  const std::int64_t m =
      std::min<std::int64_t>(T, static_cast<std::int64_t>(std::ceil(l.rho * static_cast<double>(T) - 1e-9)));
  const double cover = static_cast<double>(std::min<std::int64_t>(T, m + l.window));
  const double units = H / static_cast<double>(l.unit_heads);
  const double kv_per_unit = std::max(1.0, static_cast<double>(l.unit_heads) / static_cast<double>(s.group()));
  const double a = static_cast<double>(s.accum_bytes), io = static_cast<double>(s.io_bytes);
  const double path = std::ceil(std::log2(static_cast<double>(std::max<std::int64_t>(T, 2))));
  Traffic heavy{"heavy_set_update"}, attend{"lined_attention"};
  heavy.read = units * static_cast<double>(l.changes) * (static_cast<double>(l.unit_heads) * a + path * 8.0);
  heavy.written = units * static_cast<double>(l.changes) * (path * 8.0 + 4.0);
  attend.read = units * kv_per_unit * cover * 2 * D * static_cast<double>(s.kv_bytes) + units * cover * 4.0 +
                H * D * io + (H + KV) * cover * a;
  attend.written = H * D * io + (H + KV) * cover * a;
  return {{heavy, attend}};
}

// ===== clustered ==============================================================================

struct ClusteredLaunch {
  std::int64_t page_size = 16;
  std::int64_t tail = 128;         // raw positions never paged
  std::int64_t top_k = 3;          // pages refined per selection unit
  std::int64_t unit_heads = 1;     // heads sharing one selection (1: per head, the default)
  std::int64_t splits = 16;        // kernel A's splits per KV head
  std::int64_t summary_bytes = 2;  // summary K/V element (bf16 on the model path)
  bool bias = false;               // a per-page summary bias is read (bias none: not)
  bool candidates_only = true;     // top_k under max rank: each split hands on its per-head top_k only
};

// Pages and raw tail at context T as the segmenter leaves them after a prefill of T (every page
// that fits, the tail raw).
inline void clustered_layout(const ClusteredLaunch& l, std::int64_t T, std::int64_t* pages, std::int64_t* raw) {
  const std::int64_t room = T - l.tail;
  *pages = room >= l.page_size && l.page_size > 0 ? room / l.page_size : 0;
  *raw = T - *pages * l.page_size;
}

// Clustered v2 in two kernels (docs/kernels-v2.md):
//  A: the split pass over the summaries (K, bias, V) and the raw tail, a GQA group's heads per
//     block; writes each split's state, the page and tail logits, and (top_k under max rank) each
//     split's per-head top_k candidates; its last block selects the refined pages.
//  B: the refined pages' children (K/V rows), the merge of A's states, the finalize of both
//     refinement maths, and the accumulators: per page h2o_score and importance read and written
//     once, per raw tail and child token the per-token ones (page_accumulators.h).
inline Budget clustered_v2(const Shape& s, std::int64_t T, const ClusteredLaunch& l) {
  const double H = static_cast<double>(s.q_heads), KV = static_cast<double>(s.kv_heads),
               D = static_cast<double>(s.head_dim);
  const double S = static_cast<double>(l.splits), a = static_cast<double>(s.accum_bytes),
               io = static_cast<double>(s.io_bytes);
  std::int64_t Pn = 0, Rn = 0;
  clustered_layout(l, T, &Pn, &Rn);
  const double P = static_cast<double>(Pn), R = static_cast<double>(Rn), L = static_cast<double>(l.page_size);
  const double units = H / static_cast<double>(l.unit_heads);
  const double kv_per_unit = std::max(1.0, static_cast<double>(l.unit_heads) / static_cast<double>(s.group()));
  const double refined = static_cast<double>(std::min<std::int64_t>(l.top_k, Pn));
  // Child tokens each head attends to, and child rows read (a unit reads its pages once per KV head).
  const double child_tokens = refined * L;
  const double child_rows = units * kv_per_unit * child_tokens;
  const double states = H * S * split_state_bytes(s), logits = H * (P + R) * 4.0;
  const double candidates = l.candidates_only ? H * S * refined * 8.0 : 0.0;  // (logit, page) pairs
  const double picks = units * refined * 4.0;
  Traffic A{"clustered_a_split_select"}, B{"clustered_b_children_finalize"};
  A.read = KV * P * (2 * D * static_cast<double>(l.summary_bytes) + (l.bias ? 4.0 : 0.0)) +
           2 * KV * R * D * static_cast<double>(s.kv_bytes) + H * D * io;
  A.scratch_written = states + logits + candidates + picks;
  A.scratch_read = l.candidates_only ? candidates : H * P * 4.0;  // the last block's selection
  B.scratch_read = states + logits + picks;
  const double page_acc = (H + KV) * P * a;
  // Per token: the raw tail for every head, and each head's children (importance per KV head
  // over the union of its heads' children: at most G times a head's).
  const double token_acc = (H * (R + child_tokens) + KV * (R + static_cast<double>(s.group()) * child_tokens)) * a;
  B.read = child_rows * 2 * D * static_cast<double>(s.kv_bytes) + page_acc + token_acc;
  B.written = H * D * io + page_acc + token_acc + H * 16.0;  // output, accumulators, the step's records
  return {{A, B}};
}

inline double megabytes(double bytes) { return bytes / 1e6; }

}  // namespace luka::budget
