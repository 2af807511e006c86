// luka inspect: what a capture holds — model, config, tokens, steps, recorded layers and heads,
// and the size of each part — without loading any of its arrays.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/luka_options.h"
#include "captures/reader.h"
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

}  // namespace

int run_inspect(int argc, char** argv) {
  ArgParser args("inspect", "FILE [--json]",
                 "Summarizes a capture: model, LuKA config, tokens and segments, decode steps, the layers,\n"
                 "heads and map levels recorded, and the size of each part stored and uncompressed. A capture\n"
                 "cut off by a crash is reported with its complete steps.");
  args.flag("json", "print one JSON object instead of text");
  args.epilog("example:\n  luka capture --prompt \"The capital of France is\" --out run.h5 && luka inspect run.h5");
  // The one positional argument is the file; the rest are options.
  std::string path;
  std::vector<char*> rest = {argv[0], argv[1]};
  for (int i = 2; i < argc; ++i) {
    if (argv[i][0] != '-' && path.empty()) {
      path = argv[i];
    } else if (argv[i][0] != '-') {
      throw UsageError("unexpected argument '" + std::string(argv[i]) + "' (one capture FILE)");
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!args.parse(static_cast<int>(rest.size()), rest.data(), 2)) return 0;
  if (path.empty()) throw UsageError("the capture FILE is required");

  const auto file = capture::CaptureFile::open(path);
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
