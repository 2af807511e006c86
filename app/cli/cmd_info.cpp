// luka info: what a checkpoint is, from its config and weights (weights stay memory-mapped).
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"

namespace luka::cli {
namespace {

std::string with_thousands(std::int64_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<std::size_t>(i), ",");
  return digits;
}

void row(const char* key, const std::string& value) { std::printf("%-16s %s\n", key, value.c_str()); }

}  // namespace

int run_info(int argc, char** argv) {
  ArgParser args("info", "[--model PATH] [--dtype fp32|bf16]",
                 "Prints a model's architecture, layers, heads, dimensions, dtypes, parameter count\n"
                 "and vocabulary.");
  args.option("model", "PATH", kModelOptionHelp)
      .option("dtype", "fp32|bf16", "compute dtype to report", "the stored dtype when it is fp32 or bf16, else fp32")
      .epilog(kEnvironmentHelp);
  if (!args.parse(argc, argv, 2)) return 0;
  const std::filesystem::path path = resolve_model_path(args);

  // Loading in the stored dtype keeps the weights memory-mapped rather than converted.
  const ModelConfig probe = ModelConfig::from_json_file(path / "config.json");
  DType dtype = probe.torch_dtype == "bfloat16" ? DType::kBF16 : DType::kF32;
  if (args.has("dtype")) dtype = parse_dtype(args.get("dtype"));
  LoadOptions options;
  options.dtype = dtype;
  options.threads = 1;
  const auto model = Model::load(path, options);
  const ModelConfig& c = model->config();

  std::optional<std::int32_t> tokenizer_size;
  if (std::filesystem::exists(path / "tokenizer.json")) tokenizer_size = Tokenizer::load(path).vocab_size();

  row("model", std::filesystem::absolute(path).lexically_normal().string());
  row("architecture", std::string(to_string(c.arch)) + " (model_type " + c.model_type + ")");
  row("layers", std::to_string(c.num_layers));
  row("hidden", std::to_string(c.hidden_size));
  row("heads", std::to_string(c.num_heads) + " query, " + std::to_string(c.num_kv_heads) + " key/value (GQA " +
                   std::to_string(c.num_heads / c.num_kv_heads) + ")");
  row("head_dim", std::to_string(c.head_dim));
  row("intermediate", std::to_string(c.intermediate_size));
  row("vocab", std::to_string(c.vocab_size) + " embedding rows" +
                   (tokenizer_size ? ", tokenizer " + std::to_string(*tokenizer_size) + " tokens" : ", no tokenizer.json"));
  row("context", std::to_string(c.max_position_embeddings) + " positions");
  char rope[128];
  std::snprintf(rope, sizeof rope, "%s, theta %g", c.rope.type.c_str(), c.rope.theta);
  row("rope", rope);
  std::string flags;
  if (c.qk_norm) flags += "q/k RMSNorm, ";
  if (c.attention_bias) flags += "q/k/v bias, ";
  flags += c.tie_word_embeddings ? "tied embeddings" : "separate lm_head";
  row("attention", flags);
  char eps[32];
  std::snprintf(eps, sizeof eps, "%g", c.rms_norm_eps);
  row("rms_norm_eps", eps);
  row("dtype", model->stored_dtypes() + " stored, " + to_string(model->dtype()) + " compute");
  char billions[32];
  std::snprintf(billions, sizeof billions, " (%.3f B)", static_cast<double>(model->parameter_count()) / 1e9);
  row("parameters", with_thousands(model->parameter_count()) + billions);
  return 0;
}

}  // namespace luka::cli
