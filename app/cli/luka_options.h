// The LuKA configuration flags shared by generate, forward, perplexity and info:
//   --preset NAME, --layers-config FILE, --set SPEC (repeatable), and --schedule for generate.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/luka/config.h"

namespace luka {
class Decoder;
class LukaAttention;
}

namespace luka::cli {

class ArgParser;

void add_luka_options(ArgParser& args);
extern const char* const kLukaOptionsHelp;

// The config the flags describe (preset, then the file's settings, then each --set in order), or
// nullopt when no LuKA flag was given (plain dense attention). Errors are UsageError or luka::Error.
std::optional<LukaConfig> luka_config(const ArgParser& args, std::int64_t num_layers);

// --schedule "step=10:layers=0-7:mode=clustered;step=20:layers=all:mode=dense": overrides applied
// before the given decode step (1 = the first decode step after the prefill).
struct ScheduleEntry {
  std::int64_t step = 0;
  std::string override_spec;  // everything but step=, as LukaConfig::apply_override takes it
};
std::vector<ScheduleEntry> parse_schedule(const std::string& text);

// "clustered 2-25, lined 0-1|26-27": which layers run which mode.
std::string describe_modes(const LukaConfig& config);

}  // namespace luka::cli
