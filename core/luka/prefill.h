// The LuKA prefill on ATen (docs/design.md §5.1), device-neutral: the CPU core's prefill, and the GPU
// path's where its own kernel does not serve. It returns the attention output over the new queries and
// adds every query's probabilities to the layer's accumulators — `importance` [KV, T] (each KV group's
// mean) and `h2o` [H, T] (per query head, with `decay` applied query by query) — and hands them, by
// blocks of queries, to the capture's observer.
//
// Two forms compute it. The exact form materializes each block's probabilities [G, m, T] by softmax;
// it serves every mask (lined's sparse prefill, DAR's near keys). The tiled form serves plain causal
// attention: the outputs and each row's log-sum-exp come from ATen's fused SDPA (flash on the CPU and,
// in 16-bit, on CUDA), then a pass over key tiles recomputes the probabilities from that log-sum-exp
// and sums them into the accumulators and the pooled map, so nothing of width T is held beyond one
// observed block. aten_prefill chooses.
#pragma once

#include <cstdint>
#include <utility>

#include <ATen/ATen.h>

#include "core/luka/luka_layer.h"

namespace luka {

struct PrefillMask {
  bool sparse = false;      // lined's sparse prefill: the first 32 keys and the window
  bool fixed = false;       // ... over the fixed last `window` keys
  std::int64_t window = 0;
  // DAR: `in` holds the projected cache; a query sees the keys and values at most near_window
  // positions behind it from near_k / near_v (the raw cache) instead.
  at::Tensor near_k, near_v;
  std::int64_t near_window = -1;  // -1: none
  std::int64_t near_first = 0;    // ... and keys before this position whole too (DAR's sinks)
  // [KV, T] bool, true where no query of this forward may see the key: a continuation after a
  // press compressed the prompt (query-agnostic evaluation) sees only the kept positions.
  at::Tensor left_out;
  // Plain causal attention: what the tiled form serves.
  bool causal() const { return !sparse && near_window < 0 && !left_out.defined(); }
};

// The prefill (§5.1), on the inputs' device: the tiled form for plain causal attention on the CPU
// (and on a device once device_tiled_prefill is on), the exact form otherwise. Returns the output
// [n, H * D] in the query's dtype. Observed blocks are [G, m, T] probabilities (queries q0 .. q0+m-1
// of heads head0 .. head0+G-1), max-pooled by 2^pool_level where they lie when that is on a device
// (on the CPU the level is 0: the capture's half pyramid pools faster there), then on the CPU.
at::Tensor aten_prefill(const AttentionInputs& in, const PrefillMask& mask, double decay, int layer,
                        const LukaLayer::PrefillObserver& observer, int pool_level, at::Tensor importance,
                        at::Tensor h2o);

// Whether aten_prefill takes the tiled form on a device too. Off until a GPU run has checked the
// device's SDPA kernels against the exact form (their log-sum-exp layouts are only read, not run, here).
void set_device_tiled_prefill(bool on);
bool device_tiled_prefill();

// The exact form: per block of 256 queries and KV group, the scores [G, m, T], their softmax, the
// output, the accumulators and the observer.
at::Tensor exact_prefill(const AttentionInputs& in, const PrefillMask& mask, double decay, int layer,
                         const LukaLayer::PrefillObserver& observer, int pool_level, at::Tensor importance,
                         at::Tensor h2o);

// The tiled form (plain causal attention only): prefill_attention, then add_prefill_tiles.
at::Tensor tiled_prefill(const AttentionInputs& in, double decay, int layer,
                         const LukaLayer::PrefillObserver& observer, int pool_level, at::Tensor importance,
                         at::Tensor h2o);

// Causal attention of the new queries over the cache by ATen's SDPA with each row's log-sum-exp:
// returns the output [H, n, D] in fp32 and the log-sum-exp [H, n] of the scaled scores. A
// continuation (q_pos0 > 0) is two calls merged through their log-sum-exps — the cached keys, which
// every new query sees whole, and the new keys, a square causal block (ATen aligns a non-square causal
// mask to the top left, which is not the cache's alignment).
std::pair<at::Tensor, at::Tensor> prefill_attention(const AttentionInputs& in);

// The pass over key tiles: each query's probabilities exp(q·k·scale − lse) recomputed tile by tile
// and added to `importance` and `h2o` (and handed to `observer` as aten_prefill describes).
// pool_level is taken as asked, on the CPU too (tiled_prefill makes it 0 there).
void add_prefill_tiles(const AttentionInputs& in, const at::Tensor& lse, double decay, int layer,
                       const LukaLayer::PrefillObserver& observer, int pool_level, at::Tensor importance,
                       at::Tensor h2o);

// Hands one block of prefill probabilities `probs` [G, m, T] (queries q0 .. q0+m-1, any device)
// to `observer` as LukaLayer::set_prefill_observer describes: max-pooled by 2^pool_level where it
// lies, then copied to the CPU. Fails when q0 is not a multiple of the pool.
// aligned_pool_level: the largest level <= `level` whose pool divides both the prefill's first
// position and its query blocks (observers read the level from the blocks' width).
int aligned_pool_level(int level, std::int64_t q_pos0, std::int64_t block);
void observe_prefill_block(const LukaLayer::PrefillObserver& observer, int pool_level, int layer, std::int64_t q0,
                           std::int64_t head0, const at::Tensor& probs);

// Adds one KV group's prefill probabilities `probs` [G, m, T] (queries in order) to `importance`
// row g (the group mean) and to the group's `h2o` rows (with `decay` applied query by query).
void add_prefill_probs(const at::Tensor& probs, std::int64_t g, double decay, at::Tensor importance, at::Tensor h2o);

}  // namespace luka
