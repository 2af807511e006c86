// The safetensors format, parsed in one place: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the raw tensor bytes. The file stays
// memory-mapped; tensors point into the map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/util/mapped_file.h"

namespace luka {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;                // as in the header: "F32", "BF16", "F16", ...
  std::vector<std::int64_t> shape;
  const std::uint8_t* data = nullptr;  // into the mapping
  std::size_t nbytes = 0;
};

// Bytes per element of a safetensors dtype name; 0 for unknown names.
std::size_t safetensors_dtype_size(const std::string& dtype);

class SafetensorsFile {
 public:
  // Maps and validates the whole header (offsets inside the file, sizes matching shapes).
  // Throws luka::Error naming the path, the tensor and the problem.
  explicit SafetensorsFile(const std::filesystem::path& path);

  // Parses a safetensors image already in memory (the fuzz target uses this); `bytes` must
  // outlive the result, whose path() is empty. `where` names it in errors.
  static SafetensorsFile parse(const std::uint8_t* bytes, std::size_t size, const std::string& where);

  const std::filesystem::path& path() const { return file_.path(); }
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  // nullptr when absent.
  const SafetensorsTensor* find(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  void parse_header(const std::uint8_t* bytes, std::size_t size, const std::string& where);

  MappedFile file_;
  std::map<std::string, SafetensorsTensor> tensors_;
};

}  // namespace luka
