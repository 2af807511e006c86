// Errors that reach the user. Every message names the file (or input) and the problem, so the
// CLI can print it on one line and exit non-zero.
#pragma once

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>

namespace luka {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws Error("<where>: <what>").
[[noreturn]] void fail(const std::string& where, const std::string& what);

// Whether `e` reports a failed memory allocation: std::bad_alloc, or the errors of LibTorch's
// allocators (c10::Error "DefaultCPUAllocator: can't allocate memory: you tried to allocate N
// bytes", "CUDA out of memory. Tried to allocate ..."). `bytes`, when given, gets the size asked
// for where the message says it in bytes, else 0.
bool is_out_of_memory(const std::exception& e, std::uint64_t* bytes = nullptr);

// "out of memory <doing>", with ": an allocation of N bytes failed" when the size is known.
std::string out_of_memory_message(const std::exception& e, const std::string& doing);

// Runs f(). An allocation failure inside it becomes Error("<where>: out of memory <doing>..."):
// a bare std::bad_alloc says neither the file nor what was being done. Other errors pass as they are.
template <typename F>
decltype(auto) name_out_of_memory(const std::string& where, const std::string& doing, F&& f) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
    fail(where, out_of_memory_message(e, doing));
  }
}

}  // namespace luka
