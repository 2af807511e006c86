// The `luka` subcommands, one file each. Each returns the process exit code and throws
// luka::Error (exit 1) or cli::UsageError (exit 2) with a one-line message.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace luka {
class Backend;
struct LoadOptions;
struct SamplingParams;
}

namespace luka::cli {

class ArgParser;

int run_info(int argc, char** argv);
int run_tokenize(int argc, char** argv);
int run_forward(int argc, char** argv);
int run_generate(int argc, char** argv);
int run_perplexity(int argc, char** argv);
int run_eval(int argc, char** argv);  // luka eval wikisalad
int run_sweep(int argc, char** argv);
int run_calibrate(int argc, char** argv);
int run_capture(int argc, char** argv);
int run_inspect(int argc, char** argv);
int run_export(int argc, char** argv);
int run_studio(int argc, char** argv);  // built with LUKA_GUI

// --model, else $LUKA_MODEL, else the default model that scripts/setup.sh makes.
std::filesystem::path resolve_model_path(const ArgParser& args);
// The model's context (max_position_embeddings) from its config alone, config.json or the GGUF
// metadata, so that a prompt can be held to it before the weights load. Errors are Model::load's.
std::int64_t model_context(const std::filesystem::path& path);
// --dtype (default fp32) and --threads (default 0: all cores), as forward and generate take them;
// load_options reads them (and --weights).
void add_compute_options(ArgParser& args, const std::string& threads_help = "CPU threads");
LoadOptions load_options(const ArgParser& args);
// --device auto|cpu|cuda|cuda:N (default auto), on every command that runs a model. device_option
// opens it (loading the CUDA plugin for cuda and auto) and says on standard error which device
// runs; a GPU asked for and missing is a luka::Error, a malformed value a UsageError.
void add_device_option(ArgParser& args);
// `records_steps`: the command takes --graph on a GPU (check_graph_option).
std::shared_ptr<const Backend> device_option(const ArgParser& args, bool records_steps = false);
// The model's load options on `device`: --dtype and --threads, placed there.
LoadOptions load_options(const ArgParser& args, const Backend& device);
// --weights auto|quantized|dequantized (default auto), on every command that loads a model;
// load_options reads it. A malformed value is a UsageError; a checkpoint that cannot honour
// `quantized` is refused by Model::load (luka::Error naming the file).
void add_weights_option(ArgParser& args);
// --temperature, --top-k, --top-p, --seed: declared and read the same way by generate and capture.
void add_sampling_options(ArgParser& args);
SamplingParams sampling_options(const ArgParser& args);  // UsageError for out-of-range values
// The help text line shared by every command that takes --model.
extern const char* const kModelOptionHelp;
extern const char* const kEnvironmentHelp;

}  // namespace luka::cli
