#include "captures/consistency.h"

#include <algorithm>

#include "core/util/error.h"

namespace luka::capture {

void check_layout(const Layout& l, const std::string& name) {
  if (l.page_size.size() != l.layers.size() || l.prompt_tokens < 0 || l.num_heads <= 0 ||
      !std::is_sorted(l.layers.begin(), l.layers.end()) || !std::is_sorted(l.heads.begin(), l.heads.end()))
    fail(name, "damaged capture: inconsistent /layout attributes");
  for (const int x : l.layers)
    if (x < 0 || x >= l.num_layers) fail(name, "damaged capture: recorded layer out of range");
  for (const int x : l.heads)
    if (x < 0 || x >= l.num_heads) fail(name, "damaged capture: recorded head out of range");
}

void check_step_tokens(const std::vector<std::int64_t>& step_tokens, std::int64_t num_tokens, const std::string& name) {
  for (std::size_t i = 0; i < step_tokens.size(); ++i)
    if (step_tokens[i] < 1 || step_tokens[i] > num_tokens)
      fail(name, "damaged capture: decode step " + std::to_string(i + 1) + " attends " + std::to_string(step_tokens[i]) +
                     " tokens, outside the " + std::to_string(num_tokens) + " recorded");
}

std::vector<Token> tokens_from_columns(const TokenColumns& c, const std::string& name) {
  const std::size_t n = c.ids.size();
  if (c.segments.size() != n || c.probs.size() != n || c.generated.size() != n || c.piece_end.size() != n)
    fail(name, "damaged capture: token table columns differ in length");
  const auto total = static_cast<std::int64_t>(c.pieces.size());
  if (n > 0 && (c.piece_end.back() < 0 || c.piece_end.back() > total))
    fail(name, "damaged capture: token pieces out of range");
  std::vector<Token> out(n);
  std::int64_t begin = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t end = c.piece_end[i];
    if (end < begin || end > total) fail(name, "damaged capture: token pieces out of order");
    out[i] = Token{c.ids[i], c.pieces.substr(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)),
                   c.generated[i] != 0, c.segments[i], c.probs[i]};
    begin = end;
  }
  return out;
}

std::vector<Segment> segments_from_columns(const SegmentColumns& c, std::int64_t num_tokens, const std::string& name) {
  const std::size_t n = c.labels.size();
  if (c.colours.size() != n || c.begin.size() != n || c.end.size() != n)
    fail(name, "damaged capture: segment table columns differ in length");
  std::vector<Segment> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    // A segment is a span of the recorded tokens; one that ends before it begins numbered topics
    // from nothing.
    if (c.begin[i] < 0 || c.end[i] < c.begin[i] || c.end[i] > num_tokens)
      fail(name, "damaged capture: segment " + std::to_string(i) + " spans tokens [" + std::to_string(c.begin[i]) + ", " +
                     std::to_string(c.end[i]) + "), not a span of the " + std::to_string(num_tokens) + " recorded");
    out.push_back({c.labels[i], c.colours[i], c.begin[i], c.end[i]});
  }
  return out;
}

std::vector<PageInfo> pages_from_columns(int layer, const PageColumns& c, std::int64_t version,
                                         std::int64_t complete_steps, std::int64_t num_tokens, const std::string& name) {
  const std::size_t n = c.start.size();
  if (c.end.size() != n || c.created.size() != n) fail(name, "damaged capture: page table columns differ");
  // Version 1 has no member lists: every page holds [start, end).
  const bool lists = version >= 2;
  if (lists && (c.raw.size() != n || c.member_end.size() != n)) fail(name, "damaged capture: page table columns differ");
  if (lists && n > 0 && c.member_end.back() > static_cast<std::int64_t>(c.members.size()))
    fail(name, "damaged capture: page members end past their table");
  std::vector<PageInfo> out;
  std::int64_t from = 0;
  for (std::size_t i = 0; i < n; ++i) {
    PageInfo p{c.start[i], c.end[i], c.created[i], {}, false};
    if (lists) {
      const std::int64_t to = c.member_end[i];
      if (to < from || to > static_cast<std::int64_t>(c.members.size()))
        fail(name, "damaged capture: page member ends are not ascending");
      p.members.assign(c.members.begin() + from, c.members.begin() + to);
      p.raw = c.raw[i] != 0;
      from = to;
      for (std::size_t j = 0; j < p.members.size(); ++j)
        if (p.members[j] < p.start || p.members[j] >= p.end || (j > 0 && p.members[j] <= p.members[j - 1]))
          fail(name, "damaged capture: page " + std::to_string(i) + " lists positions outside [start, end) or out of order");
    }
    if (c.created[i] > complete_steps) continue;  // made by a step that did not complete
    if (p.start < 0 || p.end < p.start || p.end > num_tokens || c.created[i] < 0)
      fail(name, "damaged capture: layer " + std::to_string(layer) + " page " + std::to_string(i) + " spans tokens [" +
                     std::to_string(p.start) + ", " + std::to_string(p.end) + ") made at step " + std::to_string(c.created[i]) +
                     ", not a span of the " + std::to_string(num_tokens) + " recorded");
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace luka::capture
