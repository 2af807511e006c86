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
#include "core/eval/perplexity.h"
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
  // Progress on a terminal only; --json keeps standard error quiet too.
  const bool quiet = args.get_flag("json") || !isatty(fileno(stderr));
  eval::PerplexityOptions options;
  options.prompt_tokens = prompt_tokens;
  options.fidelity = fidelity;
  options.where = text_path;
  if (!quiet)
    options.progress = [](std::int64_t pos, std::int64_t tokens, double ppl) {
      std::fprintf(stderr, "\r%lld/%lld tokens, perplexity so far %.3f", static_cast<long long>(pos + 1),
                   static_cast<long long>(tokens), ppl);
      std::fflush(stderr);
    };
  const auto t0 = std::chrono::steady_clock::now();
  const eval::PerplexityResult r = eval::perplexity(session, ids, options);
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet) std::fprintf(stderr, "\r\033[K");
  const double tps = r.decode_seconds > 0 ? static_cast<double>(r.decode_steps) / r.decode_seconds : 0.0;

  nlohmann::json out = {{"model", path.string()},
                        {"text_file", text_path},
                        {"tokens", n},
                        {"prompt_tokens", prompt_tokens},
                        {"scored_tokens", r.scored},
                        {"mean_nll", r.mean_nll},
                        {"perplexity", r.perplexity()},
                        {"decode_tokens_per_s", tps},
                        {"seconds", total_s},
                        {"attention", describe_modes(config)},
                        {"attended_fraction", r.attended_fraction ? nlohmann::json(*r.attended_fraction) : nlohmann::json()}};
  if (fidelity) {
    nlohmann::json per_layer = nlohmann::json::array();
    for (std::int64_t l = 0; l < n_layers; ++l) {
      const eval::LayerFidelity& f = r.layers[static_cast<std::size_t>(l)];
      per_layer.push_back({{"layer", l},
                           {"mode", to_string(config.layers[static_cast<std::size_t>(l)].mode)},
                           {"kl", f.kl},
                           {"recall", f.recall},
                           {"topk_overlap", f.topk_overlap},
                           {"output_rel_l2", f.output_rel_l2},
                           {"hidden_cosine_vs_dense", f.hidden_cosine}});
    }
    out["fidelity"] = per_layer;
    out["next_token_kl_vs_dense"] = r.next_token_kl;
  }
  if (args.get_flag("json")) {
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("perplexity  %.4f\nmean NLL    %.5f nats over %lld tokens\ndecode      %.1f tokens/s\nattention   %s\n",
              r.perplexity(), r.mean_nll, static_cast<long long>(r.scored), tps, describe_modes(config).c_str());
  if (r.attended_fraction) std::printf("attended    %.4f of dense's entries per decode step\n", *r.attended_fraction);
  if (fidelity) {
    std::printf("next-token KL vs an all-dense run: %.6f nats/token\n", r.next_token_kl);
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
