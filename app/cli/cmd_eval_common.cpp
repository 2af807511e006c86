#include "app/cli/cmd_eval_common.h"

#include <algorithm>
#include <cstdio>

#include "app/cli/args.h"
#include "core/luka/auto_config.h"

namespace luka::cli {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> split_presets(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  int depth = 0;
  for (const char c : text + ",") {
    if (c == ',' && depth == 0) {
      if (item.empty()) throw UsageError("--presets: empty entry in '" + text + "'");
      out.push_back(item);
      item.clear();
      continue;
    }
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    item += c;
  }
  for (std::size_t i = 0; i < out.size(); ++i)
    if (std::find(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(i), out[i]) !=
        out.begin() + static_cast<std::ptrdiff_t>(i))
      throw UsageError("--presets: '" + out[i] + "' is given twice");
  return out;
}

LukaConfig preset_config(const std::string& entry, std::int64_t n_layers, const std::vector<std::string>& overrides) {
  const bool is_file = entry.size() > 5 && entry.compare(entry.size() - 5, 5, ".json") == 0;
  const bool is_auto = !is_file && entry.rfind("auto:", 0) == 0;
  // A bad preset name or --set is the command line's (exit 2), a bad file bad data (exit 1).
  if (is_auto) option_value("presets", [&] { parse_auto_spec(entry.substr(5)); });
  LukaConfig c = is_file   ? LukaConfig::from_json_file(entry, n_layers)
                 : is_auto ? LukaConfig::preset(entry, n_layers)
                           : option_value("presets", [&] { return LukaConfig::preset(entry, n_layers); });
  for (const std::string& spec : overrides) option_value("set", [&] { c.apply_override(spec); });
  return c;
}

json model_identity(const fs::path& path) {
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(path, ec);
  std::uintmax_t bytes = 0;
  if (fs::is_directory(resolved, ec)) {
    for (const auto& e : fs::directory_iterator(resolved, ec))
      if (e.is_regular_file(ec)) bytes += e.file_size(ec);
  } else {
    bytes = fs::file_size(resolved, ec);
  }
  return {{"path", (ec ? path : resolved).string()}, {"bytes", bytes}};
}

std::string duration_text(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

}  // namespace luka::cli
