// Model configuration read from a Hugging Face config.json (docs/design.md §3). One decoder serves
// every architecture; the differences are the flags here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace luka {

enum class Architecture { kQwen3, kLlama, kQwen2 };
const char* to_string(Architecture arch);

struct RopeConfig {
  std::string type = "default";  // "default", "linear", "llama3"
  double theta = 10000.0;
  double factor = 1.0;                       // linear, llama3
  double low_freq_factor = 1.0;              // llama3
  double high_freq_factor = 4.0;             // llama3
  std::int64_t original_max_position = 8192; // llama3
};

struct ModelConfig {
  Architecture arch = Architecture::kQwen3;
  std::string model_type;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  bool tie_word_embeddings = false;
  bool qk_norm = false;         // qwen3: RMSNorm over head_dim on q and k, before RoPE
  bool attention_bias = false;  // q/k/v bias (qwen2 always; llama/qwen3 from config)
  bool o_bias = false;          // o_proj bias: llama/qwen3 follow attention_bias, qwen2 never
  bool mlp_bias = false;
  std::string torch_dtype;      // as stored ("bfloat16", "float32", ...), may be empty
  std::optional<std::int64_t> bos_token_id;
  std::vector<std::int64_t> eos_token_ids;

  // Throws luka::Error naming the file and the missing or malformed field.
  static ModelConfig from_json_file(const std::filesystem::path& path);
  // The same for a config.json's text; `where` names it in errors.
  static ModelConfig from_json_text(const std::string& text, const std::string& where);
};

}  // namespace luka
