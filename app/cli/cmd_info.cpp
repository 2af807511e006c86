// luka info: what a checkpoint is, from its config and weights (weights stay memory-mapped).
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/luka_options.h"
#include "core/device/device.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "kernels/cpu/quant_gemv.h"

namespace luka::cli {
namespace {

std::string with_thousands(std::int64_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<std::size_t>(i), ",");
  return digits;
}

std::string human_bytes(double b) {
  char s[32];
  if (b >= 1e9) {
    std::snprintf(s, sizeof s, "%.2f GB", b / 1e9);
  } else if (b >= 1e6) {
    std::snprintf(s, sizeof s, "%.1f MB", b / 1e6);
  } else {
    std::snprintf(s, sizeof s, "%.1f kB", b / 1e3);
  }
  return s;
}

void row(const char* key, const std::string& value) { std::printf("%-16s %s\n", key, value.c_str()); }

}  // namespace

int run_info(int argc, char** argv) {
  ArgParser args("info", "[--model PATH] [--dtype fp32|bf16]",
                 "Prints a model's architecture, layers, heads, dimensions, stored types (GGUF\n"
                 "quantizations included) with the in-memory footprint, parameter count and vocabulary.\n"
                 "The weights' footprint is given for each --weights choice: the dequantized tensors at the\n"
                 "compute dtype, and for quantized the GGUF blocks with the tensors no block covers.");
  args.option("model", "PATH", kModelOptionHelp)
      .option("dtype", "fp32|bf16", "compute dtype to report", Default::described_text("the stored dtype when it is fp32 or bf16, else fp32"))
      .option("weights", "auto|quantized|dequantized", "the weight format to load (and so check that the file allows it); the\n"
              "footprints of both are reported either way", "auto")
      .flag("config", "also print the LuKA configuration in force (per layer, as JSON)")
      .option("device", "auto|cpu|cuda|cuda:N", "also report the device: a GPU's name and memory, and whether the model\n"
              "plus its KV cache and LuKA state at --context tokens fit in the free memory")
      .option("context", "N", "tokens to size the KV cache for (with --device)", Default::described_integer("the model's context"))
      .range(1, 1e12);
  add_luka_options(args);
  args.epilog(std::string(kLukaOptionsHelp) + "\n\n" + kEnvironmentHelp);
  if (!args.parse(argc, argv, 2)) return 0;
  const std::filesystem::path path = resolve_model_path(args);
  const std::shared_ptr<const Backend> device = args.has("device") ? device_option(args) : nullptr;

  // Loading in the stored dtype keeps the weights memory-mapped rather than converted; GGUF
  // files are dequantized into fp32 unless --dtype says otherwise.
  const bool gguf = !std::filesystem::is_directory(path);
  DType dtype = DType::kF32;
  if (!gguf && ModelConfig::from_json_file(path / "config.json").torch_dtype == "bfloat16") dtype = DType::kBF16;
  if (args.has("dtype")) dtype = option_value("dtype", [&] { return parse_dtype(args.get("dtype")); });
  if (dtype == DType::kF16) throw UsageError("--dtype fp16: luka info reports fp32 or bf16 (fp16 runs on the GPU only)");
  LoadOptions options;
  options.dtype = dtype;
  options.threads = 1;
  options.weights = load_options(args).weights;
  const auto model = Model::load(path, options);
  const ModelConfig& c = model->config();
  // The LuKA options are checked before anything is printed: a bad --set is one error, not a
  // summary followed by one.
  const auto luka = luka_config(args, c.num_layers);

  std::optional<std::int32_t> tokenizer_size;
  if (gguf || std::filesystem::exists(path / "tokenizer.json")) tokenizer_size = Tokenizer::load(path).vocab_size();

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
  if (gguf) row("format", "GGUF");
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
  // Stored types with their tensors and bytes on disk, then what the weights take in memory
  // once dequantized to the compute dtype (a tied embedding counted once).
  std::uint64_t stored_bytes = 0;
  for (const StoredType& t : model->stored_types()) {
    char line[160];
    std::snprintf(line, sizeof line, "%-6s %4d tensor%s, %s values, %s", t.name.c_str(), t.tensors, t.tensors == 1 ? "" : "s",
                  with_thousands(t.elements).c_str(), human_bytes(static_cast<double>(t.bytes)).c_str());
    row(stored_bytes == 0 ? "stored types" : "", line);
    stored_bytes += t.bytes;
  }
  const double elem = model->dtype() == DType::kF32 ? 4.0 : 2.0;
  row("footprint", human_bytes(static_cast<double>(stored_bytes)) + " on disk, " +
                       human_bytes(elem * static_cast<double>(model->parameter_count())) + " as " +
                       to_string(model->dtype()) + " in memory");
  // Each --weights choice: dequantized holds every weight as a tensor of the compute dtype;
  // quantized holds the GGUF blocks instead, and tensors only for what no block covers.
  const auto loaded = [&](WeightFormat f) { return model->weight_format() == f ? "  (loaded)" : ""; };
  const double dequantized = static_cast<double>(model->dequantized_bytes());
  const double blocks = static_cast<double>(model->quantized_block_bytes());
  row("weights", std::string("dequantized ") + human_bytes(dequantized) + ": " + to_string(model->dtype()) + " tensors" +
                     loaded(WeightFormat::kDequantized));
  row("", blocks > 0 ? std::string("quantized   ") + human_bytes(static_cast<double>(model->quantized_bytes())) + ": " +
                           human_bytes(blocks) + " of GGUF blocks, read as stored, and " +
                           human_bytes(static_cast<double>(model->quantized_bytes()) - blocks) + " of " + to_string(model->dtype()) +
                           " tensors" + loaded(WeightFormat::kQuantized)
                     : std::string("quantized   not available (") + (gguf ? "no weight in a block type the CPU GEMV reads" : "not a GGUF file") + ")");
  char billions[32];
  std::snprintf(billions, sizeof billions, " (%.3f B)", static_cast<double>(model->parameter_count()) / 1e9);
  row("parameters", with_thousands(model->parameter_count()) + billions);
  // The CPU kernel path each product on the GGUF blocks takes here (LUKA_QUANT_PATH forces one).
  if (blocks > 0)
    for (const cpu::QuantPathLine& l : cpu::quant_path_report()) row(l.product.c_str(), l.path);
  if (device) {
    const std::int64_t context = args.has("context") ? args.get_int("context") : c.max_position_embeddings;
    // What a run at `context` tokens holds on the device: the weights in the compute dtype, the
    // KV cache, LuKA's per-layer state (importance, h2o_score and spread per token, fp32; one
    // summary key and value per page of 8, the smallest preset page), and a margin for
    // activations, workspaces and the logits.
    const double weights = elem * static_cast<double>(model->parameter_count());
    const double kv = 2.0 * static_cast<double>(c.num_layers) * static_cast<double>(c.num_kv_heads) * static_cast<double>(c.head_dim) *
                      static_cast<double>(context) * elem;
    const double luka_state = static_cast<double>(c.num_layers) * static_cast<double>(context) * 4.0 *
                              (2.0 * static_cast<double>(c.num_kv_heads) + static_cast<double>(c.num_heads) +
                               2.0 * static_cast<double>(c.num_kv_heads * c.head_dim) / 8.0);
    const double margin = 0.05 * (weights + kv + luka_state) + 512e6;
    const double need = weights + kv + luka_state + margin;
    row("device", device->description());
    const GpuInfo g = device->gpu();
    char line[256];
    std::snprintf(line, sizeof line, "%s weights + %s KV + %s LuKA state + %s margin = %s at %s tokens",
                  human_bytes(weights).c_str(), human_bytes(kv).c_str(), human_bytes(luka_state).c_str(), human_bytes(margin).c_str(),
                  human_bytes(need).c_str(), with_thousands(context).c_str());
    row("run needs", line);
    if (device->is_cuda()) {
      std::snprintf(line, sizeof line, "%s (%s free of %s)", need <= static_cast<double>(g.free_bytes) ? "yes" : "no",
                    human_bytes(static_cast<double>(g.free_bytes)).c_str(), human_bytes(static_cast<double>(g.total_bytes)).c_str());
      row("fits", line);
    }
  }
  if (luka || args.get_flag("config")) {
    const LukaConfig config = luka.value_or(LukaConfig::preset("dense", c.num_layers));
    row("luka modes", describe_modes(config));
    if (args.get_flag("config")) std::printf("%s\n", config.to_json().c_str());
  }
  return 0;
}

}  // namespace luka::cli
