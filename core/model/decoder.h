// The transformer forward pass for one sequence: prefill a prompt, then decode one token at a
// time against a per-layer KV cache. One decoder serves qwen3, llama and qwen2 (config flags).
// A Decoder is one session; several may share the same immutable Model.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "core/model/attention.h"
#include "core/model/kv_cache.h"
#include "core/model/model.h"

namespace luka {

class Decoder {
 public:
  explicit Decoder(std::shared_ptr<const Model> model);
  ~Decoder();
  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) noexcept;

  // Feeds `ids` at position() onwards (position() is 0 after construction or reset()).
  // Returns float32 logits: [ids.size(), vocab] when all_logits, else [vocab] for the last id.
  // Throws luka::Error for ids outside [0, vocab) or positions past max_position_embeddings.
  at::Tensor prefill(const std::vector<std::int32_t>& ids, bool all_logits = false);
  // One token at position(); float32 logits [vocab].
  at::Tensor decode(std::int32_t id);

  // Starts a new sequence (keeps the cache memory; resets every layer's attention state).
  void reset();
  // Every layer's KV cache and attention state made room for `tokens` positions in all
  // (KvCache::reserve, LayerAttention::reserve); call it after reset().
  void reserve(std::int64_t tokens);
  std::int64_t position() const { return position_; }

  // Replaces the attention of one layer (dense by default).
  void set_attention(int layer, std::shared_ptr<LayerAttention> attention);
  LayerAttention& attention(int layer) const;
  const KvCache& cache(int layer) const { return caches_.at(static_cast<std::size_t>(layer)); }
  // RoPE's inverse frequencies [head_dim / 2] (fp32, on the weights' device), as transformers computes them.
  const at::Tensor& rope_frequencies() const { return inv_freq_; }

  const Model& model() const { return *model_; }

  // With capture on, every forward keeps each layer's output hidden state (the residual stream)
  // for the last token: last_hidden()[l] is [hidden] in the compute dtype. Off by default.
  void set_hidden_capture(bool on) { capture_hidden_ = on; }
  const std::vector<at::Tensor>& last_hidden() const { return hidden_; }
  const std::shared_ptr<const Model>& model_ptr() const { return model_; }

  // One-token steps on the CPU run fused (kernels/cpu/decode_step: RMSNorm, q/k norm + RoPE + KV
  // append, and each sub-block's linear layers with their bias, residual and SwiGLU in one pass
  // each) where the model allows it: CPU weights in fp32 or bf16, dense or GGUF blocks. The fused
  // step equals the unfused one up to the order of fp32 sums (tests/core/model/test_decode_step).
  // Off, every token goes through the ATen ops of forward(), the reference.
  void set_fused_step(bool on) { fused_on_ = on; }
  // True when decode() takes the fused step.
  bool fused_step() const { return fused_on_ && fused_ != nullptr; }

 private:
  struct FusedStep;
  at::Tensor decode_fused(std::int32_t id);
  at::Tensor forward(const std::vector<std::int32_t>& ids, bool all_logits);
  at::Tensor attention_block(int layer, const at::Tensor& h, std::int64_t pos0, const at::Tensor& cos,
                             const at::Tensor& sin);

  std::shared_ptr<const Model> model_;
  std::vector<KvCache> caches_;
  std::vector<std::shared_ptr<LayerAttention>> attention_;
  at::Tensor inv_freq_;  // [head_dim / 2] float32, on the weights' device
  at::ScalarType dtype_;
  std::int64_t position_ = 0;
  std::vector<std::int32_t> ids_;  // the sequence's ids, positions 0 .. position_ - 1 (and a forward's new ones)
  bool capture_hidden_ = false;
  std::vector<at::Tensor> hidden_;
  std::unique_ptr<FusedStep> fused_;  // null where the fused step does not apply
  bool fused_on_ = true;
};

}  // namespace luka
