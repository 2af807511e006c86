// The static decode step recorded once as a CUDA graph and replayed (issue 44). The first steps
// run eagerly (LibTorch's allocator and cuBLAS settle their workspaces), then the step's device
// work (StaticDecodeStep::enqueue_step: every layer's kernels, the greedy argmax, the counters) is
// recorded on a side stream with at::cuda::CUDAGraph, in a private memory pool, and each later
// step replays it: one launch for the whole step instead of one per op. A step after which pages
// are made is another variant, recorded with its page work (StaticDecodeStep::enqueue_pages,
// whose offsets are read on the device) the first time it comes. A config change drops the
// graphs; the next steps record anew (DecodeEngine::change).
//
// Which steps run eagerly, record or replay is plain C++ (GraphSchedule below, tested on the CPU);
// the recording itself needs a GPU: built with LUKA_CUDA only (graphed_step_cuda.cpp, library
// luka_graphed_step_cuda), tested by tests/core/run/test_graphed_step_cuda.cpp (skips without a
// GPU; scripts/gpu_run.sh graph).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device/decode_engine.h"

namespace luka {

enum class StepIssue { kEager, kRecord, kReplay };
const char* to_string(StepIssue issue);  // "eager", "record", "replay"

// When each step is issued which way: `warmup` eager steps, then each variant of the step (the
// pages each layer makes after it, StaticDecodeStep::pages_due: all zero for most steps) records
// the first time it comes (and replays what it recorded: a capture runs nothing) and replays every
// later time, until invalidate(). Past `max_variants` recorded variants a new one runs eagerly.
class GraphSchedule {
 public:
  explicit GraphSchedule(int warmup = 2, int max_variants = 8);
  // The issue of the next step, whose variant is `variant`; advances the schedule.
  StepIssue next(const std::vector<std::int64_t>& variant = {});
  // The recorded graphs no longer fit the step (a recapture-class config change): each variant
  // records again when it next comes, without a new warm-up.
  void invalidate();
  bool recorded(const std::vector<std::int64_t>& variant = {}) const;
  std::int64_t steps() const { return steps_; }
  std::int64_t records() const { return records_; }
  std::int64_t replays() const { return replays_; }
  std::int64_t eager_past_warmup() const { return eager_; }  // variants past max_variants

 private:
  int warmup_, max_variants_;
  std::vector<std::vector<std::int64_t>> recorded_;
  std::int64_t steps_ = 0, records_ = 0, replays_ = 0, eager_ = 0;
};

// The engine for `luka generate --graph` on a CUDA backend: StaticDecodeStep over the fused CUDA
// kernels (make_cuda_step_kernels), recorded and replayed as GraphSchedule says. Its describe()
// names the recorded graph's kernel nodes ("CUDA graph: N kernel nodes (M nodes in all), recorded
// in S s; R replays, E eager steps"). In the build with LUKA_CUDA only.
DecodeEngineFactory graphed_step_engine(int warmup = 2);

}  // namespace luka
