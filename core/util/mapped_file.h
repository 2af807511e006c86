// A read-only memory map of a whole file (RAII). Weights are read through these, so loading a
// checkpoint costs page faults rather than copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace luka {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws luka::Error naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void release();
  std::filesystem::path path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace luka
