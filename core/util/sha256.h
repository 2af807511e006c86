// SHA-256 (FIPS 180-4), for the identity hashes a capture's manifest records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace luka {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex();  // finishes; the object must not be updated afterwards

 private:
  void block(const std::uint8_t* p);
  std::uint32_t h_[8];
  std::uint8_t buf_[64];
  std::size_t fill_ = 0;
  std::uint64_t bytes_ = 0;
};

// Hex digest of `n` bytes from the start of a file (all of it when n is npos). Throws luka::Error.
std::string sha256_file(const std::filesystem::path& path, std::uint64_t n = UINT64_MAX);

}  // namespace luka
