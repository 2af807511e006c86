// Where each tensor of a safetensors checkpoint lives: model.safetensors alone, or the shards that
// model.safetensors.index.json maps tensor names to. No LibTorch: the weight loader (weights.cpp)
// builds on it, and the fuzz target reads an index without a model.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/model/safetensors.h"

namespace luka {

class TensorIndex {
 public:
  // Reads model.safetensors.index.json (and the shards it names) or model.safetensors from `dir`.
  // Throws luka::Error naming the file and the problem.
  static TensorIndex open(const std::filesystem::path& dir);

  // The index whose text is `text`, read from `index` (a file in `dir`, named in messages); its
  // shards are opened from `dir`.
  static TensorIndex from_index_text(const std::filesystem::path& dir, const std::string& text,
                                     const std::filesystem::path& index);

  // {file, tensor}, or {nullptr, nullptr} when no file holds `name`.
  std::pair<const SafetensorsFile*, const SafetensorsTensor*> find(const std::string& name) const;
  const std::vector<std::shared_ptr<const SafetensorsFile>>& files() const { return files_; }

 private:
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, std::pair<const SafetensorsFile*, const SafetensorsTensor*>> entries_;
};

// A shard the index names, as a path in `dir`: a plain file inside the checkpoint folder. Absolute
// paths, "..", links leading out of the folder, and anything but a regular file (a FIFO would
// block the load forever) are refused without being opened; `where` (the index) and `tensor` are
// named in the message.
std::filesystem::path shard_in_folder(const std::filesystem::path& dir, const std::string& shard,
                                      const std::string& where, const std::string& tensor);

}  // namespace luka
