// Builds GGUF images in memory for tests and fuzz seeds: metadata of any type, tensor infos,
// alignment padding and tensor data, with hooks to write deliberately broken files.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace luka::gguf::testing {

class Builder {
 public:
  explicit Builder(std::uint32_t version = 3) : version_(version) {}

  Builder& kv_u32(const std::string& key, std::uint32_t v) { return kv(key, 4, le(v)); }
  Builder& kv_i32(const std::string& key, std::int32_t v) { return kv(key, 5, le(v)); }
  Builder& kv_f32(const std::string& key, float v) { return kv(key, 6, le(v)); }
  Builder& kv_bool(const std::string& key, bool v) { return kv(key, 7, {static_cast<std::uint8_t>(v)}); }
  Builder& kv_string(const std::string& key, const std::string& v) { return kv(key, 8, str(v)); }
  Builder& kv_strings(const std::string& key, const std::vector<std::string>& v) {
    std::vector<std::uint8_t> body = le(std::uint32_t{8});
    append(body, le(static_cast<std::uint64_t>(v.size())));
    for (const auto& s : v) append(body, str(s));
    return kv(key, 9, body);
  }
  Builder& kv_i32s(const std::string& key, const std::vector<std::int32_t>& v) {
    std::vector<std::uint8_t> body = le(std::uint32_t{5});
    append(body, le(static_cast<std::uint64_t>(v.size())));
    for (auto x : v) append(body, le(x));
    return kv(key, 9, body);
  }
  // Any type id with a raw body (for unknown types and malformed values).
  Builder& kv(const std::string& key, std::uint32_t type, const std::vector<std::uint8_t>& body) {
    append(meta_, str(key));
    append(meta_, le(type));
    append(meta_, body);
    ++n_kv_;
    return *this;
  }

  // A tensor: dims innermost first, ggml type id, its data bytes (placed at the next aligned
  // offset unless `offset` is given).
  Builder& tensor(const std::string& name, const std::vector<std::uint64_t>& dims, std::uint32_t type,
                  const std::vector<std::uint8_t>& data, std::int64_t offset = -1) {
    const std::uint64_t at = offset >= 0 ? static_cast<std::uint64_t>(offset) : align(data_.size());
    append(infos_, str(name));
    append(infos_, le(static_cast<std::uint32_t>(dims.size())));
    for (auto d : dims) append(infos_, le(d));
    append(infos_, le(type));
    append(infos_, le(at));
    if (offset < 0) {
      data_.resize(at, 0);
      append(data_, data);
    }
    ++n_tensors_;
    return *this;
  }

  std::vector<std::uint8_t> bytes() const {
    std::vector<std::uint8_t> out = {'G', 'G', 'U', 'F'};
    append(out, le(version_));
    append(out, le(n_tensors_));
    append(out, le(n_kv_));
    append(out, meta_);
    append(out, infos_);
    out.resize(align(out.size()), 0);
    append(out, data_);
    return out;
  }

  template <typename T>
  static std::vector<std::uint8_t> le(T v) {
    std::vector<std::uint8_t> b(sizeof(T));
    std::memcpy(b.data(), &v, sizeof(T));
    return b;
  }
  static std::vector<std::uint8_t> str(const std::string& s) {
    std::vector<std::uint8_t> b = le(static_cast<std::uint64_t>(s.size()));
    b.insert(b.end(), s.begin(), s.end());
    return b;
  }
  static void append(std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) { a.insert(a.end(), b.begin(), b.end()); }

 private:
  std::uint64_t align(std::uint64_t n) const { return (n + 31) / 32 * 32; }

  std::uint32_t version_;
  std::uint64_t n_kv_ = 0, n_tensors_ = 0;
  std::vector<std::uint8_t> meta_, infos_, data_;
};

}  // namespace luka::gguf::testing
