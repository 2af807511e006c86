#include "captures/capture.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <sstream>

#include "core/util/error.h"
#include "core/util/layer_range.h"

namespace luka::capture {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (const char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

long long parse_int(const std::string& s, const std::string& what) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') fail("--record", what + ": '" + s + "' is not an integer");
  return v;
}

// A layer (or head) list (core/util/layer_range.h), "0-3,8" or "0-3|8" -> {0,1,2,3,8}; "all" -> {}.
// The model's count is not known yet: recorder.cpp's make_layout checks the indices against it.
std::vector<int> parse_list(const std::string& s, const std::string& noun) {
  std::vector<int> out;
  for (const std::int64_t v : LayerRange::parse(s, "--record", noun).listed()) out.push_back(static_cast<int>(v));
  return out;
}

std::string list_string(const std::vector<int>& v) { return v.empty() ? "all" : format_layer_range(v); }

}  // namespace

const char* mode_name(int code) {
  switch (code) {
    case kModeDense: return "dense";
    case kModeLined: return "lined";
    case kModeClustered: return "clustered";
    case kModeKascade: return "kascade";
    case kModePress: return "press";
    case kModeQuest: return "quest";
  }
  return "?";
}

RecordSpec RecordSpec::parse(const std::string& spec) {
  RecordSpec r;
  const std::string s = trim(spec);
  if (s.empty() || s == "all") return r;
  if (s == "maps" || s == "rows" || s == "covers") {
    r.maps = s == "maps";
    r.rows = s == "rows";
    r.covers = s == "covers";
    return r;
  }
  for (const std::string& raw : split(s, ';')) {
    const std::string item = trim(raw);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) fail("--record", "'" + item + "' is not key=value (keys: layers, heads, parts, map_cap, map_min, deflate)");
    const std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    if (key == "layers") {
      r.layers = parse_list(value, "layer");
    } else if (key == "heads") {
      r.heads = parse_list(value, "head");
    } else if (key == "parts") {
      r.maps = r.rows = r.covers = false;
      for (const std::string& p : split(value, ',')) {
        const std::string part = trim(p);
        if (part == "maps") r.maps = true;
        else if (part == "rows") r.rows = true;
        else if (part == "covers") r.covers = true;
        else if (part == "all") r.maps = r.rows = r.covers = true;
        else fail("--record", "unknown part '" + part + "' (parts: maps, rows, covers, all)");
      }
    } else if (key == "map_cap") {
      r.map_cap = parse_int(value, "map_cap");
      if (r.map_cap < 1) fail("--record", "map_cap must be >= 1");
    } else if (key == "map_min") {
      r.map_min = parse_int(value, "map_min");
      if (r.map_min < 1) fail("--record", "map_min must be >= 1");
    } else if (key == "deflate") {
      // "none" is the only way to say no compression: -1 is a typo, not a level.
      r.deflate = value == "none" ? -1 : static_cast<int>(parse_int(value, "deflate"));
      if (value != "none" && (r.deflate < 0 || r.deflate > 9)) fail("--record", "deflate must be 0-9 or none, got '" + value + "'");
    } else {
      fail("--record", "unknown key '" + key + "' (keys: layers, heads, parts, map_cap, map_min, deflate)");
    }
  }
  if (r.map_min > r.map_cap) fail("--record", "map_min must not exceed map_cap");
  return r;
}

std::string RecordSpec::to_string() const {
  std::string parts;
  for (const auto& [on, name] : {std::pair{maps, "maps"}, {rows, "rows"}, {covers, "covers"}})
    if (on) parts += std::string(parts.empty() ? "" : ",") + name;
  std::ostringstream o;
  o << "layers=" << list_string(layers) << ";heads=" << list_string(heads) << ";parts=" << (parts.empty() ? "none" : parts)
    << ";map_cap=" << map_cap << ";map_min=" << map_min << ";deflate=" << (deflate < 0 ? "none" : std::to_string(deflate));
  return o.str();
}

std::int64_t level_size(std::int64_t n, int level) {
  const std::int64_t scale = std::int64_t{1} << level;
  return (n + scale - 1) / scale;
}

std::vector<int> stored_levels(std::int64_t n, std::int64_t cap, std::int64_t min) {
  std::vector<int> out;
  if (n <= 0) return out;
  int level = 0;
  while (level_size(n, level) > cap) ++level;
  for (;; ++level) {
    out.push_back(level);
    if (level_size(n, level) <= min) break;
  }
  return out;
}

int recorded_index(const std::vector<int>& recorded, int value, const char* what) {
  const auto it = std::lower_bound(recorded.begin(), recorded.end(), value);
  if (it == recorded.end() || *it != value)
    fail("capture", std::string(what) + " " + std::to_string(value) + " is not recorded");
  return static_cast<int>(it - recorded.begin());
}

std::vector<std::int64_t> CaptureView::refined_pages(std::int64_t step, int layer, int head) const {
  std::vector<std::int64_t> out;
  const auto states = page_states(step, layer, head);
  for (std::size_t p = 0; p < states.size(); ++p)
    if (states[p] == kPageRefined) out.push_back(static_cast<std::int64_t>(p));
  return out;
}

std::vector<std::int64_t> CaptureView::heavy_hitters(std::int64_t step, int layer, int head) const {
  std::vector<std::int64_t> out;
  const auto c = cover(step, layer, head);
  for (std::size_t t = 0; t < c.size(); ++t)
    if (c[t] == kHeavy) out.push_back(static_cast<std::int64_t>(t));
  return out;
}

}  // namespace luka::capture

namespace luka::capture {

std::int64_t map_chunk(const Layout& layout, int layer_index, int level) {
  const std::int64_t size = level_size(layout.prompt_tokens, level);
  std::int64_t c = 256;
  const std::int64_t page = layout.page_size.at(static_cast<std::size_t>(layer_index)) >> level;
  if (page > 1 && page <= c) c -= c % page;  // a whole number of (pooled) pages
  return std::max<std::int64_t>(1, std::min(c, size));
}

std::int64_t token_chunk(const Layout& layout) {
  std::int64_t pages = 1;  // tokens of a whole number of pages of every recorded layer
  for (const std::int64_t p : layout.page_size) {
    pages = std::lcm(pages, std::max<std::int64_t>(1, p));
    if (pages > 4096) {  // page sizes without a small common multiple: chunks do not align
      pages = 1;
      break;
    }
  }
  // A run's whole row in one chunk where it reaches at most 4,096 tokens: one chunk per row and
  // step to compress and index, and no padding chunk once T passes a chunk boundary.
  const std::int64_t tokens = layout.max_tokens > 0 ? std::min<std::int64_t>(layout.max_tokens, 4096) : 1024;
  return pages * ((tokens + pages - 1) / pages);
}

std::int64_t layer_chunk(const Layout& layout) {
  const std::int64_t L = static_cast<std::int64_t>(layout.layers.size());
  if (L <= 1) return 1;
  const std::int64_t per_layer = std::max<std::int64_t>(1, static_cast<std::int64_t>(layout.heads.size()) * token_chunk(layout) * 2);
  const std::int64_t fit = std::max<std::int64_t>(1, kStepChunkBytes / per_layer);  // layers in one chunk at most
  const std::int64_t groups = (L + fit - 1) / fit;
  return (L + groups - 1) / groups;  // the same count in every chunk, as far as the layers allow
}

std::uint64_t estimate_bytes(const Layout& layout, std::int64_t steps) {
  // Whole chunks, as stored without compression: the map chunks on and left of the diagonal, and
  // per step each row's chunks (a group of layers, padded to the layer chunk, by the token or
  // page chunk, the last one padded).
  const std::uint64_t H = layout.heads.size();
  const std::int64_t n = layout.prompt_tokens, S = std::max<std::int64_t>(steps, 0);
  const auto up = [](std::int64_t v, std::int64_t m) { return static_cast<std::uint64_t>((v + m - 1) / m * m); };
  const std::int64_t ct = token_chunk(layout), L = static_cast<std::int64_t>(layout.layers.size()), Lc = layer_chunk(layout);
  const auto page_of = [&](std::int64_t i) { return std::max<std::int64_t>(1, layout.page_size.at(static_cast<std::size_t>(i))); };
  std::uint64_t bytes = 0;
  for (std::int64_t i = 0; i < L; ++i) {
    for (const int level : layout.levels) {
      const std::int64_t size = level_size(n, level), c = map_chunk(layout, static_cast<int>(i), level);
      const std::uint64_t R = static_cast<std::uint64_t>((size + c - 1) / c);
      bytes += H * (R * (R + 1) / 2) * static_cast<std::uint64_t>(c * c) * 2;
    }
    bytes += up(S, 64) * 17 + H * up(S, 16) * 20;   // mode, paged_end, seconds; cover sizes, fidelity
    // The page table: start, end, created_step, member_end and raw (the member lists of
    // SemantiCache's clusters, at most 8 bytes a token, are not known ahead).
    bytes += up((n + S) / page_of(i), kPageTableChunk) * (4 * 8 + 1);
  }
  const std::uint64_t rows = static_cast<std::uint64_t>(Lc) * H;  // chunk rows: layers x heads
  for (std::int64_t g0 = 0; g0 < L; g0 += Lc) {
    std::int64_t page = page_of(g0);  // the smallest page of the group: the most pages
    for (std::int64_t i = g0; i < std::min(L, g0 + Lc); ++i) page = std::min(page, page_of(i));
    for (std::int64_t st = 1; st <= S; ++st) {
      const std::int64_t T = n + st;
      if (layout.rows) bytes += rows * up(T, ct) * 2;                                     // effective (dense-shadow rows not counted)
      if (layout.covers) bytes += rows * up(T / page, kPageChunk) * 3 + rows * up(T, ct);  // page states and mass, cover
    }
  }
  // Token lists (id, generated, segment, prob, piece_end; piece bytes at about 4 per token) and step lengths.
  return bytes + up(n + S + 1, 4096) * 21 + up(4 * (n + S + 1), 16384) + up(S, 64) * 8;
}

}  // namespace luka::capture
