// Reading a user's file, in one place: a whole text file, or a JSON document, with one-line
// errors that name the file and say what is wrong (missing, a folder, unreadable, not a regular
// file, malformed JSON and where). Every parser of a user's file starts here.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace luka {

// The file's bytes. `what` names it in messages ("prompt file", "config file"); throws
// luka::Error "<path>: <what>: ..." when it is missing, a folder, not a regular file (a FIFO or a
// device would block or never end) or unreadable.
std::string read_text_file(const std::filesystem::path& path, const std::string& what);

// The file parsed as JSON; malformed JSON is an error with the parser's position.
nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what);

}  // namespace luka
