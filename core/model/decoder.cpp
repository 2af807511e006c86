#include "core/model/decoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/model/weights.h"
#include "core/util/error.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/quant_gemv.h"

namespace luka {

namespace {

// Hugging Face RMSNorm: normalise in fp32, cast back, then scale by the weight in the input dtype.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor var = xf.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (xf * at::rsqrt(var + eps)).to(x.scalar_type());
}

// Decode steps (one row) stream each weight once: a bandwidth-bound GEMV beats oneDNN there,
// and reading the GGUF blocks (when kept, `qw`) streams 4.5-8.5 bits per weight instead of 16 or
// 32. Prefill (several rows) uses the dequantized weight.
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const QuantizedMatrix& qw = {}) {
  if (x.size(0) == 1 && x.is_cpu()) {
    if (!qw.defined()) return cpu::linear_row(x, w, b);
    const at::Tensor xf = x.to(at::kFloat).contiguous();
    at::Tensor y = at::empty({1, qw.out}, xf.options());
    cpu::quant_gemv(qw.type, qw.data, qw.out, qw.in, xf.const_data_ptr<float>(), y.mutable_data_ptr<float>());
    if (b.defined()) y += b.to(at::kFloat);
    return y.to(x.scalar_type());
  }
  return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
}

at::Tensor rotate_half(const at::Tensor& x) {
  const std::int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// The inverse frequencies as transformers computes them (fp32), with linear/llama3 scaling.
at::Tensor rope_inv_freq(const ModelConfig& c) {
  const std::int64_t d = c.head_dim;
  const at::Tensor exponent = at::arange(0, d, 2, at::kLong).to(at::kFloat) / static_cast<double>(d);
  at::Tensor inv = 1.0 / at::pow(at::Scalar(c.rope.theta), exponent);
  if (c.rope.type == "linear") {
    inv = inv / c.rope.factor;
  } else if (c.rope.type == "llama3") {
    const double factor = c.rope.factor, lo = c.rope.low_freq_factor, hi = c.rope.high_freq_factor;
    const double old_len = static_cast<double>(c.rope.original_max_position);
    const double low_freq_wavelen = old_len / lo, high_freq_wavelen = old_len / hi;
    const at::Tensor wavelen = 2 * M_PI / inv;
    at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv / factor, inv);
    const at::Tensor smooth = (old_len / wavelen - lo) / (hi - lo);
    const at::Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
    const at::Tensor medium = at::logical_not(wavelen < high_freq_wavelen).logical_and(
        at::logical_not(wavelen > low_freq_wavelen));
    inv = at::where(medium, smoothed, scaled);
  }
  return inv.contiguous();
}

}  // namespace

Decoder::Decoder(std::shared_ptr<const Model> model) : model_(std::move(model)) {
  if (!model_) fail("decoder", "no model");
  const ModelConfig& c = model_->config();
  dtype_ = to_scalar_type(model_->dtype());
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    caches_.emplace_back(c.num_kv_heads, c.head_dim, c.max_position_embeddings, dtype_, model_->weights().embed_tokens.device());
    attention_.push_back(std::make_shared<DenseAttention>());
  }
  c10::InferenceMode guard;
  inv_freq_ = rope_inv_freq(c).to(model_->weights().embed_tokens.device());  // computed on the CPU, kept beside the weights
}

void Decoder::reserve(std::int64_t tokens) {
  c10::InferenceMode guard;
  for (auto& cache : caches_) cache.reserve(tokens);
  for (auto& a : attention_) a->reserve(std::min(tokens, model_->config().max_position_embeddings));
}

void Decoder::reset() {
  c10::InferenceMode guard;  // the caches' and layers' tensors are inference tensors
  position_ = 0;
  for (auto& cache : caches_) cache.reset();
  for (auto& a : attention_) a->reset();
}

void Decoder::set_attention(int layer, std::shared_ptr<LayerAttention> attention) {
  if (layer < 0 || layer >= static_cast<int>(attention_.size()))
    fail("decoder", "layer " + std::to_string(layer) + " out of range [0, " + std::to_string(attention_.size()) + ")");
  if (!attention) fail("decoder", "null attention for layer " + std::to_string(layer));
  attention_[static_cast<std::size_t>(layer)] = std::move(attention);
}

LayerAttention& Decoder::attention(int layer) const { return *attention_.at(static_cast<std::size_t>(layer)); }

at::Tensor Decoder::prefill(const std::vector<std::int32_t>& ids, bool all_logits) {
  if (ids.empty()) fail("prefill", "empty prompt");
  const ModelConfig& c = model_->config();
  const std::int64_t total = position_ + static_cast<std::int64_t>(ids.size());
  if (total > c.max_position_embeddings)
    fail("prefill", "prompt of " + std::to_string(total) + " tokens exceeds max_position_embeddings " +
                        std::to_string(c.max_position_embeddings) + " of " + model_->config_path().string());
  at::Tensor logits = forward(ids, all_logits);
  return all_logits ? logits : logits[0];
}

at::Tensor Decoder::decode(std::int32_t id) {
  const ModelConfig& c = model_->config();
  if (position_ + 1 > c.max_position_embeddings)
    fail("decode", "position " + std::to_string(position_) + " reaches max_position_embeddings " +
                       std::to_string(c.max_position_embeddings) + " of " + model_->config_path().string());
  return forward({id}, false)[0];
}

at::Tensor Decoder::attention_block(int layer, const at::Tensor& h, std::int64_t pos0, const at::Tensor& cos,
                                    const at::Tensor& sin) {
  const ModelConfig& c = model_->config();
  const LayerWeights& w = model_->weights().layers[static_cast<std::size_t>(layer)];
  const std::int64_t n = h.size(0), D = c.head_dim;
  at::Tensor q = linear(h, w.q_proj, w.q_bias, w.quantized.q_proj).view({n, c.num_heads, D});
  at::Tensor k = linear(h, w.k_proj, w.k_bias, w.quantized.k_proj).view({n, c.num_kv_heads, D});
  at::Tensor v = linear(h, w.v_proj, w.v_bias, w.quantized.v_proj).view({n, c.num_kv_heads, D});
  if (c.qk_norm) {  // qwen3: per-head RMSNorm over head_dim, before RoPE
    q = rms_norm(q, w.q_norm, c.rms_norm_eps);
    k = rms_norm(k, w.k_norm, c.rms_norm_eps);
  }
  q = q.transpose(0, 1);  // [heads, n, D]
  k = k.transpose(0, 1);
  q = q * cos + rotate_half(q) * sin;  // cos/sin [n, D] broadcast over heads
  k = k * cos + rotate_half(k) * sin;
  KvCache& cache = caches_[static_cast<std::size_t>(layer)];
  cache.append(k, v.transpose(0, 1));

  AttentionInputs in;
  in.layer = layer;
  in.q = q.contiguous();
  in.k = cache.keys();
  in.v = cache.values();
  in.q_pos0 = pos0;
  in.group_size = c.num_heads / c.num_kv_heads;
  in.scale = 1.0 / std::sqrt(static_cast<double>(D));
  const at::Tensor out = attention_[static_cast<std::size_t>(layer)]->forward(in);
  return linear(out, w.o_proj, w.o_bias, w.quantized.o_proj);
}

at::Tensor Decoder::forward(const std::vector<std::int32_t>& ids, bool all_logits) {
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  std::vector<std::int64_t> ids64(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      fail(model_->path().string(), "token id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                                        " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    ids64[i] = ids[i];
  }
  c10::InferenceMode guard;
  const std::int64_t pos0 = position_;
  const at::Device device = w.embed_tokens.device();
  const at::Tensor index = at::from_blob(ids64.data(), {n}, at::kLong).to(device);
  at::Tensor x = w.embed_tokens.index_select(0, index);  // [n, hidden]

  // RoPE tables for positions pos0 .. pos0+n-1, as transformers computes them: fp32 angles,
  // cos/sin of cat(freqs, freqs), cast to the compute dtype.
  // Built on the weights' device, so a GPU step copies nothing but the ids to the device.
  const at::Tensor pos = at::arange(pos0, pos0 + n, at::TensorOptions().dtype(at::kLong).device(device)).to(at::kFloat);
  const at::Tensor freqs = pos.unsqueeze(1) * inv_freq_.unsqueeze(0);  // [n, D/2]
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  const at::Tensor cos = emb.cos().to(dtype_);
  const at::Tensor sin = emb.sin().to(dtype_);

  try {
    for (std::int64_t l = 0; l < c.num_layers; ++l) {
      const LayerWeights& lw = w.layers[static_cast<std::size_t>(l)];
      const at::Tensor h = rms_norm(x, lw.input_norm, c.rms_norm_eps);
      x = x + attention_block(static_cast<int>(l), h, pos0, cos, sin);
      const at::Tensor h2 = rms_norm(x, lw.post_attention_norm, c.rms_norm_eps);
      const at::Tensor gate = at::silu(linear(h2, lw.gate_proj, lw.gate_bias, lw.quantized.gate_proj));
      const at::Tensor up = linear(h2, lw.up_proj, lw.up_bias, lw.quantized.up_proj);
      x = x + linear(gate * up, lw.down_proj, lw.down_bias, lw.quantized.down_proj);
      if (capture_hidden_) {
        hidden_.resize(static_cast<std::size_t>(c.num_layers));
        hidden_[static_cast<std::size_t>(l)] = x[n - 1].clone();
      }
    }
  } catch (...) {
    // A layer failed half-way (e.g. a custom attention threw): the caches no longer agree, so
    // the sequence is dropped rather than left inconsistent.
    reset();
    throw;
  }
  position_ = pos0 + n;

  if (!all_logits) x = x.narrow(0, n - 1, 1);
  x = rms_norm(x, w.final_norm, c.rms_norm_eps);
  return linear(x, w.lm_head, at::Tensor(), w.quantized_lm_head).to(at::kFloat);
}

}  // namespace luka
