#include "core/util/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/util/error.h"

namespace luka {

std::string read_text_file(const std::filesystem::path& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail(path.string(), what + ": no such file");
  if (fs::is_directory(st)) fail(path.string(), what + ": is a folder, not a file");
  if (!fs::is_regular_file(st)) fail(path.string(), what + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), what + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) fail(path.string(), what + ": cannot read");
  return buffer.str();
}

nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what) {
  const std::string text = read_text_file(path, what);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), what + ": malformed JSON: " + e.what());
  }
}

}  // namespace luka
