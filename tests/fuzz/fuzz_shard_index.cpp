// Fuzz target for model.safetensors.index.json (core/model/shard_index.cpp): any text must give a
// TensorIndex or a luka::Error. The index is read against a scratch checkpoint folder holding two
// shards, a shard in a subfolder, a folder, a broken shard and a link leading out of the folder,
// so weight_map entries can name files that exist; every tensor found must be in a file the index
// opened, inside the folder.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/model/shard_index.h"
#include "core/util/error.h"

namespace {

namespace fs = std::filesystem;

void write_safetensors(const fs::path& path, const std::string& header, std::size_t data_bytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header + std::string(data_bytes, '\x01');
  std::ofstream(path, std::ios::binary) << bytes;
}

struct ScratchCheckpoint {
  fs::path base, dir;
  ScratchCheckpoint() {
    std::string tmpl = (fs::temp_directory_path() / "luka-fuzz-shards-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) std::abort();
    base = tmpl;
    dir = base / "checkpoint";
    fs::create_directories(dir / "sub");
    fs::create_directories(dir / "folder.safetensors");
    write_safetensors(dir / "model-00001-of-00002.safetensors",
                      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]}})", 16);
    write_safetensors(dir / "model-00002-of-00002.safetensors", R"({"c":{"dtype":"F16","shape":[3],"data_offsets":[0,6]}})", 6);
    write_safetensors(dir / "sub" / "model.safetensors", R"({"d":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}})", 1);
    write_safetensors(dir / "broken.safetensors", R"({"e":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 3);
    write_safetensors(base / "outside.safetensors", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
    fs::create_symlink(base / "outside.safetensors", dir / "link.safetensors");
  }
  ~ScratchCheckpoint() {
    std::error_code ec;
    fs::remove_all(base, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ScratchCheckpoint scratch;
  try {
    const fs::path index = scratch.dir / "model.safetensors.index.json";
    const luka::TensorIndex tensors =
        luka::TensorIndex::from_index_text(scratch.dir, std::string(reinterpret_cast<const char*>(data), size), index);
    const fs::path base = fs::canonical(scratch.dir);
    for (const auto& file : tensors.files()) {
      const fs::path real = fs::canonical(file->path());
      if (real.string().rfind(base.string() + "/", 0) != 0) std::abort();
      for (const auto& [name, t] : file->tensors())
        if (tensors.find(name).first && tensors.find(name).second->name != name) std::abort();
    }
  } catch (const luka::Error&) {
    // Rejected cleanly: the expected outcome for most inputs.
  }
  return 0;
}
