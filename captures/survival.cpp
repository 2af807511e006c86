#include "captures/survival.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/util/error.h"

namespace luka::capture {

namespace {

std::int64_t parse_position(const std::string& text, const std::string& spec) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    fail("--track", "'" + spec + "' is not A-B, A or text:STRING");
  return std::stoll(text);
}

}  // namespace

TokenSpan parse_track(const std::string& spec, const std::vector<Token>& tokens, const std::vector<Segment>& segments) {
  const std::int64_t n = static_cast<std::int64_t>(tokens.size());
  const auto inside = [&](TokenSpan span, const std::string& what) {
    if (span.begin < 0 || span.end > n || span.end <= span.begin)
      fail("--track", what + " spans tokens " + std::to_string(span.begin) + "-" + std::to_string(span.end - 1) +
                          ", not within the capture's " + std::to_string(n));
    return span;
  };
  if (spec == "needle") {
    TokenSpan span{-1, -1};
    for (const Segment& s : segments)
      if (s.label.rfind("needle", 0) == 0) {
        span.begin = span.begin < 0 ? s.begin : std::min(span.begin, s.begin);
        span.end = std::max(span.end, s.end);
      }
    if (span.begin < 0)
      fail("--track", "the capture marks no needle (a prompt segment labelled \"needle 1\", as luka eval niah and ruler "
                      "write with --capture-dir)");
    return inside(span, "the needle");
  }
  if (spec.rfind("segment:", 0) == 0) {
    const std::string label = spec.substr(8);
    for (const Segment& s : segments)
      if (s.label == label) return inside({s.begin, s.end}, "segment \"" + label + "\"");
    fail("--track", "the capture has no prompt segment labelled \"" + label + "\"");
  }
  if (spec.rfind("text:", 0) == 0) {
    const std::string needle = spec.substr(5);
    if (needle.empty()) fail("--track", "text: needs the text to find");
    std::string text;
    std::vector<std::int64_t> owner;  // byte -> token
    for (std::int64_t i = 0; i < n; ++i) {
      text += tokens[static_cast<std::size_t>(i)].piece;
      owner.resize(text.size(), i);
    }
    const std::size_t at = text.find(needle);
    if (at == std::string::npos) fail("--track", "\"" + needle + "\" does not occur in the capture's text");
    return {owner[at], owner[at + needle.size() - 1] + 1};
  }
  const std::size_t dash = spec.find('-');
  const std::int64_t a = parse_position(spec.substr(0, dash), spec);
  const std::int64_t b = dash == std::string::npos ? a : parse_position(spec.substr(dash + 1), spec);
  if (b < a) fail("--track", "'" + spec + "' ends before it starts");
  if (b >= n) fail("--track", "'" + spec + "' goes past the capture's " + std::to_string(n) + " tokens (0 to " + std::to_string(n - 1) + ")");
  return {a, b + 1};
}

std::vector<SurvivalRow> track_tokens(const CaptureView& capture, TokenSpan span, const std::vector<int>& layers,
                                      const std::vector<int>& heads) {
  const Summary s = capture.summary();
  if (!s.layout.covers) fail("--track", "the capture has no covers (record them with --record parts=covers)");
  const std::vector<int> ls = layers.empty() ? s.layout.layers : layers;
  const std::vector<int> hs = heads.empty() ? s.layout.heads : heads;
  for (const int l : ls) (void)recorded_index(s.layout.layers, l, "layer");
  for (const int h : hs) (void)recorded_index(s.layout.heads, h, "head");
  std::vector<SurvivalRow> out;
  for (std::int64_t step = 1; step <= s.complete_steps; ++step)
    for (const int l : ls)
      for (const int h : hs) {
        const std::vector<std::uint8_t> cover = capture.cover(step, l, h);
        std::vector<float> row;
        if (s.layout.rows) row = capture.row(step, l, h);
        SurvivalRow r;
        r.step = step;
        r.layer = l;
        r.head = h;
        for (std::int64_t t = span.begin; t < span.end; ++t) {
          const bool in = t < static_cast<std::int64_t>(cover.size());
          r.states.push_back(in ? cover[static_cast<std::size_t>(t)] : static_cast<std::uint8_t>(kAbsent));
          r.attention.push_back(!s.layout.rows ? std::numeric_limits<float>::quiet_NaN()
                                               : t < static_cast<std::int64_t>(row.size()) ? row[static_cast<std::size_t>(t)] : 0.0f);
        }
        out.push_back(std::move(r));
      }
  return out;
}

std::vector<SurvivalSummary> summarize_survival(const std::vector<SurvivalRow>& rows) {
  std::map<std::pair<int, int>, SurvivalSummary> by;
  std::vector<std::pair<int, int>> order;
  for (const SurvivalRow& r : rows) {
    auto [it, added] = by.try_emplace({r.layer, r.head});
    if (added) {
      it->second.layer = r.layer;
      it->second.head = r.head;
      order.push_back({r.layer, r.head});
    }
    SurvivalSummary& s = it->second;
    ++s.steps;
    double mass = 0;
    for (std::size_t i = 0; i < r.states.size(); ++i) {
      ++s.counts[r.states[i] < 6 ? r.states[i] : 0];
      mass += r.attention[i];
    }
    s.mass += mass;  // NaN stays NaN
  }
  std::vector<SurvivalSummary> out;
  for (const auto& key : order) {
    SurvivalSummary s = by.at(key);
    s.mass /= static_cast<double>(s.steps);
    out.push_back(s);
  }
  return out;
}

const char* cover_state_name(std::uint8_t state) {
  static const char* const kNames[] = {"absent", "summarized", "refined", "raw", "heavy", "dropped"};
  return state < 6 ? kNames[state] : "unknown";
}

char cover_state_letter(std::uint8_t state) {
  static const char kLetters[] = {'.', 's', 'R', 'r', 'h', 'x'};
  return state < 6 ? kLetters[state] : '?';
}

}  // namespace luka::capture
