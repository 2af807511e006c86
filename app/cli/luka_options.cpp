#include "app/cli/luka_options.h"

#include <sstream>

#include "app/cli/args.h"

namespace luka::cli {

const char* const kLukaOptionsHelp =
    "LuKA attention (default: dense everywhere; every key in docs/luka-config.md):\n"
    "  --preset NAME         dense, lined, clustered, mixed(a,b), paper, authors_eval\n"
    "  --layers-config FILE  JSON: {\"preset\": ..., \"default\": {key: value}, \"layers\": {\"0-7\": {...}}}\n"
    "  --set SPEC            per-layer override, repeatable: \"layer=5,mode=lined,rho=0.25\",\n"
    "                        \"layers=0-7,mode=clustered,top_k=4\" (layers: N, A-B, A-B|C, all)\n"
    "  keys: mode, dense_shadow, importance_source (effective|cover);\n"
    "    lined: window, window_frac, rho, lined_selection (head|group|layer), decay, sparse_prefill,\n"
    "        sparse_prefill_window (sliding|fixed), lined_rounding (ceil|floor), heavy_late;\n"
    "    pages: page_size, tail, interval, page_schedule (interval|authors), page_counter_start,\n"
    "        page_bypass, max_pages, compressor (mean|attention_weighted|random), tau, seed, zero_v,\n"
    "        bias (none|fixed|adaptive), bias_entropy (weights|importance_mean);\n"
    "    refinement: rule (threshold|top_k|top_frac|top_p), epsilon, top_k, top_frac, top_p,\n"
    "        always_refine_first, refine_selection (head|group|layer), refine_math\n"
    "        (mass_preserving|exact), refine_on (biased|unbiased), page_rank (max|sum)\n"
    "  authors_eval reproduces the LuKA authors' evaluation code: their tail_len T is tail T+1 here.";

void add_luka_options(ArgParser& args) {
  args.option("preset", "NAME", "LuKA preset for every layer (see below)", "dense")
      .option("layers-config", "FILE", "LuKA per-layer config as JSON")
      .option("set", "SPEC", "LuKA override, e.g. layer=5,mode=lined (repeatable)");
}

std::optional<LukaConfig> luka_config(const ArgParser& args, std::int64_t num_layers) {
  if (!args.has("preset") && !args.has("layers-config") && !args.has("set")) return std::nullopt;
  if (args.has("preset") && args.has("layers-config"))
    throw UsageError("--preset and --layers-config both choose a base config: give one (a file may name a preset)");
  LukaConfig config = args.has("layers-config") ? LukaConfig::from_json_file(args.get("layers-config"), num_layers)
                                                : LukaConfig::preset(args.get("preset", "dense"), num_layers);
  for (const std::string& spec : args.get_all("set")) config.apply_override(spec);
  return config;
}

std::vector<ScheduleEntry> parse_schedule(const std::string& text) {
  std::vector<ScheduleEntry> out;
  std::stringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    if (entry.empty()) continue;
    ScheduleEntry e;
    bool has_step = false;
    std::stringstream items(entry);
    std::string item;
    while (std::getline(items, item, ':')) {
      if (item.rfind("step=", 0) == 0) {
        const std::string v = item.substr(5);
        std::size_t used = 0;
        long long step = -1;
        try {
          step = std::stoll(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != v.size() || step < 1) throw UsageError("--schedule: step must be a positive integer, got '" + v + "'");
        e.step = step;
        has_step = true;
      } else {
        e.override_spec += (e.override_spec.empty() ? "" : ",") + item;
      }
    }
    if (!has_step) throw UsageError("--schedule: entry '" + entry + "' has no step=N");
    if (e.override_spec.empty()) throw UsageError("--schedule: entry '" + entry + "' changes nothing");
    out.push_back(e);
  }
  if (out.empty()) throw UsageError("--schedule is empty");
  return out;
}

std::string describe_modes(const LukaConfig& config) {
  std::string out;
  for (const AttentionMode mode : {AttentionMode::kDense, AttentionMode::kLined, AttentionMode::kClustered}) {
    std::string ranges;
    const std::int64_t n = static_cast<std::int64_t>(config.layers.size());
    for (std::int64_t i = 0; i < n;) {
      if (config.layers[static_cast<std::size_t>(i)].mode != mode) {
        ++i;
        continue;
      }
      std::int64_t j = i;
      while (j + 1 < n && config.layers[static_cast<std::size_t>(j + 1)].mode == mode) ++j;
      ranges += (ranges.empty() ? "" : "|") + (i == j ? std::to_string(i) : std::to_string(i) + "-" + std::to_string(j));
      i = j + 1;
    }
    if (!ranges.empty()) out += (out.empty() ? "" : ", ") + std::string(to_string(mode)) + " " + ranges;
  }
  return out;
}

}  // namespace luka::cli
