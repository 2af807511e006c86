// Reference files made by the Python scripts in tests/fixtures (run with LUKA_PYTHON, the project's
// virtualenv) at test time, once: an output newer than its script is reused, so each ctest process
// after the first reads it straight away.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace luka::test {

// Runs `script args... OUT` unless `out` is newer than the script. Returns `out`, or an empty path
// with the reason in `why_missing` (no Python, or the script failed, e.g. exit 77 for a missing
// package).
inline std::filesystem::path python_reference(const std::filesystem::path& script, const std::vector<std::string>& args,
                                              const std::filesystem::path& out, std::string& why_missing) {
  namespace fs = std::filesystem;
  if (fs::exists(out) && fs::last_write_time(out) >= fs::last_write_time(script)) return out;
  if (!fs::exists(LUKA_PYTHON)) {
    why_missing = std::string("python not found at ") + LUKA_PYTHON;
    return {};
  }
  fs::create_directories(out.parent_path());
  const fs::path tmp = out.string() + "." + std::to_string(::getpid()) + ".tmp";
  std::string cmd = "\"" + std::string(LUKA_PYTHON) + "\" \"" + script.string() + "\"";
  for (const std::string& a : args) cmd += " \"" + a + "\"";
  cmd += " \"" + tmp.string() + "\"";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    why_missing = "reference script failed (exit " + std::to_string(rc) + ", a Python package missing?): " + cmd;
    return {};
  }
  // Atomic for a file, so a parallel test never reads half of one; a folder made by an older
  // script is removed first (rename cannot replace a folder that is not empty).
  std::error_code ec;
  if (fs::is_directory(out, ec)) fs::remove_all(out, ec);
  fs::rename(tmp, out);
  return out;
}

}  // namespace luka::test
