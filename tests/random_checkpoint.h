// A small random Qwen3 checkpoint (3 layers, hidden 256, 4 query / 2 KV heads, head_dim 64,
// vocabulary 512, tied embeddings, fp32 safetensors) written by the test itself, for the tests
// that run the model on the GPU machines, where the Python fixtures are not made.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace luka::test {

constexpr int kRandomQwen3Layers = 3, kRandomQwen3HeadDim = 64, kRandomQwen3Vocab = 512;

// Writes config.json and model.safetensors into `dir` (a folder of the calling process: ctest runs
// tests in parallel and models map their file) unless they are there; returns dir.

// `layers`: more than the usual 3 for configs that name layers past them (mixed(8,8)).
inline std::filesystem::path write_random_qwen3(const std::filesystem::path& dir, int layers = kRandomQwen3Layers) {
  namespace fs = std::filesystem;
  const int kLayers = layers;
  constexpr int kHidden = 256, kHeads = 4, kKvHeads = 2, kHeadDim = kRandomQwen3HeadDim, kInter = 512,
                kVocab = kRandomQwen3Vocab;
  if (fs::exists(dir / "model.safetensors")) return dir;
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "attention_bias": false, "head_dim": 64, "hidden_act": "silu", "hidden_size": 256, "intermediate_size": 512,
    "max_position_embeddings": 1024, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000.0, "tie_word_embeddings": true,
    "vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32", "num_hidden_layers": )"
                                      << kLayers << "}";
  struct T {
    std::string name;
    std::vector<std::int64_t> shape;
    bool norm;
  };
  std::vector<T> tensors = {{"model.embed_tokens.weight", {kVocab, kHidden}, false}, {"model.norm.weight", {kHidden}, true}};
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    tensors.push_back({p + "input_layernorm.weight", {kHidden}, true});
    tensors.push_back({p + "post_attention_layernorm.weight", {kHidden}, true});
    tensors.push_back({p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden}, false});
    tensors.push_back({p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden}, false});
    tensors.push_back({p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden}, false});
    tensors.push_back({p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}, false});
    tensors.push_back({p + "self_attn.q_norm.weight", {kHeadDim}, true});
    tensors.push_back({p + "self_attn.k_norm.weight", {kHeadDim}, true});
    tensors.push_back({p + "mlp.gate_proj.weight", {kInter, kHidden}, false});
    tensors.push_back({p + "mlp.up_proj.weight", {kInter, kHidden}, false});
    tensors.push_back({p + "mlp.down_proj.weight", {kHidden, kInter}, false});
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::string header = "{", data;
  for (const T& t : tensors) {
    std::int64_t count = 1;
    for (auto d : t.shape) count *= d;
    const float sd = t.norm ? 0.1f : 0.6f / std::sqrt(static_cast<float>(t.shape.back()));
    std::vector<float> v(static_cast<std::size_t>(count));
    for (float& x : v) x = t.norm ? 1.0f + sd * normal(rng) : sd * normal(rng);
    const std::size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    std::string shape;
    for (std::size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(t.shape[i]);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"F32\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::ofstream f(dir / "model.safetensors", std::ios::binary);
  const std::uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << data;
  return dir;
}


}  // namespace luka::test
