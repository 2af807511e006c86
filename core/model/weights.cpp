#include "core/model/weights.h"

#include <map>
#include <sstream>

#include "core/model/safetensors.h"
#include "core/model/shard_index.h"
#include "core/util/error.h"

namespace luka {

ModelWeights::~ModelWeights() = default;

at::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return at::kFloat;
    case DType::kBF16: return at::kBFloat16;
    case DType::kF16: return at::kHalf;
  }
  return at::kFloat;
}

namespace {

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::ostringstream s;
  s << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

class Loader {
 public:
  Loader(const TensorIndex& index, const std::filesystem::path& dir, const std::filesystem::path& config_path,
         DType dtype)
      : index_(index), dir_(dir), config_path_(config_path), dtype_(to_scalar_type(dtype)) {}

  bool has(const std::string& name) const { return index_.find(name).second != nullptr; }

  at::Tensor get(const std::string& name, const std::vector<std::int64_t>& shape) {
    auto [file, t] = index_.find(name);
    if (!t) fail(dir_.string(), "checkpoint lacks tensor '" + name + "' (expected shape " + shape_string(shape) + ")");
    const std::string where = file->path().string() + ": tensor '" + name + "'";
    at::ScalarType stored;
    if (t->dtype == "F32") {
      stored = at::kFloat;
    } else if (t->dtype == "BF16") {
      stored = at::kBFloat16;
    } else if (t->dtype == "F16") {
      stored = at::kHalf;
    } else {
      fail(where, "dtype " + t->dtype + " is not supported (expected F32, BF16 or F16)");
    }
    if (t->shape != shape)
      fail(where, "shape " + shape_string(t->shape) + " does not match " + shape_string(shape) + " expected from " +
                      config_path_.string());
    std::int64_t numel = 1;
    for (auto d : shape) numel *= d;
    params_ += numel;
    const std::size_t elem = safetensors_dtype_size(t->dtype);
    StoredType& usage = usage_[t->dtype];
    usage.name = t->dtype;
    usage.tensors += 1;
    usage.elements += numel;
    usage.bytes += static_cast<std::uint64_t>(numel) * elem;
    // The mapping is read-only; these tensors are never written (the decoder only reads weights).
    void* ptr = const_cast<std::uint8_t*>(t->data);
    at::Tensor view = at::from_blob(ptr, shape, at::TensorOptions().dtype(stored));
    if (reinterpret_cast<std::uintptr_t>(ptr) % elem != 0) view = view.clone();  // misaligned: copy
    if (stored == dtype_) return view;
    return view.to(dtype_);
  }

  at::Tensor get_optional(bool present, const std::string& name, const std::vector<std::int64_t>& shape) {
    return present ? get(name, shape) : at::Tensor();
  }

  std::int64_t params() const { return params_; }
  std::vector<StoredType> usage() const {
    std::vector<StoredType> out;
    for (const auto& [name, u] : usage_) out.push_back(u);
    return out;
  }

 private:
  std::map<std::string, StoredType> usage_;
  const TensorIndex& index_;
  std::filesystem::path dir_, config_path_;
  at::ScalarType dtype_;
  std::int64_t params_ = 0;
};

}  // namespace

std::string stored_type_names(const std::vector<StoredType>& types) {
  std::string s;
  for (const StoredType& t : types) s += (s.empty() ? "" : ",") + t.name;
  return s;
}

LoadedWeights load_weights(const std::filesystem::path& dir, const ModelConfig& c,
                           const std::filesystem::path& config_path, DType dtype) {
  const TensorIndex index = TensorIndex::open(dir);
  Loader L(index, dir, config_path, dtype);
  auto w = std::make_unique<ModelWeights>();
  const std::int64_t H = c.hidden_size;
  w->embed_tokens = L.get("model.embed_tokens.weight", {c.vocab_size, H});
  static const LayerTensorNames kNames = {
      "model.layers.",
      {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
       "self_attn.o_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
       "self_attn.o_proj.bias", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
       "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
       "mlp.gate_proj.bias", "mlp.up_proj.bias", "mlp.down_proj.bias"}};
  load_layers(L, c, kNames, w->layers);
  w->final_norm = L.get("model.norm.weight", {H});
  if (c.tie_word_embeddings) {
    w->lm_head = w->embed_tokens;  // Hugging Face ties them even when lm_head.weight is stored
  } else {
    w->lm_head = L.get("lm_head.weight", {c.vocab_size, H});
  }
  w->files = index.files();

  LoadedWeights out;
  out.stored_types = L.usage();
  out.stored_dtypes = stored_type_names(out.stored_types);
  out.parameter_count = L.params();
  out.weights = std::move(w);
  return out;
}

}  // namespace luka
