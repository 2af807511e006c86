#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/luka_options.h"
#include "core/device/device.h"
#include "core/generate/sampler.h"
#include "core/util/error.h"
#include "core/util/text_file.h"
#include "core/gguf/gguf.h"
#include "core/model/gguf_config.h"
#include "core/model/model.h"

namespace luka::cli {

const char* const kModelOptionHelp =
    "checkpoint folder (config.json, *.safetensors, tokenizer.json) or GGUF file; falls back to "
    "$LUKA_MODEL, then to the default model installed by scripts/setup.sh (SmolLM2-135M-Instruct, GGUF)";

const char* const kEnvironmentHelp =
    "environment:\n"
    "  LUKA_MODEL   model used when --model is not given";

std::filesystem::path resolve_model_path(const ArgParser& args) {
  if (args.has("model")) {
    if (args.get("model").empty()) throw UsageError("--model: the path is empty (a checkpoint folder or a GGUF file)");
    return args.get("model");
  }
  if (const char* env = std::getenv("LUKA_MODEL"); env != nullptr && *env != '\0') return env;
  const std::filesystem::path fallback = std::filesystem::path(LUKA_SOURCE_DIR) / "models" / "default";
  if (std::filesystem::exists(fallback)) return fallback;
  throw UsageError("no model given: pass --model PATH or set LUKA_MODEL (scripts/setup.sh installs a default model)");
}

std::int64_t model_context(const std::filesystem::path& path) {
  // As Model::load tells the two apart: a GGUF file, else a checkpoint folder.
  if (std::filesystem::is_regular_file(path) && gguf::File::has_magic(path))
    return config_from_gguf(*gguf::File::open(path)).max_position_embeddings;
  if (!std::filesystem::exists(path)) fail(path.string(), "no such file or folder");
  if (!std::filesystem::is_directory(path)) {
    require_regular_file(path, "");  // a FIFO or a device is named as one
    fail(path.string(), "neither a checkpoint folder nor a GGUF file");
  }
  const std::filesystem::path config = path / "config.json";
  if (!std::filesystem::exists(config)) fail(config.string(), "missing config.json in the checkpoint folder");
  return ModelConfig::from_json_file(config).max_position_embeddings;
}

void add_device_option(ArgParser& args) {
  args.option("device", "auto|cpu|cuda|cuda:N",
              "where the model runs; auto: the GPU when the CUDA plugin sees one, else the CPU (said on standard error)",
              "auto");
  add_graph_options(args);  // how the decode steps run on that device
}

std::shared_ptr<const Backend> device_option(const ArgParser& args, bool records_steps) {
  DeviceRequest request;
  try {
    request = parse_device(args.get("device"));
  } catch (const Error& e) {
    throw UsageError(std::string("--") + e.what());
  }
  std::string note;
  std::shared_ptr<const Backend> device = open_backend(request, &note);
  // auto says where it ran only where it considered a GPU: on a CPU-only machine a run's errors
  // stay one line.
  if (request.kind != DeviceRequest::Kind::kAuto || auto_considers_gpu()) std::fprintf(stderr, "%s\n", note.c_str());
  check_graph_option(args, device->is_cuda(), records_steps);
  return device;
}

LoadOptions load_options(const ArgParser& args, const Backend& device) {
  LoadOptions options = load_options(args);
  device.place(options);
  if (options.dtype == DType::kF16 && !options.cuda)
    throw UsageError("--dtype fp16: fp16 compute runs on the GPU only (use fp32 or bf16 on " + device.name() + ")");
  return options;
}

void add_compute_options(ArgParser& args, const std::string& threads_help) {
  args.option("dtype", "fp32|bf16|fp16", "compute dtype (fp16 on the GPU only)", "fp32")
      .option("threads", "N", threads_help + "; 0: all cores", 0)
      .range(0, 1024);
}

void add_weights_option(ArgParser& args) {
  args.option("weights", "auto|quantized|dequantized",
              "a GGUF file's linear weights: quantized keeps only their GGUF blocks (Q4_0, Q4_1, Q8_0, Q4_K,\n"
              "Q6_K), which decode steps read as stored with 8-bit activations and prompts multiply by a few\n"
              "MB at a time; dequantized decodes them into the compute dtype at load (the exact reference,\n"
              "several times the memory: luka info shows both). auto is quantized for such a GGUF file on\n"
              "the CPU and dequantized otherwise (safetensors, the GPU)",
              "auto");
}

void add_sampling_options(ArgParser& args) {
  args.option("temperature", "T", "sampling temperature; 0 = greedy", 0.0)
      .option("top-k", "K", "sample from the K most likely tokens; 0 = all", 0)
      .option("top-p", "P", "sample from the smallest set of tokens with mass >= P, in (0, 1]", 1.0)
      .range(0, 1)
      .option("seed", "S", "random seed for sampling", 0)
      .range(0, 1e18);
}

SamplingParams sampling_options(const ArgParser& args) {
  SamplingParams sampling;
  sampling.temperature = static_cast<float>(args.get_double("temperature"));
  sampling.top_k = static_cast<int>(args.get_int("top-k"));
  sampling.top_p = static_cast<float>(args.get_double("top-p"));
  sampling.seed = static_cast<std::uint64_t>(args.get_int("seed"));
  if (sampling.temperature < 0) throw UsageError("--temperature must be >= 0");
  if (args.get_int("top-k") < 0 || args.get_int("top-k") > INT32_MAX) throw UsageError("--top-k must be >= 0");
  if (!(sampling.top_p > 0)) throw UsageError("--top-p must be in (0, 1]");  // the declared range takes 0
  return sampling;
}

LoadOptions load_options(const ArgParser& args) {
  LoadOptions options;
  // Not every command that loads a model offers every setting (luka info has no --threads, and
  // works out its dtype): what it lacks stays LoadOptions' own default.
  if (const std::string dtype = args.declares("dtype") ? args.get("dtype") : ""; !dtype.empty())
    options.dtype = option_value("dtype", [&] { return parse_dtype(dtype); });
  if (args.declares("threads")) options.threads = static_cast<int>(args.get_int("threads"));
  try {
    if (args.declares("weights")) options.weights = parse_weight_format(args.get("weights"));
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(std::string("--") + e.what());
  }
  return options;
}

}  // namespace luka::cli
