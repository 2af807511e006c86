#include "core/model/model.h"

#include <thread>

#include <ATen/Parallel.h>

#include "core/gguf/gguf.h"
#include "core/model/gguf_model.h"
#include "core/model/weights.h"
#include "core/util/error.h"

namespace luka {

Model::~Model() = default;

std::shared_ptr<const Model> Model::load(const std::filesystem::path& dir, const LoadOptions& options) {
  const bool gguf_file = std::filesystem::is_regular_file(dir) && gguf::File::has_magic(dir);
  if (!std::filesystem::exists(dir)) fail(dir.string(), "no such file or folder");
  if (!gguf_file && !std::filesystem::is_directory(dir))
    fail(dir.string(), "neither a checkpoint folder nor a GGUF file");
  if (options.dtype == DType::kF16)
    fail(dir.string(), "fp16 compute is not supported on CPU (use fp32 or bf16)");
  // LibTorch starts with one intra-op thread in embedding hosts; matmuls need all of them.
  const unsigned hw = std::thread::hardware_concurrency();
  at::set_num_threads(options.threads > 0 ? options.threads : static_cast<int>(hw > 0 ? hw : 1));

  std::shared_ptr<Model> model(new Model());
  model->path_ = dir;
  model->dtype_ = options.dtype;
  if (gguf_file) {
    auto file = gguf::File::open(dir);
    model->config_ = config_from_gguf(*file);
    model->config_path_ = dir;
    model->is_gguf_ = true;
    LoadedWeights loaded = load_gguf_weights(std::move(file), model->config_, options.dtype);
    model->weights_ = std::move(loaded.weights);
    model->stored_dtypes_ = std::move(loaded.stored_dtypes);
    model->stored_types_ = std::move(loaded.stored_types);
    model->parameter_count_ = loaded.parameter_count;
    return model;
  }
  const auto config_path = dir / "config.json";
  if (!std::filesystem::exists(config_path)) fail(config_path.string(), "missing config.json in the checkpoint folder");
  model->config_ = ModelConfig::from_json_file(config_path);
  model->config_path_ = config_path;
  model->dtype_ = options.dtype;
  LoadedWeights loaded = load_weights(dir, model->config_, config_path, options.dtype);
  model->weights_ = std::move(loaded.weights);
  model->stored_dtypes_ = std::move(loaded.stored_dtypes);
  model->stored_types_ = std::move(loaded.stored_types);
  model->parameter_count_ = loaded.parameter_count;
  return model;
}

}  // namespace luka
