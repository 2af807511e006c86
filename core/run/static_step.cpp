// Index of this file:
//   [SECTION] a layer's weights and reserved state
//   [SECTION] making the step: the plan's buffers, the weights, the layers' modes, a change's carry-over
//   [SECTION] start: the prefill's caches and LuKA state
//   [SECTION] one step: the device work, then the host's counters
//   [SECTION] step records for captures
//   [SECTION] accumulators and pages
//   [SECTION] the static step as the run loop's decode engine

#include "core/run/static_step.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "core/luka/luka_layer.h"
#include "core/luka/step_records.h"
#include "core/model/decoder.h"
#include "core/model/weights.h"
#include "core/run/static_luka.h"
#include "core/util/error.h"
#include "kernels/common/luka_rules.h"

namespace luka {

namespace {

at::ScalarType scalar_type(ElemKind kind, at::ScalarType compute) {
  switch (kind) {
    case ElemKind::kCompute:
      return compute;
    case ElemKind::kF32:
      return at::kFloat;
    case ElemKind::kI64:
      return at::kLong;
    case ElemKind::kI32:
      return at::kInt;
    case ElemKind::kBool:
      return at::kBool;
    case ElemKind::kF64:
      return at::kDouble;
  }
  return compute;
}

// ATen's out= functions take `Tensor&` although they only write through the handle (the buffer
// it points at); views made in the call, and const members, are passed through this.
at::Tensor& out_arg(const at::Tensor& t) { return const_cast<at::Tensor&>(t); }

// A weight as the step reads it: [out, in] on the step's device and dtype, or a clear error.
at::Tensor dense_weight(const at::Tensor& w, const std::string& name, at::ScalarType dt, at::Device device) {
  if (!w.defined())
    fail("static step", name + " is held only as GGUF blocks: load the model with --weights dequantized");
  if (w.scalar_type() != dt || w.device() != device || w.dim() < 1)
    fail("static step", name + " is not a " + std::string(c10::toString(dt)) + " tensor on " + device.str());
  return w;
}

}  // namespace

// [SECTION] a layer's weights and reserved state

// One layer's weights as the per-layer ops read them, and its reserved cache and state.
struct StaticDecodeStep::LayerOps {
  StepLayer w;                      // weights, with w.k_cache and w.v_cache the two below
  at::Tensor k_cache, v_cache;      // [KV, T, D]
  LayerAttention* eager = nullptr;  // neither plain dense attention nor a static LuKA layer: the layer's own
  // A LuKA layer in dense mode that the step runs itself: the layer (its state after the prefill
  // is copied in), its config, its reserved state and where its pages stand on the host.
  LukaLayer* luka = nullptr;
  LayerConfig config;
  at::Tensor importance, h2o, spread, summary_keys, summary_values, summary_bias;
  at::Tensor constants;  // [decay, tau] fp32
  at::Tensor page_state, page_advance;  // [pages, paged_end] on the device; row c: what c pages add
  std::int64_t pages = 0, paged_end = 0;
  // With step records on: the effective rows and (clustered) the pages' α the step keeps, and
  // the layer's pages on the host (the prefill's, then the ones the schedule makes).
  at::Tensor record_effective, record_alpha;
  std::vector<Page> host_pages;
  std::size_t pages_during_step = 0;  // of host_pages, those made before the last step
  // Lined, clustered and Kascade layers: their mode's ops (static_luka.h) and what they read and write.
  std::shared_ptr<StaticLined> lined;
  std::shared_ptr<StaticClustered> clustered;
  std::shared_ptr<StaticKascade> kascade;
  StaticLayerStep mode_step;
};

namespace {

// Why the static step runs this LuKA layer through its own attention ("" when it runs it itself):
// dense mode and the modes of static_luka.h, with pages made by the compressors written below.
std::string luka_eager_reason(const LayerConfig& c) {
  if (std::string why = static_luka_reason(c); !why.empty()) return why;
  if (c.clustered.segmenter != Segmenter::kFixed || c.dar.window > 0 || c.dense_shadow)
    return "a config the plan leaves eager";
  if (c.clustered.compressor != Compressor::kAttentionWeighted && c.clustered.compressor != Compressor::kMean)
    return std::string("compressor ") + to_string(c.clustered.compressor);
  return "";
}

}  // namespace

// [SECTION] making the step: the plan's buffers, the weights, the layers' modes, a change's carry-over

StaticDecodeStep::~StaticDecodeStep() = default;

StaticDecodeStep::StaticDecodeStep(const Decoder& decoder, StaticDecodeStep& from, const std::vector<LayerConfig>& layers,
                                   const StepKernelsFactory& kernels)
    : StaticDecodeStep(decoder, from.plan_.run, layers, kernels, from.started_ ? &from : nullptr) {
  if (from.started_) continue_from(from);
}

at::Tensor StaticDecodeStep::reusable(const StepBuffer& b, at::ScalarType type) const {
  for (std::size_t i = 0; i < plan_.buffers.size(); ++i) {
    const StepBuffer& a = plan_.buffers[i];
    if (a.name == b.name && a.layer == b.layer && a.shape == b.shape && tensors_[i].scalar_type() == type)
      return tensors_[i];
  }
  return {};
}

void StaticDecodeStep::continue_from(const StaticDecodeStep& from) {
  c10::InferenceMode guard;
  if (has_eager_ || from.has_eager_)
    fail("static step", "layers that run through their own attention keep their state in the decoder: a config "
                        "change mid-run needs the decoder's step (run without --static-step or --graph)");
  if (plan_.shape.layers != from.plan_.shape.layers || plan_.luka != from.plan_.luka)
    fail("static step", "the change is not one of the same model's layer configs");
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    if (!plan_.luka) break;
    if (plan_.prefill_pages[l] != from.plan_.prefill_pages[l] || plan_.page_counts[l] != from.plan_.page_counts[l] ||
        plan_.layers[l].clustered.page_size != from.plan_.layers[l].clustered.page_size)
      fail("static step", "layer " + std::to_string(l) +
                              ": the change moves the page schedule (page size, tail, interval or the rule), and "
                              "the pages made so far follow the old one: run it without --static-step or --graph");
    LayerOps& o = layers_[l];
    const LayerOps& f = from.layers_[l];
    if (!o.luka || !f.luka) fail("static step", "layer " + std::to_string(l) + " has no LuKA state to continue");
    o.pages = f.pages;
    o.paged_end = f.paged_end;
    o.host_pages = f.host_pages;
    set_page_state(o);
  }
  host_position_ = from.host_position_;
  host_step_ = from.host_step_;
  started_ = true;
}

StaticDecodeStep::StaticDecodeStep(const Decoder& decoder, const RunLength& run, const std::vector<LayerConfig>& layers,
                                   const StepKernelsFactory& kernels, StaticDecodeStep* from) {
  const Model& model = decoder.model();
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const at::ScalarType dt = to_scalar_type(model.dtype());
  if (dt != at::kFloat && dt != at::kBFloat16 && dt != at::kHalf)
    fail("static step", std::string("runs fp32, bf16 and fp16 models, not ") + c10::toString(dt));
  if (run.context() > c.max_position_embeddings)
    fail("static step", "a context of " + std::to_string(run.context()) + " exceeds max_position_embeddings " +
                            std::to_string(c.max_position_embeddings));
  // Step records for the layers a capture asked for them (LukaLayer::set_step_records).
  std::vector<bool> recorded(static_cast<std::size_t>(c.num_layers), false);
  for (int l = 0; l < c.num_layers && !layers.empty(); ++l) {
    const auto* luka = dynamic_cast<const LukaLayer*>(&decoder.attention(l));
    recorded[static_cast<std::size_t>(l)] = luka && luka->step_records();
  }
  plan_ = plan_step(model_shape(c, dt == at::kFloat ? 4 : 2), run, layers, recorded);
  const at::Device device = decoder.rope_frequencies().device();
  c10::InferenceMode guard;

  tensors_.reserve(plan_.buffers.size());
  for (const StepBuffer& b : plan_.buffers) {
    const at::ScalarType type = scalar_type(b.kind, dt);
    const at::Tensor kept = from ? from->reusable(b, type) : at::Tensor();
    tensors_.push_back(kept.defined() ? kept : at::zeros(b.shape, at::TensorOptions().dtype(type).device(device)));
  }
  const auto get = [&](const char* name) { return buffer(name); };
  token_ = get("token");
  position_ = get("position");
  step_ = get("step");
  ids_ = get("ids");
  key_positions_ = get("key_positions");
  key_positions_.copy_(at::arange(plan_.context, at::TensorOptions().dtype(at::kLong)));
  mask_ = get("mask");
  x_ = get("x");
  h_ = get("h");
  q_ = get("q");
  scores_ = get("scores");
  probabilities_ = get("probabilities");
  attention_ = get("attention");
  logits_ = get("logits");
  if (plan_.luka) {
    group_sum_ = get("group_sum");
    page_index_ = get("page_index");
    page_slots_ = get("page_slots");
    page_counting_ = get("page_counting");
    page_counting_.copy_(at::arange(page_counting_.size(0), at::TensorOptions().dtype(at::kLong)));
    page_importance_ = get("page_importance");
    page_logits_ = get("page_logits");
    page_weights_ = get("page_weights");
    page_keys_ = get("page_keys");
    page_values_ = get("page_values");
    page_summary_ = get("page_summary");
    page_bias_ = get("page_bias");
  }
  wide_ = dt != at::kFloat;
  if (wide_) {
    logits_compute_ = get("logits_compute");
    q32_ = get("q_f32");
    keys32_ = get("keys_f32");
    values32_ = get("values_f32");
    attention32_ = get("attention_f32");
  }

  embed_ = dense_weight(w.embed_tokens, "embed_tokens", dt, device);
  final_norm_ = dense_weight(w.final_norm, "final_norm", dt, device);
  lm_head_t_ = dense_weight(w.lm_head, "lm_head", dt, device).t();
  scale_ = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const at::Tensor constants = get("constants");
  constants.copy_(
      at::tensor({static_cast<float>(c.rms_norm_eps), static_cast<float>(c.hidden_size), static_cast<float>(c.head_dim),
                  static_cast<float>(scale_), static_cast<float>(c.num_heads / c.num_kv_heads)}));
  scale_t_ = constants.narrow(0, 3, 1);
  group_n_t_ = constants.narrow(0, 4, 1);
  one_ = get("one");
  one_.fill_(1);

  // The per-layer ops' tensors: views of the reserved buffers of the same names.
  seam_.shape = plan_.shape;
  seam_.eps = static_cast<float>(c.rms_norm_eps);
  seam_.position = position_;
  seam_.inv_freq = decoder.rope_frequencies();
  if (seam_.inv_freq.scalar_type() != at::kFloat || !seam_.inv_freq.is_contiguous())
    fail("static step", "the decoder's RoPE frequencies are not a contiguous fp32 tensor");
  seam_.x = x_;
  seam_.h = h_;
  seam_.q = q_;
  seam_.k = get("k");
  seam_.v = get("v");
  seam_.rotated = get("rotated");
  seam_.norm_input = get("norm_input");
  seam_.norm_square = get("norm_square");
  seam_.norm_scale = get("norm_scale");
  seam_.position_f32 = get("position_f32");
  seam_.rope_angle = get("rope_angle");
  seam_.rope_cos = get("rope_cos");
  seam_.rope_sin = get("rope_sin");
  seam_.gate = get("gate");
  seam_.up = get("up");
  seam_.constants = constants.narrow(0, 0, 3);
  seam_.qkv = get("qkv");
  seam_.projected = get("projected");
  seam_.gate_up = get("gate_up");
  seam_.activation = get("activation");
  seam_.table_cos = get("table_cos");
  seam_.table_sin = get("table_sin");
  if (kernels) {
    kernels_ = kernels(seam_);
  } else {
    if (device.type() != at::kCPU)
      fail("static step", "on " + device.str() + " the per-layer ops must be given (make_cuda_step_kernels)");
    kernels_ = make_cpu_step_kernels(seam_);
  }
  if (!kernels_) fail("static step", "no per-layer ops were made");

  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<std::size_t>(l)];
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerOps o;
    StepLayer& sw = o.w;
    sw.input_norm = dense_weight(lw.input_norm, p + "input_norm", dt, device);
    sw.post_norm = dense_weight(lw.post_attention_norm, p + "post_attention_norm", dt, device);
    if (c.qk_norm) {
      sw.q_norm = dense_weight(lw.q_norm, p + "q_norm", dt, device);
      sw.k_norm = dense_weight(lw.k_norm, p + "k_norm", dt, device);
    }
    sw.q = dense_weight(lw.q_proj, p + "q_proj", dt, device);
    sw.k = dense_weight(lw.k_proj, p + "k_proj", dt, device);
    sw.v = dense_weight(lw.v_proj, p + "v_proj", dt, device);
    sw.o = dense_weight(lw.o_proj, p + "o_proj", dt, device);
    sw.gate = dense_weight(lw.gate_proj, p + "gate_proj", dt, device);
    sw.up = dense_weight(lw.up_proj, p + "up_proj", dt, device);
    sw.down = dense_weight(lw.down_proj, p + "down_proj", dt, device);
    sw.q_b = lw.q_bias;
    sw.k_b = lw.k_bias;
    sw.v_b = lw.v_bias;
    sw.o_b = lw.o_bias;
    sw.gate_b = lw.gate_bias;
    sw.up_b = lw.up_bias;
    sw.down_b = lw.down_bias;
    o.k_cache = buffer("k_cache", l);
    o.v_cache = buffer("v_cache", l);
    sw.k_cache = o.k_cache;
    sw.v_cache = o.v_cache;
    kernels_->prepare(sw);
    LayerAttention& a = decoder.attention(l);
    auto* luka = dynamic_cast<LukaLayer*>(&a);  // the CPU core's or the GPU's: their state is read alike
    if (luka && plan_.luka && luka_eager_reason(luka->config()).empty()) {
      o.luka = luka;
      o.config = luka->config();
      if (o.config.mode != layers[static_cast<std::size_t>(l)].mode ||
          o.config.clustered.page_size != layers[static_cast<std::size_t>(l)].clustered.page_size)
        fail("static step", "layer " + std::to_string(l) + "'s attention runs another config than the one planned");
      o.importance = buffer("importance", l);
      o.h2o = buffer("h2o", l);
      o.spread = buffer("spread", l);
      o.constants = buffer("layer_constants", l);
      o.constants.copy_(
          at::tensor({static_cast<float>(o.config.lined.decay), static_cast<float>(o.config.clustered.tau)}));
      o.summary_keys = buffer("summary_keys", l);
      o.summary_values = buffer("summary_values", l);
      o.summary_bias = buffer("summary_bias", l);
      o.page_state = buffer("page_state", l);
      o.page_advance = buffer("page_advance", l);
      const std::int64_t L = o.config.clustered.page_size;
      at::Tensor advance = at::empty({o.page_advance.size(0), 2}, at::kLong);
      for (std::int64_t c = 0; c < advance.size(0); ++c) {
        advance[c][0] = c;
        advance[c][1] = c * L;
      }
      o.page_advance.copy_(advance);
      // A 16-bit step's modes read the fp32 query, keys and values and write the fp32 output.
      o.mode_step = StaticLayerStep{wide_ ? q32_ : q_,
                                    wide_ ? keys32_ : o.k_cache,
                                    wide_ ? values32_ : o.v_cache,
                                    o.h2o,
                                    o.spread,
                                    o.summary_keys,
                                    o.summary_values,
                                    o.summary_bias,
                                    scores_,
                                    probabilities_,
                                    wide_ ? attention32_ : attention_,
                                    scale_t_,
                                    {},
                                    {}};
      if (plan_.recorded[static_cast<std::size_t>(l)]) {
        o.record_effective = buffer("record_effective", l);
        if (o.config.mode == AttentionMode::kClustered) o.record_alpha = buffer("record_alpha", l);
        o.mode_step.record_alpha = o.record_alpha;
        if (o.config.importance_source == ImportanceSource::kCover) o.mode_step.record_effective = o.record_effective;
      }
      if (o.config.mode == AttentionMode::kLined) o.lined = std::make_shared<StaticLined>(*this, l, o.config);
      if (o.config.mode == AttentionMode::kClustered)
        o.clustered = std::make_shared<StaticClustered>(*this, l, o.config);
      if (o.config.mode == AttentionMode::kKascade) {
        const std::int64_t source = o.config.kascade.source;
        if (source >= l || (source >= 0 && !layers_[static_cast<std::size_t>(source)].kascade))
          fail("static step",
               "layer " + std::to_string(l) + " reuses a layer the step does not run as a Kascade anchor");
        o.kascade = std::make_shared<StaticKascade>(
            *this, l, o.config, source < 0 ? o.config : layers_[static_cast<std::size_t>(source)].config);
      }
    } else if (!dynamic_cast<const DenseAttention*>(&a)) {
      o.eager = &a;
    }
    layers_.push_back(o);
  }
  has_eager_ = !eager_layers().empty();
  if (has_eager_) host_ids_.reserve(static_cast<std::size_t>(plan_.context));
}

const at::Tensor& StaticDecodeStep::buffer(const std::string& name, int layer) const {
  for (std::size_t i = 0; i < plan_.buffers.size(); ++i)
    if (plan_.buffers[i].name == name && plan_.buffers[i].layer == layer) return tensors_[i];
  fail("static step", "no buffer " + name);
}

std::vector<int> StaticDecodeStep::eager_layers() const {
  std::vector<int> out;
  for (std::size_t l = 0; l < layers_.size(); ++l)
    if (layers_[l].eager) out.push_back(static_cast<int>(l));
  return out;
}

std::int64_t StaticDecodeStep::pages(int layer) const {
  const LayerOps& o = layers_.at(static_cast<std::size_t>(layer));
  return o.luka ? o.pages : -1;
}

at::Tensor StaticDecodeStep::logits() const { return logits_[0]; }

std::vector<std::int32_t> StaticDecodeStep::ids() const {
  const at::Tensor ids = ids_.narrow(0, 0, host_step_).to(at::kCPU);
  std::vector<std::int32_t> out;
  for (std::int64_t i = 0; i < ids.numel(); ++i)
    out.push_back(static_cast<std::int32_t>(ids.const_data_ptr<std::int64_t>()[i]));
  return out;
}

// [SECTION] start: the prefill's caches and LuKA state

void StaticDecodeStep::start(Decoder& decoder, const std::vector<std::int32_t>& prompt, std::int32_t first_token) {
  if (static_cast<std::int64_t>(prompt.size()) != plan_.run.prompt || decoder.position() != plan_.run.prompt)
    fail("static step", "planned for a prompt of " + std::to_string(plan_.run.prompt) +
                            " tokens, the decoder is at position " + std::to_string(decoder.position()));
  if (first_token < 0 || first_token >= plan_.shape.vocab)
    fail("static step", "first token " + std::to_string(first_token) + " outside the vocabulary");
  c10::InferenceMode guard;
  const std::int64_t n = plan_.run.prompt;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const KvCache& cache = decoder.cache(static_cast<int>(l));
    layers_[l].k_cache.zero_();
    layers_[l].v_cache.zero_();
    layers_[l].k_cache.narrow(1, 0, n).copy_(cache.keys());
    layers_[l].v_cache.narrow(1, 0, n).copy_(cache.values());
    LayerOps& o = layers_[l];
    if (!o.luka) continue;
    // The layer's state after the prefill becomes the step's.
    const LukaState state = o.luka->state_view();
    if (state.tokens != n)
      fail("static step", "layer " + std::to_string(l) + "'s LuKA state is not at the prompt's end");
    o.pages = state.pages;
    o.paged_end = state.paged_end;
    o.host_pages = o.luka->pages();
    if (o.pages > o.summary_keys.size(1))
      fail("static step", "layer " + std::to_string(l) + " has more pages than planned");
    for (const at::Tensor* t : {&o.importance, &o.h2o, &o.spread, &o.summary_keys, &o.summary_values, &o.summary_bias})
      t->zero_();
    o.importance.narrow(1, 0, n).copy_(state.importance);
    o.h2o.narrow(1, 0, n).copy_(state.h2o);
    if (o.paged_end > 0) o.spread.narrow(1, 0, o.paged_end).copy_(state.spread);
    if (o.pages > 0) {
      o.summary_keys.narrow(1, 0, o.pages).copy_(state.summary_keys);
      o.summary_values.narrow(1, 0, o.pages).copy_(state.summary_values);
      o.summary_bias.narrow(1, 0, o.pages).copy_(state.summary_bias);
    }
    set_page_state(o);
  }
  token_.fill_(first_token);
  position_.fill_(n);
  step_.zero_();
  ids_.zero_();
  host_position_ = n;
  host_step_ = 0;
  if (has_eager_) host_ids_.assign(prompt.begin(), prompt.end());  // the delimiter segmenter reads them
  started_ = true;
}

// [SECTION] one step: the device work, then the host's counters

void StaticDecodeStep::step() {
  check_next_step();
  if (has_eager_) {
    // Eager layers read the sequence's ids (the delimiter segmenter); on the CPU the token is
    // right there, on a GPU this read is the one synchronisation such a run keeps.
    host_ids_.push_back(static_cast<std::int32_t>(token_.to(at::kCPU).const_data_ptr<std::int64_t>()[0]));
  }
  enqueue_step();
  end_step();
  publish_records();
}

void StaticDecodeStep::check_next_step() const {
  if (!started_) fail("static step", "step() before start()");
  if (host_step_ >= plan_.run.max_new_tokens)
    fail("static step", "planned for " + std::to_string(plan_.run.max_new_tokens) + " steps");
}

std::int32_t StaticDecodeStep::token() const {
  return static_cast<std::int32_t>(token_.to(at::kCPU).const_data_ptr<std::int64_t>()[0]);
}

void StaticDecodeStep::enqueue_step() {
  c10::InferenceMode guard;
  const ModelShape& m = plan_.shape;
  const std::int64_t H = m.heads, KV = m.kv_heads, D = m.head_dim, G = H / KV;

  // The token's row, the RoPE tables of its position, the mask of the keys past it, and the first
  // layer's input norm (every later norm comes with the residual add before it).
  at::index_select_out(x_, embed_, 0, token_);
  kernels_->rope_tables();
  at::gt_out(mask_, key_positions_, position_);
  kernels_->norm(layers_.front().w.input_norm);

  const at::Tensor scores = scores_.view({KV, G, plan_.context}), probs = probabilities_.view({KV, G, plan_.context});
  const at::Tensor att = attention_.view({KV, G, D});
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    LayerOps& o = layers_[l];
    kernels_->qkv(o.w);  // q (in q_) normed and rotated; k and v appended at the position
    if (o.eager) {
      const std::int64_t T = host_position_ + 1;
      AttentionInputs in;
      in.layer = static_cast<int>(l);
      in.q = q_.view({H, 1, D});
      in.k = o.k_cache.narrow(1, 0, T);
      in.v = o.v_cache.narrow(1, 0, T);
      in.q_pos0 = host_position_;
      in.group_size = G;
      in.scale = scale_;
      in.ids = host_ids_.data();
      attention_.view({1, H * D}).copy_(o.eager->forward(in));
    } else {
      // A 16-bit step widens the query, keys and values to fp32 first (the decoder's attention
      // sums its products in fp32 and keeps fp32 probabilities).
      const at::Tensor& query = wide_ ? q32_ : q_;
      const at::Tensor& keys = wide_ ? keys32_ : o.k_cache;
      const at::Tensor& values = wide_ ? values32_ : o.v_cache;
      if (wide_) {
        q32_.copy_(q_);
        keys32_.copy_(o.k_cache);
        values32_.copy_(o.v_cache);
      }
      // Every reserved key, the ones past the position masked: a fixed shape whatever the length.
      at::bmm_out(out_arg(scores), query.view({KV, G, D}), keys.transpose(1, 2));
      scores_.mul_(scale_t_);
      scores_.masked_fill_(mask_, -std::numeric_limits<double>::infinity());
      if (o.lined) {
        o.lined->attend(o.mode_step, step_);
      } else if (o.clustered) {
        o.clustered->attend(o.mode_step);
      } else if (o.kascade) {
        o.kascade->attend(o.mode_step, step_);
      } else {
        at::_softmax_out(probabilities_, scores_, 1, /*half_to_float=*/false);
        at::bmm_out(out_arg(wide_ ? attention32_.view({KV, G, D}) : att), probs, values);
      }
      if (wide_) attention_.copy_(attention32_);  // rounded to the compute dtype, as the decoder's output
      if (o.record_effective.defined() && !o.mode_step.record_effective.defined())
        o.record_effective.copy_(probabilities_);
      if (o.luka) accumulate(o);
    }
    kernels_->residual_projection_norm(attention_.view({1, H * D}), o.w.o, o.w.o_b, o.w.post_norm);
    const at::Tensor activation = kernels_->mlp_activation(o.w);
    kernels_->residual_projection_norm(activation, o.w.down, o.w.down_b,
                                       l + 1 < layers_.size() ? layers_[l + 1].w.input_norm : final_norm_);
  }
  if (wide_) {
    at::mm_out(logits_compute_, h_, lm_head_t_);  // in the compute dtype, then widened, as the decoder's
    logits_.copy_(logits_compute_);
  } else {
    at::mm_out(logits_, h_, lm_head_t_);
  }
  // Greedy: the next token, recorded at this step's index; then the position and the counter move.
  at::argmax_out(token_, logits_, 1, /*keepdim=*/false);
  ids_.index_copy_(0, step_, token_);
  step_.add_(one_);
  position_.add_(one_);
}

void StaticDecodeStep::end_step(bool pages_enqueued) {
  c10::InferenceMode guard;
  // The page variant: the layers whose schedule makes pages after this step (known on the host
  // from the plan), made here unless the caller enqueued them with the step (a recorded variant).
  const std::vector<std::int64_t> due = pages_due();
  ++host_step_;
  ++host_position_;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    LayerOps& o = layers_[l];
    o.pages_during_step = o.host_pages.size();  // the step's records are of these pages
    if (due[l] > 0) {
      if (!pages_enqueued) enqueue_layer_pages(o, due[l]);
      const std::int64_t L = o.config.clustered.page_size;
      for (std::int64_t j = 0; j < due[l]; ++j) {
        Page page;
        page.start = o.paged_end + j * L;
        page.end = page.start + L;
        page.created_step = host_step_;
        o.host_pages.push_back(page);
      }
      o.pages += due[l];
      o.paged_end += due[l] * L;
      if (o.pages > o.summary_keys.size(1)) fail("static step", "more pages than planned");
    }
  }
}

// [SECTION] step records for captures

void StaticDecodeStep::publish_records() {
  if (!plan_.records || host_step_ == 0) return;
  c10::InferenceMode guard;
  for (std::size_t l = 0; l < layers_.size(); ++l)
    if (layers_[l].record_effective.defined())
      layers_[l].luka->adopt_step(layer_records(layers_[l], static_cast<int>(l)), layers_[l].host_pages);
}

// The layer's step as core/luka records it (LukaStep), from the records the step kept on the
// device: the effective rows over the T tokens, the pages' α and each head's refined pages
// (clustered), each unit's first `heavy` ranked hitters (lined), over the pages made before the
// step. A recorded step has no per-layer time: `seconds` is 0.
LukaStep StaticDecodeStep::layer_records(const LayerOps& o, int layer) const {
  const std::int64_t H = plan_.shape.heads, T = host_position_;
  StepRecords r;
  r.effective = o.record_effective.narrow(1, 0, T);
  if (o.clustered) {
    const std::int64_t P = o.pages;
    r.summary_mass = o.record_alpha;
    const at::Tensor refined = buffer("refined_pages", layer).to(at::kCPU).contiguous();  // [H, P_max] bool
    const bool* mask = refined.const_data_ptr<bool>();
    r.refined = at::full({H, std::max<std::int64_t>(P, 1)}, -1, at::kInt);
    r.refined_count = at::zeros({H}, at::kInt);
    int* rows = r.refined.mutable_data_ptr<int>();
    for (std::int64_t h = 0; h < H; ++h) {
      int n = 0;
      for (std::int64_t p = 0; p < P; ++p)
        if (mask[h * refined.size(1) + p]) rows[h * r.refined.size(1) + n++] = static_cast<int>(p);
      r.refined_count.mutable_data_ptr<int>()[h] = n;
    }
  } else if (o.lined) {
    const std::int64_t count = rules::lined_cover(to_rule(o.config.lined), T).heavy;
    const at::Tensor ranked = buffer("heavy", layer).to(at::kCPU);  // [units.., K] int64, ranked
    const Selection sel = o.config.lined.selection;
    const std::int64_t U = sel == Selection::kPerHead ? H : sel == Selection::kPerGroup ? plan_.shape.kv_heads : 1;
    r.heavy = at::empty({H, count}, at::kInt);
    for (std::int64_t h = 0; h < H; ++h) r.heavy[h].copy_(ranked[h / (H / U)].narrow(0, 0, count));
  }
  const std::vector<Page> during(o.host_pages.begin(), o.host_pages.begin() + static_cast<std::ptrdiff_t>(o.pages_during_step));
  LukaStep s = step_from_records(o.config, host_step_, T, during, r);
  s.seconds = 0;
  if (o.kascade) kascade_records(o, layer, s);
  return s;
}

// decode_kascade's records: the layer whose sets it used (itself for an anchor), per KV head the
// set it read (not for a shared set), and per head the keys it attended, ascending: its set as the
// layer's mask holds it (an anchor's per pooled group, a reuse layer's per KV head), or every key
// for layer 0's dense output.
void StaticDecodeStep::kascade_records(const LayerOps& o, int layer, LukaStep& s) const {
  const std::int64_t H = plan_.shape.heads, KV = plan_.shape.kv_heads, G = H / KV, T = s.tokens;
  const std::int64_t source = o.config.kascade.source;
  const bool anchor = source < 0, dense_out = anchor && layer == 0;
  const bool shared = anchor ? o.config.kascade.shared : layers_[static_cast<std::size_t>(source)].config.kascade.shared;
  s.kascade_source = anchor ? layer : source;
  s.head_map.clear();
  if (!shared) {
    const at::Tensor map = buffer("kascade_map", layer).to(at::kCPU);
    for (std::int64_t g = 0; g < KV; ++g) s.head_map.push_back(anchor ? g : map.const_data_ptr<std::int64_t>()[g]);
  }
  const at::Tensor mask = buffer("kascade_mask", layer).to(at::kCPU).contiguous();  // [rows, T_max] bool
  const bool* m = mask.const_data_ptr<bool>();
  s.selected.assign(static_cast<std::size_t>(H), {});
  for (std::int64_t h = 0; h < H; ++h) {
    auto& sel = s.selected[static_cast<std::size_t>(h)];
    const std::int64_t row = anchor && shared ? 0 : h / G;
    for (std::int64_t t = 0; t < T; ++t)
      if (dense_out || m[row * mask.size(1) + t]) sel.push_back(t);
    s.cover_size[static_cast<std::size_t>(h)] = static_cast<std::int64_t>(sel.size());
  }
}

// [SECTION] accumulators and pages

// §5.1 as core/luka accumulates a decode step: h2o_score per query head (with decay) and
// importance per KV head as the mean over its group, from the step's attention rows, which are 0
// past the length (so the whole reserved width is updated).
void StaticDecodeStep::accumulate(LayerOps& o) {
  const std::int64_t KV = plan_.shape.kv_heads, G = plan_.shape.heads / KV;
  if (o.config.lined.decay != 1.0) o.h2o.mul_(o.constants.narrow(0, 0, 1));
  o.h2o.add_(probabilities_);
  const std::int64_t group[] = {1};
  at::sum_out(group_sum_, probabilities_.view({KV, G, plan_.context}), at::IntArrayRef(group));
  group_sum_.div_(group_n_t_);
  o.importance.add_(group_sum_);
}

std::vector<std::int64_t> StaticDecodeStep::pages_due() const {
  std::vector<std::int64_t> due(layers_.size(), 0);
  if (host_step_ >= plan_.run.max_new_tokens) return due;
  for (std::size_t l = 0; l < layers_.size(); ++l)
    if (layers_[l].luka) due[l] = plan_.page_counts[l][static_cast<std::size_t>(host_step_)];
  return due;
}

void StaticDecodeStep::enqueue_pages() {
  c10::InferenceMode guard;
  const std::vector<std::int64_t> due = pages_due();
  for (std::size_t l = 0; l < layers_.size(); ++l)
    if (due[l] > 0) enqueue_layer_pages(layers_[l], due[l]);
}

// `count` fixed pages of page_size from the layer's paged end, as core/luka makes them: per KV
// head the compressor's weights π over each page's tokens (softmax(importance / τ), or uniform),
// the summary key and value Σ π·k, Σ π·v, the bias (0, log page_size or adaptive: static_luka.h)
// and π as the spread. The offsets are read on the device (the layer's page_state: the pages'
// positions and slots gathered, the results scattered), so the same work records into a graph
// whatever the step; page_state then advances by the plan's row for `count`.
void StaticDecodeStep::enqueue_layer_pages(LayerOps& o, std::int64_t count) {
  const ClusteredConfig& c = o.config.clustered;
  const std::int64_t KV = plan_.shape.kv_heads, D = plan_.shape.head_dim, L = c.page_size, n = count * L;
  // The front of a scratch buffer as a contiguous [rows, cols] (or [rows, cols, D]).
  const auto front = [](const at::Tensor& t, std::int64_t rows, std::int64_t cols, std::int64_t depth = 1) {
    const at::Tensor flat = t.view(-1).narrow(0, 0, rows * cols * depth);
    return depth == 1 ? flat.view({rows, cols}) : flat.view({rows, cols, depth});
  };
  const at::Tensor index = page_index_.narrow(0, 0, n), slots = page_slots_.narrow(0, 0, count);
  at::add_out(out_arg(index), page_counting_.narrow(0, 0, n), o.page_state.narrow(0, 1, 1));  // paged_end + i
  at::add_out(out_arg(slots), page_counting_.narrow(0, 0, count), o.page_state.narrow(0, 0, 1));  // pages + j
  const at::Tensor importance = front(page_importance_, KV, n), weights = front(page_weights_, KV, n);
  at::index_select_out(out_arg(importance), o.importance, 1, index);
  if (c.compressor == Compressor::kAttentionWeighted) {
    const at::Tensor logits = front(page_logits_, KV, n);
    at::div_out(out_arg(logits), importance, o.constants.narrow(0, 1, 1));
    at::_softmax_out(out_arg(weights.view({KV * count, L})), logits.view({KV * count, L}), 1, /*half_to_float=*/false);
  } else {
    weights.fill_(1.0 / static_cast<double>(L));
  }
  o.spread.index_copy_(1, index, weights);
  // The pages' keys and values (widened to fp32 in a 16-bit step: summaries are fp32), then per
  // KV head Σ π·k and Σ π·v of each page.
  const auto rows = [&](const at::Tensor& cache, const at::Tensor& gathered, const at::Tensor& wide) {
    at::index_select_out(out_arg(gathered), cache, 1, index);
    if (!wide_) return gathered;
    wide.copy_(gathered);
    return wide;
  };
  const at::Tensor summary = front(page_summary_, KV, count, D);
  const auto summarize = [&](const at::Tensor& page_rows_of, const at::Tensor& into) {
    for (std::int64_t g = 0; g < KV; ++g)
      at::bmm_out(out_arg(summary[g].view({count, 1, D})), weights[g].view({count, 1, L}),
                  page_rows_of[g].view({count, L, D}));
    into.index_copy_(1, slots, summary);
  };
  summarize(rows(o.k_cache, front(page_keys_, KV, n, D), wide_ ? front(keys32_, KV, n, D) : at::Tensor()),
            o.summary_keys);
  if (c.zero_v) {
    o.summary_values.index_fill_(1, slots, 0.0);
  } else {
    summarize(rows(o.v_cache, front(page_values_, KV, n, D), wide_ ? front(values32_, KV, n, D) : at::Tensor()),
              o.summary_values);
  }
  if (c.bias == SummaryBias::kAdaptive) {
    const at::Tensor bias = front(page_bias_, KV, count);
    adaptive_page_bias(c, importance, weights, bias, buffer("page_scratch"));
    o.summary_bias.index_copy_(1, slots, bias);
  } else {
    o.summary_bias.index_fill_(1, slots, c.bias == SummaryBias::kFixed ? std::log(static_cast<double>(L)) : 0.0);
  }
  o.page_state.add_(o.page_advance[count]);
}

// Where a layer's pages stand, from the host's count (outside any recorded step).
void StaticDecodeStep::set_page_state(LayerOps& o) {
  if (o.pages > o.summary_keys.size(1)) fail("static step", "more pages than planned");
  o.page_state.copy_(at::tensor({o.pages, o.paged_end}, at::kLong));
  if (o.clustered) o.clustered->set_pages(o.pages, o.paged_end);
}

namespace {

// [SECTION] the static step as the run loop's decode engine

class StaticStepEngine final : public DecodeEngine {
 public:
  StaticStepEngine(const Decoder& decoder, const RunLength& run, const std::vector<LayerConfig>& layers,
                   StepKernelsFactory kernels)
      : decoder_(decoder), kernels_(std::move(kernels)),
        step_(std::make_unique<StaticDecodeStep>(decoder, run, layers, kernels_)) {}
  void start(Decoder& decoder, const std::vector<std::int32_t>& prompt, std::int32_t first) override {
    step_->start(decoder, prompt, first);
  }
  std::int32_t step() override {
    step_->step();
    return step_->token();
  }
  at::Tensor logits() const override { return step_->logits(); }
  void change(std::int64_t step, const std::vector<LayerConfig>& layers) override {
    const auto t0 = std::chrono::steady_clock::now();
    EngineChange c;
    c.step = step;
    c.kind = to_string(step_change(step_->plan(), layers));
    step_ = std::make_unique<StaticDecodeStep>(decoder_, *step_, layers, kernels_);
    c.plan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    changes_.push_back(c);
  }
  std::string describe() const override {
    std::string s = std::string("static step (") + step_->kernels() + " per-layer ops, " +
                    std::to_string(step_->plan().total_bytes() >> 20) + " MiB reserved)";
    const std::vector<int> eager = step_->eager_layers();
    if (!eager.empty()) s += ", " + std::to_string(eager.size()) + " layers through their own attention";
    if (!changes_.empty()) s += "; config changes: " + describe_changes(changes_);
    return s;
  }

 private:
  const Decoder& decoder_;
  StepKernelsFactory kernels_;
  std::unique_ptr<StaticDecodeStep> step_;
  std::vector<EngineChange> changes_;
};

}  // namespace

DecodeEngineFactory static_step_engine(StepKernelsFactory kernels) {
  return [kernels](const Decoder& decoder, std::int64_t prompt_tokens, std::int64_t max_new_tokens,
                   const std::vector<LayerConfig>& layers) -> std::unique_ptr<DecodeEngine> {
    return std::make_unique<StaticStepEngine>(decoder, RunLength{prompt_tokens, max_new_tokens}, layers, kernels);
  };
}

}  // namespace luka
