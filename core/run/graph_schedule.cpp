#include "core/run/graphed_step.h"

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

GraphSchedule::GraphSchedule(int warmup) : warmup_(warmup) {
  if (warmup < 0) fail("graph schedule", "the warm-up is a number of steps, at least 0");
}

StepIssue GraphSchedule::next() {
  ++steps_;
  if (steps_ <= warmup_) return StepIssue::kEager;
  if (!recorded_) {
    recorded_ = true;
    ++records_;
    return StepIssue::kRecord;
  }
  ++replays_;
  return StepIssue::kReplay;
}

void GraphSchedule::invalidate() { recorded_ = false; }

}  // namespace luka
