#include "app/studio/data/run_budget.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace luka::studio {

RunBudget estimate_run(const capture::Layout& layout, int num_heads, std::int64_t prompt_tokens, std::int64_t new_tokens,
                       std::uint64_t kv_bytes_per_token, std::uint64_t map_budget) {
  RunBudget b;
  const auto n = static_cast<std::uint64_t>(std::max<std::int64_t>(prompt_tokens, 0));
  b.kv = kv_bytes_per_token * (n + static_cast<std::uint64_t>(std::max<std::int64_t>(new_tokens, 0)));
  b.prefill = static_cast<std::uint64_t>(std::max(num_heads, 0)) * n * n * (4 + 2);
  // Each stored level's lower triangle in halves, for every recorded layer and head; the level-1
  // encoder keeps about half of that (measured on 4K-token maps of the default model: 0.51).
  std::uint64_t raw = 0;
  for (const int level : layout.levels) {
    const auto s = static_cast<std::uint64_t>(capture::level_size(prompt_tokens, level));
    raw += s * (s + 1) / 2 * 2;
  }
  raw *= static_cast<std::uint64_t>(layout.layers.size()) * static_cast<std::uint64_t>(layout.heads.size());
  b.maps = raw / 2;
  b.map_memory = std::min(b.maps, map_budget);
  b.map_spill = b.maps - b.map_memory;
  return b;
}

std::string check_budget(const RunBudget& b, std::uint64_t free_memory, std::uint64_t free_disk, const std::string& disk_folder) {
  const bool memory_short = free_memory > 0 && b.memory() > free_memory / 10 * 9;
  const bool disk_short = b.map_spill > 0 && free_disk > 0 && b.map_spill > free_disk / 10 * 9;
  if (!memory_short && !disk_short) return "";
  std::string why = "this run needs about " + human_bytes(b.memory()) + " of memory (" + human_bytes(free_memory) + " free)";
  if (b.map_spill > 0) why += " and " + human_bytes(b.map_spill) + " of temporary disk in " + disk_folder + " (" + human_bytes(free_disk) + " free)";
  why += ": record fewer layers or smaller maps, or run it anyway";
  return why;
}

std::uint64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream words(line.substr(13));
    std::uint64_t kib = 0;
    words >> kib;
    return kib * 1024;
  }
  return 0;
}

std::uint64_t free_disk(const std::filesystem::path& folder) {
  struct statvfs s {};
  if (::statvfs(folder.c_str(), &s) != 0) return 0;
  return static_cast<std::uint64_t>(s.f_bavail) * static_cast<std::uint64_t>(s.f_frsize);
}

std::string human_bytes(std::uint64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.1f GB", b / 1e9);
  else std::snprintf(buf, sizeof buf, "%.0f MB", b / 1e6);
  return buf;
}

}  // namespace luka::studio
