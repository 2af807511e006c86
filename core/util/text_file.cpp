#include "core/util/text_file.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/util/error.h"

namespace luka {

void require_regular_file(const std::filesystem::path& path, const std::string& what) {
  namespace fs = std::filesystem;
  const std::string where = path.empty() ? std::string("''") : path.string();
  const std::string prefix = what.empty() ? "" : what + ": ";
  if (path.empty()) fail(where, prefix + "empty path");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail(where, prefix + "no such file");
  if (fs::is_directory(st)) fail(where, prefix + "is a folder, not a file");
  if (fs::is_regular_file(st)) return;
  const char* kind = fs::is_fifo(st)              ? "a FIFO"
                     : fs::is_character_file(st) ? "a character device"
                     : fs::is_block_file(st)     ? "a block device"
                     : fs::is_socket(st)         ? "a socket"
                                                 : "a special file";
  fail(where, prefix + "not a regular file (" + kind + ")");
}

std::string read_text_file(const std::filesystem::path& path, const std::string& what) {
  namespace fs = std::filesystem;
  require_regular_file(path, what);
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), what + ": cannot open (" + std::strerror(errno) + ")");
  // One allocation of the file's size, so a file larger than memory fails at once, naming it.
  const std::uintmax_t size = fs::file_size(path, ec);
  std::string text;
  if (!ec) name_out_of_memory(path.string(), "reading the " + what + " (" + std::to_string(size) + " bytes)", [&] { text.resize(size); });
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) fail(path.string(), what + ": cannot read");
  if (!in.eof() && in.peek() != std::char_traits<char>::eof()) {  // grown since its size was taken
    std::ostringstream rest;
    rest << in.rdbuf();
    text += rest.str();
  }
  if (in.bad()) fail(path.string(), what + ": cannot read");
  return text;
}

nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what) {
  return parse_json_text(read_text_file(path, what), path.string(), what);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& where, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(where, what + ": malformed JSON: " + e.what());
  }
  check_json_depth(text, where, what);
  return j;
}

void check_json_depth(std::string_view json, const std::string& where, const std::string& what) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        fail(where, what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace luka
