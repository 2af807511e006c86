// luka calibrate: per layer and head, how closely lined and clustered attention approximate dense
// attention on a text — KL(dense ‖ effective), recall, the output's relative error and the entries
// attended per step, for each candidate setting — and what the dense attention itself looks like
// (sink mass, entropy, locality, cross-topic mass). The text's second part is fed token by token
// through the decode path with the dense shadow on, once per candidate. The JSON it writes is what
// `--preset auto:FILE[,budget=B]` optimizes over.
#include <ATen/ATen.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/prompt_input.h"
#include "core/device/device.h"
#include "core/eval/head_scores.h"
#include "core/luka/auto_config.h"
#include "core/luka/config.h"
#include "core/luka/methods/dar.h"
#include "core/luka/methods/kascade.h"
#include "core/luka/luka_layer.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/run/run_loop.h"
#include "core/run/session.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/output_file.h"

namespace luka::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kDefaultCandidates =
    "lined:rho=0.0625;lined:rho=0.125;lined:rho=0.25;clustered:top_k=1;clustered:top_k=3;clustered:top_k=8";

struct Candidate {
  std::string name;  // "lined:rho=0.125"
  LukaConfig config;
};

// "lined:rho=0.125;clustered:top_k=3": a preset (lined or clustered) and an override for every
// layer, per candidate.
std::vector<Candidate> parse_candidates(const std::string& text, std::int64_t n_layers, const std::vector<std::string>& overrides) {
  std::vector<Candidate> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t end = text.find(';', at);
    const std::string item = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    const std::size_t colon = item.find(':');
    const std::string preset = item.substr(0, colon);
    if (preset != "lined" && preset != "clustered")
      throw UsageError("--candidates: '" + item + "' must start with lined or clustered (e.g. clustered:top_k=3)");
    Candidate c{item, LukaConfig::preset(preset, n_layers)};
    for (const std::string& spec : overrides) option_value("set", [&] { c.config.apply_override(spec); });
    if (colon != std::string::npos && colon + 1 < item.size())
      option_value("candidates", [&] { c.config.apply_override(item.substr(colon + 1)); });
    for (auto& l : c.config.layers) l.dense_shadow = true;
    out.push_back(std::move(c));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return out;
}

// Sums over decode steps, per layer and head.
struct HeadSums {
  double kl = 0, recall = 0, rel_l2 = 0, entries = 0;
  double sink = 0, entropy = 0, locality = 0, cross = 0;
  std::int64_t cross_steps = 0;
};

// --kascade N: the prompt's dense prefill attention of the last Q queries, every layer and head;
// Kascade's similarity (docs/papers/kascade.md Eq. 3, minimum over those queries), the N anchors of its dynamic
// program and the head maps; written as a layers-config JSON of Kascade layers.
int calibrate_kascade(const ArgParser& args, const Backend& device, const std::shared_ptr<const Model>& model,
                      const std::vector<std::int32_t>& ids, bool quiet) {
  const std::int64_t L = model->config().num_layers, H = model->config().num_heads, KV = model->config().num_kv_heads;
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  const std::int64_t anchors = args.get_int("kascade");
  if (anchors > L) throw UsageError("--kascade: the model has " + std::to_string(L) + " layers, fewer than " + std::to_string(anchors) + " anchors");
  const std::int64_t Q = std::min<std::int64_t>(args.get_int("kascade-queries"), n);
  KascadeOptions options;
  options.top_k.count = static_cast<int>(args.get_int("kascade-k"));
  const std::string heads = args.get("kascade-heads");
  options.heads = heads == "identity" ? KascadeHeads::kIdentity : heads == "shared" ? KascadeHeads::kShared : KascadeHeads::kRemap;
  if (heads != "remap" && heads != "identity" && heads != "shared")
    throw UsageError("--kascade-heads must be remap, identity or shared, got '" + heads + "'");

  // rows[l][h][i][t]: query n - Q + i of head h in layer l, from the prefill's observer.
  const std::size_t per_layer = static_cast<std::size_t>(H * Q * n);
  std::vector<float> rows(static_cast<std::size_t>(L) * per_layer, 0.0f);
  Decoder decoder(model);
  const auto layers = device.install_luka(decoder, LukaConfig::preset("dense", L));
  for (const auto& layer : layers)
    layer->set_prefill_observer([&](int l, std::int64_t q0, std::int64_t head0, const at::Tensor& probs) {
      const std::int64_t G = probs.size(0), m = probs.size(1), T = probs.size(2);
      const float* p = probs.const_data_ptr<float>();
      for (std::int64_t j = 0; j < G; ++j)
        for (std::int64_t i = 0; i < m; ++i) {
          const std::int64_t query = q0 + i - (n - Q);
          if (query < 0) continue;
          std::copy_n(p + (j * m + i) * T, T, rows.data() + static_cast<std::size_t>(l) * per_layer + static_cast<std::size_t>(((head0 + j) * Q + query) * n));
        }
    });
  if (!quiet) std::fprintf(stderr, "%lld tokens prefilled densely; scoring the last %lld queries of %lld layers\n", static_cast<long long>(n),
                           static_cast<long long>(Q), static_cast<long long>(L));
  decoder.prefill(ids);
  const KascadeSimilarity sim = kascade_similarity(
      {prompt_attention(rows.data(), static_cast<int>(L), static_cast<int>(H), static_cast<int>(KV), static_cast<int>(Q), static_cast<int>(n))}, options);
  const KascadePlan plan = kascade_plan(sim, static_cast<int>(anchors));

  LukaConfig config = LukaConfig::preset("dense", L);
  for (std::int64_t l = 0; l < L; ++l) {
    KascadeConfig& k = config.layers[static_cast<std::size_t>(l)].kascade;
    config.layers[static_cast<std::size_t>(l)].mode = AttentionMode::kKascade;
    const int source = plan.anchors.source[static_cast<std::size_t>(l)];
    k.source = source == l ? -1 : source;
    k.shared = options.heads == KascadeHeads::kShared;
    if (k.source >= 0 && options.heads == KascadeHeads::kRemap)
      for (const int h : plan.head_map[static_cast<std::size_t>(l)]) k.head_map.push_back(h);
  }
  validate_kascade_sources(config);
  write_file_atomically(args.get("out"), json::parse(config.to_json()).dump(1, ' ', false, json::error_handler_t::replace) + "\n");

  std::printf("anchors:");
  for (const int a : plan.anchors.anchors) std::printf(" %d", a);
  std::printf("  (score %.4f of %lld)\n%-6s %6s %10s  %s\n", plan.anchors.score, static_cast<long long>(L), "layer", "source", "similarity",
              "head map");
  for (std::int64_t l = 0; l < L; ++l) {
    const int source = plan.anchors.source[static_cast<std::size_t>(l)];
    std::string map;
    for (const std::int64_t h : config.layers[static_cast<std::size_t>(l)].kascade.head_map) map += (map.empty() ? "" : "|") + std::to_string(h);
    std::printf("%-6lld %6d %10.4f  %s\n", static_cast<long long>(l), source, sim.layer_sim(source, static_cast<int>(l)),
                source == l ? "(anchor)" : map.empty() ? "identity" : map.c_str());
  }
  std::fprintf(stderr, "wrote %s: %s\n", args.get("out").c_str(), describe_modes(config).c_str());
  return 0;
}

// --dar: the DAR probe's basis (core/luka/methods/dar.h) from the text's dense prefill: every layer's
// cached keys and values, per KV head, their mean and principal directions.
int calibrate_dar(const ArgParser& args, const Backend& device, const std::shared_ptr<const Model>& model,
                  const std::vector<std::int32_t>& ids, bool quiet) {
  const std::int64_t L = model->config().num_layers;
  Decoder decoder(model);
  device.install_luka(decoder, LukaConfig::preset("dense", L));
  if (!quiet) std::fprintf(stderr, "%zu tokens prefilled densely\n", ids.size());
  decoder.prefill(ids);
  std::vector<at::Tensor> keys, values, rotated;
  const at::Tensor inv_freq = decoder.rope_frequencies().cpu();
  for (std::int64_t l = 0; l < L; ++l) {
    rotated.push_back(decoder.cache(static_cast<int>(l)).keys().cpu());
    keys.push_back(rope_rotate(rotated.back().to(at::kFloat), 0, inv_freq, -1));  // before RoPE
    values.push_back(decoder.cache(static_cast<int>(l)).values().cpu());
  }
  const DarBasis basis = DarBasis::measure(keys, values, rotated);
  basis.write(args.get("out"));
  const std::int64_t D = basis.head_dim(), r = std::max<std::int64_t>(1, D / 4);
  std::printf("variance held by the first %lld of %lld directions (mean over KV heads)\n%-6s %10s %10s %10s\n", static_cast<long long>(r),
              static_cast<long long>(D), "layer", "keys", "values", "keys+rope");
  for (std::int64_t l = 0; l < L; ++l)
    std::printf("%-6lld %10.4f %10.4f %10.4f\n", static_cast<long long>(l), basis.explained(l, DarBasis::kKeys, r).mean().item<double>(),
                basis.explained(l, DarBasis::kValues, r).mean().item<double>(),
                basis.explained(l, DarBasis::kKeysAfterRope, r).mean().item<double>());
  std::fprintf(stderr, "wrote %s: %lld layers x %lld KV heads, head dimension %lld (use with --set dar_window=W,dar_basis=%s)\n",
               args.get("out").c_str(), static_cast<long long>(L), static_cast<long long>(basis.kv_heads()), static_cast<long long>(D),
               args.get("out").c_str());
  return 0;
}


// Runs the text once per candidate (the first `head` ids prefilled, the rest forced through the
// decode path with the dense shadow on) and sums, per candidate, layer and head, the shadow's
// fidelity and the entries attended; per head, from the first candidate's dense rows, the pattern
// scores (`topic`: each token's topic, for the cross-topic mass).
std::vector<std::vector<std::vector<HeadSums>>> measure_candidates(RunSession& session, const std::vector<Candidate>& candidates,
                                                                 const std::vector<std::int32_t>& head, const RunSettings& run,
                                                                 std::int64_t steps, const std::int32_t* topic, bool quiet) {
  const std::int64_t L = session.model().config().num_layers, H = session.model().config().num_heads;
  const bool tty = isatty(STDERR_FILENO) != 0;
  // sums[c][l][h]; head pattern scores come from the first candidate's dense shadow rows.
  std::vector<std::vector<std::vector<HeadSums>>> sums(candidates.size(),
                                                       std::vector<std::vector<HeadSums>>(static_cast<std::size_t>(L), std::vector<HeadSums>(static_cast<std::size_t>(H))));
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    session.use(candidates[c].config);
    const std::vector<std::shared_ptr<LukaLayer>>& layers = session.layers();
    struct Observer final : RunObserver {
      std::function<void(std::int64_t)> after;
      void after_step(std::int64_t step, double) override { after(step); }
    } observer;
    observer.after = [&](std::int64_t step) {
      for (std::int64_t l = 0; l < L; ++l) {
        const LukaStep& s = layers[static_cast<std::size_t>(l)]->last_step();
        if (!s.fidelity.defined()) fail("calibrate", "layer " + std::to_string(l) + " gave no dense shadow");
        const at::Tensor f = s.fidelity.to(at::kDouble).contiguous();
        const double* fp = f.data_ptr<double>();
        at::Tensor dense;
        if (c == 0) dense = s.dense.to(at::kFloat).contiguous();
        for (std::int64_t h = 0; h < H; ++h) {
          HeadSums& hs = sums[c][static_cast<std::size_t>(l)][static_cast<std::size_t>(h)];
          hs.kl += fp[h * 4 + kKl];
          hs.recall += fp[h * 4 + kRecall];
          hs.rel_l2 += fp[h * 4 + kRelL2];
          hs.entries += static_cast<double>(s.cover_size.at(static_cast<std::size_t>(h)));
          if (c == 0) {
            const eval::HeadScores sc = eval::head_scores(dense[h].data_ptr<float>(), s.tokens, topic);
            hs.sink += sc.sink;
            hs.entropy += sc.entropy;
            hs.locality += sc.locality;
            if (!std::isnan(sc.cross_topic)) hs.cross += sc.cross_topic, ++hs.cross_steps;
          }
        }
      }
      if (!quiet && (tty || step == steps)) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double done = static_cast<double>(c * static_cast<std::size_t>(steps) + static_cast<std::size_t>(step));
        const double left = elapsed / done * (static_cast<double>(candidates.size() * static_cast<std::size_t>(steps)) - done);
        std::fprintf(stderr, "%s[%zu/%zu] %s: step %lld/%lld, about %.0f s left%s", tty ? "\r\033[K" : "", c + 1, candidates.size(),
                     candidates[c].name.c_str(), static_cast<long long>(step), static_cast<long long>(steps), left, tty ? "" : "\n");
        std::fflush(stderr);
      }
    };
    const RunResult r = session.loop().run(head, run, &observer);
    if (r.decode_steps != steps) fail("calibrate", "ran " + std::to_string(r.decode_steps) + " decode steps, expected " + std::to_string(steps));
  }
  if (!quiet && tty) std::fputc('\n', stderr);
  return sums;
}

// Per layer: the dense entries, each head's pattern scores (from the first candidate's dense
// shadow), and per candidate its means over the heads and each head's numbers, over `S` steps.
json calibration_layers(const std::vector<std::vector<std::vector<HeadSums>>>& sums, const std::vector<Candidate>& candidates,
                        std::int64_t L, std::int64_t H, std::int64_t m, double S) {
  json layers = json::array();
  for (std::int64_t l = 0; l < L; ++l) {
    // Dense attends every raw token: T = m + s at step s, so the mean over the steps.
    const double dense_entries = static_cast<double>(m) + (S + 1) / 2;
    json heads = json::array();
    const auto& first = sums[0][static_cast<std::size_t>(l)];
    for (std::int64_t h = 0; h < H; ++h) {
      const HeadSums& hs = first[static_cast<std::size_t>(h)];
      heads.push_back({{"head", h},
                       {"sink", hs.sink / S},
                       {"entropy", hs.entropy / S},
                       {"locality", hs.locality / S},
                       {"cross_topic", hs.cross_steps ? json(hs.cross / static_cast<double>(hs.cross_steps)) : json()}});
    }
    json per = json::array();
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      json ph = json::array();
      double kl = 0, recall = 0, rel = 0, entries = 0;
      for (std::int64_t h = 0; h < H; ++h) {
        const HeadSums& hs = sums[c][static_cast<std::size_t>(l)][static_cast<std::size_t>(h)];
        ph.push_back({{"kl", hs.kl / S}, {"recall", hs.recall / S}, {"rel_l2", hs.rel_l2 / S}, {"entries", hs.entries / S}});
        kl += hs.kl / S, recall += hs.recall / S, rel += hs.rel_l2 / S, entries += hs.entries / S;
      }
      const double h_count = static_cast<double>(H);
      per.push_back({{"name", candidates[c].name},
                     {"kl", kl / h_count},
                     {"recall", recall / h_count},
                     {"rel_l2", rel / h_count},
                     {"entries", entries / h_count},
                     {"heads", ph}});
    }
    layers.push_back({{"layer", l}, {"dense_entries", dense_entries}, {"heads", heads}, {"candidates", per}});
  }
  return layers;
}

// A table of the layers' KL per candidate, with the entries each attends.
void print_calibration_table(const json& layers, const std::vector<Candidate>& candidates) {
  std::printf("%-6s %9s", "layer", "dense");
  for (const Candidate& c : candidates) std::printf(" %18s", c.name.c_str());
  std::printf("\n%-6s %9s", "", "entries");
  for (std::size_t c = 0; c < candidates.size(); ++c) std::printf(" %18s", "KL / entries");
  std::printf("\n");
  for (const json& layer : layers) {
    std::printf("%-6lld %9.1f", static_cast<long long>(layer["layer"].get<std::int64_t>()), layer["dense_entries"].get<double>());
    for (const json& c : layer["candidates"]) std::printf("   %8.5f / %5.1f", c["kl"].get<double>(), c["entries"].get<double>());
    std::printf("\n");
  }
}

}  // namespace

int run_calibrate(int argc, char** argv) {
  ArgParser args("calibrate", "[--model PATH] (--prompt-file F | --prompt STR | --wikisalad F) --out FILE.json [options]",
                 "Measures, for every layer and head, how closely each candidate setting of lined and clustered\n"
                 "attention approximates dense attention: the first --prompt-tokens of the text are prefilled, the\n"
                 "rest fed token by token through the decode path with the dense shadow on, once per candidate.\n"
                 "Per candidate, layer and head: KL(dense || effective), recall, the attention output's relative\n"
                 "error and the entries attended per step; per head, from the dense attention: the mass on the\n"
                 "first token (sink), entropy, locality (mean distance back) and, for interwoven prompts, the mass\n"
                 "on other topics' segments. --preset auto:FILE[,budget=B][,loss=output|kl] builds a layer config from the file.\n"
                 "With --kascade N it instead prefills the text densely, scores Kascade's cross-layer top-k similarity\n"
                 "on the last --kascade-queries queries (docs/papers/kascade.md Eq. 3, minimum over them), chooses\n"
                 "N anchor layers (layer 0 among them) by the paper's dynamic program and a head map per reuse\n"
                 "layer, and writes them to --out as a layers-config JSON of Kascade layers (--layers-config FILE\n"
                 "runs it).\n"
                 "With --dar it instead prefills the text densely and writes to --out (.npy) the DAR probe's basis: per\n"
                 "layer and KV head, the mean and principal directions of the cached keys and of the values (use it\n"
                 "with --set dar_window=W,dar_basis=FILE).");
  args.option("model", "PATH", kModelOptionHelp)
      .option("out", "FILE", "the calibration JSON to write")
      .option("max-tokens", "N", "use at most the first N tokens of the text", 1024)
      .range(4, 10000000)
      .option("prompt-tokens", "N", "tokens prefilled before the decode path", Default::described_integer("half of them"))
      .range(1, 1e12)
      .option("candidates", "LIST", "';'-separated lined:SPEC and clustered:SPEC settings to measure", kDefaultCandidates)
      .option("set", "SPEC", "an override applied to every candidate first (repeatable), e.g. \"page_size=16\"")
      .option("config-out", "FILE", "also write the automatic layer config for --budget as a layers-config JSON")
      .option("budget", "B", "with --config-out: entries attended per step, as a fraction of dense (0 < B <= 1)", 0.125)
      .range(0, 1)
      .option("kascade", "N", "choose N Kascade anchors and head maps instead, written to --out as a layers config", Default::integer())
      .range(1, 100000)
      .option("kascade-k", "K", "with --kascade: the similarity's top-k", 64)
      .range(1, 10000000)
      .option("kascade-heads", "HOW", "with --kascade: remap (each reuse head the most similar anchor head), identity or shared", "remap")
      .option("kascade-queries", "Q", "with --kascade: the last Q tokens of the text are the queries scored", 256)
      .range(1, 10000000)
      .flag("dar", "measure the DAR probe's basis instead, written to --out as .npy")
      .flag("quiet", "no progress on standard error");
  add_compute_options(args);
  add_prompt_options(args);
  add_device_option(args);
  add_weights_option(args);
  args.epilog(std::string("example:\n  luka calibrate --prompt-file ../shared/data/texts/emma.txt --max-tokens 1024 --out calib.json\n"
                          "  luka perplexity --text-file emma.txt --preset auto:calib.json,budget=0.125\n\n") +
              kPromptOptionsHelp + "\n\n" + kEnvironmentHelp);
  if (!args.parse(argc, argv, 2)) return 0;
  if (!args.has("out")) throw UsageError("--out FILE.json is required");
  const std::int64_t max_tokens = args.get_int("max-tokens");
  const double budget = args.get_double("budget");
  if (!(budget > 0)) throw UsageError("--budget must be in (0, 1]");  // the declared range takes 0

  const fs::path path = resolve_model_path(args);
  const Tokenizer tokenizer = Tokenizer::load(path);
  // Only the first --max-tokens are used: encoding stops there.
  PromptInput prompt = build_prompt(args, tokenizer, static_cast<std::size_t>(max_tokens));
  if (static_cast<std::int64_t>(prompt.ids.size()) > max_tokens) {
    prompt.ids.resize(static_cast<std::size_t>(max_tokens));
    prompt.segment.resize(static_cast<std::size_t>(max_tokens));
  }
  const std::int64_t n = static_cast<std::int64_t>(prompt.ids.size());
  const std::int64_t m = args.has("prompt-tokens") ? args.get_int("prompt-tokens") : n / 2;
  if (m < 1 || m >= n - 1) throw UsageError("--prompt-tokens must be in 1.." + std::to_string(n - 2) + " for " + std::to_string(n) + " tokens");
  // Topics: segments with the same label share one.
  std::vector<std::int32_t> topic(static_cast<std::size_t>(n), -1);
  bool topics = false;
  {
    std::map<std::string, std::int32_t> ids;
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int32_t s = prompt.segment[static_cast<std::size_t>(t)];
      if (s < 0) continue;
      topics = true;
      topic[static_cast<std::size_t>(t)] = ids.emplace(prompt.segments[static_cast<std::size_t>(s)].label, static_cast<std::int32_t>(ids.size())).first->second;
    }
  }

  const std::shared_ptr<const Backend> device = device_option(args);
  if (args.get_flag("dar")) {
    for (const char* other : {"candidates", "config-out", "prompt-tokens", "set", "kascade"})
      if (args.has(other)) throw UsageError(std::string("--") + other + " does not apply with --dar");
    const auto model = Model::load(path, load_options(args, *device));
    check_context(model->config().max_position_embeddings, 0, n, 0);
    return calibrate_dar(args, *device, model, prompt.ids, args.get_flag("quiet"));
  }
  if (args.has("kascade")) {
    for (const char* other : {"candidates", "config-out", "prompt-tokens", "set"})
      if (args.has(other)) throw UsageError(std::string("--") + other + " does not apply with --kascade");
    const auto model = Model::load(path, load_options(args, *device));
    check_context(model->config().max_position_embeddings, 0, n, 0);
    return calibrate_kascade(args, *device, model, prompt.ids, args.get_flag("quiet"));
  }
  const auto model = Model::load(path, load_options(args, *device));
  const std::int64_t L = model->config().num_layers, H = model->config().num_heads;
  check_context(model->config().max_position_embeddings, 0, n, 0);
  const std::vector<Candidate> candidates = parse_candidates(args.get("candidates"), L, args.get_all("set"));

  const std::vector<std::int32_t> head(prompt.ids.begin(), prompt.ids.begin() + m);
  RunSettings run;
  run.forced.assign(prompt.ids.begin() + m, prompt.ids.end());
  run.max_new_tokens = n - m;
  const std::int64_t steps = n - 1 - m;  // decode steps: each feeds one forced token
  const bool quiet = args.get_flag("quiet");
  if (!quiet)
    std::fprintf(stderr, "%lld tokens: %lld prefilled, %lld decode steps per candidate, %zu candidates\n", static_cast<long long>(n),
                 static_cast<long long>(m), static_cast<long long>(steps), candidates.size());

  RunSession session(device, model, &tokenizer);
  const auto sums = measure_candidates(session, candidates, head, run, steps, topics ? topic.data() : nullptr, quiet);

  // The file: candidates with their per-layer config, then per layer the dense entries, the
  // candidates' means over heads and each head's numbers.
  const double S = static_cast<double>(steps);
  json cands = json::array();
  for (const Candidate& c : candidates) {
    LukaConfig plain = c.config;  // the setting itself, without the measuring shadow
    for (auto& l : plain.layers) l.dense_shadow = false;
    cands.push_back({{"name", c.name}, {"config", json::parse(plain.to_json()).at("layers").at("0")}});
  }
  const json layers = calibration_layers(sums, candidates, L, H, m, S);
  const json out = {{"calibration", 1},
                    {"model", fs::weakly_canonical(path).string()},
                    {"source", prompt.source},
                    {"tokens", n},
                    {"prompt_tokens", m},
                    {"decode_steps", steps},
                    {"num_layers", L},
                    {"num_heads", H},
                    {"topics", topics},
                    {"candidates", cands},
                    {"layers", layers}};
  write_file_atomically(args.get("out"), out.dump(1, ' ', false, json::error_handler_t::replace) + "\n");

  print_calibration_table(layers, candidates);
  std::fprintf(stderr, "wrote %s\n", args.get("out").c_str());
  if (args.has("config-out")) {
    const LukaConfig automatic = auto_config({args.get("out"), budget}, L);
    write_file_atomically(args.get("config-out"), json::parse(automatic.to_json()).dump(1, ' ', false, json::error_handler_t::replace) + "\n");
    std::fprintf(stderr, "wrote %s: %s\n", args.get("config-out").c_str(), describe_modes(automatic).c_str());
  }
  return 0;
}

}  // namespace luka::cli
