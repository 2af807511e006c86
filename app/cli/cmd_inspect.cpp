// luka inspect: what a capture holds — model, config, tokens, steps, recorded layers and heads,
// and the size of each part — without loading any of its arrays; with --topics or --heads, the
// numbers captures/analysis.h computes from its maps and rows (docs/capture-analysis.md).
//
// Index of this file:
//   [SECTION] the selection and --track
//   [SECTION] --topics and --heads
//   [SECTION] the summary and the command

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/luka_options.h"
#include "captures/analysis.h"
#include "captures/reader.h"
#include "captures/survival.h"
#include "core/eval/calibration.h"
#include "core/luka/config.h"

namespace luka::cli {
namespace {

// [SECTION] the selection and --track

std::string list(const std::vector<int>& v, int total) {
  if (static_cast<int>(v.size()) == total) return "all " + std::to_string(total);
  std::string s;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(v[i]) + (j > i ? "-" + std::to_string(v[j]) : "");
    i = j + 1;
  }
  return s + " (" + std::to_string(v.size()) + " of " + std::to_string(total) + ")";
}

std::string mb(std::uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MB", static_cast<double>(b) / 1e6);
  return buf;
}

std::string short_hash(const std::string& h) { return h.size() > 16 ? h.substr(0, 16) : h; }

// The options that pick from the capture (--layer, --head, --decode-topic) against what it holds:
// a value it does not have is the command line's error (exit 2), named with the file.
void check_selection(const capture::CaptureFile& file, const std::string& path, const ArgParser& args) {
  const capture::Layout& l = file.summary().layout;
  const auto check = [&](const char* option, const std::vector<int>& recorded) {
    if (!args.has(option)) return;
    for (const int v : parse_layer_list(option, args.get(option), option))
      if (!std::binary_search(recorded.begin(), recorded.end(), v))
        throw UsageError(std::string("--") + option + " " + std::to_string(v) + ": " + path + ": " + option + " " +
                         std::to_string(v) + " is not recorded");
  };
  check("layer", l.layers);
  check("head", l.heads);
  if (args.has("decode-topic")) {
    std::vector<std::string> labels;
    for (const auto& s : file.segments())
      if (std::find(labels.begin(), labels.end(), s.label) == labels.end()) labels.push_back(s.label);
    const std::string letter = args.get("decode-topic");
    if (letter.size() == 1 && letter[0] >= 'A' && letter[0] <= 'Z' && letter[0] - 'A' >= static_cast<int>(labels.size()))
      throw UsageError("--decode-topic " + letter + ": " + path + ": the capture has " + std::to_string(labels.size()) + " topics");
  }
}

// luka inspect FILE --track SPEC [--layer L [--head H]] [--json].
int print_survival(const capture::CaptureFile& file, const ArgParser& args) {
  const auto tokens = file.tokens();
  const bool needle = args.get_flag("needle-track");
  const capture::TokenSpan span = option_value(needle ? "needle-track" : "track", [&] {
    return capture::parse_track(needle ? "needle" : args.get("track"), tokens, file.segments());
  });
  // --layer and --head are lists for the other reports; --track takes one of each.
  const auto one = [&](const char* option) {
    const std::vector<std::int64_t> v = parse_int_list(option, args.get(option));
    if (v.size() != 1 || v[0] < 0 || v[0] > INT32_MAX)
      throw UsageError(std::string("--") + option + " with --track: one " + option + " number, got '" + args.get(option) + "'");
    return std::vector<int>{static_cast<int>(v[0])};
  };
  std::vector<int> layers, heads;
  if (args.has("layer")) layers = one("layer");
  if (args.has("head")) heads = one("head");
  const auto rows = capture::track_tokens(file, span, layers, heads);
  std::string text;
  for (std::int64_t t = span.begin; t < span.end; ++t) text += tokens[static_cast<std::size_t>(t)].piece;
  if (args.get_flag("json")) {
    nlohmann::json j = {{"begin", span.begin}, {"end", span.end}, {"text", text}, {"rows", nlohmann::json::array()}};
    for (const auto& r : rows) {
      nlohmann::json states = nlohmann::json::array(), attention = nlohmann::json::array();
      for (std::size_t i = 0; i < r.states.size(); ++i) {
        states.push_back(capture::cover_state_name(r.states[i]));
        attention.push_back(std::isnan(r.attention[i]) ? nlohmann::json() : nlohmann::json(r.attention[i]));
      }
      j["rows"].push_back({{"step", r.step}, {"layer", r.layer}, {"head", r.head}, {"states", states}, {"attention", attention}});
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("tracking   tokens %lld-%lld (%lld tokens): \"%s\"\n", static_cast<long long>(span.begin), static_cast<long long>(span.end - 1),
              static_cast<long long>(span.end - span.begin), text.c_str());
  if (rows.empty()) {
    std::printf("no complete decode step\n");
    return 0;
  }
  if (args.has("head")) {  // one head's timeline
    std::printf("%-6s %-*s %s\n", "step", static_cast<int>(std::max<std::size_t>(6, rows[0].states.size())), "states", "attention");
    for (const auto& r : rows) {
      std::string states;
      double mass = 0;
      for (std::size_t i = 0; i < r.states.size(); ++i) states += capture::cover_state_letter(r.states[i]), mass += r.attention[i];
      std::printf("%-6lld %-*s %.5f\n", static_cast<long long>(r.step), static_cast<int>(std::max<std::size_t>(6, states.size())), states.c_str(), mass);
    }
    std::printf("states: r raw, s in a page summary, R refined, h heavy hitter, x dropped, . not yet in the context\n");
    return 0;
  }
  // Per layer over its heads, or per head of one layer.
  auto summaries = capture::summarize_survival(rows);
  if (!args.has("layer")) {  // heads summed; the attention is the mean over heads
    std::vector<capture::SurvivalSummary> per_layer;
    std::vector<int> heads_of;
    for (const auto& s : summaries) {
      if (per_layer.empty() || per_layer.back().layer != s.layer) {
        per_layer.push_back(s);
        per_layer.back().head = -1;
        heads_of.push_back(1);
        continue;
      }
      auto& p = per_layer.back();
      for (std::size_t k = 0; k < 6; ++k) p.counts[k] += s.counts[k];
      p.mass += s.mass;
      ++heads_of.back();
    }
    for (std::size_t i = 0; i < per_layer.size(); ++i) per_layer[i].mass /= heads_of[i];
    summaries = per_layer;
  }
  std::printf("%-6s %-5s %8s %8s %8s %8s %8s %8s  %s\n", "layer", "head", "raw", "summary", "refined", "heavy", "dropped", "absent",
              "attention/step");
  for (const auto& s : summaries) {
    std::int64_t total = 0;
    for (const auto c : s.counts) total += c;
    const auto pct = [&](int k) { return total ? 100.0 * static_cast<double>(s.counts[static_cast<std::size_t>(k)]) / static_cast<double>(total) : 0.0; };
    std::printf("%-6d %-5s %7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%%  %.5f\n", s.layer, s.head < 0 ? "all" : std::to_string(s.head).c_str(),
                pct(capture::kRaw), pct(capture::kSummarized), pct(capture::kRefined), pct(capture::kHeavy), pct(capture::kDropped),
                pct(capture::kAbsent), s.mass);
  }
  return 0;
}

// [SECTION] --topics and --heads

// A manifest attribute that holds JSON, as JSON: null when empty (captures from before it was
// written), the text itself when it does not parse, so that --json always prints valid JSON.
nlohmann::json embedded_json(const std::string& text) {
  if (text.empty()) return nullptr;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? nlohmann::json(text) : j;
}

// The mode switches a run made as it ran (--schedule, or the Studio's live switches): the
// generation's "schedule", empty when none or unreadable.
std::string schedule_of(const std::string& generation) {
  const nlohmann::json g = nlohmann::json::parse(generation, nullptr, false);
  if (!g.is_object() || !g.contains("schedule") || !g["schedule"].is_string()) return "";
  return g["schedule"].get<std::string>();
}

// The generation settings on one line: the configs of the Studio's live changes (each in full)
// are counted, not printed; --json has them.
std::string generation_line(const std::string& generation) {
  nlohmann::json g = nlohmann::json::parse(generation, nullptr, false);
  if (!g.is_object() || !g.contains("live_changes") || !g["live_changes"].is_array()) return generation;
  const std::size_t changes = g["live_changes"].size();
  g.erase("live_changes");
  return g.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + " (" + std::to_string(changes) +
         " live config changes)";
}

nlohmann::json number(double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); }

std::string fixed(double v, int width, int digits) {
  char buf[64];
  if (std::isnan(v)) std::snprintf(buf, sizeof buf, "%*s", width, "-");
  else std::snprintf(buf, sizeof buf, "%*.*f", width, digits, v);
  return buf;
}

// --layer / --head with --topics or --heads: lists of recorded layers and heads (the analysis
// checks that each is recorded).
capture::AnalysisOptions analysis_options(const ArgParser& args) {
  capture::AnalysisOptions o;
  if (args.has("layer")) o.layers = parse_layer_list("layer", args.get("layer"), "layer");
  if (args.has("head")) o.heads = parse_layer_list("head", args.get("head"), "head");
  if (args.has("decode-topic")) {
    const std::string letter = args.get("decode-topic");
    if (letter.size() != 1 || letter[0] < 'A' || letter[0] > 'Z') throw UsageError("--decode-topic: '" + letter + "' is not a topic letter A-Z");
    o.decode_topic = letter[0] - 'A';
  }
  return o;
}

std::string notes(bool prefill, const std::string& prefill_note, bool decode, const std::string& decode_note) {
  std::string s;
  if (!prefill) s += "prefill: " + prefill_note;
  if (!decode) s += std::string(s.empty() ? "" : "; ") + "decode: " + decode_note;
  return s;
}

// The fields --topics and --heads share: the file, its prompt and steps, and which parts the numbers come from.
nlohmann::json report_json(const capture::CaptureView& view, const std::string& path, std::int64_t steps, bool prefill,
                           const std::string& prefill_note, bool decode, const std::string& decode_note) {
  nlohmann::json j = {{"file", path}, {"prompt_tokens", view.summary().layout.prompt_tokens}, {"steps", steps},
                      {"prefill", prefill}, {"decode", decode}};
  if (!prefill || !decode) j["notes"] = notes(prefill, prefill_note, decode, decode_note);
  return j;
}

// luka inspect FILE --topics [--layer L,...] [--head H,...] [--json].
int print_topics(const capture::CaptureView& view, const std::string& path, const ArgParser& args) {
  const capture::TopicAnalysis a = capture::analyze_topics(view, analysis_options(args));
  const capture::TopicIndex& t = a.topics;
  const std::size_t S = t.segments.size(), K = t.labels.size();
  std::vector<std::string> segment_names, topic_names = t.letters;
  for (std::size_t i = 0; i < S; ++i) segment_names.push_back(std::to_string(i) + ":" + t.letters[static_cast<std::size_t>(t.segment_topic[i])]);
  segment_names.push_back("other");
  topic_names.push_back("other");
  const auto counts = [&](const std::vector<std::int64_t>& v) { return v.empty() ? nlohmann::json() : nlohmann::json(v); };

  if (args.get_flag("json")) {
    using nlohmann::json;
    json j = report_json(view, path, a.steps, a.prefill, a.prefill_note, a.decode, a.decode_note);
    j["covers"] = a.covers;
    j["topics"] = json::array();
    for (std::size_t k = 0; k < K; ++k) {
      json segs = json::array();
      for (std::size_t i = 0; i < S; ++i)
        if (t.segment_topic[i] == static_cast<int>(k)) segs.push_back(i);
      j["topics"].push_back({{"letter", t.letters[k]}, {"label", t.labels[k]}, {"colour", t.colours[k]}, {"segments", segs}});
    }
    j["segments"] = json::array();
    for (std::size_t i = 0; i < S; ++i)
      j["segments"].push_back({{"index", i}, {"label", t.segments[i].label}, {"topic", t.letters[static_cast<std::size_t>(t.segment_topic[i])]},
                               {"begin", t.segments[i].begin}, {"end", t.segments[i].end}});
    j["decode_topic"] = t.decode_topic >= 0 ? json(t.letters[static_cast<std::size_t>(t.decode_topic)]) : json();
    j["columns"] = {{"segments", segment_names}, {"topics", topic_names}};
    j["heads"] = json::array();
    for (const auto& h : a.heads) {
      json e = {{"layer", h.layer}, {"head", h.head}};
      if (a.prefill) {
        json m = json::array();
        for (std::size_t i = 0; i <= S; ++i)
          m.push_back(std::vector<double>(h.prefill_matrix.begin() + static_cast<std::ptrdiff_t>(i * (S + 1)),
                                          h.prefill_matrix.begin() + static_cast<std::ptrdiff_t>((i + 1) * (S + 1))));
        e["prefill"] = {{"matrix", m}, {"queries", h.prefill_queries}, {"leakage", number(h.prefill_leakage)}};
      }
      if (a.decode) {
        json by_topic = json::object();  // the leakage against each topic, by letter
        for (std::size_t k = 0; k < h.decode_leakage_by_topic.size() && k < a.topics.letters.size(); ++k)
          by_topic[a.topics.letters[k]] = number(h.decode_leakage_by_topic[k]);
        e["decode"] = {{"leakage", number(h.decode_leakage)}, {"leakage_by_topic", by_topic}, {"refined_pages", counts(h.refined_pages)},
                       {"heavy_hitters", counts(h.heavy_hitters)}, {"steps", json::array()}};
      }
      j["heads"].push_back(std::move(e));
    }
    // Steps are stored step-major; each goes to its head's entry.
    const std::size_t per_step = a.heads.size();
    for (std::size_t i = 0; i < a.steps_by_head.size(); ++i) {
      const auto& st = a.steps_by_head[i];
      j["heads"][i % per_step]["decode"]["steps"].push_back({{"step", st.step}, {"segments", st.segment_mass}, {"topics", st.topic_mass},
                                                              {"generated", st.generated}, {"leakage", st.leakage},
                                                              {"refined_pages", counts(st.refined_pages)}, {"heavy_hitters", counts(st.heavy_hitters)}});
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }

  std::printf("topics    ");
  for (std::size_t k = 0; k < K; ++k) {
    std::string segs;
    for (std::size_t i = 0; i < S; ++i)
      if (t.segment_topic[i] == static_cast<int>(k)) segs += (segs.empty() ? "" : ", ") + std::to_string(i);
    std::printf("%s%s %s (segment%s %s)", k ? ", " : "", t.letters[k].c_str(), t.labels[k].c_str(), segs.find(',') != std::string::npos ? "s" : "",
                segs.c_str());
  }
  std::printf("\n");
  if (!a.prefill || !a.decode) std::printf("missing   %s\n", notes(a.prefill, a.prefill_note, a.decode, a.decode_note).c_str());
  std::printf("leakage   mass on segments of other topics: prefill, mean over query rows inside a segment; decode, mean over %lld steps,\n"
              "          against topic %s%s\n",
              static_cast<long long>(a.steps), t.decode_topic >= 0 ? t.letters[static_cast<std::size_t>(t.decode_topic)].c_str() : "-",
              args.has("decode-topic") ? "" : " (the last segment's)");
  std::string topic_head;
  for (const auto& name : topic_names) topic_head += " " + std::string(std::max<std::size_t>(1, 6 - name.size()), ' ') + name;
  std::printf("\n%-6s %-5s %9s %9s", "layer", "head", "prefill", "decode");
  if (a.covers) std::printf("   refined pages by topic%*s   heavy hitters by topic", static_cast<int>(topic_head.size()) - 23, "");
  std::printf("\n%-6s %-5s %9s %9s", "", "", "leakage", "leakage");
  if (a.covers) std::printf("  %s  %s", topic_head.c_str(), topic_head.c_str());
  std::printf("\n");
  for (const auto& h : a.heads) {
    std::printf("%-6d %-5d %s %s", h.layer, h.head, fixed(h.prefill_leakage, 9, 4).c_str(), fixed(h.decode_leakage, 9, 4).c_str());
    if (a.covers) {
      std::printf("  ");
      for (const auto c : h.refined_pages) std::printf(" %6lld", static_cast<long long>(c));
      std::printf("  ");
      for (const auto c : h.heavy_hitters) std::printf(" %6lld", static_cast<long long>(c));
    }
    std::printf("\n");
  }
  // One head: its segment matrix and each step's mass by topic.
  if (a.heads.size() == 1) {
    const auto& h = a.heads[0];
    if (a.prefill) {
      std::printf("\nprefill, layer %d head %d: row = query segment, column = key segment; the mean over the row's queries of their mass on the column\n",
                  h.layer, h.head);
      std::printf("%-8s %7s", "", "queries");
      for (const auto& name : segment_names) std::printf(" %7s", name.c_str());
      std::printf("\n");
      for (std::size_t i = 0; i <= S; ++i) {
        std::printf("%-8s %7lld", segment_names[i].c_str(), static_cast<long long>(h.prefill_queries[i]));
        for (std::size_t jj = 0; jj <= S; ++jj) std::printf(" %s", fixed(h.prefill_matrix[i * (S + 1) + jj], 7, 4).c_str());
        std::printf("\n");
      }
    }
    if (a.decode) {
      std::printf("\ndecode, layer %d head %d: each step's attention by topic (\"other\" includes the generated tokens)\n", h.layer, h.head);
      std::printf("%-6s", "step");
      for (const auto& name : topic_names) std::printf(" %7s", name.c_str());
      std::printf(" %9s %8s\n", "generated", "leakage");
      for (const auto& st : a.steps_by_head) {
        std::printf("%-6lld", static_cast<long long>(st.step));
        for (const double v : st.topic_mass) std::printf(" %s", fixed(v, 7, 4).c_str());
        std::printf(" %s %s\n", fixed(st.generated, 9, 4).c_str(), fixed(st.leakage, 8, 4).c_str());
      }
    }
  }
  return 0;
}

nlohmann::json scores_json(const capture::PatternScores& p) {
  return {{"sink", number(p.sink)},
          {"entropy", number(p.entropy)},
          {"locality", number(p.locality)},
          {"previous_token", number(p.previous_token)},
          {"induction", number(p.induction)},
          {"cross_topic", number(p.cross_topic)},
          {"rows", p.rows},
          {"previous_rows", p.previous_rows},
          {"induction_rows", p.induction_rows},
          {"cross_rows", p.cross_rows}};
}

// luka inspect FILE --heads [--layer L,...] [--head H,...] [--json].
int print_heads(const capture::CaptureView& view, const std::string& path, const ArgParser& args) {
  const capture::HeadScoreAnalysis a = capture::analyze_heads(view, analysis_options(args));
  if (args.get_flag("json")) {
    nlohmann::json j = report_json(view, path, a.steps, a.prefill, a.prefill_note, a.decode, a.decode_note);
    j["topics"] = a.topics;
    j["decode_topic"] = a.decode_topic >= 0 ? nlohmann::json(a.topic_letters[static_cast<std::size_t>(a.decode_topic)]) : nlohmann::json();
    j["kl_source"] = "per head: the mean of decode/fidelity KL(dense || effective) over the steps the dense shadow ran";
    j["heads"] = nlohmann::json::array();
    for (const auto& h : a.heads) {
      nlohmann::json e = {{"layer", h.layer}, {"head", h.head}, {"kl", number(h.kl)}, {"kl_steps", h.kl_steps}};
      if (a.prefill) e["prefill"] = scores_json(h.prefill);
      if (a.decode) e["decode"] = scores_json(h.decode);
      j["heads"].push_back(std::move(e));
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  const std::int64_t n = view.summary().layout.prompt_tokens;
  std::printf("head scores of %s\n", path.c_str());
  if (!a.prefill || !a.decode) std::printf("missing   %s\n", notes(a.prefill, a.prefill_note, a.decode, a.decode_note).c_str());
  std::printf("sink: mass on token 0; entropy in nats; locality: mean distance back (tokens); prev: mass on the previous token;\n"
              "induction: mass on tokens that followed earlier occurrences of the query's token; cross: mass on other topics' segments%s;\n"
              "KL: mean dense-shadow KL(dense || effective) over the steps it ran\n",
              a.topics ? "" : " (no segments: -)");
  // KL is a decode-step number: in the decode table, or the prefill one when rows were not recorded.
  const auto table = [&](const std::string& title, const capture::PatternScores capture::HeadScoreRow::*part, bool kl) {
    std::printf("\n%s\n%-6s %-5s %7s %8s %9s %7s %9s %7s %10s\n", title.c_str(), "layer", "head", "sink", "entropy", "locality", "prev", "induction",
                "cross", kl ? "KL" : "");
    for (const auto& h : a.heads) {
      const capture::PatternScores& p = h.*part;
      std::printf("%-6d %-5d %s %s %s %s %s %s %s\n", h.layer, h.head, fixed(p.sink, 7, 4).c_str(), fixed(p.entropy, 8, 3).c_str(),
                  fixed(p.locality, 9, 2).c_str(), fixed(p.previous_token, 7, 4).c_str(), fixed(p.induction, 9, 4).c_str(),
                  fixed(p.cross_topic, 7, 4).c_str(), kl ? fixed(h.kl, 10, 5).c_str() : "");
    }
  };
  if (a.prefill) table("prefill: the mean over the " + std::to_string(n) + " query rows of the level-0 map", &capture::HeadScoreRow::prefill, !a.decode);
  if (a.decode) {
    std::string title = "decode: the mean over " + std::to_string(a.steps) + " steps' effective rows";
    if (a.topics) title += args.has("decode-topic") ? "; cross-topic against topic " + args.get("decode-topic") : "; cross-topic against the last segment's topic";
    table(title, &capture::HeadScoreRow::decode, true);
  }
  return 0;
}

// luka inspect FILE --calibration [--layer L,...] [--head H,...] [--json]: the `luka calibrate` file
// attached to the capture (luka capture --calibration), as a table or as the file itself.
int print_calibration(const capture::CaptureView& view, const std::string& path, const ArgParser& args) {
  const std::string& text = view.summary().manifest.calibration;
  if (text.empty()) fail(path, "has no calibration attached (luka capture --calibration FILE attaches one)");
  const eval::Calibration c = eval::parse_calibration(text, path + ": manifest/calibration");
  std::set<int> layers, heads;
  if (args.has("layer"))
    for (const int l : parse_layer_list("layer", args.get("layer"), "layer", c.num_layers)) layers.insert(l);
  if (args.has("head"))
    for (const int h : parse_layer_list("head", args.get("head"), "head", c.num_heads)) heads.insert(h);
  const auto shown = [&](const eval::CalibrationHead& r) { return (layers.empty() || layers.count(r.layer)) && (heads.empty() || heads.count(r.head)); };
  if (args.get_flag("json")) {
    nlohmann::json j = nlohmann::json::parse(text);
    if (!layers.empty() || !heads.empty()) {  // only the chosen layers and heads, in the file's shape
      nlohmann::json kept = nlohmann::json::array();
      for (nlohmann::json& layer : j["layers"]) {
        const int l = layer["layer"].get<int>();
        if (!layers.empty() && !layers.count(l)) continue;
        const auto keep_heads = [&](nlohmann::json& list) {
          nlohmann::json out = nlohmann::json::array();
          for (std::size_t h = 0; h < list.size(); ++h)
            if (heads.empty() || heads.count(static_cast<int>(h))) out.push_back(list[h]);
          list = std::move(out);
        };
        keep_heads(layer["heads"]);
        for (nlohmann::json& cand : layer["candidates"]) keep_heads(cand["heads"]);
        kept.push_back(std::move(layer));
      }
      j["layers"] = std::move(kept);
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("calibration of %s: %s, %lld tokens (%lld prefilled, %lld decode steps)\n", path.c_str(), c.source.c_str(),
              static_cast<long long>(c.tokens), static_cast<long long>(c.prompt_tokens), static_cast<long long>(c.decode_steps));
  std::printf("under dense attention: sink mass on token 0, entropy in nats, locality (mean distance back), cross-topic mass%s;\n"
              "per candidate: the attention output's relative L2 error against dense (lower is closer); best: the lowest\n",
              c.topics ? "" : " (no segments: -)");
  for (std::size_t k = 0; k < c.candidates.size(); ++k) std::printf("  c%zu  %s\n", k, c.candidates[k].c_str());
  std::printf("\n%-6s %-5s %7s %8s %9s %7s", "layer", "head", "sink", "entropy", "locality", "cross");
  for (std::size_t k = 0; k < c.candidates.size(); ++k) std::printf(" %8s", ("c" + std::to_string(k)).c_str());
  std::printf("  best\n");
  for (const eval::CalibrationHead& r : c.heads) {
    if (!shown(r)) continue;
    std::printf("%-6d %-5d %s %s %s %s", r.layer, r.head, fixed(r.sink, 7, 4).c_str(), fixed(r.entropy, 8, 3).c_str(),
                fixed(r.locality, 9, 2).c_str(), fixed(r.cross_topic, 7, 4).c_str());
    for (const eval::CandidateScores& s : r.candidates) std::printf(" %s", fixed(s.rel_l2, 8, 4).c_str());
    std::printf("  %s\n", r.best >= 0 ? ("c" + std::to_string(r.best)).c_str() : "-");
  }
  return 0;
}

// [SECTION] the summary and the command

// The capture's summary: model, config, tokens and segments, steps, what was recorded, and the
// size of each part stored and uncompressed; as text or one JSON object.
int print_summary(const capture::CaptureFile& f, const std::string& path, bool json) {
  const capture::Summary s = f.summary();
  const capture::Layout& l = s.layout;
  const capture::Manifest& m = s.manifest;
  const auto tokens = f.tokens();
  const auto segments = f.segments();
  const auto parts = f.storage();
  std::int64_t generated = 0;
  for (const auto& t : tokens) generated += t.generated ? 1 : 0;
  std::string modes = "?";
  try {
    modes = describe_modes(LukaConfig::from_json(m.luka_config, l.num_layers, "manifest"));
  } catch (const Error&) {
  }

  if (json) {
    nlohmann::json j;
    j["file"] = path;
    j["bytes"] = f.file_bytes();
    j["version"] = capture::kFormatVersion;
    j["finished"] = s.finished;
    j["complete_steps"] = s.complete_steps;
    j["model"] = {{"path", m.model_path}, {"architecture", m.architecture}, {"dtype", m.dtype}, {"device", m.device},
                  {"weights_hash", m.weights_hash}, {"tokenizer_hash", m.tokenizer_hash}};
    j["created"] = m.created;
    j["tool"] = {{"version", m.tool_version}, {"git_revision", m.git_revision}};
    j["attention"] = modes;
    j["luka_config"] = embedded_json(m.luka_config);
    j["generation"] = embedded_json(m.generation);
    j["record"] = m.record;
    j["calibration"] = !m.calibration.empty();
    j["tokens"] = {{"prompt", l.prompt_tokens}, {"generated", generated}, {"total", tokens.size()}};
    j["segments"] = nlohmann::json::array();
    for (const auto& seg : segments) j["segments"].push_back({{"label", seg.label}, {"colour", seg.colour}, {"begin", seg.begin}, {"end", seg.end}});
    j["layers"] = l.layers;
    j["heads"] = l.heads;
    j["levels"] = l.levels;
    j["rows"] = l.rows;
    j["covers"] = l.covers;
    j["parts"] = nlohmann::json::object();
    for (const auto& [name, size] : parts) j["parts"][name] = {{"stored", size.stored}, {"uncompressed", size.logical}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }

  std::printf("capture    %s: %s, luka-capture version %d, %s\n", path.c_str(), mb(f.file_bytes()).c_str(),
              capture::kFormatVersion,
              s.finished ? "finished" : ("not finished (cut off or still running): " + std::to_string(s.complete_steps) + " complete steps").c_str());
  std::printf("model      %s (%s, %s on %s)\n", m.model_path.c_str(), m.architecture.c_str(), m.dtype.c_str(), m.device.c_str());
  if (!m.weights_hash.empty() && m.weights_hash == m.tokenizer_hash)  // a GGUF file holds both
    std::printf("hashes     weights and tokenizer %s… (one file)\n", short_hash(m.weights_hash).c_str());
  else
    std::printf("hashes     weights %s…, tokenizer %s…\n", short_hash(m.weights_hash).c_str(), short_hash(m.tokenizer_hash).c_str());
  std::printf("created    %s by luka %s (%s)\n", m.created.c_str(), m.tool_version.c_str(), m.git_revision.c_str());
  std::printf("attention  %s\n", modes.c_str());
  std::printf("generation %s\n", generation_line(m.generation).c_str());
  if (const std::string switches = schedule_of(m.generation); !switches.empty())
    std::printf("switches   %s\n", switches.c_str());
  std::printf("tokens     %lld prompt + %lld generated\n", static_cast<long long>(l.prompt_tokens), static_cast<long long>(generated));
  for (const auto& seg : segments)
    std::printf("  segment  %-24s %s  tokens [%lld, %lld)\n", seg.label.c_str(), seg.colour.c_str(), static_cast<long long>(seg.begin),
                static_cast<long long>(seg.end));
  std::printf("steps      %lld decode steps\n", static_cast<long long>(s.complete_steps));
  std::printf("layers     %s\n", list(l.layers, l.num_layers).c_str());
  std::printf("heads      %s\n", list(l.heads, l.num_heads).c_str());
  std::string levels;
  for (const int k : l.levels)
    levels += (levels.empty() ? "" : ", ") + std::to_string(k) + " (" + std::to_string(capture::level_size(l.prompt_tokens, k)) + "²)";
  std::printf("maps       %s\n", levels.empty() ? "not recorded" : ("levels " + levels).c_str());
  std::printf("per step   %s%s\n", l.rows ? "effective rows, " : "", l.covers ? "covers, page states, summary mass, metrics" : "metrics");
  std::printf("record     %s\n", m.record.c_str());
  if (!m.calibration.empty()) {
    std::string what = "attached (luka inspect --calibration shows it)";
    try {
      const eval::Calibration c = eval::parse_calibration(m.calibration, "manifest");
      what = c.source + ", " + std::to_string(c.candidates.size()) + " candidates; " + what;
    } catch (const Error& e) {
      what = std::string("unreadable: ") + e.what();
    }
    std::printf("calibration %s\n", what.c_str());
  }
  std::printf("size       %-8s %12s %14s %7s\n", "part", "stored", "uncompressed", "ratio");
  for (const auto& [name, size] : parts)
    std::printf("           %-8s %12s %14s %7.1f\n", name.c_str(), mb(size.stored).c_str(), mb(size.logical).c_str(),
                size.stored ? static_cast<double>(size.logical) / static_cast<double>(size.stored) : 0.0);
  return 0;
}

}  // namespace

int run_inspect(int argc, char** argv) {
  ArgParser args("inspect", "FILE [--json] [--track SPEC | --needle-track | --topics | --heads | --calibration] [--layer L] [--head H]",
                 "Summarizes a capture: model, LuKA config, tokens and segments, decode steps, the layers,\n"
                 "heads and map levels recorded, and the size of each part stored and uncompressed. A capture\n"
                 "cut off by a crash is reported with its complete steps.");
  args.positional("FILE", "the capture to read")
      .flag("json", "print one JSON object instead of text")
      .option("track", "SPEC", "what became of tokens at every decode step: A-B (positions, both included), A,\n"
              "text:STRING (the tokens covering its first occurrence, e.g. an answer span), segment:LABEL (a\n"
              "prompt segment) or needle (as --needle-track)")
      .flag("needle-track", "--track of the needles a luka eval niah or ruler capture marks (its segments \"needle 1\",\n"
            "...): where their tokens were kept, summarized, refined or evicted, per layer and step")
      .flag("topics", "attention by topic of an interwoven prompt: segment x segment mass of the prefill,\n"
            "each decode step's mass per segment and topic, cross-topic leakage, refined pages and heavy\n"
            "hitters by topic, per layer and head")
      .flag("heads", "head scores per layer and head, from the prefill map and the decode rows: sink mass,\n"
            "entropy, locality, previous-token and induction mass, cross-topic mass, dense-shadow KL")
      .flag("calibration", "the luka calibrate file attached to the capture (luka capture --calibration): per\n"
            "layer and head, dense pattern scores and each candidate's output error against dense")
      .option("decode-topic", "X", "with --topics or --heads: the topic letter decode queries are measured against\n"
              "(cross-topic leakage), e.g. the topic a question asks about",
              Default::described_text("the question's (the prompt file's question_topic), else the last segment's"))
      .option("layer", "L", "with --track: one layer, per head (with --head: per step); with --topics, --heads or\n"
              "--calibration: layers to include, a layer list such as 12, 0,12,29 or 0-3|12\n"
              "(docs/luka-config.md#layer-lists)")
      .option("head", "H", "with --track and --layer: one head's timeline, one line per step; with --topics,\n"
              "--heads or --calibration: heads to include, the same list grammar (one layer and one head: --topics adds its\n"
              "matrix and steps)");
  args.epilog("With --track, per layer (or per head, or per step) the share of token-steps kept raw (r), seen\n"
              "through a page summary (s), refined back (R), kept as heavy hitters (h) or dropped (x), and the\n"
              "attention the span got per step.\n\n"
              "--topics and --heads compute from the prefill map's level 0 (recorded when the prompt fits\n"
              "map_cap) and the decode steps' effective rows; docs/capture-analysis.md defines every number.\n"
              "A topic is a segment label; decode queries, in no segment, are measured against the topic of\n"
              "the prompt's last segment. --topics needs a capture of an interwoven prompt.\n\n"
              "examples:\n  luka capture --prompt \"The capital of France is\" --out run.h5 && luka inspect run.h5\n"
              "  luka inspect run.h5 --track text:Paris --layer 12\n"
              "  luka inspect caps/clustered/niah-1024-d50-s0.h5 --needle-track   # luka eval niah --capture-dir caps\n"
              "  luka capture --prompt-file assets/prompts/demo.json --record layers=0,14,29 --out demo.h5\n"
              "  luka inspect demo.h5 --topics                      # leakage per layer and head\n"
              "  luka inspect demo.h5 --topics --layer 14 --head 3  # one head's segment matrix and steps\n"
              "  luka inspect demo.h5 --heads --json > heads.json");
  if (!args.parse(argc, argv, 2)) return 0;
  if (!args.has("FILE")) throw UsageError("the capture FILE is required");
  const std::string path = args.get("FILE");

  const bool topics = args.get_flag("topics"), heads = args.get_flag("heads"), calibration = args.get_flag("calibration");
  if (args.has("track") && args.get_flag("needle-track")) throw UsageError("--track and --needle-track: give one");
  const bool track = args.has("track") || args.get_flag("needle-track");
  if (static_cast<int>(track) + static_cast<int>(topics) + static_cast<int>(heads) + static_cast<int>(calibration) > 1)
    throw UsageError("--track, --topics, --heads and --calibration are separate reports: give one");
  if ((args.has("layer") || args.has("head")) && !track && !topics && !heads && !calibration)
    throw UsageError("--layer and --head go with --track, --topics, --heads or --calibration");
  if (args.has("decode-topic") && !topics && !heads) throw UsageError("--decode-topic goes with --topics or --heads");
  if (track && args.has("head") && !args.has("layer")) throw UsageError("--head needs --layer");
  const auto file = capture::CaptureFile::open(path);
  check_selection(*file, path, args);
  if (track) return print_survival(*file, args);
  if (calibration) return print_calibration(*file, path, args);
  if (topics || heads) {
    try {
      return topics ? print_topics(*file, path, args) : print_heads(*file, path, args);
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      throw Error(path + ": " + e.what());  // the analysis does not know the file's name
    }
  }
  return print_summary(*file, path, args.get_flag("json"));
}

}  // namespace luka::cli
