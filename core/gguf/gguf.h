// GGUF files (llama.cpp's model format, versions 2 and 3): header, metadata key/values of every
// type, tensor infos and the memory-mapped tensor data. No LibTorch here: the tokenizer reads its
// vocabulary from GGUF metadata too.
//
// Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata count, the
// metadata (string key, u32 value type, value), the tensor infos (string name, u32 n_dims,
// u64 dims[n_dims] innermost first, u32 ggml type, u64 offset), padding to `general.alignment`
// (default 32), then the tensor data; each offset is relative to the start of that data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf/ggml_types.h"
#include "core/util/mapped_file.h"

namespace luka::gguf {

enum class ValueType : std::uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* to_string(ValueType type);

// One metadata value. Scalars: integers of every width in `i` (u64 values above INT64_MAX keep
// their bits), floats in `f`, booleans in `b`, strings in `s`. Arrays (type kArray) keep their
// elements compactly by `element_type`: integers and booleans in `ints`, floats in `floats`,
// strings in `strings`, nested arrays in `arrays`.
struct Value {
  ValueType type = ValueType::kU8;
  std::int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  ValueType element_type = ValueType::kU8;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::vector<Value> arrays;

  std::size_t size() const;  // number of array elements
  std::string describe() const;  // "u32", "array of string", ...
};

struct TensorInfo {
  std::string name;
  std::vector<std::int64_t> dims;  // GGUF order: dims[0] is the innermost (contiguous) axis
  GgmlType type = GgmlType::kF32;
  std::uint64_t offset = 0;        // from the start of the tensor data
  std::int64_t elements = 0;
  std::uint64_t bytes = 0;
  const std::uint8_t* data = nullptr;  // into the mapping
};

class File {
 public:
  // Maps and parses `path`. Throws luka::Error naming the file and the problem for anything
  // malformed: bad magic or version, truncation, unknown value or tensor types, sizes that do
  // not fit the file.
  static std::shared_ptr<const File> open(const std::filesystem::path& path);

  // Parses a GGUF image already in memory (the fuzz target and tests use this); `bytes` must
  // outlive the result. `where` names it in errors.
  static std::shared_ptr<const File> parse(const std::uint8_t* bytes, std::size_t size, const std::string& where);

  // True when the file at `path` starts with the GGUF magic.
  static bool has_magic(const std::filesystem::path& path);

  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  const std::filesystem::path& path() const { return path_; }
  const std::string& where() const { return where_; }

  const std::map<std::string, Value>& metadata() const { return metadata_; }
  const Value* find(const std::string& key) const;
  // Typed getters: throw naming the key when it is missing or has another type. The integer
  // getters accept any integer type whose value fits.
  std::int64_t get_int(const std::string& key) const;
  std::optional<std::int64_t> get_int_or(const std::string& key) const;
  double get_float(const std::string& key) const;  // f32 or f64
  std::optional<double> get_float_or(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::optional<std::string> get_string_or(const std::string& key) const;
  std::optional<bool> get_bool_or(const std::string& key) const;
  // An array of `element_type`; nullptr when the key is absent, an error for another type.
  const Value* get_array_or(const std::string& key, ValueType element_type) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // Bytes before the tensor data: header, metadata, tensor infos and alignment padding.
  std::uint64_t header_bytes() const { return header_bytes_; }
  const TensorInfo* find_tensor(const std::string& name) const;

 private:
  File() = default;
  void parse_all(const std::uint8_t* bytes, std::size_t size);

  MappedFile mapping_;
  std::filesystem::path path_;
  std::string where_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::uint64_t header_bytes_ = 0;
  std::map<std::string, Value> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t> tensor_index_;
};

}  // namespace luka::gguf
