#include "core/model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include <ATen/Parallel.h>

#include "core/gguf/ggml_types.h"
#include "core/model/weights.h"
#include "core/util/error.h"
#include "kernels/cpu/decode_step.h"
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

// A [rows, in] slice of a matrix's GGUF blocks decoded to `dtype` (a row: in / block values).
at::Tensor dequantize_rows(const QuantizedMatrix& q, std::int64_t r0, std::int64_t rows, at::ScalarType dtype) {
  const auto traits = *gguf::type_traits(static_cast<std::uint32_t>(q.type));
  const std::int64_t per_row = q.in / traits.block_elements;
  at::Tensor out = at::empty({rows, q.in}, at::kFloat);
  float* dst = out.mutable_data_ptr<float>();
  const std::uint8_t* src = q.data + r0 * per_row * traits.block_bytes;
  at::parallel_for(0, rows, 16, [&](std::int64_t a, std::int64_t b) {
    gguf::dequantize(q.type, src + a * per_row * traits.block_bytes, (b - a) * per_row, dst + a * q.in);
  });
  return dtype == at::kFloat ? out : out.to(dtype);
}

// Decode steps (one row) stream each weight once: a bandwidth-bound GEMV beats oneDNN there,
// and reading the GGUF blocks (when kept, `qw`) streams 4.5-8.5 bits per weight instead of 16 or
// 32. Prefill (several rows) uses the dequantized weight; with only the blocks held
// (WeightFormat::kQuantized), slices of at most kSliceBytes of it, decoded one after another.
constexpr std::int64_t kSliceBytes = 8 << 20;

// `exact_input` (the lm_head): Q8_0 blocks read against the fp32 row itself, not an 8-bit copy of
// it (cpu::q8_0_gemv_f32), so the logits are the dequantized model's up to the order of sums.
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const QuantizedMatrix& qw = {},
                  bool exact_input = false) {
  if (x.size(0) == 1 && x.is_cpu()) {
    if (!qw.defined()) return cpu::linear_row(x, w, b);
    const at::Tensor xf = x.to(at::kFloat).contiguous();
    at::Tensor y = at::empty({1, qw.out}, xf.options());
    if (exact_input && qw.type == gguf::GgmlType::kQ8_0)
      cpu::q8_0_gemv_f32(qw.data, qw.out, qw.in, xf.const_data_ptr<float>(), y.mutable_data_ptr<float>());
    else
      cpu::quant_gemv(qw.type, qw.data, qw.out, qw.in, xf.const_data_ptr<float>(), y.mutable_data_ptr<float>());
    if (b.defined()) y += b.to(at::kFloat);
    return y.to(x.scalar_type());
  }
  if (w.defined()) return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
  // Blocks only, on a CPU with AMX tiles and from cpu::kTileMinRows rows: the rows' 8-bit copies
  // multiplied with the blocks in int8 tiles (cpu::quant_gemm), 1.2-6x faster than dequantized
  // slices through fp32 (bench/results/cpu-quant-amx.md). Not for `exact_input` (the lm_head keeps
  // fp32 inputs).
  if (!exact_input && x.is_cpu() && x.dim() == 2 && cpu::quant_gemm_preferred(qw.type, x.size(0))) {
    const at::Tensor xf = x.to(at::kFloat).contiguous();
    at::Tensor y = at::empty({x.size(0), qw.out}, xf.options());
    cpu::quant_gemm(qw.type, qw.data, qw.out, qw.in, xf.const_data_ptr<float>(), x.size(0), y.mutable_data_ptr<float>());
    if (b.defined()) y += b.to(at::kFloat);
    return y.to(x.scalar_type());
  }
  // Blocks only: the output's columns a slice of rows at a time (the same products as at::linear
  // on the whole dequantized matrix, each output column from its own row).
  const std::int64_t rows = std::max<std::int64_t>(1, kSliceBytes / (qw.in * 4));
  at::Tensor y = at::empty({x.size(0), qw.out}, x.options());
  for (std::int64_t r0 = 0; r0 < qw.out; r0 += rows) {
    const std::int64_t n = std::min(rows, qw.out - r0);
    y.narrow(1, r0, n).copy_(at::linear(x, dequantize_rows(qw, r0, n, x.scalar_type())));
  }
  if (b.defined()) y += b;
  return y;
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

// A linear layer as the fused step reads it: the GGUF blocks when kept and readable, else the
// dense rows; nullopt when neither fits (another dtype or device, a strided tensor).
std::optional<cpu::RowWeight> row_weight(const at::Tensor& w, const QuantizedMatrix& qw, const at::Tensor& b, at::ScalarType dt) {
  cpu::RowWeight r;
  if (qw.defined() && cpu::quant_gemv_supports(qw.type) && qw.in % cpu::quant_block_elements(qw.type) == 0) {
    r.data = qw.data;
    r.type = qw.type;
    r.out = qw.out;
    r.in = qw.in;
  } else {
    if (!w.defined() || !w.is_cpu() || w.dim() != 2 || w.scalar_type() != dt || !w.is_contiguous()) return std::nullopt;
    r.data = w.const_data_ptr();
    r.type = dt == at::kFloat ? gguf::GgmlType::kF32 : gguf::GgmlType::kBF16;
    r.out = w.size(0);
    r.in = w.size(1);
  }
  if (b.defined()) {
    if (!b.is_cpu() || b.scalar_type() != dt || !b.is_contiguous() || b.numel() != r.out) return std::nullopt;
    r.bias = b.const_data_ptr();
  }
  return r;
}

// A [n] vector the fused step reads in place (norm weights), or null when it cannot.
const void* row_vector(const at::Tensor& t, std::int64_t n, at::ScalarType dt) {
  if (!t.defined() || !t.is_cpu() || t.scalar_type() != dt || !t.is_contiguous() || t.numel() != n) return nullptr;
  return t.const_data_ptr();
}

}  // namespace

// The weights of every layer as the fused step's jobs, and the step's buffers (allocated once:
// the jobs point into them).
struct Decoder::FusedStep {
  struct Layer {
    const void* input_norm = nullptr;
    const void* post_attention_norm = nullptr;
    const void* q_norm = nullptr;
    const void* k_norm = nullptr;
    cpu::RowJob qkv[3];
    cpu::RowJob o_proj, gate_up, down;
  };
  cpu::StepDtype dtype = cpu::StepDtype::kF32;
  std::size_t elem = 4;
  std::vector<Layer> layers;
  const void* final_norm = nullptr;
  const std::uint8_t* embed = nullptr;  // [vocab, hidden] in the compute dtype, or null:
  QuantizedMatrix embed_blocks;         // ... the embedding's blocks, a row decoded per token
  cpu::RowJob lm_head;
  std::vector<std::uint8_t> x, h, q, k, v, act, logits;
  std::vector<float> inv_freq, cos, sin;
  cpu::RowScratch scratch;

  // Null where the step does not apply (GPU weights, fp16, a weight it cannot read in place).
  static std::unique_ptr<FusedStep> build(const Model& model, at::ScalarType dt, const at::Tensor& inv_freq) {
    const ModelConfig& c = model.config();
    const ModelWeights& w = model.weights();
    if (dt != at::kFloat && dt != at::kBFloat16) return nullptr;
    if (w.embed_tokens.defined() ? (!w.embed_tokens.is_cpu() || w.embed_tokens.scalar_type() != dt || !w.embed_tokens.is_contiguous())
                                 : !w.quantized_embed.defined())
      return nullptr;
    auto f = std::make_unique<FusedStep>();
    f->dtype = dt == at::kFloat ? cpu::StepDtype::kF32 : cpu::StepDtype::kBF16;
    f->elem = cpu::step_dtype_bytes(f->dtype);
    const std::int64_t hidden = c.hidden_size, D = c.head_dim, H = c.num_heads, KV = c.num_kv_heads;
    const auto bytes = [&](std::int64_t n) { return static_cast<std::size_t>(n) * f->elem; };
    f->x.resize(bytes(hidden));
    f->h.resize(bytes(hidden));
    f->q.resize(bytes(H * D));
    f->k.resize(bytes(KV * D));
    f->v.resize(bytes(KV * D));
    f->act.resize(bytes(c.intermediate_size));
    f->logits.resize(bytes(c.vocab_size));
    f->cos.resize(static_cast<std::size_t>(D / 2));
    f->sin.resize(static_cast<std::size_t>(D / 2));
    const at::Tensor inv = inv_freq.to(at::kCPU).to(at::kFloat).contiguous();
    f->inv_freq.assign(inv.const_data_ptr<float>(), inv.const_data_ptr<float>() + inv.numel());
    if (w.embed_tokens.defined()) f->embed = static_cast<const std::uint8_t*>(w.embed_tokens.const_data_ptr());
    f->embed_blocks = w.quantized_embed;
    if (!(f->final_norm = row_vector(w.final_norm, hidden, dt))) return nullptr;
    const auto job = [&](const at::Tensor& t, const QuantizedMatrix& qt, const at::Tensor& b, cpu::Epilogue e, void* y,
                         std::int64_t out, std::int64_t in, cpu::RowJob& j) {
      const auto r = row_weight(t, qt, b, dt);
      if (!r || r->out != out || r->in != in) return false;
      j.weight = *r;
      j.epilogue = e;
      j.y = y;
      return true;
    };
    for (const LayerWeights& lw : w.layers) {
      Layer L;
      L.input_norm = row_vector(lw.input_norm, hidden, dt);
      L.post_attention_norm = row_vector(lw.post_attention_norm, hidden, dt);
      if (!L.input_norm || !L.post_attention_norm) return nullptr;
      if (c.qk_norm) {
        L.q_norm = row_vector(lw.q_norm, D, dt);
        L.k_norm = row_vector(lw.k_norm, D, dt);
        if (!L.q_norm || !L.k_norm) return nullptr;
      }
      const auto& qz = lw.quantized;
      if (!job(lw.q_proj, qz.q_proj, lw.q_bias, cpu::Epilogue::kStore, f->q.data(), H * D, hidden, L.qkv[0]) ||
          !job(lw.k_proj, qz.k_proj, lw.k_bias, cpu::Epilogue::kStore, f->k.data(), KV * D, hidden, L.qkv[1]) ||
          !job(lw.v_proj, qz.v_proj, lw.v_bias, cpu::Epilogue::kStore, f->v.data(), KV * D, hidden, L.qkv[2]) ||
          !job(lw.o_proj, qz.o_proj, lw.o_bias, cpu::Epilogue::kResidual, f->x.data(), hidden, H * D, L.o_proj) ||
          !job(lw.gate_proj, qz.gate_proj, lw.gate_bias, cpu::Epilogue::kSwiGlu, f->act.data(), c.intermediate_size, hidden,
               L.gate_up) ||
          !job(lw.down_proj, qz.down_proj, lw.down_bias, cpu::Epilogue::kResidual, f->x.data(), hidden, c.intermediate_size,
               L.down))
        return nullptr;
      const auto up = row_weight(lw.up_proj, qz.up_proj, lw.up_bias, dt);
      if (!up || up->out != c.intermediate_size || up->in != hidden) return nullptr;
      L.gate_up.up = *up;
      f->layers.push_back(L);
    }
    if (!job(w.lm_head, w.quantized_lm_head, at::Tensor(), cpu::Epilogue::kStore, f->logits.data(), c.vocab_size, hidden,
             f->lm_head))
      return nullptr;
    f->lm_head.weight.exact_input = true;  // as forward()'s lm_head
    return f;
  }
};

Decoder::~Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;

Decoder::Decoder(std::shared_ptr<const Model> model) : model_(std::move(model)) {
  if (!model_) fail("decoder", "no model");
  const ModelConfig& c = model_->config();
  dtype_ = to_scalar_type(model_->dtype());
  // Where the weights are (blocks only: on the CPU).
  const at::Tensor& embed = model_->weights().embed_tokens;
  const at::Device device = embed.defined() ? embed.device() : at::Device(at::kCPU);
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    caches_.emplace_back(c.num_kv_heads, c.head_dim, c.max_position_embeddings, dtype_, device);
    attention_.push_back(std::make_shared<DenseAttention>());
  }
  c10::InferenceMode guard;
  inv_freq_ = rope_inv_freq(c).to(device);  // computed on the CPU, kept beside the weights
  fused_ = FusedStep::build(*model_, dtype_, inv_freq_);
}

void Decoder::reserve(std::int64_t tokens) {
  c10::InferenceMode guard;
  for (auto& cache : caches_) cache.reserve(tokens);
  ids_.reserve(static_cast<std::size_t>(tokens));
  for (auto& a : attention_) a->reserve(std::min(tokens, model_->config().max_position_embeddings));
}

void Decoder::reset() {
  c10::InferenceMode guard;  // the caches' and layers' tensors are inference tensors
  position_ = 0;
  ids_.clear();
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
  if (fused_step()) return decode_fused(id);
  return forward({id}, false)[0];
}

// One token through the fused ops: the same layers as forward(), with every per-token tensor a
// buffer of the step's and ATen left only inside the layer's attention.
at::Tensor Decoder::decode_fused(std::int32_t id) {
  const ModelConfig& c = model_->config();
  if (id < 0 || id >= c.vocab_size)
    fail(model_->path().string(), "token id " + std::to_string(id) + " at index 0 is outside the vocabulary [0, " +
                                      std::to_string(c.vocab_size) + ")");
  c10::InferenceMode guard;
  FusedStep& f = *fused_;
  const cpu::StepDtype dt = f.dtype;
  const std::int64_t hidden = c.hidden_size, D = c.head_dim, H = c.num_heads, KV = c.num_kv_heads;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const std::int64_t pos = position_;
  if (f.embed) {
    std::memcpy(f.x.data(), f.embed + static_cast<std::size_t>(id) * f.x.size(), f.x.size());
  } else {
    const at::Tensor row = dequantize_rows(f.embed_blocks, id, 1, dtype_);
    std::memcpy(f.x.data(), row.const_data_ptr(), f.x.size());
  }
  cpu::rope_tables(pos, f.inv_freq.data(), D / 2, dt, f.cos.data(), f.sin.data());
  ids_.resize(static_cast<std::size_t>(pos));
  ids_.push_back(id);
  const at::TensorOptions options = at::TensorOptions().dtype(dtype_);
  try {
    for (std::int64_t l = 0; l < c.num_layers; ++l) {
      const FusedStep::Layer& L = f.layers[static_cast<std::size_t>(l)];
      cpu::rms_norm_row(f.x.data(), L.input_norm, eps, hidden, f.h.data(), dt);
      cpu::run_rows(L.qkv, 3, f.h.data(), dt, f.scratch);
      cpu::norm_rope_heads(f.q.data(), H, D, L.q_norm, eps, f.cos.data(), f.sin.data(), dt);
      cpu::norm_rope_heads(f.k.data(), KV, D, L.k_norm, eps, f.cos.data(), f.sin.data(), dt);
      KvCache& cache = caches_[static_cast<std::size_t>(l)];
      cache.append_row(f.k.data(), f.v.data());
      AttentionInputs in;
      in.layer = static_cast<int>(l);
      in.q = at::from_blob(f.q.data(), {H, 1, D}, options);
      in.k = cache.keys();
      in.v = cache.values();
      in.q_pos0 = pos;
      in.group_size = H / KV;
      in.scale = 1.0 / std::sqrt(static_cast<double>(D));
      in.ids = ids_.data();
      const at::Tensor out = attention_[static_cast<std::size_t>(l)]->forward(in).contiguous();
      if (out.scalar_type() != dtype_ || out.numel() != H * D)
        fail("decode", "layer " + std::to_string(l) + "'s attention returned another shape or dtype");
      cpu::run_rows(&L.o_proj, 1, out.const_data_ptr(), dt, f.scratch);
      cpu::rms_norm_row(f.x.data(), L.post_attention_norm, eps, hidden, f.h.data(), dt);
      cpu::run_rows(&L.gate_up, 1, f.h.data(), dt, f.scratch);
      cpu::run_rows(&L.down, 1, f.act.data(), dt, f.scratch);
      if (capture_hidden_) {
        hidden_.resize(static_cast<std::size_t>(c.num_layers));
        hidden_[static_cast<std::size_t>(l)] = at::from_blob(f.x.data(), {hidden}, options).clone();
      }
    }
  } catch (...) {
    reset();  // as forward(): a layer failed half-way, the caches no longer agree
    throw;
  }
  position_ = pos + 1;
  cpu::rms_norm_row(f.x.data(), f.final_norm, eps, hidden, f.h.data(), dt);
  cpu::run_rows(&f.lm_head, 1, f.h.data(), dt, f.scratch);
  // A new tensor each step (callers keep logits); bf16 logits are rounded first, as forward() does.
  return at::from_blob(f.logits.data(), {c.vocab_size}, options).to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
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
  in.ids = ids_.data();
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
  ids_.resize(static_cast<std::size_t>(pos0));
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  const at::Device device = inv_freq_.device();
  at::Tensor x;  // [n, hidden]
  if (w.embed_tokens.defined()) {
    x = w.embed_tokens.index_select(0, at::from_blob(ids64.data(), {n}, at::kLong).to(device));
  } else {  // blocks only: each token's row decoded
    x = at::empty({n, c.hidden_size}, at::TensorOptions().dtype(dtype_));
    for (std::int64_t i = 0; i < n; ++i) x[i].copy_(dequantize_rows(w.quantized_embed, ids64[static_cast<std::size_t>(i)], 1, dtype_)[0]);
  }

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
  return linear(x, w.lm_head, at::Tensor(), w.quantized_lm_head, /*exact_input=*/true).to(at::kFloat);
}

}  // namespace luka
