// Errors that reach the user. Every message names the file (or input) and the problem, so the
// CLI can print it on one line and exit non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace luka {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws Error("<where>: <what>").
[[noreturn]] void fail(const std::string& where, const std::string& what);

}  // namespace luka
