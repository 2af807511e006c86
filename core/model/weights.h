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

#include "core/gguf/ggml_types.h"
#include "core/model/config.h"
#include "core/model/dtype.h"
#include "core/model/model.h"

namespace luka {

class SafetensorsFile;
namespace gguf {
class File;
}

// A linear weight kept as GGUF blocks (WeightFormat::kQuantized): `out` rows, each
// in / block_elements blocks of `type`, as kernels/cpu/quant_gemv.h reads them. `data` points into
// the GGUF mapping (kept alive by ModelWeights::gguf) or, where rows had to be reordered, into
// `storage`. Empty (data == nullptr) when the weight is used dequantized only.
struct QuantizedMatrix {
  gguf::GgmlType type = gguf::GgmlType::kF32;
  const std::uint8_t* data = nullptr;
  std::int64_t out = 0, in = 0;
  std::uint64_t bytes = 0;
  at::Tensor storage;  // uint8 [out, row bytes] when the blocks were copied
  bool defined() const { return data != nullptr; }
};

// Linear weights are [out, in] as in Hugging Face; undefined tensors mean "no bias".
struct LayerWeights {
  at::Tensor input_norm;           // [hidden]
  at::Tensor q_proj, k_proj, v_proj, o_proj;
  at::Tensor q_bias, k_bias, v_bias, o_bias;
  at::Tensor q_norm, k_norm;       // [head_dim], qwen3 only
  at::Tensor post_attention_norm;  // [hidden]
  at::Tensor gate_proj, up_proj, down_proj;
  at::Tensor gate_bias, up_bias, down_bias;
  // The same projections as GGUF blocks, for one-row decode steps (empty unless kQuantized).
  struct Quantized {
    QuantizedMatrix q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj;
  } quantized;
};

struct ModelWeights {
  at::Tensor embed_tokens;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  at::Tensor final_norm;    // [hidden]
  at::Tensor lm_head;       // [vocab, hidden]; the same tensor as embed_tokens when tied
  QuantizedMatrix quantized_lm_head;  // the lm_head (or tied embedding) as GGUF blocks, if kQuantized
  // kQuantized: the embedding's blocks when embed_tokens is not held (rows dequantized per token).
  QuantizedMatrix quantized_embed;
  std::vector<std::shared_ptr<const SafetensorsFile>> files;  // keeps the mappings alive
  std::shared_ptr<const gguf::File> gguf;                     // ... or the GGUF mapping

  ~ModelWeights();
};

at::ScalarType to_scalar_type(DType dtype);

// Calls f(name, tensor) for every defined weight, in a fixed order, with a readable name
// ("embed_tokens", "layers.3.q_proj", ...); a tied lm_head is visited once, as embed_tokens.
template <typename W, typename F>
void for_each_weight(W& w, F&& f) {
  const auto visit = [&](const std::string& name, auto& t) {
    if (t.defined()) f(name, t);
  };
  visit("embed_tokens", w.embed_tokens);
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    auto& l = w.layers[i];
    const std::string p = "layers." + std::to_string(i) + ".";
    visit(p + "input_norm", l.input_norm);
    visit(p + "q_proj", l.q_proj);
    visit(p + "k_proj", l.k_proj);
    visit(p + "v_proj", l.v_proj);
    visit(p + "o_proj", l.o_proj);
    visit(p + "q_bias", l.q_bias);
    visit(p + "k_bias", l.k_bias);
    visit(p + "v_bias", l.v_bias);
    visit(p + "o_bias", l.o_bias);
    visit(p + "q_norm", l.q_norm);
    visit(p + "k_norm", l.k_norm);
    visit(p + "post_attention_norm", l.post_attention_norm);
    visit(p + "gate_proj", l.gate_proj);
    visit(p + "up_proj", l.up_proj);
    visit(p + "down_proj", l.down_proj);
    visit(p + "gate_bias", l.gate_bias);
    visit(p + "up_bias", l.up_bias);
    visit(p + "down_bias", l.down_bias);
  }
  visit("final_norm", w.final_norm);
  if (!w.lm_head.is_same(w.embed_tokens)) visit("lm_head", w.lm_head);
}

// Tensor names of one layer in a file format, in LayerWeights order: input_norm, q, k, v, o,
// q/k/v/o bias, q/k norm, post_attention_norm, gate, up, down, gate/up/down bias. Each name is
// prefixed with `prefix` + the layer index + ".".
struct LayerTensorNames {
  const char* prefix;
  const char* parts[18];
};

// Fills `layers` for every layer of `c` from a loader with get(name, shape) and
// get_optional(present, name, shape); shapes come from the config, Hugging Face layout.
template <typename Loader>
void load_layers(Loader& L, const ModelConfig& c, const LayerTensorNames& names, std::vector<LayerWeights>& layers) {
  const std::int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const std::int64_t q_out = c.num_heads * D, kv_out = c.num_kv_heads * D;
  layers.resize(static_cast<std::size_t>(c.num_layers));
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = layers[static_cast<std::size_t>(i)];
    const std::string p = names.prefix + std::to_string(i) + ".";
    const auto n = [&](int part) { return p + names.parts[part]; };
    l.input_norm = L.get(n(0), {H});
    l.q_proj = L.get(n(1), {q_out, H});
    l.k_proj = L.get(n(2), {kv_out, H});
    l.v_proj = L.get(n(3), {kv_out, H});
    l.o_proj = L.get(n(4), {H, q_out});
    l.q_bias = L.get_optional(c.attention_bias, n(5), {q_out});
    l.k_bias = L.get_optional(c.attention_bias, n(6), {kv_out});
    l.v_bias = L.get_optional(c.attention_bias, n(7), {kv_out});
    l.o_bias = L.get_optional(c.o_bias, n(8), {H});
    l.q_norm = L.get_optional(c.qk_norm, n(9), {D});
    l.k_norm = L.get_optional(c.qk_norm, n(10), {D});
    l.post_attention_norm = L.get(n(11), {H});
    l.gate_proj = L.get(n(12), {I, H});
    l.up_proj = L.get(n(13), {I, H});
    l.down_proj = L.get(n(14), {H, I});
    l.gate_bias = L.get_optional(c.mlp_bias, n(15), {I});
    l.up_bias = L.get_optional(c.mlp_bias, n(16), {I});
    l.down_bias = L.get_optional(c.mlp_bias, n(17), {H});
  }
}

// "BF16,F32": the stored type names, comma-separated, in the order given.
std::string stored_type_names(const std::vector<StoredType>& types);

struct LoadedWeights {
  std::unique_ptr<ModelWeights> weights;
  std::string stored_dtypes;  // e.g. "BF16" or "BF16,F32"
  std::vector<StoredType> stored_types;
  std::int64_t parameter_count = 0;
  // GGUF: bytes of the blocks WeightFormat::kQuantized keeps (whether or not it was asked for).
  std::uint64_t quantized_block_bytes = 0;
  // kQuantized: the values held as tensors beside the blocks (norms, biases, tensors of other types).
  std::int64_t unquantized_elements = 0;
};

// Reads model.safetensors or model.safetensors.index.json from `dir`, checks every tensor's
// shape against `config` (read from `config_path`) and converts to `dtype` where needed.
// Throws luka::Error naming the file, the tensor and the problem.
LoadedWeights load_weights(const std::filesystem::path& dir, const ModelConfig& config,
                           const std::filesystem::path& config_path, DType dtype);

}  // namespace luka
