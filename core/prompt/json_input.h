// Reading the prompt library's JSON files: every failure is a luka::Error that names the file, the
// field (as a path such as segments[2].topic) and what was expected. Internal to core/prompt.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

namespace luka::prompt_json {

using nlohmann::json;

// A file's text parsed (core/util/text_file: malformed JSON and where are errors naming the file
// and `what` it is).
json parse(const std::string& text, const std::filesystem::path& file, const std::string& what);

// Fails when `object` has a key not in `allowed`, naming it and the allowed ones.
void check_keys(const json& object, std::initializer_list<const char*> allowed, const std::string& where,
                const std::string& field);

// object[key] as a string; `fallback` when absent; fails when present but not a string.
std::string string_field(const json& object, const char* key, const std::string& fallback, const std::string& where,
                         const std::string& field);

// object[key] as a string; fails when absent or not a string.
std::string required_string(const json& object, const char* key, const std::string& where, const std::string& field);

// object[key] as a non-negative integer; fails when absent, negative or not an integer.
std::uint64_t required_offset(const json& object, const char* key, const std::string& where, const std::string& field);

// `value` as a "#rrggbb" colour, lower-cased; fails on anything else.
std::string colour(const json& value, const std::string& where, const std::string& field);

// "name" or "parent.name" for messages.
std::string field_path(const std::string& parent, const std::string& name);

}  // namespace luka::prompt_json
