// luka inspect: what a capture holds — model, config, tokens, steps, recorded layers and heads,
// and the size of each part — without loading any of its arrays.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/luka_options.h"
#include "captures/reader.h"
#include "captures/survival.h"
#include "core/luka/config.h"

namespace luka::cli {
namespace {

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

// luka inspect FILE --track SPEC [--layer L [--head H]] [--json].
int print_survival(const capture::CaptureFile& file, const ArgParser& args) {
  const auto tokens = file.tokens();
  const capture::TokenSpan span = capture::parse_track(args.get("track"), tokens);
  std::vector<int> layers, heads;
  if (args.has("layer")) layers = {static_cast<int>(args.get_int("layer", 0))};
  if (args.has("head")) heads = {static_cast<int>(args.get_int("head", 0))};
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

}  // namespace

int run_inspect(int argc, char** argv) {
  ArgParser args("inspect", "FILE [--json]",
                 "Summarizes a capture: model, LuKA config, tokens and segments, decode steps, the layers,\n"
                 "heads and map levels recorded, and the size of each part stored and uncompressed. A capture\n"
                 "cut off by a crash is reported with its complete steps.");
  args.flag("json", "print one JSON object instead of text")
      .option("track", "SPEC", "what became of tokens at every decode step: A-B (positions, both included), A, or\n"
              "text:STRING (the tokens covering its first occurrence, e.g. an answer span)")
      .option("layer", "L", "with --track: one layer, per head (with --head: per step)")
      .option("head", "H", "with --track and --layer: one head's timeline, one line per step");
  args.epilog("With --track, per layer (or per head, or per step) the share of token-steps kept raw (r), seen\n"
              "through a page summary (s), refined back (R), kept as heavy hitters (h) or dropped (x), and the\n"
              "attention the span got per step.\n\n"
              "examples:\n  luka capture --prompt \"The capital of France is\" --out run.h5 && luka inspect run.h5\n"
              "  luka inspect run.h5 --track text:Paris --layer 12");
  // The one positional argument is the file; the rest are options.
  std::string path;
  std::vector<char*> rest = {argv[0], argv[1]};
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--track" || a == "--layer" || a == "--head") && i + 1 < argc) {  // an option and its value
      rest.push_back(argv[i]);
      rest.push_back(argv[++i]);
    } else if (argv[i][0] != '-' && path.empty()) {
      path = argv[i];
    } else if (argv[i][0] != '-') {
      throw UsageError("unexpected argument '" + std::string(argv[i]) + "' (one capture FILE)");
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!args.parse(static_cast<int>(rest.size()), rest.data(), 2)) return 0;
  if (path.empty()) throw UsageError("the capture FILE is required");

  if ((args.has("layer") || args.has("head")) && !args.has("track")) throw UsageError("--layer and --head go with --track");
  if (args.has("head") && !args.has("layer")) throw UsageError("--head needs --layer");
  const auto file = capture::CaptureFile::open(path);
  if (args.has("track")) return print_survival(*file, args);
  const capture::Summary s = file->summary();
  const capture::Layout& l = s.layout;
  const capture::Manifest& m = s.manifest;
  const auto tokens = file->tokens();
  const auto segments = file->segments();
  const auto parts = file->storage();
  std::int64_t generated = 0;
  for (const auto& t : tokens) generated += t.generated ? 1 : 0;
  std::string modes = "?";
  try {
    modes = describe_modes(LukaConfig::from_json(m.luka_config, l.num_layers, "manifest"));
  } catch (const Error&) {
  }

  if (args.get_flag("json")) {
    nlohmann::json j;
    j["file"] = path;
    j["bytes"] = file->file_bytes();
    j["version"] = capture::kFormatVersion;
    j["finished"] = s.finished;
    j["complete_steps"] = s.complete_steps;
    j["model"] = {{"path", m.model_path}, {"architecture", m.architecture}, {"dtype", m.dtype}, {"device", m.device},
                  {"weights_hash", m.weights_hash}, {"tokenizer_hash", m.tokenizer_hash}};
    j["created"] = m.created;
    j["tool"] = {{"version", m.tool_version}, {"git_revision", m.git_revision}};
    j["attention"] = modes;
    j["luka_config"] = nlohmann::json::parse(m.luka_config, nullptr, false);
    j["generation"] = nlohmann::json::parse(m.generation, nullptr, false);
    j["record"] = m.record;
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
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }

  std::printf("capture    %s: %s, luka-capture version %d, %s\n", path.c_str(), mb(file->file_bytes()).c_str(),
              capture::kFormatVersion,
              s.finished ? "finished" : ("not finished (cut off or still running): " + std::to_string(s.complete_steps) + " complete steps").c_str());
  std::printf("model      %s (%s, %s on %s)\n", m.model_path.c_str(), m.architecture.c_str(), m.dtype.c_str(), m.device.c_str());
  std::printf("hashes     weights %s…, tokenizer %s…\n", short_hash(m.weights_hash).c_str(), short_hash(m.tokenizer_hash).c_str());
  std::printf("created    %s by luka %s (%s)\n", m.created.c_str(), m.tool_version.c_str(), m.git_revision.c_str());
  std::printf("attention  %s\n", modes.c_str());
  std::printf("generation %s\n", m.generation.c_str());
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
  std::printf("size       %-8s %12s %14s %7s\n", "part", "stored", "uncompressed", "ratio");
  for (const auto& [name, size] : parts)
    std::printf("           %-8s %12s %14s %7.1f\n", name.c_str(), mb(size.stored).c_str(), mb(size.logical).c_str(),
                size.stored ? static_cast<double>(size.logical) / static_cast<double>(size.stored) : 0.0);
  return 0;
}

}  // namespace luka::cli
