#include "core/luka/schedule.h"

#include <sstream>

#include "core/util/error.h"

namespace luka {

std::vector<ScheduleEntry> parse_schedule(const std::string& text) {
  std::vector<ScheduleEntry> out;
  std::stringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    if (entry.empty()) continue;
    ScheduleEntry e;
    bool has_step = false;
    std::stringstream items(entry);
    std::string item;
    while (std::getline(items, item, ':')) {
      if (item.rfind("step=", 0) == 0) {
        const std::string v = item.substr(5);
        std::size_t used = 0;
        long long step = -1;
        try {
          step = std::stoll(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != v.size() || step < 1) fail("schedule", "step must be a positive integer, got '" + v + "'");
        e.step = step;
        has_step = true;
      } else {
        e.override_spec += (e.override_spec.empty() ? "" : ",") + item;
      }
    }
    if (!has_step) fail("schedule", "entry '" + entry + "' has no step=N");
    if (e.override_spec.empty()) fail("schedule", "entry '" + entry + "' changes nothing");
    out.push_back(e);
  }
  if (out.empty()) fail("schedule", "the schedule is empty");
  return out;
}

void check_schedule(const LukaConfig& config, const std::vector<ScheduleEntry>& schedule) {
  LukaConfig probe = config;
  for (const ScheduleEntry& e : schedule) probe.apply_override(e.override_spec);
}

}  // namespace luka
