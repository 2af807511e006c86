// A decode step's records as the GPU kernels write them (kernels/cuda StepOutputs: the effective
// rows, each page's α, the refined pages as padded rows with counts, the heavy hitters as rows),
// turned into the LukaStep the CPU core makes, so captures, the Studio and tests read one type
// whatever the device. Host code: the GPU layer copies its outputs back, then calls this.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "core/luka/luka_layer.h"

namespace luka {

struct StepRecords {
  at::Tensor effective;      // [H, T] fp32
  at::Tensor summary_mass;   // clustered: [H, ≥ P] fp32, α of each page before refinement
  at::Tensor refined;        // clustered: [H, ≥ max refined] int32, row h's first refined_count[h] valid
  at::Tensor refined_count;  // clustered: [H] int32
  at::Tensor heavy;          // lined: [H, m] int32 heavy-hitter positions (any order)
};

// `pages`: the layer's pages during the step (made before it); `config`: the layer's config in
// force. Fills mode, step, tokens, paged_end, effective, summary_mass, refined (ascending),
// heavy (ascending), window_start and cover_size as the CPU core does.
LukaStep step_from_records(const LayerConfig& config, std::int64_t step, std::int64_t tokens, const std::vector<Page>& pages,
                           const StepRecords& records);

// A step's records still on their way to the host: the GPU layer queues asynchronous copies
// into pinned memory after the step's kernels, so the decode step never waits for the device,
// and the LukaStep is made when someone reads it, after `wait` (an event on the copies' stream;
// by then the step's one synchronisation, the sampled token, has usually passed it).
class PendingStep {
 public:
  PendingStep() = default;
  PendingStep(LayerConfig config, std::int64_t step, std::int64_t tokens, std::vector<Page> pages, StepRecords records,
              std::function<void()> wait, double seconds)
      : config_(std::move(config)), step_(step), tokens_(tokens), pages_(std::move(pages)), records_(std::move(records)),
        wait_(std::move(wait)), seconds_(seconds), armed_(true) {}
  bool armed() const { return armed_; }
  // The step (once: `wait`, then step_from_records); disarms. `seconds`: the layer's host time.
  LukaStep take();

 private:
  LayerConfig config_;
  std::int64_t step_ = 0, tokens_ = 0;
  std::vector<Page> pages_;
  StepRecords records_;
  std::function<void()> wait_;
  double seconds_ = 0;
  bool armed_ = false;
};

// The inverse, for tests and the CPU stand-in of the GPU path: a CPU LukaStep in the kernels'
// layout (refined rows padded to the widest with -1, heavy rows of one width).
StepRecords records_from_step(const LukaStep& step, std::int64_t pages);

}  // namespace luka
