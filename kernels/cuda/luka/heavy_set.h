// Lined mode's incremental heavy set on the GPU (kernels/common/heavy_set.h run on device memory):
// one thread per selection unit updates the unit's set from the h2o_score rows of its heads, with
// the same heaps and the same result as the host. A full selection happens only on a unit's first
// update after invalidation (entering lined mode); afterwards a step costs a few heap operations.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/heavy_set.h"

namespace luka::cuda::v2 {

struct HeavySetArgs {
  luka::heavy::HeavySet* sets = nullptr;  // [units] in device memory, each over device arrays of `capacity`
  const float* h2o = nullptr;             // [heads, h2o_stride] (h2o_score, stored values)
  std::int64_t h2o_stride = 0;
  const std::int32_t* unit_heads = nullptr;  // [units, unit_size]: each unit's heads, summed in this order
  std::int64_t units = 0, unit_size = 1;
  std::int64_t select_end = 0, heavy = 0, window_start = 0;  // rules::lined_cover of the step
};

// Launches the update on `stream`; "" on success, else what is wrong. Never synchronizes.
std::string heavy_set_update(const HeavySetArgs& args, void* stream);

}  // namespace luka::cuda::v2
