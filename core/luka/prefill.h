// The LuKA prefill on ATen (docs/design.md §5.1), device-neutral: the CPU core's prefill, and the GPU
// path's where its own kernel does not serve. It returns the attention output over the new queries and
// adds every query's probabilities to the layer's accumulators — `importance` [KV, T] (each KV group's
// mean) and `h2o` [H, T] (per query head, with `decay` applied query by query) — and hands them, by
// blocks of queries, to the capture's observer.
#pragma once

#include <cstdint>

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
};

// The prefill (§5.1), on the inputs' device: exact causal attention over the prompt, or lined's
// sparse prefill (`mask`), 256 queries at a time per KV group. Returns the output [n, H * D] in the
// query's dtype. Observed blocks are [G, m, T] probabilities (queries q0 .. q0+m-1 of heads
// head0 .. head0+G-1), max-pooled by 2^pool_level where they lie when that is on a device (on the
// CPU the level is 0: the capture's half pyramid pools faster there), then on the CPU.
at::Tensor aten_prefill(const AttentionInputs& in, const PrefillMask& mask, double decay, int layer,
                        const LukaLayer::PrefillObserver& observer, int pool_level, at::Tensor importance, at::Tensor h2o);

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
