// Fuzz target for LuKA layers-config files (core/luka/config.cpp, LukaConfig::from_json): any text
// must give a config or a luka::Error. A config that loads has every layer valid and reads back
// equal from its own to_json (what captures store and `luka info --config` prints).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/luka/config.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A model of 12 layers: enough for every preset's split and for layer ranges to matter.
  constexpr std::int64_t kLayers = 12;
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The "auto:FILE" preset reads a calibration file named in the input: not this target's format,
  // and no file on this machine is the fuzzer's to read.
  if (text.find("auto:") != std::string::npos) return 0;
  luka::LukaConfig config;
  try {
    config = luka::LukaConfig::from_json(text, kLayers, "layers.json");
  } catch (const luka::Error&) {
    return 0;  // rejected cleanly: the expected outcome for most inputs
  }
  if (config.layers.size() != kLayers) std::abort();
  for (std::size_t i = 0; i < config.layers.size(); ++i) luka::validate(config.layers[i], static_cast<std::int64_t>(i));
  (void)luka::describe_modes(config);
  const std::string json = config.to_json();
  if (luka::LukaConfig::from_json(json, kLayers, "to_json").to_json() != json) std::abort();
  return 0;
}
