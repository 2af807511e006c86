#include "core/model/gguf_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "core/util/error.h"

namespace luka {

namespace {

std::int64_t positive(const gguf::File& f, const std::string& key, std::optional<std::int64_t> fallback = std::nullopt) {
  const auto v = f.get_int_or(key);
  if (!v && !fallback) fail(f.where(), "GGUF: missing metadata '" + key + "'");
  const std::int64_t x = v ? *v : *fallback;
  if (x <= 0) fail(f.where(), "GGUF: metadata '" + key + "' must be positive, got " + std::to_string(x));
  return x;
}

}  // namespace

ModelConfig config_from_gguf(const gguf::File& f) {
  const std::string where = f.where();
  ModelConfig c;
  const std::string arch = f.get_string("general.architecture");
  if (arch == "qwen3") {
    c.arch = Architecture::kQwen3;
  } else if (arch == "llama") {
    c.arch = Architecture::kLlama;
  } else if (arch == "qwen2") {
    c.arch = Architecture::kQwen2;
  } else {
    fail(where, "GGUF: unsupported general.architecture '" + arch + "' (supported: llama, qwen2, qwen3)");
  }
  c.model_type = arch;
  const std::string a = arch + ".";
  c.hidden_size = positive(f, a + "embedding_length");
  c.intermediate_size = positive(f, a + "feed_forward_length");
  c.num_layers = positive(f, a + "block_count");
  // The model is sized by the count before any block's tensor is looked up: a count past the
  // file's blocks (2^40) would allocate first and fail as out of memory, naming neither.
  std::int64_t blocks = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    const long long i = t.name.rfind("blk.", 0) == 0 ? std::strtoll(t.name.c_str() + 4, nullptr, 10) : -1;
    if (i >= 0 && i < (1LL << 30)) blocks = std::max<std::int64_t>(blocks, i + 1);
  }
  // (One block is allowed without tensors, for the missing-tensor message that names the first.)
  if (c.num_layers > std::max<std::int64_t>(blocks, 1))
    fail(where, "GGUF: metadata '" + a + "block_count' is " + std::to_string(c.num_layers) + ", but the file has tensors for " +
                    std::to_string(blocks) + " blocks");
  c.num_heads = positive(f, a + "attention.head_count");
  c.num_kv_heads = positive(f, a + "attention.head_count_kv", c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    fail(where, "GGUF: attention.head_count " + std::to_string(c.num_heads) + " is not a multiple of head_count_kv " +
                    std::to_string(c.num_kv_heads));
  if (!f.get_int_or(a + "attention.key_length") && c.hidden_size % c.num_heads != 0)
    fail(where, "GGUF: no attention.key_length and embedding_length is not a multiple of head_count");
  c.head_dim = positive(f, a + "attention.key_length", c.hidden_size / c.num_heads);
  if (const auto v = f.get_int_or(a + "attention.value_length"); v && *v != c.head_dim)
    fail(where, "GGUF: attention.value_length " + std::to_string(*v) + " differs from key_length " +
                    std::to_string(c.head_dim) + " (not supported)");
  if (c.head_dim % 2 != 0) fail(where, "GGUF: head dimension " + std::to_string(c.head_dim) + " must be even for RoPE");
  if (const auto r = f.get_int_or(a + "rope.dimension_count"); r && *r != c.head_dim)
    fail(where, "GGUF: rope.dimension_count " + std::to_string(*r) + " differs from the head dimension " +
                    std::to_string(c.head_dim) + " (partial rotary embeddings are not supported)");
  const gguf::TensorInfo* embed = f.find_tensor("token_embd.weight");
  if (!embed || embed->dims.size() != 2) fail(where, "GGUF: missing 2-D tensor 'token_embd.weight'");
  c.vocab_size = positive(f, a + "vocab_size", embed->dims[1]);
  c.max_position_embeddings = positive(f, a + "context_length");
  c.rms_norm_eps = f.get_float(a + "attention.layer_norm_rms_epsilon");
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps))
    fail(where, "GGUF: metadata '" + a + "attention.layer_norm_rms_epsilon' must be a finite positive number");
  // A NaN or negative base gives NaN rotations, and every logit NaN, long after loading.
  c.rope.theta = f.get_float_or(a + "rope.freq_base").value_or(10000.0);
  if (!(c.rope.theta > 0) || !std::isfinite(c.rope.theta))
    fail(where, "GGUF: metadata '" + a + "rope.freq_base' must be a finite positive number, got " + std::to_string(c.rope.theta));
  const std::string scaling = f.get_string_or(a + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    c.rope.type = "linear";
    c.rope.factor = f.get_float(a + "rope.scaling.factor");
    if (!(c.rope.factor > 0) || !std::isfinite(c.rope.factor))
      fail(where, "GGUF: metadata '" + a + "rope.scaling.factor' must be a finite positive number, got " + std::to_string(c.rope.factor));
  } else if (scaling != "none") {
    fail(where, "GGUF: rope.scaling.type '" + scaling + "' is not supported (supported: none, linear)");
  }
  if (f.find_tensor("rope_freqs.weight"))
    fail(where, "GGUF: per-frequency RoPE factors (rope_freqs.weight, llama3 scaling) are not supported");
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;

  c.qk_norm = c.arch == Architecture::kQwen3;
  c.attention_bias = c.arch == Architecture::kQwen2 || f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.o_bias = f.find_tensor("blk.0.attn_output.bias") != nullptr;
  c.mlp_bias = f.find_tensor("blk.0.ffn_gate.bias") != nullptr;
  if (c.arch == Architecture::kLlama && c.attention_bias)
    fail(where, "GGUF: q/k/v biases in a llama file are not supported");

  if (const auto bos = f.get_int_or("tokenizer.ggml.bos_token_id")) c.bos_token_id = *bos;
  if (const auto eos = f.get_int_or("tokenizer.ggml.eos_token_id")) c.eos_token_ids.push_back(*eos);
  return c;
}

}  // namespace luka
