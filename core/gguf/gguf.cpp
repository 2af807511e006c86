#include "core/gguf/gguf.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include "core/util/error.h"

namespace luka::gguf {

namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxArrayDepth = 8;
constexpr std::uint32_t kMaxDims = 4;

bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kU16: case ValueType::kI16:
    case ValueType::kU32: case ValueType::kI32: case ValueType::kU64: case ValueType::kI64:
      return true;
    default:
      return false;
  }
}

bool is_known(std::uint32_t raw) { return raw <= static_cast<std::uint32_t>(ValueType::kF64); }

// Bounds-checked little-endian reads over the header; every failure names the file and what
// was being read.
class Cursor {
 public:
  Cursor(const std::uint8_t* data, std::size_t size, const std::string& where)
      : data_(data), size_(size), where_(where) {}

  std::size_t pos() const { return pos_; }
  std::size_t remaining() const { return size_ - pos_; }

  void need(std::size_t n, const std::string& what) const {
    if (n > remaining())
      fail(where_, "GGUF: truncated header while reading " + what + " at byte " + std::to_string(pos_) + " (needs " +
                       std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left)");
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what) {
    const std::uint64_t n = read<std::uint64_t>(what + " length");
    if (n > remaining())
      fail(where_, "GGUF: " + what + " claims " + std::to_string(n) + " bytes at byte " + std::to_string(pos_) +
                       " but only " + std::to_string(remaining()) + " remain");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  const std::string& where_;
};

// Smallest encoding of one element of `t` (used to reject counts the file cannot hold).
std::size_t min_bytes(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kBool: return 1;
    case ValueType::kU16: case ValueType::kI16: return 2;
    case ValueType::kU32: case ValueType::kI32: case ValueType::kF32: return 4;
    case ValueType::kString: case ValueType::kU64: case ValueType::kI64: case ValueType::kF64: return 8;
    case ValueType::kArray: return 12;
  }
  return 1;
}

std::int64_t read_integer(Cursor& c, ValueType t, const std::string& what) {
  switch (t) {
    case ValueType::kU8: return c.read<std::uint8_t>(what);
    case ValueType::kI8: return c.read<std::int8_t>(what);
    case ValueType::kU16: return c.read<std::uint16_t>(what);
    case ValueType::kI16: return c.read<std::int16_t>(what);
    case ValueType::kU32: return c.read<std::uint32_t>(what);
    case ValueType::kI32: return c.read<std::int32_t>(what);
    case ValueType::kU64: return static_cast<std::int64_t>(c.read<std::uint64_t>(what));
    case ValueType::kI64: return c.read<std::int64_t>(what);
    default: return 0;
  }
}

bool read_bool(Cursor& c, const std::string& where, const std::string& what) {
  const std::uint8_t v = c.read<std::uint8_t>(what);
  if (v > 1) fail(where, "GGUF: " + what + " is a bool with byte value " + std::to_string(v));
  return v == 1;
}

Value read_value(Cursor& c, ValueType type, const std::string& where, const std::string& what, int depth) {
  Value v;
  v.type = type;
  if (is_integer(type)) {
    v.i = read_integer(c, type, what);
  } else if (type == ValueType::kF32) {
    v.f = c.read<float>(what);
  } else if (type == ValueType::kF64) {
    v.f = c.read<double>(what);
  } else if (type == ValueType::kBool) {
    v.b = read_bool(c, where, what);
  } else if (type == ValueType::kString) {
    v.s = c.string(what);
  } else {  // array
    if (depth >= kMaxArrayDepth) fail(where, "GGUF: " + what + " nests arrays deeper than " + std::to_string(kMaxArrayDepth));
    const std::uint32_t raw = c.read<std::uint32_t>(what + " element type");
    if (!is_known(raw)) fail(where, "GGUF: " + what + " has unknown array element type " + std::to_string(raw));
    v.element_type = static_cast<ValueType>(raw);
    const std::uint64_t n = c.read<std::uint64_t>(what + " element count");
    if (n > c.remaining() / min_bytes(v.element_type))
      fail(where, "GGUF: " + what + " claims " + std::to_string(n) + " elements, more than the " +
                      std::to_string(c.remaining()) + " remaining bytes can hold");
    const std::size_t count = static_cast<std::size_t>(n);
    const ValueType et = v.element_type;
    if (is_integer(et)) {
      v.ints.resize(count);
      for (std::size_t k = 0; k < count; ++k) v.ints[k] = read_integer(c, et, what);
    } else if (et == ValueType::kBool) {
      v.ints.resize(count);
      for (std::size_t k = 0; k < count; ++k) v.ints[k] = read_bool(c, where, what);
    } else if (et == ValueType::kF32 || et == ValueType::kF64) {
      v.floats.resize(count);
      for (std::size_t k = 0; k < count; ++k)
        v.floats[k] = et == ValueType::kF32 ? c.read<float>(what) : c.read<double>(what);
    } else if (et == ValueType::kString) {
      v.strings.resize(count);
      for (std::size_t k = 0; k < count; ++k) v.strings[k] = c.string(what + " element");
    } else {
      v.arrays.reserve(count);
      for (std::size_t k = 0; k < count; ++k) v.arrays.push_back(read_value(c, ValueType::kArray, where, what, depth + 1));
    }
  }
  return v;
}

}  // namespace

const char* to_string(ValueType type) {
  switch (type) {
    case ValueType::kU8: return "u8";
    case ValueType::kI8: return "i8";
    case ValueType::kU16: return "u16";
    case ValueType::kI16: return "i16";
    case ValueType::kU32: return "u32";
    case ValueType::kI32: return "i32";
    case ValueType::kF32: return "f32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kU64: return "u64";
    case ValueType::kI64: return "i64";
    case ValueType::kF64: return "f64";
  }
  return "?";
}

std::size_t Value::size() const {
  if (type != ValueType::kArray) return 0;
  if (is_integer(element_type) || element_type == ValueType::kBool) return ints.size();
  if (element_type == ValueType::kF32 || element_type == ValueType::kF64) return floats.size();
  if (element_type == ValueType::kString) return strings.size();
  return arrays.size();
}

std::string Value::describe() const {
  if (type != ValueType::kArray) return to_string(type);
  return std::string("array of ") + to_string(element_type);
}

std::shared_ptr<const File> File::open(const std::filesystem::path& path) {
  std::shared_ptr<File> file(new File());
  file->mapping_ = MappedFile(path);
  file->path_ = path;
  file->where_ = path.string();
  file->parse_all(file->mapping_.data(), file->mapping_.size());
  return file;
}

std::shared_ptr<const File> File::parse(const std::uint8_t* bytes, std::size_t size, const std::string& where) {
  std::shared_ptr<File> file(new File());
  file->where_ = where;
  file->parse_all(bytes, size);
  return file;
}

bool File::has_magic(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;  // a FIFO would block the read
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

void File::parse_all(const std::uint8_t* bytes, std::size_t size) {
  Cursor c(bytes, size, where_);
  if (size < 4 || c.read<std::uint32_t>("magic") != kMagic) fail(where_, "not a GGUF file (the first 4 bytes are not \"GGUF\")");
  version_ = c.read<std::uint32_t>("version");
  if (version_ == 1) fail(where_, "GGUF version 1 is not supported (versions 2 and 3 are)");
  if (version_ != 2 && version_ != 3)
    fail(where_, "unsupported GGUF version " + std::to_string(version_) +
                     " (versions 2 and 3 are supported; a big-endian file reads as a huge version)");
  const std::uint64_t n_tensors = c.read<std::uint64_t>("tensor count");
  const std::uint64_t n_kv = c.read<std::uint64_t>("metadata count");
  if (n_kv > c.remaining() / 13)
    fail(where_, "GGUF: metadata count " + std::to_string(n_kv) + " does not fit in the file");

  for (std::uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.string("metadata key #" + std::to_string(k));
    const std::uint32_t raw = c.read<std::uint32_t>("type of metadata '" + key + "'");
    if (!is_known(raw)) fail(where_, "GGUF: metadata '" + key + "' has unknown value type " + std::to_string(raw));
    Value v = read_value(c, static_cast<ValueType>(raw), where_, "metadata '" + key + "'", 0);
    if (!metadata_.emplace(key, std::move(v)).second) fail(where_, "GGUF: metadata key '" + key + "' appears twice");
  }

  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::kU32)
      fail(where_, "GGUF: metadata 'general.alignment' has type " + a->describe() + ", expected u32");
    if (a->i == 0 || (a->i & (a->i - 1)) != 0)
      fail(where_, "GGUF: general.alignment " + std::to_string(a->i) + " is not a power of two");
    alignment_ = static_cast<std::uint64_t>(a->i);
  }

  if (n_tensors > c.remaining() / 32)
    fail(where_, "GGUF: tensor count " + std::to_string(n_tensors) + " does not fit in the file");
  tensors_.reserve(static_cast<std::size_t>(n_tensors));
  for (std::uint64_t t = 0; t < n_tensors; ++t) {
    TensorInfo info;
    info.name = c.string("name of tensor #" + std::to_string(t));
    const std::string what = "tensor '" + info.name + "'";
    const std::uint32_t n_dims = c.read<std::uint32_t>(what + " dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      fail(where_, "GGUF: " + what + " has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    std::int64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t dim = c.read<std::uint64_t>(what + " dimension");
      if (dim == 0 || dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          __builtin_mul_overflow(elements, static_cast<std::int64_t>(dim), &elements))
        fail(where_, "GGUF: " + what + " has an invalid dimension " + std::to_string(dim));
      info.dims.push_back(static_cast<std::int64_t>(dim));
    }
    info.elements = elements;
    const std::uint32_t raw_type = c.read<std::uint32_t>(what + " type");
    const auto traits = type_traits(raw_type);
    if (!traits) fail(where_, "GGUF: " + what + " has unknown ggml type " + std::to_string(raw_type));
    info.type = static_cast<GgmlType>(raw_type);
    if (info.dims[0] % traits->block_elements != 0)
      fail(where_, "GGUF: " + what + " of type " + type_name(info.type) + " has a row of " +
                       std::to_string(info.dims[0]) + " values, not a multiple of its block of " +
                       std::to_string(traits->block_elements));
    const std::uint64_t blocks = static_cast<std::uint64_t>(elements / traits->block_elements);
    if (__builtin_mul_overflow(blocks, static_cast<std::uint64_t>(traits->block_bytes), &info.bytes))
      fail(where_, "GGUF: " + what + " is too large");
    info.offset = c.read<std::uint64_t>(what + " offset");
    if (info.offset % alignment_ != 0)
      fail(where_, "GGUF: " + what + " offset " + std::to_string(info.offset) + " is not a multiple of the alignment " +
                       std::to_string(alignment_));
    if (!tensor_index_.emplace(info.name, tensors_.size()).second)
      fail(where_, "GGUF: tensor name '" + info.name + "' appears twice");
    tensors_.push_back(std::move(info));
  }

  // Tensor data starts at the next multiple of the alignment.
  const std::uint64_t header_end = c.pos();
  const std::uint64_t data_start = (header_end + alignment_ - 1) / alignment_ * alignment_;
  const std::uint64_t data_size = data_start <= size ? size - data_start : 0;
  header_bytes_ = std::min<std::uint64_t>(data_start, size);
  for (TensorInfo& info : tensors_) {
    std::uint64_t end;
    if (__builtin_add_overflow(info.offset, info.bytes, &end) || end > data_size)
      fail(where_, "GGUF: tensor '" + info.name + "' (" + std::to_string(info.bytes) + " bytes at data offset " +
                       std::to_string(info.offset) + ") extends past the end of the file (" + std::to_string(data_size) +
                       " bytes of tensor data); the file is truncated or corrupt");
    info.data = bytes + data_start + info.offset;
  }
  // Every tensor has its own bytes (llama.cpp writes them one after another): two that share
  // bytes are a damaged header, and would load one tensor's weights as another's.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const TensorInfo& info : tensors_) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* x, const TensorInfo* y) {
    return x->offset < y->offset || (x->offset == y->offset && x->bytes < y->bytes);
  });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& p = *by_offset[i - 1];
    const TensorInfo& q = *by_offset[i];
    if (q.offset < p.offset + p.bytes)
      fail(where_, "GGUF: tensors '" + p.name + "' [" + std::to_string(p.offset) + ", " + std::to_string(p.offset + p.bytes) +
                       ") and '" + q.name + "' [" + std::to_string(q.offset) + ", " + std::to_string(q.offset + q.bytes) +
                       ") overlap in the tensor data");
  }
}

const Value* File::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

std::int64_t File::get_int(const std::string& key) const {
  const auto v = get_int_or(key);
  if (!v) fail(where_, "GGUF: missing metadata '" + key + "' (expected an integer)");
  return *v;
}

std::optional<std::int64_t> File::get_int_or(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!is_integer(v->type)) fail(where_, "GGUF: metadata '" + key + "' has type " + v->describe() + ", expected an integer");
  if (v->type == ValueType::kU64 && v->i < 0) fail(where_, "GGUF: metadata '" + key + "' is too large");
  return v->i;
}

double File::get_float(const std::string& key) const {
  const auto v = get_float_or(key);
  if (!v) fail(where_, "GGUF: missing metadata '" + key + "' (expected a float)");
  return *v;
}

std::optional<double> File::get_float_or(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::kF32 && v->type != ValueType::kF64)
    fail(where_, "GGUF: metadata '" + key + "' has type " + v->describe() + ", expected f32 or f64");
  return v->f;
}

std::string File::get_string(const std::string& key) const {
  const auto v = get_string_or(key);
  if (!v) fail(where_, "GGUF: missing metadata '" + key + "' (expected a string)");
  return *v;
}

std::optional<std::string> File::get_string_or(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::kString) fail(where_, "GGUF: metadata '" + key + "' has type " + v->describe() + ", expected string");
  return v->s;
}

std::optional<bool> File::get_bool_or(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::kBool) fail(where_, "GGUF: metadata '" + key + "' has type " + v->describe() + ", expected bool");
  return v->b;
}

const Value* File::get_array_or(const std::string& key, ValueType element_type) const {
  const Value* v = find(key);
  if (!v) return nullptr;
  const bool ok = v->type == ValueType::kArray &&
                  (v->element_type == element_type || (is_integer(element_type) && is_integer(v->element_type)));
  if (!ok)
    fail(where_, "GGUF: metadata '" + key + "' has type " + v->describe() + ", expected array of " + to_string(element_type));
  return v;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace luka::gguf
