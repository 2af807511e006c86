// Reading a user's file, in one place: a whole text file, or a JSON document, with one-line
// errors that name the file and say what is wrong (missing, a folder, unreadable, not a regular
// file, malformed JSON and where). Every parser of a user's file starts here.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace luka {

// Refuses a path that is not a regular file, before anything opens it: missing, a folder, a FIFO
// (open() blocks until a writer comes, so a load would hang), a device or a socket. Links are
// followed. `what` names the file in messages ("prompt file"; empty: the path alone). Every reader
// of a user's file calls it first: read_text_file, MappedFile (weights, GGUF), the capture reader.
void require_regular_file(const std::filesystem::path& path, const std::string& what);

// The file's bytes. `what` names it in messages ("prompt file", "config file"); throws
// luka::Error "<path>: <what>: ..." when it is missing, a folder, not a regular file (a FIFO or a
// device would block or never end) or unreadable.
std::string read_text_file(const std::filesystem::path& path, const std::string& what);

// The file parsed as JSON; malformed JSON is an error with the parser's position.
nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what);

// A user's JSON already in memory (a file's text, or a fuzz input): malformed JSON is the error
// "<where>: <what>: malformed JSON: ..." that read_json_file gives, and so is nesting deeper than
// kMaxJsonDepth.
nlohmann::json parse_json_text(const std::string& text, const std::string& where, const std::string& what);

// nlohmann::json parses and frees iteratively but copies, compares and prints recursively: a file
// of 100,000 '[' parses, then overflows the stack when printed in an error message. No format we
// read nests deeper than a few levels.
constexpr int kMaxJsonDepth = 256;

// Throws "<where>: <what>: JSON nested deeper than 256 levels" for such a document; `json` must be
// valid JSON (brackets inside strings are skipped, escapes included).
void check_json_depth(std::string_view json, const std::string& where, const std::string& what);

}  // namespace luka
