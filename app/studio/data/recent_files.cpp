#include "app/studio/data/recent_files.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include <nlohmann/json.hpp>

#include "core/util/output_file.h"
#include "core/util/text_file.h"

namespace luka::studio {
namespace {

std::string normal(const std::filesystem::path& p) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(p, ec);
  return (ec ? p : abs).lexically_normal().string();
}

}  // namespace

std::filesystem::path config_folder() {
  // XDG Base Directory: $XDG_CONFIG_HOME when set and absolute, else ~/.config.
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg && *xdg && std::filesystem::path(xdg).is_absolute()) return std::filesystem::path(xdg) / "luka-studio";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".config" / "luka-studio";
  return {};
}

std::filesystem::path RecentFiles::default_file() {
  const std::filesystem::path dir = config_folder();
  return dir.empty() ? dir : dir / "recent.json";
}

RecentFiles::RecentFiles(std::filesystem::path file, std::size_t limit) : file_(std::move(file)), limit_(std::max<std::size_t>(limit, 1)) {
  std::error_code ec;
  if (file_.empty() || !std::filesystem::exists(file_, ec)) return;
  try {
    const nlohmann::json j = read_json_file(file_, "recent files list");
    if (!j.is_object() || !j.contains("recent") || !j["recent"].is_array()) {
      warning_ = file_.string() + ": recent files list: expected {\"recent\": [paths]}; starting a new list";
      return;
    }
    for (const auto& entry : j["recent"]) {
      if (!entry.is_string() || entry.get<std::string>().empty()) continue;
      const std::string p = normal(entry.get<std::string>());
      if (std::find(paths_.begin(), paths_.end(), p) == paths_.end()) paths_.push_back(p);
      if (paths_.size() == limit_) break;
    }
  } catch (const std::exception& e) {
    warning_ = std::string(e.what()) + "; starting a new list";
  }
}

void RecentFiles::add(const std::filesystem::path& capture) {
  const std::string p = normal(capture);
  paths_.erase(std::remove(paths_.begin(), paths_.end(), p), paths_.end());
  paths_.insert(paths_.begin(), p);
  if (paths_.size() > limit_) paths_.resize(limit_);
  save();
}

void RecentFiles::remove(const std::filesystem::path& capture) {
  const std::string p = normal(capture);
  paths_.erase(std::remove(paths_.begin(), paths_.end(), p), paths_.end());
  save();
}

void RecentFiles::save() {
  if (file_.empty()) return;
  try {
    std::error_code ec;
    std::filesystem::create_directories(file_.parent_path(), ec);
    nlohmann::json j;
    j["recent"] = paths_;
    write_file_atomically(file_, j.dump(2) + "\n");
    warning_.clear();
  } catch (const std::exception& e) {
    warning_ = e.what();
  }
}

}  // namespace luka::studio
