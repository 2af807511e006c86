#include "core/model/model.h"

#include <cstdio>
#include <string>
#include <thread>

#include <ATen/Parallel.h>

#include "core/gguf/gguf.h"
#include "core/model/gguf_model.h"
#include "core/model/weights.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka {

Model::~Model() = default;

namespace {

// Moves every weight to the GPU, keeping a tied lm_head the same tensor as the embedding.
void move_to_cuda(ModelWeights& w) {
  const bool tied = w.lm_head.is_same(w.embed_tokens);
  for_each_weight(w, [](const std::string&, at::Tensor& t) { t = t.to(at::kCUDA); });
  if (tied) w.lm_head = w.embed_tokens;
}

// NaN or Inf in a weight turns every logit into NaN without an error: refuse the file at load.
// One pass over the values as loaded (after dequantization), in parallel.
void check_finite(const ModelWeights& w, const std::filesystem::path& path) {
  // Blocks kept instead of tensors: their scales (WeightFormat::kQuantized).
  const auto blocks = [&](const std::string& name, const QuantizedMatrix& q) {
    if (!q.defined()) return;
    const std::int64_t per_row = q.in / gguf::type_traits(static_cast<std::uint32_t>(q.type))->block_elements;
    const std::int64_t bad = gguf::first_nonfinite_block(q.type, q.data, q.out * per_row);
    if (bad >= 0)
      fail(path.string(), "weight " + name + " has a non-finite scale in block " + std::to_string(bad) + " (row " +
                              std::to_string(bad / per_row) + ")");
  };
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights::Quantized& q = w.layers[i].quantized;
    const std::string p = "layers." + std::to_string(i) + ".";
    blocks(p + "q_proj", q.q_proj);
    blocks(p + "k_proj", q.k_proj);
    blocks(p + "v_proj", q.v_proj);
    blocks(p + "o_proj", q.o_proj);
    blocks(p + "gate_proj", q.gate_proj);
    blocks(p + "up_proj", q.up_proj);
    blocks(p + "down_proj", q.down_proj);
  }
  blocks("lm_head", w.quantized_lm_head);
  blocks("embed_tokens", w.quantized_embed);
  for_each_weight(w, [&](const std::string& name, const at::Tensor& t) {
    if (at::isfinite(t).all().item<bool>()) return;
    const at::Tensor bad = at::logical_not(at::isfinite(t)).flatten().nonzero();
    const std::int64_t first = bad[0][0].item<std::int64_t>();
    fail(path.string(), "weight " + name + " holds " + std::to_string(bad.size(0)) + " non-finite value" +
                            (bad.size(0) == 1 ? "" : "s") + " (the first at flat index " + std::to_string(first) + ": " +
                            std::to_string(t.flatten()[first].item<double>()) + ")");
  });
}

// What an out-of-memory error during the load says about the weights: their size on disk (the
// safetensors files of a folder, or the GGUF file).
std::string weights_on_disk(const std::filesystem::path& path) {
  std::error_code ec;
  std::uintmax_t bytes = 0;
  if (std::filesystem::is_regular_file(path, ec)) {
    bytes = std::filesystem::file_size(path, ec);
  } else {
    for (const auto& e : std::filesystem::directory_iterator(path, ec))
      if (e.path().extension() == ".safetensors" && e.is_regular_file(ec)) bytes += e.file_size(ec);
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MB on disk", static_cast<double>(bytes) / 1e6);
  return text;
}

}  // namespace

std::uint64_t Model::dequantized_bytes() const {
  return static_cast<std::uint64_t>(parameter_count_) * (dtype_ == DType::kF32 ? 4u : 2u);
}

std::uint64_t Model::quantized_bytes() const {
  if (quantized_block_bytes_ == 0) return 0;
  return quantized_block_bytes_ + static_cast<std::uint64_t>(unquantized_elements_) * (dtype_ == DType::kF32 ? 4u : 2u);
}

const char* to_string(WeightFormat format) {
  return format == WeightFormat::kQuantized ? "quantized" : format == WeightFormat::kAuto ? "auto" : "dequantized";
}

WeightFormat parse_weight_format(std::string_view text) {
  if (text == "quantized") return WeightFormat::kQuantized;
  if (text == "dequantized") return WeightFormat::kDequantized;
  if (text == "auto") return WeightFormat::kAuto;
  fail("weights", "'" + std::string(text) + "': expected auto, quantized or dequantized");
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& dir, const LoadOptions& options) try {
  const bool gguf_file = std::filesystem::is_regular_file(dir) && gguf::File::has_magic(dir);
  if (!std::filesystem::exists(dir)) fail(dir.string(), "no such file or folder");
  if (!gguf_file && !std::filesystem::is_directory(dir)) {
    require_regular_file(dir, "");  // a FIFO or a device is named as one, before anything opens it
    fail(dir.string(), "neither a checkpoint folder nor a GGUF file");
  }
  if (options.dtype == DType::kF16 && !options.cuda)
    fail(dir.string(), "fp16 compute is not supported on CPU (use fp32 or bf16)");
  // LibTorch starts with one intra-op thread in embedding hosts; matmuls need all of them.
  const unsigned hw = std::thread::hardware_concurrency();
  at::set_num_threads(options.threads > 0 ? options.threads : static_cast<int>(hw > 0 ? hw : 1));

  if (options.weights == WeightFormat::kQuantized && !gguf_file)
    fail(dir.string(), "quantized weights need a GGUF file with quantized tensors; a safetensors checkpoint has none "
                       "(load it dequantized)");
  if (options.weights == WeightFormat::kQuantized && options.cuda)
    fail(dir.string(), "quantized weights are read by the CPU decode path only; on the GPU load them dequantized");
  if (options.cuda && !at::hasCUDA())
    fail(dir.string(), "device cuda: this build's LibTorch has no CUDA support or no GPU is visible");
  std::shared_ptr<Model> model(new Model());
  const auto placed = [&]() -> std::shared_ptr<const Model> {
    check_finite(*model->weights_, dir);
    if (options.cuda) {
      c10::InferenceMode guard;
      move_to_cuda(*model->weights_);
      model->on_cuda_ = true;
    }
    return model;
  };
  model->path_ = dir;
  model->dtype_ = options.dtype;
  if (gguf_file) {
    auto file = gguf::File::open(dir);
    model->config_ = config_from_gguf(*file);
    model->config_path_ = dir;
    model->is_gguf_ = true;
    // auto on the CPU loads as quantized: a file with no block the GEMV reads then holds every
    // weight as a tensor, exactly as dequantized would.
    const WeightFormat asked = options.weights == WeightFormat::kAuto
                                   ? (options.cuda ? WeightFormat::kDequantized : WeightFormat::kQuantized)
                                   : options.weights;
    LoadedWeights loaded = load_gguf_weights(std::move(file), model->config_, options.dtype, asked);
    if (options.weights == WeightFormat::kQuantized && loaded.quantized_block_bytes == 0)
      fail(dir.string(), "quantized weights: no linear weight is stored in a block type the CPU GEMV reads (Q4_0, Q4_1, "
                         "Q8_0, Q4_K, Q6_K); stored types are " + loaded.stored_dtypes + " (load it dequantized)");
    model->weight_format_ = loaded.quantized_block_bytes > 0 ? asked : WeightFormat::kDequantized;
    model->quantized_block_bytes_ = loaded.quantized_block_bytes;
    model->unquantized_elements_ = loaded.unquantized_elements;
    model->weights_ = std::move(loaded.weights);
    model->stored_dtypes_ = std::move(loaded.stored_dtypes);
    model->stored_types_ = std::move(loaded.stored_types);
    model->parameter_count_ = loaded.parameter_count;
    return placed();
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
  return placed();
} catch (const Error&) {
  throw;
} catch (const std::exception& e) {
  // A bare "out of memory" would name neither the model nor the size: say both.
  if (!is_out_of_memory(e)) throw;
  fail(dir.string(), out_of_memory_message(e, "loading the model's weights (" + weights_on_disk(dir) + ", held as " +
                                                  to_string(options.dtype) + (options.cuda ? " on the GPU" : "") + ")"));
}

}  // namespace luka
