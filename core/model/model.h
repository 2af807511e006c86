// A loaded checkpoint: config plus weights in the compute dtype. Immutable once loaded, so
// several decoders (sessions) can share it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/config.h"
#include "core/model/dtype.h"

namespace luka {

// How a GGUF file's quantized linear weights are held. kDequantized: decoded into the compute
// dtype at load (the reference). kQuantized: kept only as their GGUF blocks, never dequantized
// as a whole: one-row decode steps on the CPU read the blocks directly (kernels/cpu/quant_gemv.h,
// with activations quantized to 8 bits per block), prefill multiplies by a dequantized slice of a
// few MB at a time, and the embedding is decoded one row per token. Tensors of other types (F32,
// F16, BF16, or rows that are no whole number of blocks) stay tensors in the compute dtype.
// Model::load refuses kQuantized where it could change nothing: a safetensors checkpoint, a GGUF
// file with no block the GEMV reads, or weights placed on the GPU (whose decoder reads tensors).
// kAuto (the command line's default): kQuantized for a GGUF file with such blocks on the CPU,
// kDequantized otherwise; Model::weight_format() says which was taken.
enum class WeightFormat { kDequantized, kQuantized, kAuto };
const char* to_string(WeightFormat format);                 // "dequantized", "quantized", "auto"
WeightFormat parse_weight_format(std::string_view text);    // throws luka::Error otherwise

struct LoadOptions {
  DType dtype = DType::kF32;
  int threads = 0;  // LibTorch intra-op threads; 0 = all cores
  bool cuda = false;  // weights on the GPU (needs a LibTorch with CUDA and a device)
  WeightFormat weights = WeightFormat::kDequantized;
};

struct ModelWeights;  // defined in core/model/weights.h (LibTorch inside)

// How many tensors of one stored type a checkpoint has, and their size on disk.
struct StoredType {
  std::string name;  // "BF16", "Q4_K", ...
  int tensors = 0;
  std::int64_t elements = 0;
  std::uint64_t bytes = 0;
};

class Model {
 public:
  // `path`: a Hugging Face checkpoint folder (config.json + model.safetensors or a sharded
  // model.safetensors.index.json), or a GGUF file. Throws luka::Error naming the file and the
  // problem.
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, const LoadOptions& options);

  ~Model();
  const ModelConfig& config() const { return config_; }
  DType dtype() const { return dtype_; }
  const std::filesystem::path& path() const { return path_; }
  // Where the configuration came from: <folder>/config.json, or the GGUF file itself.
  const std::filesystem::path& config_path() const { return config_path_; }
  bool is_gguf() const { return is_gguf_; }
  // dtypes of the tensors on disk, e.g. "BF16" or "F32,BF16" when mixed.
  const std::string& stored_dtypes() const { return stored_dtypes_; }
  std::int64_t parameter_count() const { return parameter_count_; }
  // Per stored type (GGUF quantization types, or safetensors dtypes): tensors and bytes on disk.
  const std::vector<StoredType>& stored_types() const { return stored_types_; }
  const ModelWeights& weights() const { return *weights_; }
  bool on_cuda() const { return on_cuda_; }
  WeightFormat weight_format() const { return weight_format_; }
  // What the weights take in memory: the dequantized tensors at the compute dtype (a tied
  // embedding counted once), and the GGUF blocks WeightFormat::kQuantized keeps besides them
  // (whichever format was loaded; 0 for safetensors).
  std::uint64_t dequantized_bytes() const;
  std::uint64_t quantized_block_bytes() const { return quantized_block_bytes_; }
  // What WeightFormat::kQuantized holds: the blocks, and the tensors no block covers (norms,
  // biases, weights of other types) at the compute dtype; 0 when the file has no such blocks.
  std::uint64_t quantized_bytes() const;

 private:
  Model() = default;
  ModelConfig config_;
  DType dtype_ = DType::kF32;
  std::filesystem::path path_;
  std::filesystem::path config_path_;
  bool is_gguf_ = false;
  std::string stored_dtypes_;
  std::vector<StoredType> stored_types_;
  std::int64_t parameter_count_ = 0;
  bool on_cuda_ = false;
  WeightFormat weight_format_ = WeightFormat::kDequantized;
  std::uint64_t quantized_block_bytes_ = 0;
  std::int64_t unquantized_elements_ = 0;
  std::unique_ptr<ModelWeights> weights_;
};

}  // namespace luka
