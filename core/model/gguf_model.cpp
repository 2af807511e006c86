#include "core/model/gguf_model.h"

#include <map>
#include <sstream>

#include <ATen/Parallel.h>

#include "core/util/error.h"
#include "kernels/cpu/quant_gemv.h"

namespace luka {

namespace {

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::ostringstream s;
  s << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

class GgufLoader {
 public:
  // keep_blocks: a 2-D tensor whose blocks quant_gemv reads is not dequantized at all; get()
  // returns an undefined tensor for it and the caller keeps blocks() instead.
  GgufLoader(const gguf::File& file, DType dtype, bool keep_blocks)
      : file_(file), dtype_(to_scalar_type(dtype)), keep_blocks_(keep_blocks) {}

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

  // `shape` is the Hugging Face shape ([out, in] for matrices); GGUF lists dims innermost first.
  at::Tensor get(const std::string& name, const std::vector<std::int64_t>& shape) {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (!t) fail(file_.where(), "GGUF: missing tensor '" + name + "' (expected shape " + shape_string(shape) + ")");
    const std::vector<std::int64_t> dims(shape.rbegin(), shape.rend());
    if (t->dims != dims)
      fail(file_.where(), "GGUF: tensor '" + name + "' has dims " + shape_string(t->dims) + ", expected " +
                              shape_string(dims) + " from the metadata");
    if (!gguf::can_dequantize(t->type))
      fail(file_.where(), "GGUF: tensor '" + name + "' has type " + gguf::type_name(t->type) +
                              ", which is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K)");
    StoredType& usage = usage_[gguf::type_name(t->type)];
    usage.name = gguf::type_name(t->type);
    usage.tensors += 1;
    usage.elements += t->elements;
    usage.bytes += t->bytes;
    params_ += t->elements;
    if (blocks(name).defined()) {  // what kQuantized holds as blocks, counted in either format
      block_elements_ += t->elements;
      block_bytes_ += t->bytes;
      if (keep_blocks_) return at::Tensor();
    }

    // The mapping is read-only; weights are never written.
    void* ptr = const_cast<std::uint8_t*>(t->data);
    if (t->type == gguf::GgmlType::kF32 && dtype_ == at::kFloat && reinterpret_cast<std::uintptr_t>(ptr) % 4 == 0)
      return at::from_blob(ptr, shape, at::TensorOptions().dtype(at::kFloat));
    if (t->type == gguf::GgmlType::kBF16 && dtype_ == at::kBFloat16 && reinterpret_cast<std::uintptr_t>(ptr) % 2 == 0)
      return at::from_blob(ptr, shape, at::TensorOptions().dtype(at::kBFloat16));

    at::Tensor out = at::empty(shape, at::kFloat);
    const auto traits = *gguf::type_traits(static_cast<std::uint32_t>(t->type));
    const std::int64_t blocks = t->elements / traits.block_elements;
    float* dst = out.mutable_data_ptr<float>();
    at::parallel_for(0, blocks, 4096, [&](std::int64_t b0, std::int64_t b1) {
      gguf::dequantize(t->type, t->data + b0 * traits.block_bytes, b1 - b0, dst + b0 * traits.block_elements);
    });
    return out.scalar_type() == dtype_ ? out : out.to(dtype_);
  }

  // A [out, in] matrix's GGUF blocks, in place in the mapping, when quant_gemv reads its type;
  // empty otherwise (the dequantized tensor from get() serves alone). Call after get().
  QuantizedMatrix blocks(const std::string& name) const {
    QuantizedMatrix q;
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (!t || t->dims.size() != 2 || !cpu::quant_gemv_supports(t->type)) return q;
    const auto traits = *gguf::type_traits(static_cast<std::uint32_t>(t->type));
    if (t->dims[0] % traits.block_elements != 0) return q;
    q.type = t->type;
    q.data = t->data;
    q.in = t->dims[0];
    q.out = t->dims[1];
    q.bytes = t->bytes;
    return q;
  }

  at::Tensor get_optional(bool present, const std::string& name, const std::vector<std::int64_t>& shape) {
    return present ? get(name, shape) : at::Tensor();
  }

  std::vector<StoredType> usage() const {
    std::vector<StoredType> out;
    for (const auto& [name, u] : usage_) out.push_back(u);
    return out;
  }
  std::int64_t params() const { return params_; }
  // Values and bytes of the tensors get() leaves as blocks with keep_blocks (whether or not set).
  std::int64_t block_elements() const { return block_elements_; }
  std::uint64_t block_bytes() const { return block_bytes_; }

 private:
  const gguf::File& file_;
  at::ScalarType dtype_;
  bool keep_blocks_ = false;
  std::int64_t block_elements_ = 0;
  std::uint64_t block_bytes_ = 0;
  std::map<std::string, StoredType> usage_;
  std::int64_t params_ = 0;
};

// llama.cpp's converter reorders each head's q/k rows from rotate-half (first half, second half)
// to interleaved pairs; this undoes it: [heads, 2, half] <- [heads, half, 2].
at::Tensor unpermute_rows(const at::Tensor& w, std::int64_t heads) {
  const std::int64_t rows = w.size(0);
  std::vector<std::int64_t> split = {heads, rows / heads / 2, 2};
  for (std::int64_t d = 1; d < w.dim(); ++d) split.push_back(w.size(d));
  return w.reshape(split).transpose(1, 2).reshape(w.sizes()).contiguous();
}

}  // namespace

// The same row reordering on a matrix's blocks (whole rows of blocks move), copied out of the mapping.
QuantizedMatrix unpermute_block_rows(const QuantizedMatrix& q, std::int64_t heads) {
  if (!q.defined()) return q;
  const std::int64_t row_bytes = static_cast<std::int64_t>(q.bytes) / q.out;
  // The mapping is read-only; from_blob only reads it here.
  const at::Tensor rows = at::from_blob(const_cast<std::uint8_t*>(q.data), {q.out, row_bytes}, at::kByte);
  QuantizedMatrix out = q;
  out.storage = unpermute_rows(rows, heads);
  out.data = out.storage.const_data_ptr<std::uint8_t>();
  return out;
}

LoadedWeights load_gguf_weights(std::shared_ptr<const gguf::File> file, const ModelConfig& c, DType dtype,
                                WeightFormat format) {
  // Quantized: the linear weights and the embedding stay blocks only (prefill dequantizes a
  // bounded slice at a time, the embedding one row per token), so no dequantized copy is held.
  GgufLoader L(*file, dtype, format == WeightFormat::kQuantized);
  auto w = std::make_unique<ModelWeights>();
  const std::int64_t H = c.hidden_size;
  w->embed_tokens = L.get("token_embd.weight", {c.vocab_size, H});
  static const LayerTensorNames kNames = {
      "blk.",
      {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "attn_q.bias",
       "attn_k.bias", "attn_v.bias", "attn_output.bias", "attn_q_norm.weight", "attn_k_norm.weight",
       "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "ffn_gate.bias", "ffn_up.bias",
       "ffn_down.bias"}};
  load_layers(L, c, kNames, w->layers);
  if (c.arch == Architecture::kLlama) {
    for (LayerWeights& l : w->layers) {
      if (l.q_proj.defined()) l.q_proj = unpermute_rows(l.q_proj, c.num_heads);
      if (l.k_proj.defined()) l.k_proj = unpermute_rows(l.k_proj, c.num_kv_heads);
    }
  }
  w->final_norm = L.get("output_norm.weight", {H});
  w->lm_head = c.tie_word_embeddings ? w->embed_tokens : L.get("output.weight", {c.vocab_size, H});
  // The blocks are kept (the llama q/k rows reordered into a copy) only when asked for; get()
  // counted them either way, so the footprint of the quantized format is known.
  const auto keep = [&](const std::string& name) {
    return format == WeightFormat::kQuantized ? L.blocks(name) : QuantizedMatrix{};
  };
  for (std::size_t i = 0; i < w->layers.size(); ++i) {
    const std::string p = kNames.prefix + std::to_string(i) + ".";
    LayerWeights::Quantized& q = w->layers[i].quantized;
    q.q_proj = keep(p + "attn_q.weight");
    q.k_proj = keep(p + "attn_k.weight");
    q.v_proj = keep(p + "attn_v.weight");
    q.o_proj = keep(p + "attn_output.weight");
    q.gate_proj = keep(p + "ffn_gate.weight");
    q.up_proj = keep(p + "ffn_up.weight");
    q.down_proj = keep(p + "ffn_down.weight");
    if (c.arch == Architecture::kLlama) {
      q.q_proj = unpermute_block_rows(q.q_proj, c.num_heads);
      q.k_proj = unpermute_block_rows(q.k_proj, c.num_kv_heads);
    }
  }
  w->quantized_lm_head = keep(c.tie_word_embeddings ? "token_embd.weight" : "output.weight");
  if (format == WeightFormat::kQuantized && !w->embed_tokens.defined()) w->quantized_embed = L.blocks("token_embd.weight");
  w->gguf = std::move(file);

  LoadedWeights out;
  out.stored_types = L.usage();
  out.stored_dtypes = stored_type_names(out.stored_types);
  out.parameter_count = L.params();
  out.quantized_block_bytes = L.block_bytes();
  out.unquantized_elements = L.params() - L.block_elements();
  out.weights = std::move(w);
  return out;
}

}  // namespace luka
