#include "app/cli/luka_options.h"

#include "app/cli/args.h"
#include "core/device/device.h"
#include "core/run/static_step.h"
#include "core/util/error.h"
#include "core/luka/auto_config.h"
#include "core/luka/schedule.h"

namespace luka::cli {

const char* const kLukaOptionsHelp =
    "LuKA attention (default: dense everywhere; every key in docs/luka-config.md):\n"
    "  --preset NAME         dense, lined, clustered, mixed(a,b), paper, authors_eval, kascade,\n"
    "                        semanticache, streaming_llm, snapkv, tova, knorm, expected_attention,\n"
    "                        random, pyramidkv, adakv, decoding, tova_decoding, quest,\n"
    "                        auto:FILE[,budget=B][,loss=output|kl]\n"
    "                        (docs/luka-config.md)\n"
    "  --layers-config FILE  JSON: {\"preset\": ..., \"default\": {key: value}, \"layers\": {\"0-7\": {...}}}\n"
    "  --set SPEC            per-layer override, repeatable: \"layer=5,mode=lined,rho=0.25\",\n"
    "                        \"layers=0-7,mode=clustered,top_k=4\"; layers: a layer list, e.g.\n"
    "                        5, 0-7, 0-3|8, 0-3,8 or all (docs/luka-config.md#layer-lists)\n"
    "  keys: mode (dense|lined|clustered|kascade|press|quest), dense_shadow,\n"
    "    importance_source (effective|cover);\n"
    "    lined: window, window_frac, rho, lined_selection (head|group|layer), decay, sparse_prefill,\n"
    "        sparse_prefill_window (sliding|fixed), lined_rounding (ceil|floor), heavy_late;\n"
    "    pages: page_size, tail, interval, page_schedule (interval|authors), page_counter_start,\n"
    "        page_bypass, max_pages, compressor (mean|attention_weighted|random|gsc), tau, seed, zero_v,\n"
    "        bias (none|fixed|adaptive), bias_entropy (weights|importance_mean);\n"
    "    semanticache pages: segmenter (fixed|delimiter), delimiters (names joined by |: period,\n"
    "        comma, question, exclamation, semicolon, colon, space, tab, newline), delimiter_match\n"
    "        (exact|composed), gsc_tau (the gsc compressor's cosine threshold; docs/methods.md);\n"
    "    refinement: rule (threshold|top_k|top_frac|top_p), epsilon, top_k, top_frac, top_p,\n"
    "        always_refine_first, refine_selection (head|group|layer), refine_math\n"
    "        (mass_preserving|exact), refine_on (biased|unbiased), page_rank (max|sum);\n"
    "    kascade: kascade_source (-1: an anchor, else the anchor layer reused), kascade_head_map\n"
    "        (KV heads, e.g. 1|1|0|3), kascade_top_k, kascade_top_frac, kascade_min_k, kascade_shared,\n"
    "        kascade_prefill (top_k|dense), kascade_tile (docs/methods.md);\n"
    "    dar probe (dense, lined, clustered): dar_window (0: off), dar_rank (0: head_dim/4), dar_basis\n"
    "        (luka calibrate --dar), dar_keys (pre_rope|post_rope), dar_sink (the first positions seen\n"
    "        whole);\n"
    "    press (kvpress's methods, docs/methods.md): press_method (streaming_llm|snapkv|tova|knorm|\n"
    "        expected_attention|random), press_allocation (uniform|pyramidkv|adakv), compression_ratio,\n"
    "        budget_tokens (0: use the ratio), press_sink, press_window, press_kernel,\n"
    "        press_future_positions, press_covariance, press_vnorm, press_epsilon, press_seed,\n"
    "        press_beta, press_alpha; during decoding (kvpress's DecodingPress; tova with interval 1 is\n"
    "        TOVA's own eviction): press_interval (0: off), press_target_size;\n"
    "    quest: quest_page_size, quest_pages, quest_window (docs/methods.md)\n"
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
  // A bad --preset or --set is the command line's (exit 2); a bad layers-config file, or the
  // calibration file of auto:FILE, is bad data (exit 1).
  const std::string preset = args.get("preset");
  if (!args.has("layers-config") && preset.rfind("auto:", 0) == 0) option_value("preset", [&] { parse_auto_spec(preset.substr(5)); });
  LukaConfig config = args.has("layers-config") ? LukaConfig::from_json_file(args.get("layers-config"), num_layers)
                      : preset.rfind("auto:", 0) == 0 ? LukaConfig::preset(preset, num_layers)
                                                      : option_value("preset", [&] { return LukaConfig::preset(preset, num_layers); });
  for (const std::string& spec : args.get_all("set")) option_value("set", [&] { config.apply_override(spec); });
  return config;
}

void check_schedule_option(const LukaConfig& config, const std::vector<ScheduleEntry>& schedule) {
  option_value("schedule", [&] { check_schedule(config, schedule); });
}

std::vector<ScheduleEntry> schedule_option(const ArgParser& args) {
  if (!args.has("schedule")) return {};
  try {
    return parse_schedule(args.get("schedule"));
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(std::string("--") + e.what());
  }
}

void add_graph_options(ArgParser& args) {
  args.flag("graph", "GPU only: record each decode step once as a CUDA graph and replay it\n"
                     "(luka generate and luka capture: greedy, --weights dequantized; generate --verbose names\n"
                     "its kernel nodes)")
      .flag("no-graph", "issue each decode step's kernels one by one (eager): the default until the graph path is "
                        "verified on a GPU");
}

DecodeIssue graph_option(const ArgParser& args) {
  if (args.get_flag("graph") && args.get_flag("no-graph"))
    throw UsageError("--graph and --no-graph contradict each other");
  return args.get_flag("graph") ? DecodeIssue::kGraph : DecodeIssue::kEager;
}

void check_graph_option(const ArgParser& args, bool on_cuda, bool records_steps) {
  if (graph_option(args) != DecodeIssue::kGraph) return;
  if (!on_cuda)
    throw UsageError("--graph records CUDA graphs: it needs --device cuda (drop it, or use --no-graph, on the CPU)");
  if (!records_steps)
    fail("--graph", "only luka generate and luka capture record their decode steps as a CUDA graph so far; run without --graph");
}

void add_static_step_option(ArgParser& args) {
  args.flag("static-step", "run each decode step as the static step on buffers reserved for the whole run (greedy;\n"
                           "weights held as tensors: --weights dequantized; CPU): the step --graph records on a GPU");
}

void check_decode_engine_option(const ArgParser& args, double temperature) {
  const bool graph = graph_option(args) == DecodeIssue::kGraph, static_step = args.get_flag("static-step");
  if ((graph || static_step) && temperature > 0)
    throw UsageError(std::string(graph ? "--graph" : "--static-step") + " chooses greedily: drop --temperature");
}

void use_decode_engine_option(const ArgParser& args, const Backend& device, RunLoop& loop) {
  const bool graph = graph_option(args) == DecodeIssue::kGraph, static_step = args.get_flag("static-step");
  if (graph) {
    std::string why;
    DecodeEngineFactory engine = device.graph_engine(&why);
    if (!engine) fail("--graph", why);
    loop.set_decode_engine(std::move(engine));
    return;
  }
  if (!static_step) return;
  if (device.is_cuda()) fail("--static-step", "on a GPU the static step runs recorded: use --graph");
  loop.set_decode_engine(static_step_engine());
}

}  // namespace luka::cli
