// luka perplexity: teacher-forced perplexity of a text through the decode path (after an
// optional prompt prefill), under any LuKA configuration; optionally per-layer fidelity against
// dense attention (the dense shadow) and the drift of the next-token distribution against a
// separate all-dense run.
#include <ATen/ATen.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/luka_options.h"
#include "core/device/device.h"
#include "core/luka/luka_attention.h"
#include "core/run/run_loop.h"
#include "core/model/decoder.h"
#include "core/run/session.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka::cli {

int run_perplexity(int argc, char** argv) {
  ArgParser args("perplexity", "[--model PATH] --text-file F [--max-tokens N] [--prompt-tokens N] [LuKA options]",
                 "Teacher-forced perplexity of a text: the first --prompt-tokens go through one prefill, every\n"
                 "further token through the decode path (where the LuKA modes act), and each token's negative\n"
                 "log-likelihood under the model is averaged. Prints perplexity, mean NLL and tokens/s.");
  args.option("model", "PATH", kModelOptionHelp)
      .option("text-file", "F", "UTF-8 text to score (tokenized without special tokens)")
      .option("max-tokens", "N", "score at most the first N tokens of the text (at least 2)", 2048)
      .range(2, 1e12)
      .option("prompt-tokens", "N", "tokens prefilled before the decode path starts (not scored)", 0)
      .range(0, 1e12)
      .flag("fidelity", "turn on the dense shadow in every layer and report per-layer means of KL, recall,\n"
                        "top-k overlap and output error; against a separate all-dense run, the per-layer\n"
                        "hidden-state cosine and the next-token KL")
      .flag("json", "print one JSON object instead of text");
  add_compute_options(args);
  add_device_option(args);
  add_weights_option(args);
  add_luka_options(args);
  args.epilog(std::string("example:\n  luka perplexity --text-file emma.txt --max-tokens 2048 --preset clustered --set top_k=8\n\n") +
              kLukaOptionsHelp + "\n\n" + kEnvironmentHelp);
  if (!args.parse(argc, argv, 2)) return 0;
  if (!args.has("text-file")) throw UsageError("--text-file F is required");
  const std::int64_t max_tokens = args.get_int("max-tokens");
  const std::int64_t prompt_tokens = args.get_int("prompt-tokens");

  const std::string text_path = args.get("text-file");
  const std::string text = read_text_file(text_path, "text file");
  const auto path = resolve_model_path(args);
  const Tokenizer tokenizer = Tokenizer::load(path);
  std::vector<std::int32_t> ids = name_out_of_memory(text_path, "encoding the text (" + std::to_string(text.size()) + " bytes)",
                                                     [&] { return tokenizer.encode(text); });
  if (static_cast<std::int64_t>(ids.size()) > max_tokens) ids.resize(static_cast<std::size_t>(max_tokens));
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  if (n < 2) throw Error(text_path + ": the text has fewer than 2 tokens");
  if (prompt_tokens >= n) throw UsageError("--prompt-tokens must be smaller than the number of tokens (" + std::to_string(n) + ")");

  const std::shared_ptr<const Backend> device = device_option(args);
  const auto model = Model::load(path, load_options(args, *device));
  const std::int64_t n_layers = model->config().num_layers;
  if (n > model->config().max_position_embeddings)
    throw Error(text_path + ": " + std::to_string(n) + " tokens exceed the model's " +
                std::to_string(model->config().max_position_embeddings) + " positions; lower --max-tokens");
  LukaConfig config = luka_config(args, n_layers).value_or(LukaConfig::preset("dense", n_layers));
  const bool fidelity = args.get_flag("fidelity");
  if (fidelity)
    for (auto& l : config.layers) l.dense_shadow = true;
  RunSession session(device, model, &tokenizer);
  session.use(config);
  Decoder& decoder = session.decoder();
  const std::vector<std::shared_ptr<LukaLayer>>& layers = session.layers();
  std::unique_ptr<Decoder> reference;
  if (fidelity) {
    reference = std::make_unique<Decoder>(model);
    reference->set_hidden_capture(true);
    decoder.set_hidden_capture(true);
  }
  // Per-layer sums of the cosine between this run's hidden state and the all-dense run's.
  std::vector<double> cosine(static_cast<std::size_t>(n_layers), 0.0);

  // Per-layer sums of the fidelity columns over heads and steps.
  std::vector<std::vector<double>> fid(static_cast<std::size_t>(n_layers), std::vector<double>(4, 0.0));
  std::int64_t fid_steps = 0;
  double next_token_kl = 0;
  double nll = 0;
  std::int64_t scored = 0;
  const auto score = [&](const at::Tensor& logits, std::int32_t next, const at::Tensor& ref_logits) {
    const at::Tensor logp = at::log_softmax(logits.to(at::kDouble), -1);
    const double lp = logp[next].item<double>();
    if (!std::isfinite(lp))
      throw Error(text_path + ": the model's log-probability of token " + std::to_string(scored + prompt_tokens + 1) +
                  " is not finite (" + std::to_string(lp) + "): NaN or Inf in the logits");
    nll -= lp;
    ++scored;
    if (ref_logits.defined()) {
      const at::Tensor ref_logp = at::log_softmax(ref_logits.to(at::kDouble), -1);
      next_token_kl += (ref_logp.exp() * (ref_logp - logp)).sum().item<double>();
    }
  };
  // Progress on a terminal only; --json keeps standard error quiet too.
  const bool quiet = args.get_flag("json") || !isatty(fileno(stderr));
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::int32_t> prompt(ids.begin(), ids.begin() + prompt_tokens);
  RunSettings run;
  run.forced.assign(ids.begin() + prompt_tokens, ids.end());
  run.max_new_tokens = n - prompt_tokens;

  // Scores each token against the logits before it; with --fidelity, steps the all-dense
  // reference run alongside and sums the per-layer fidelity and hidden-state cosines.
  struct Scoring final : RunObserver {
    std::function<void(const at::Tensor&, std::int32_t)> score;
    std::function<void(std::int64_t)> after;
    const std::vector<std::int32_t>* forced = nullptr;
    void logits(std::int64_t index, const at::Tensor& l) override { score(l, (*forced)[static_cast<std::size_t>(index)]); }
    void after_step(std::int64_t step, double) override { after(step); }
  } scoring;
  at::Tensor ref_logits;
  if (reference && prompt_tokens > 0) ref_logits = reference->prefill(prompt);
  scoring.forced = &run.forced;
  scoring.score = [&](const at::Tensor& logits, std::int32_t next) { score(logits, next, ref_logits); };
  // Entries attended per decode step (raw tokens, summaries, refined children, top-k keys), summed
  // over steps, layers and heads, against dense's (T per head); a layer without records leaves it
  // unknown.
  double attended = 0, attendable = 0;
  bool counted = true;
  scoring.after = [&](std::int64_t step) {
    for (const auto& layer : layers) {
      const LukaStep& s = layer->last_step();
      if (s.cover_size.empty()) counted = false;
      for (const std::int64_t c : s.cover_size) attended += static_cast<double>(c), attendable += static_cast<double>(s.tokens);
    }
    const std::int32_t fed = run.forced[static_cast<std::size_t>(step - 1)];
    if (reference) ref_logits = reference->decode(fed);
    if (fidelity && layers[0]->last_step().fidelity.defined()) {
      ++fid_steps;
      for (std::int64_t l = 0; l < n_layers; ++l) {
        const at::Tensor a = decoder.last_hidden()[static_cast<std::size_t>(l)].to(at::kDouble);
        const at::Tensor b = reference->last_hidden()[static_cast<std::size_t>(l)].to(at::kDouble);
        cosine[static_cast<std::size_t>(l)] += (a.dot(b) / (a.norm() * b.norm()).clamp_min(1e-300)).item<double>();
      }
      for (std::int64_t l = 0; l < n_layers; ++l) {
        const at::Tensor f = layers[static_cast<std::size_t>(l)]->last_step().fidelity.to(at::kDouble).mean(0);
        for (int c = 0; c < 4; ++c) fid[static_cast<std::size_t>(l)][static_cast<std::size_t>(c)] += f[c].item<double>();
      }
    }
    const std::int64_t pos = prompt_tokens + step - 1;  // the position this step fed
    if (!quiet && scored > 0 && (pos % 64 == 0 || pos + 2 == n)) {
      std::fprintf(stderr, "\r%lld/%lld tokens, perplexity so far %.3f", static_cast<long long>(pos + 1),
                   static_cast<long long>(n), scored ? std::exp(nll / static_cast<double>(scored)) : 0.0);
      std::fflush(stderr);
    }
  };
  const RunResult result = session.loop().run(prompt, run, &scoring);
  const double decode_s = result.decode_seconds;
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet) std::fprintf(stderr, "\r\033[K");
  const std::int64_t decode_steps = n - 1 - prompt_tokens;
  const double mean_nll = nll / static_cast<double>(scored);
  const double tps = decode_s > 0 ? static_cast<double>(decode_steps) / decode_s : 0.0;

  nlohmann::json out = {{"model", path.string()},
                        {"text_file", text_path},
                        {"tokens", n},
                        {"prompt_tokens", prompt_tokens},
                        {"scored_tokens", scored},
                        {"mean_nll", mean_nll},
                        {"perplexity", std::exp(mean_nll)},
                        {"decode_tokens_per_s", tps},
                        {"seconds", total_s},
                        {"attention", describe_modes(config)},
                        {"attended_fraction", counted && attendable > 0 ? nlohmann::json(attended / attendable) : nlohmann::json()}};
  if (fidelity) {
    nlohmann::json per_layer = nlohmann::json::array();
    for (std::int64_t l = 0; l < n_layers; ++l) {
      const auto& f = fid[static_cast<std::size_t>(l)];
      const double d = fid_steps > 0 ? static_cast<double>(fid_steps) : 1.0;
      per_layer.push_back({{"layer", l},
                           {"mode", to_string(config.layers[static_cast<std::size_t>(l)].mode)},
                           {"kl", f[0] / d},
                           {"recall", f[1] / d},
                           {"topk_overlap", f[2] / d},
                           {"output_rel_l2", f[3] / d},
                           {"hidden_cosine_vs_dense", cosine[static_cast<std::size_t>(l)] / d}});
    }
    out["fidelity"] = per_layer;
    out["next_token_kl_vs_dense"] = next_token_kl / static_cast<double>(scored);
  }
  if (args.get_flag("json")) {
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("perplexity  %.4f\nmean NLL    %.5f nats over %lld tokens\ndecode      %.1f tokens/s\nattention   %s\n",
              std::exp(mean_nll), mean_nll, static_cast<long long>(scored), tps, describe_modes(config).c_str());
  if (counted && attendable > 0) std::printf("attended    %.4f of dense's entries per decode step\n", attended / attendable);
  if (fidelity) {
    std::printf("next-token KL vs an all-dense run: %.6f nats/token\n", next_token_kl / static_cast<double>(scored));
    std::printf("%-6s %-10s %12s %8s %10s %12s %14s\n", "layer", "mode", "KL", "recall", "top-32", "output err",
                "hidden cosine");
    for (const auto& l : out["fidelity"])
      std::printf("%-6lld %-10s %12.6f %8.4f %10.4f %12.6f %14.6f\n", static_cast<long long>(l["layer"].get<std::int64_t>()),
                  l["mode"].get<std::string>().c_str(), l["kl"].get<double>(), l["recall"].get<double>(),
                  l["topk_overlap"].get<double>(), l["output_rel_l2"].get<double>(),
                  l["hidden_cosine_vs_dense"].get<double>());
  }
  return 0;
}

}  // namespace luka::cli
