// The model config of a GGUF file: its metadata (llama.*, qwen2.*, qwen3.*) mapped onto the same
// ModelConfig the config.json path produces. No LibTorch, so the fuzz target reads it.
#pragma once

#include "core/gguf/gguf.h"
#include "core/model/config.h"

namespace luka {

// Throws luka::Error naming the file and the missing, mistyped or unsupported metadata.
ModelConfig config_from_gguf(const gguf::File& file);

}  // namespace luka
