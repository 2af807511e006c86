// The capture files opened or saved lately, most recent first: the Studio's "Open capture…" list.
// Kept in recent.json in the user's config folder ($XDG_CONFIG_HOME/luka-studio, or
// ~/.config/luka-studio), as {"recent": ["/abs/path.h5", ...]}. The list is a convenience: a
// missing, unreadable or corrupt file reads as an empty list (warning() says why) and is
// rewritten at the next change; a file that cannot be written leaves the list in memory.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace luka::studio {

// The Studio's folder in the user's config: $XDG_CONFIG_HOME/luka-studio when that is set and
// absolute, else $HOME/.config/luka-studio; empty when neither variable is set.
std::filesystem::path config_folder();

class RecentFiles {
 public:
  static constexpr std::size_t kDefaultLimit = 10;

  // recent.json under $XDG_CONFIG_HOME/luka-studio, or $HOME/.config/luka-studio; empty when
  // neither variable is set (the list then lives in memory only).
  static std::filesystem::path default_file();

  explicit RecentFiles(std::filesystem::path file = default_file(), std::size_t limit = kDefaultLimit);

  const std::vector<std::string>& paths() const { return paths_; }
  // Puts `capture` first (as an absolute path; an entry for the same file moves up, never
  // doubles), keeps the newest `limit`, and writes the file.
  void add(const std::filesystem::path& capture);
  void remove(const std::filesystem::path& capture);
  const std::filesystem::path& file() const { return file_; }
  // Why the file was not read or written (empty when it was, or did not exist yet).
  const std::string& warning() const { return warning_; }

 private:
  void save();
  std::filesystem::path file_;
  std::size_t limit_;
  std::vector<std::string> paths_;
  std::string warning_;
};

}  // namespace luka::studio
