#include "core/model/shard_index.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka {

std::filesystem::path shard_in_folder(const std::filesystem::path& dir, const std::string& shard, const std::string& where,
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

TensorIndex TensorIndex::open(const std::filesystem::path& dir) {
  const auto single = dir / "model.safetensors";
  const auto index = dir / "model.safetensors.index.json";
  // transformers loads model.safetensors when both are there and ignores the index; which one a
  // folder means is not ours to guess, and loading the other silently runs different weights.
  if (std::filesystem::exists(index) && std::filesystem::exists(single))
    fail(dir.string(), "holds both model.safetensors and a shard index (model.safetensors.index.json); transformers would "
                       "load model.safetensors and ignore the shards: remove the one that is not this model's weights");
  if (std::filesystem::exists(index)) return from_index_text(dir, read_text_file(index, "shard index"), index);
  if (!std::filesystem::exists(single))
    fail(dir.string(), "no model.safetensors or model.safetensors.index.json in the checkpoint folder");
  TensorIndex out;
  auto file = std::make_shared<const SafetensorsFile>(single);
  out.files_.push_back(file);
  for (const auto& [name, t] : file->tensors()) out.entries_[name] = {file.get(), &t};
  return out;
}

TensorIndex TensorIndex::from_index_text(const std::filesystem::path& dir, const std::string& text,
                                         const std::filesystem::path& index) {
  const std::string where = index.string();
  const nlohmann::json j = parse_json_text(text, where, "shard index");
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(where, "missing field 'weight_map' (expected an object of tensor name -> file)");
  TensorIndex out;
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> by_name;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) fail(where, "weight_map entry '" + it.key() + "' is not a file name");
    const std::string shard = it.value().get<std::string>();
    auto found = by_name.find(shard);
    if (found == by_name.end()) {
      auto file = std::make_shared<const SafetensorsFile>(shard_in_folder(dir, shard, where, it.key()));
      out.files_.push_back(file);
      found = by_name.emplace(shard, file).first;
    }
    const SafetensorsTensor* t = found->second->find(it.key());
    if (!t) fail(found->second->path().string(), "tensor '" + it.key() + "' listed in " + index.filename().string() + " is missing");
    out.entries_[it.key()] = {found->second.get(), t};
  }
  return out;
}

std::pair<const SafetensorsFile*, const SafetensorsTensor*> TensorIndex::find(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return {nullptr, nullptr};
  return it->second;
}

}  // namespace luka
