#include "core/model/config.h"

#include <cmath>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka {

const char* to_string(Architecture arch) {
  switch (arch) {
    case Architecture::kQwen3: return "qwen3";
    case Architecture::kLlama: return "llama";
    case Architecture::kQwen2: return "qwen2";
  }
  return "?";
}

namespace {

using nlohmann::json;

// Readers that name the file and the field on every failure.
class Fields {
 public:
  Fields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  std::int64_t int_(const char* key) const {
    if (!has(key)) fail(where_, std::string("missing field '") + key + "' (expected an integer)");
    return as_int(j_.at(key), key);
  }
  std::int64_t int_or(const char* key, std::int64_t fallback) const {
    return has(key) ? as_int(j_.at(key), key) : fallback;
  }
  std::int64_t positive(const char* key) const {
    const std::int64_t v = int_(key);
    if (v <= 0) fail(where_, std::string("field '") + key + "' must be positive, got " + std::to_string(v));
    return v;
  }
  double number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    return as_number(j_.at(key), key);
  }
  bool bool_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_boolean()) fail(where_, std::string("field '") + key + "' must be true or false");
    return j_.at(key).get<bool>();
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_string()) fail(where_, std::string("field '") + key + "' must be a string");
    return j_.at(key).get<std::string>();
  }
  std::int64_t as_int(const json& v, const std::string& key) const {
    if (!v.is_number_integer()) fail(where_, "field '" + key + "' must be an integer, got " + v.dump());
    return v.get<std::int64_t>();
  }
  double as_number(const json& v, const std::string& key) const {
    if (!v.is_number()) fail(where_, "field '" + key + "' must be a number, got " + v.dump());
    return v.get<double>();
  }
  const std::string& where() const { return where_; }

 private:
  const json& j_;
  std::string where_;
};

void read_rope(const json& root, const Fields& f, RopeConfig& rope) {
  const std::string& where = f.where();
  // transformers >= 5 folds theta and scaling into rope_parameters.
  const json* params = nullptr;
  if (f.has("rope_parameters")) {
    params = &root.at("rope_parameters");
    if (!params->is_object()) fail(where, "field 'rope_parameters' must be an object");
  }
  const json* scaling = nullptr;
  if (f.has("rope_scaling")) {
    scaling = &root.at("rope_scaling");
    if (!scaling->is_object()) fail(where, "field 'rope_scaling' must be an object or null");
  }
  if (f.has("rope_theta")) {
    rope.theta = f.number_or("rope_theta", rope.theta);
  } else if (params && params->contains("rope_theta")) {
    rope.theta = f.as_number(params->at("rope_theta"), "rope_parameters.rope_theta");
  }
  if (!(rope.theta > 0) || !std::isfinite(rope.theta)) fail(where, "field 'rope_theta' must be a finite positive number");

  const json* s = scaling ? scaling : params;
  if (!s) return;
  const std::string prefix = scaling ? "rope_scaling." : "rope_parameters.";
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    if (s->contains(key) && s->at(key).is_string()) {
      type = s->at(key).get<std::string>();
      break;
    }
  }
  // The fields transformers requires of each type (modeling_rope_utils: _validate_linear_scaling_
  // rope_parameters, _validate_llama3_parameters raise KeyError without them); a default made up
  // here would run a model its authors did not describe.
  auto number = [&](const char* key) {
    if (!s->contains(key) || s->at(key).is_null())
      fail(where, "missing field '" + prefix + key + "' (rope_type '" + type + "' requires " +
                      (type == "linear" ? std::string("factor")
                                        : std::string("factor, low_freq_factor, high_freq_factor and original_max_position_embeddings")) +
                      ", as transformers does)");
    const double v = f.as_number(s->at(key), prefix + key);
    if (!std::isfinite(v)) fail(where, "field '" + prefix + key + "' must be a finite number");
    return v;
  };
  if (type == "default") {
    rope.type = type;
  } else if (type == "linear") {
    rope.type = type;
    rope.factor = number("factor");
  } else if (type == "llama3") {
    rope.type = type;
    rope.factor = number("factor");
    rope.low_freq_factor = number("low_freq_factor");
    rope.high_freq_factor = number("high_freq_factor");
    // Checked before the conversion: a double past int64's range does not convert (undefined behaviour).
    const double original = number("original_max_position_embeddings");
    if (!(original >= 1 && original < 0x1p63))
      fail(where, prefix + "original_max_position_embeddings must be a positive number of positions, got " +
                      s->at("original_max_position_embeddings").dump());
    rope.original_max_position = static_cast<std::int64_t>(original);
    if (rope.high_freq_factor == rope.low_freq_factor)
      fail(where, prefix + "high_freq_factor must differ from low_freq_factor");
  } else {
    fail(where, "unsupported " + prefix + "rope_type '" + type + "' (supported: default, linear, llama3)");
  }
  if (!(rope.factor > 0)) fail(where, prefix + "factor must be positive");
}

}  // namespace

ModelConfig ModelConfig::from_json_file(const std::filesystem::path& path) {
  return from_json_text(read_text_file(path, "config file"), path.string());
}

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& where) {
  const json root = parse_json_text(text, where, "config file");
  if (!root.is_object()) fail(where, "expected a JSON object");
  Fields f(root, where);

  ModelConfig c;
  c.model_type = f.string_or("model_type", "");
  if (c.model_type == "qwen3") {
    c.arch = Architecture::kQwen3;
  } else if (c.model_type == "llama") {
    c.arch = Architecture::kLlama;
  } else if (c.model_type == "qwen2") {
    c.arch = Architecture::kQwen2;
  } else if (c.model_type.empty()) {
    fail(where, "missing field 'model_type' (expected qwen3, llama or qwen2)");
  } else {
    fail(where, "unsupported model_type '" + c.model_type + "' (expected qwen3, llama or qwen2)");
  }

  c.hidden_size = f.positive("hidden_size");
  c.intermediate_size = f.positive("intermediate_size");
  c.num_layers = f.positive("num_hidden_layers");
  c.num_heads = f.positive("num_attention_heads");
  c.num_kv_heads = f.int_or("num_key_value_heads", c.num_heads);
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0)
    fail(where, "num_attention_heads " + std::to_string(c.num_heads) +
                    " is not a multiple of num_key_value_heads " + std::to_string(c.num_kv_heads));
  if (f.has("head_dim")) {
    c.head_dim = f.positive("head_dim");
  } else {
    if (c.hidden_size % c.num_heads != 0)
      fail(where, "missing field 'head_dim' and hidden_size is not a multiple of num_attention_heads");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) fail(where, "field 'head_dim' must be even for RoPE, got " + std::to_string(c.head_dim));
  c.vocab_size = f.positive("vocab_size");
  c.max_position_embeddings = f.positive("max_position_embeddings");
  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6);
  // eps <= 0 divides by zero on a zero row and turns every logit into NaN downstream.
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps))
    fail(where, "field 'rms_norm_eps' must be a positive number, got " + std::to_string(c.rms_norm_eps));
  read_rope(root, f, c.rope);
  c.tie_word_embeddings = f.bool_or("tie_word_embeddings", false);

  const std::string act = f.string_or("hidden_act", "silu");
  if (act != "silu") fail(where, "unsupported hidden_act '" + act + "' (expected silu)");

  c.qk_norm = c.arch == Architecture::kQwen3;
  switch (c.arch) {
    case Architecture::kQwen2:
      c.attention_bias = true;  // Qwen2 always has q/k/v bias
      c.mlp_bias = false;
      if (f.bool_or("use_sliding_window", false))
        fail(where, "use_sliding_window=true is not supported");
      break;
    case Architecture::kLlama:
      c.attention_bias = f.bool_or("attention_bias", false);
      c.o_bias = c.attention_bias;
      c.mlp_bias = f.bool_or("mlp_bias", false);
      break;
    case Architecture::kQwen3:
      c.attention_bias = f.bool_or("attention_bias", false);
      c.o_bias = c.attention_bias;
      c.mlp_bias = false;
      if (f.bool_or("use_sliding_window", false))
        fail(where, "use_sliding_window=true is not supported");
      break;
  }

  c.torch_dtype = f.string_or("torch_dtype", f.string_or("dtype", ""));
  if (f.has("bos_token_id")) c.bos_token_id = f.int_("bos_token_id");
  if (f.has("eos_token_id")) {
    const json& e = root.at("eos_token_id");
    if (e.is_array()) {
      for (const json& v : e) c.eos_token_ids.push_back(f.as_int(v, "eos_token_id[]"));
    } else {
      c.eos_token_ids.push_back(f.as_int(e, "eos_token_id"));
    }
  }
  return c;
}

}  // namespace luka
