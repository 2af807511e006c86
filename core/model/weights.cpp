#include "core/model/weights.h"

#include <algorithm>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/model/safetensors.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

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

// Where each tensor name lives, over one or many shards.
class TensorIndex {
 public:
  explicit TensorIndex(const std::filesystem::path& dir) {
    const auto single = dir / "model.safetensors";
    const auto index = dir / "model.safetensors.index.json";
    if (std::filesystem::exists(index)) {
      read_index(dir, index);
    } else if (std::filesystem::exists(single)) {
      auto file = std::make_shared<const SafetensorsFile>(single);
      files_.push_back(file);
      for (const auto& [name, t] : file->tensors()) entries_[name] = {file.get(), &t};
    } else {
      fail(dir.string(), "no model.safetensors or model.safetensors.index.json in the checkpoint folder");
    }
  }

  // nullptr-safe lookup: {file, tensor} or {nullptr, nullptr}.
  std::pair<const SafetensorsFile*, const SafetensorsTensor*> find(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) return {nullptr, nullptr};
    return it->second;
  }
  const std::vector<std::shared_ptr<const SafetensorsFile>>& files() const { return files_; }
  const std::string& where() const { return where_; }

 private:
  // A shard the index names: a plain file inside the checkpoint folder. Absolute paths, "..",
  // links leading out of the folder, and anything but a regular file (a FIFO would block the load
  // forever) are refused without being opened.
  static std::filesystem::path shard_in_folder(const std::filesystem::path& dir, const std::string& shard, const std::string& where,
                                               const std::string& tensor) {
    namespace fs = std::filesystem;
    const fs::path rel(shard);
    const auto refuse = [&](const std::string& why) {
      fail(where, "weight_map entry '" + shard + "' (for tensor '" + tensor + "') " + why);
    };
    if (shard.empty() || rel.is_absolute() || rel.has_root_name()) refuse("must be a file name inside the checkpoint folder");
    for (const auto& part : rel)
      if (part == "..") refuse("must be a file name inside the checkpoint folder (no '..')");
    const fs::path path = dir / rel;
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) fail(where, "weight_map names missing file '" + shard + "' (for tensor '" + tensor + "')");
    if (!fs::is_regular_file(st)) refuse("is not a regular file");
    const fs::path real = fs::canonical(path, ec), base = fs::canonical(dir, ec);
    if (ec) refuse("cannot be resolved");
    const auto mismatch = std::mismatch(base.begin(), base.end(), real.begin(), real.end());
    if (mismatch.first != base.end()) refuse("leads outside the checkpoint folder");
    return path;
  }

  void read_index(const std::filesystem::path& dir, const std::filesystem::path& index) {
    const std::string where = index.string();
    const nlohmann::json j = read_json_file(index, "shard index");
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      fail(where, "missing field 'weight_map' (expected an object of tensor name -> file)");
    std::map<std::string, std::shared_ptr<const SafetensorsFile>> by_name;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) fail(where, "weight_map entry '" + it.key() + "' is not a file name");
      const std::string shard = it.value().get<std::string>();
      auto found = by_name.find(shard);
      if (found == by_name.end()) {
        const auto shard_path = shard_in_folder(dir, shard, where, it.key());
        auto file = std::make_shared<const SafetensorsFile>(shard_path);
        files_.push_back(file);
        found = by_name.emplace(shard, file).first;
      }
      const SafetensorsTensor* t = found->second->find(it.key());
      if (!t) fail(found->second->path().string(), "tensor '" + it.key() + "' listed in " + index.filename().string() + " is missing");
      entries_[it.key()] = {found->second.get(), t};
    }
  }

  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, std::pair<const SafetensorsFile*, const SafetensorsTensor*>> entries_;
  std::string where_;
};

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
  TensorIndex index(dir);
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
