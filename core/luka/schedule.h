// --schedule: config overrides that take effect at given decode steps (the run loop applies them).
// No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/luka/config.h"

namespace luka {

// --schedule "step=10:layers=0-7:mode=clustered;step=20:layers=all:mode=dense": overrides applied
// before the given decode step (1 = the first decode step after the prefill).
struct ScheduleEntry {
  std::int64_t step = 0;
  std::string override_spec;  // everything but step=, as LukaConfig::apply_override takes it
};

// Throws luka::Error ("schedule: ...") for a malformed schedule.
std::vector<ScheduleEntry> parse_schedule(const std::string& text);

// Applies every entry to a copy of `config`: a bad key or layer fails now (luka::Error), not
// half-way through a run.
void check_schedule(const LukaConfig& config, const std::vector<ScheduleEntry>& schedule);

}  // namespace luka
