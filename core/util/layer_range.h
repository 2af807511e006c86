// Layer lists: the one grammar of every option and file that picks layers (or heads): --set and
// --schedule's layers=, a layers-config file's "layers" keys, --record's layers= and heads=,
// luka inspect's --layer and --head, the Studio's record spec. docs/luka-config.md#layer-lists.
//
//   LIST  = "all" | PIECE { SEP PIECE }
//   PIECE = N | A-B                (whole numbers from 0, A <= B; spaces around them are ignored)
//   SEP   = "," | "|"
//
// e.g. "5", "0-7", "0-3,8", "0-3|8". Both separators everywhere: ',' reads naturally, and '|' is
// what --set needed while ',' was taken there (between key=value pairs; --set now reads a piece
// without '=' after layers= as more of the list, so "layers=0-3,8,mode=lined" works too).
// Pieces may repeat or overlap; the list is the set they cover, ascending.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace luka {

class LayerRange {
 public:
  // The most an index may be while the count is not known yet (listed()).
  static constexpr std::int64_t kMaxIndex = (std::int64_t{1} << 20) - 1;

  // Checks the syntax. Throws luka::Error "<context>: ..." naming the bad piece; `noun` is what
  // the numbers count ("layer", "head").
  static LayerRange parse(const std::string& text, const std::string& context, const std::string& noun = "layer");

  bool all() const { return all_; }

  // Every index the list covers (0..count-1 for "all"), ascending; throws luka::Error
  // "<context>: layer range '28-31' is out of range [0, 28)" for a piece outside the count.
  std::vector<std::int64_t> indices(std::int64_t count) const;

  // The indices the pieces name, for a list read before the count is known (checked later by
  // whoever knows it): ascending; empty for "all"; every index at most kMaxIndex.
  std::vector<std::int64_t> listed() const;

 private:
  struct Piece {
    std::int64_t first = 0, last = 0;
    std::string text;
  };
  std::vector<std::int64_t> expand(std::int64_t count, bool count_known) const;
  bool all_ = true;
  std::vector<Piece> pieces_;
  std::string context_, noun_;
};

// LayerRange::parse(text, context, noun).indices(count).
std::vector<std::int64_t> parse_layer_range(const std::string& text, std::int64_t count, const std::string& context,
                                            const std::string& noun = "layer");

// Ascending indices in the grammar's shortest spelling: {0, 1, 2, 3, 8} -> "0-3,8" ("" for none).
template <typename Int>
std::string format_layer_range(const std::vector<Int>& ascending, char separator = ',') {
  std::string s;
  for (std::size_t i = 0; i < ascending.size();) {
    std::size_t j = i;
    while (j + 1 < ascending.size() && ascending[j + 1] == ascending[j] + 1) ++j;
    if (!s.empty()) s += separator;
    s += std::to_string(ascending[i]);
    if (j > i) s += '-' + std::to_string(ascending[j]);
    i = j + 1;
  }
  return s;
}

}  // namespace luka
