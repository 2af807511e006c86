#include "core/run/graphed_step.h"

#include <algorithm>

#include "core/util/error.h"

namespace luka {

const char* to_string(StepIssue issue) {
  switch (issue) {
    case StepIssue::kEager:
      return "eager";
    case StepIssue::kRecord:
      return "record";
    case StepIssue::kReplay:
      return "replay";
  }
  return "?";
}

GraphSchedule::GraphSchedule(int warmup, int max_variants) : warmup_(warmup), max_variants_(max_variants) {
  if (warmup < 0) fail("graph schedule", "the warm-up is a number of steps, at least 0");
  if (max_variants < 1) fail("graph schedule", "at least one variant is recorded");
}

StepIssue GraphSchedule::next(const std::vector<std::int64_t>& variant) {
  ++steps_;
  if (steps_ <= warmup_) return StepIssue::kEager;
  if (std::find(recorded_.begin(), recorded_.end(), variant) == recorded_.end()) {
    if (static_cast<int>(recorded_.size()) >= max_variants_) {
      ++eager_;
      return StepIssue::kEager;
    }
    recorded_.push_back(variant);
    ++records_;
    return StepIssue::kRecord;
  }
  ++replays_;
  return StepIssue::kReplay;
}

void GraphSchedule::invalidate() { recorded_.clear(); }

bool GraphSchedule::recorded(const std::vector<std::int64_t>& variant) const {
  return std::find(recorded_.begin(), recorded_.end(), variant) != recorded_.end();
}

}  // namespace luka
