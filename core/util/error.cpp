#include "core/util/error.h"

#include <cstdlib>
#include <new>
#include <string_view>

namespace luka {

void fail(const std::string& where, const std::string& what) {
  throw Error(where.empty() ? what : where + ": " + what);
}

bool is_out_of_memory(const std::exception& e, std::uint64_t* bytes) {
  if (bytes != nullptr) *bytes = 0;
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  // LibTorch's allocators throw c10::Error (a std::exception); this file knows no LibTorch, so
  // the messages tell: c10/core/impl/alloc_cpu.cpp and the CUDA caching allocator.
  const std::string_view what = e.what();
  const bool cpu = what.find("can't allocate memory") != std::string_view::npos;
  if (!cpu && what.find("out of memory") == std::string_view::npos) return false;
  if (bytes != nullptr) {
    constexpr std::string_view kAsked = "you tried to allocate ";
    if (const auto at = what.find(kAsked); at != std::string_view::npos)
      *bytes = std::strtoull(std::string(what.substr(at + kAsked.size(), 24)).c_str(), nullptr, 10);
  }
  return true;
}

std::string out_of_memory_message(const std::exception& e, const std::string& doing) {
  std::uint64_t bytes = 0;
  is_out_of_memory(e, &bytes);
  return "out of memory " + doing + (bytes > 0 ? ": an allocation of " + std::to_string(bytes) + " bytes failed" : "");
}

}  // namespace luka
