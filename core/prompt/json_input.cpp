#include "core/prompt/json_input.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka::prompt_json {

json parse(const std::string& text, const std::filesystem::path& file, const std::string& what) {
  return parse_json_text(text, file.string(), what);
}

std::string field_path(const std::string& parent, const std::string& name) {
  return parent.empty() ? name : parent + "." + name;
}

void check_keys(const json& object, std::initializer_list<const char*> allowed, const std::string& where,
                const std::string& field) {
  for (const auto& item : object.items()) {
    bool known = false;
    for (const char* key : allowed) known = known || item.key() == key;
    if (known) continue;
    std::string names;
    for (const char* key : allowed) names += std::string(names.empty() ? "" : ", ") + key;
    fail(where, "unknown field \"" + item.key() + "\"" + (field.empty() ? "" : " in " + field) +
                    " (expected: " + names + ")");
  }
}

std::string string_field(const json& object, const char* key, const std::string& fallback, const std::string& where,
                         const std::string& field) {
  if (!object.contains(key)) return fallback;
  const json& value = object[key];
  if (!value.is_string()) fail(where, field_path(field, key) + " must be a string, not " + value.dump());
  return value.get<std::string>();
}

std::string required_string(const json& object, const char* key, const std::string& where, const std::string& field) {
  if (!object.contains(key)) fail(where, field_path(field, key) + " is missing");
  return string_field(object, key, "", where, field);
}

std::uint64_t required_offset(const json& object, const char* key, const std::string& where, const std::string& field) {
  if (!object.contains(key)) fail(where, field_path(field, key) + " is missing");
  const json& value = object[key];
  if (!value.is_number_unsigned())
    fail(where, field_path(field, key) + " must be a non-negative integer (a byte offset), not " + value.dump());
  return value.get<std::uint64_t>();
}

std::string colour(const json& value, const std::string& where, const std::string& field) {
  std::string text = value.is_string() ? value.get<std::string>() : std::string();
  bool ok = text.size() == 7 && text[0] == '#';
  for (std::size_t i = 1; ok && i < text.size(); ++i) ok = std::isxdigit(static_cast<unsigned char>(text[i])) != 0;
  if (!ok) fail(where, field + " must be a colour \"#rrggbb\" (six hex digits), not " + value.dump());
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace luka::prompt_json
