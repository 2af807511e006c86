#include "core/util/layer_range.h"

#include <algorithm>
#include <cstdlib>

#include "core/util/error.h"

namespace luka {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// A whole number, possibly negative, so that "-1" reads as out of range rather than as garbage
// (and one too long for 64 bits saturates: out of range too).
bool to_int(const std::string& s, std::int64_t& v) {
  const std::size_t digits = !s.empty() && s[0] == '-' ? 1 : 0;
  if (s.size() == digits || s.find_first_not_of("0123456789", digits) != std::string::npos) return false;
  v = std::strtoll(s.c_str(), nullptr, 10);  // LLONG_MIN / LLONG_MAX on overflow
  return true;
}

}  // namespace

LayerRange LayerRange::parse(const std::string& text, const std::string& context, const std::string& noun) {
  LayerRange r;
  r.context_ = context;
  r.noun_ = noun;
  const std::string whole = trim(text);
  const std::string expected = " (expected N, A-B, several separated by ',' or '|', or all)";
  if (whole.empty()) fail(context, "empty " + noun + " list" + expected);
  if (whole == "all") return r;
  r.all_ = false;
  std::string piece;
  const auto add = [&](const std::string& raw) {
    const std::string t = trim(raw);
    if (t.empty()) fail(context, "empty piece in " + noun + " list '" + text + "'" + expected);
    if (t == "all") fail(context, "'all' in " + noun + " list '" + text + "' stands alone (it is every " + noun + ")");
    const std::size_t dash = t.find('-', 1);  // after a leading minus sign
    Piece p;
    p.text = t;
    bool ok;
    if (dash == std::string::npos) {
      ok = to_int(t, p.first);
      p.last = p.first;
    } else {
      ok = to_int(trim(t.substr(0, dash)), p.first) && to_int(trim(t.substr(dash + 1)), p.last);
    }
    if (!ok) {
      const std::string in = t == whole ? "" : " in '" + text + "'";
      fail(context, "'" + t + "'" + in + " is not a " + noun + " number or range" + expected);
    }
    if (p.first > p.last && p.last >= 0)  // a negative end is out of range, said when checked
      fail(context, noun + " range '" + t + "' runs backwards (write " + std::to_string(p.last) + "-" + std::to_string(p.first) + ")");
    r.pieces_.push_back(p);
  };
  for (const char c : whole) {
    if (c == ',' || c == '|') {
      add(piece);
      piece.clear();
    } else {
      piece += c;
    }
  }
  add(piece);
  return r;
}

std::vector<std::int64_t> LayerRange::expand(std::int64_t count, bool count_known) const {
  std::vector<std::int64_t> out;
  if (all_) {
    for (std::int64_t i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> spans;
  for (const Piece& p : pieces_) {
    if (p.first < 0 || p.last < 0 || p.first >= count || p.last >= count) {
      if (count_known)
        fail(context_, noun_ + " range '" + p.text + "' is out of range [0, " + std::to_string(count) + ")");
      fail(context_, noun_ + " range '" + p.text + "' is out of range: " + noun_ + "s count from 0, up to " +
                         std::to_string(kMaxIndex));
    }
    spans.emplace_back(p.first, p.last);
  }
  // Overlapping pieces merged first, so the work is bounded by the count, not by the text.
  std::sort(spans.begin(), spans.end());
  std::int64_t next = 0;  // the first index not yet in `out`
  for (const auto& [first, last] : spans) {
    for (std::int64_t i = std::max(first, next); i <= last; ++i) out.push_back(i);
    next = std::max(next, last + 1);
  }
  return out;
}

std::vector<std::int64_t> LayerRange::indices(std::int64_t count) const { return expand(count, true); }

std::vector<std::int64_t> LayerRange::listed() const {
  if (all_) return {};
  return expand(kMaxIndex + 1, false);
}

std::vector<std::int64_t> parse_layer_range(const std::string& text, std::int64_t count, const std::string& context,
                                            const std::string& noun) {
  return LayerRange::parse(text, context, noun).indices(count);
}

}  // namespace luka
