// Fuzz target for the LuKA command-line strings: a --set override (LukaConfig::apply_override) and
// a --schedule (core/luka/schedule.cpp, parse_schedule and check_schedule). Any text must be taken
// or fail with a luka::Error; a config it leaves has every layer valid.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/luka/config.h"
#include "core/luka/schedule.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const luka::LukaConfig base = luka::LukaConfig::preset("paper", 12);
  try {
    luka::LukaConfig config = base;
    config.apply_override(text);
    for (std::size_t i = 0; i < config.layers.size(); ++i) luka::validate(config.layers[i], static_cast<std::int64_t>(i));
  } catch (const luka::Error&) {
  }
  try {
    const auto schedule = luka::parse_schedule(text);
    for (const luka::ScheduleEntry& e : schedule)
      if (e.step < 1 || e.override_spec.empty()) std::abort();
    luka::check_schedule(base, schedule);
  } catch (const luka::Error&) {
  }
  return 0;
}
