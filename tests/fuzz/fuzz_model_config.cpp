// Fuzz target for config.json (core/model/config.cpp): any text must give a ModelConfig or a
// luka::Error, and a config that parses must hold the invariants the decoder relies on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/model/config.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const luka::ModelConfig c =
        luka::ModelConfig::from_json_text(std::string(reinterpret_cast<const char*>(data), size), "config.json");
    if (c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 ||
        c.num_heads % c.num_kv_heads != 0 || c.head_dim <= 0 || c.head_dim % 2 != 0 || c.vocab_size <= 0 ||
        c.max_position_embeddings <= 0 || !(c.rms_norm_eps > 0) || !(c.rope.theta > 0) || !(c.rope.factor > 0))
      std::abort();
  } catch (const luka::Error&) {
    // Rejected cleanly: the expected outcome for most inputs.
  }
  return 0;
}
