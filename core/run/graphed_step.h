// The static decode step recorded once as a CUDA graph and replayed (issue 44). The first steps
// run eagerly (LibTorch's allocator and cuBLAS settle their workspaces), then the step's device
// work (StaticDecodeStep::enqueue_step: every layer's kernels, the greedy argmax, the counters) is
// recorded on a side stream with at::cuda::CUDAGraph, in a private memory pool, and each later
// step replays it: one launch for the whole step instead of one per op. The pages due after a
// step are made eagerly after its replay (their offsets move from one page step to the next).
// A config change that StepChange calls a recapture drops the graph; the next step records anew.
//
// Which steps run eagerly, record or replay is plain C++ (GraphSchedule below, tested on the CPU);
// the recording itself needs a GPU: built with LUKA_CUDA only (graphed_step_cuda.cpp, library
// luka_graphed_step_cuda), tested by tests/core/run/test_graphed_step_cuda.cpp (skips without a
// GPU; scripts/gpu_run.sh graph).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/device/decode_engine.h"

namespace luka {

enum class StepIssue { kEager, kRecord, kReplay };
const char* to_string(StepIssue issue);  // "eager", "record", "replay"

// When each step is issued which way: `warmup` eager steps, then one that records (and replays
// what it recorded: a capture runs nothing), then replays until invalidate().
class GraphSchedule {
 public:
  explicit GraphSchedule(int warmup = 2);
  // The issue of the next step; advances the schedule.
  StepIssue next();
  // The recorded graph no longer fits the step (a recapture-class config change): the next step
  // records again, without a new warm-up.
  void invalidate();
  bool recorded() const { return recorded_; }
  std::int64_t steps() const { return steps_; }
  std::int64_t records() const { return records_; }
  std::int64_t replays() const { return replays_; }

 private:
  int warmup_;
  bool recorded_ = false;
  std::int64_t steps_ = 0, records_ = 0, replays_ = 0;
};

// The engine for `luka generate --graph` on a CUDA backend: StaticDecodeStep over the fused CUDA
// kernels (make_cuda_step_kernels), recorded and replayed as GraphSchedule says. Its describe()
// names the recorded graph's kernel nodes ("CUDA graph: N kernel nodes (M nodes in all), recorded
// in S s; R replays, E eager steps"). In the build with LUKA_CUDA only.
DecodeEngineFactory graphed_step_engine(int warmup = 2);

}  // namespace luka
