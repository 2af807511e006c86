// The tensors of a loaded checkpoint, in the compute dtype. Tensors whose stored dtype equals
// the compute dtype point straight into the memory-mapped safetensors files (no copy), so
// `files` must outlive them: ModelWeights owns both.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "core/model/config.h"
#include "core/model/dtype.h"
#include "core/model/model.h"

namespace luka {

class SafetensorsFile;
namespace gguf {
class File;
}

// Linear weights are [out, in] as in Hugging Face; undefined tensors mean "no bias".
struct LayerWeights {
  at::Tensor input_norm;           // [hidden]
  at::Tensor q_proj, k_proj, v_proj, o_proj;
  at::Tensor q_bias, k_bias, v_bias, o_bias;
  at::Tensor q_norm, k_norm;       // [head_dim], qwen3 only
  at::Tensor post_attention_norm;  // [hidden]
  at::Tensor gate_proj, up_proj, down_proj;
  at::Tensor gate_bias, up_bias, down_bias;
};

struct ModelWeights {
  at::Tensor embed_tokens;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  at::Tensor final_norm;    // [hidden]
  at::Tensor lm_head;       // [vocab, hidden]; the same tensor as embed_tokens when tied
  std::vector<std::shared_ptr<const SafetensorsFile>> files;  // keeps the mappings alive
  std::shared_ptr<const gguf::File> gguf;                     // ... or the GGUF mapping

  ~ModelWeights();
};

at::ScalarType to_scalar_type(DType dtype);

struct LoadedWeights {
  std::unique_ptr<ModelWeights> weights;
  std::string stored_dtypes;  // e.g. "BF16" or "BF16,F32"
  std::vector<StoredType> stored_types;
  std::int64_t parameter_count = 0;
};

// Reads model.safetensors or model.safetensors.index.json from `dir`, checks every tensor's
// shape against `config` (read from `config_path`) and converts to `dtype` where needed.
// Throws luka::Error naming the file, the tensor and the problem.
LoadedWeights load_weights(const std::filesystem::path& dir, const ModelConfig& config,
                           const std::filesystem::path& config_path, DType dtype);

}  // namespace luka
