#include "core/model/model.h"

#include <thread>

#include <ATen/Parallel.h>

#include "core/model/weights.h"
#include "core/util/error.h"

namespace luka {

Model::~Model() = default;

std::shared_ptr<const Model> Model::load(const std::filesystem::path& dir, const LoadOptions& options) {
  if (!std::filesystem::is_directory(dir)) fail(dir.string(), "not a checkpoint folder");
  if (options.dtype == DType::kF16)
    fail(dir.string(), "fp16 compute is not supported on CPU (use fp32 or bf16)");
  // LibTorch starts with one intra-op thread in embedding hosts; matmuls need all of them.
  const unsigned hw = std::thread::hardware_concurrency();
  at::set_num_threads(options.threads > 0 ? options.threads : static_cast<int>(hw > 0 ? hw : 1));

  std::shared_ptr<Model> model(new Model());
  model->path_ = dir;
  const auto config_path = dir / "config.json";
  if (!std::filesystem::exists(config_path)) fail(config_path.string(), "missing config.json in the checkpoint folder");
  model->config_ = ModelConfig::from_json_file(config_path);
  model->dtype_ = options.dtype;
  LoadedWeights loaded = load_weights(dir, model->config_, config_path, options.dtype);
  model->weights_ = std::move(loaded.weights);
  model->stored_dtypes_ = std::move(loaded.stored_dtypes);
  model->parameter_count_ = loaded.parameter_count;
  return model;
}

}  // namespace luka
