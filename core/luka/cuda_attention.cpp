#include "core/luka/cuda_attention.h"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "core/luka/dense_shadow.h"
#include "core/luka/luka_attention.h"
#include "core/luka/prefill.h"
#include "core/luka/step_records.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/util/error.h"

namespace luka {

std::string gpu_unsupported(const LayerConfig& c) {
  const ClusteredConfig& k = c.clustered;
  if (c.mode == AttentionMode::kKascade) return "mode kascade runs on the CPU path only";
  if (c.mode == AttentionMode::kPress) return "mode press runs on the CPU path only";
  if (c.mode == AttentionMode::kQuest) return "mode quest runs on the CPU path only";
  if (c.dar.window > 0) return "the dar probe runs on the CPU path only";
  if (c.mode == AttentionMode::kClustered && k.segmenter != Segmenter::kFixed) return "segmenter=delimiter runs on the CPU path only";
  if (c.mode == AttentionMode::kClustered && k.compressor == Compressor::kGsc) return "compressor=gsc runs on the CPU path only";
  if (c.mode == AttentionMode::kLined && c.lined.sparse_prefill) return "lined sparse_prefill runs on the CPU path only";
  if (k.page_size > cuda::kMaxPageTokens) return "pages above 1024 tokens run on the CPU path only";
  // The authors' variants (docs/design.md §5.6) that change what the kernels compute.
  if (c.importance_source != ImportanceSource::kEffective) return "importance_source=cover runs on the CPU path only";
  if (k.bias == SummaryBias::kAdaptive && k.bias_entropy != BiasEntropy::kWeights)
    return "bias_entropy=importance_mean runs on the CPU path only";
  if (k.refine_on != RefineOn::kBiased && k.bias != SummaryBias::kNone) return "refine_on=unbiased runs on the CPU path only";
  if (k.page_rank != PageRank::kMax && (k.rule == RefineRule::kTopFrac || k.rule == RefineRule::kTopP))
    return "page_rank=sum runs on the CPU path only";
  if (c.lined.rounding != BudgetRounding::kCeil) return "lined_rounding=floor runs on the CPU path only";
  if (c.lined.heavy_late) return "heavy_late runs on the CPU path only";
  return {};
}

std::string to_cuda_params(const LayerConfig& c, cuda::LayerParams* out) {
  out->mode = c.mode;
  out->lined = c.lined;
  out->clustered = c.clustered;
  return gpu_unsupported(c);
}

namespace {

cuda::ElemType elem_type(at::ScalarType t, int layer) {
  if (t == at::kFloat) return cuda::ElemType::kF32;
  if (t == at::kBFloat16) return cuda::ElemType::kBF16;
  if (t == at::kHalf) return cuda::ElemType::kF16;
  fail("luka layer " + std::to_string(layer), std::string("unsupported cache dtype ") + c10::toString(t));
}

cuda::KvView kv_view(const AttentionInputs& in, int layer) {
  cuda::KvView kv;
  kv.type = elem_type(in.k.scalar_type(), layer);
  kv.k = in.k.const_data_ptr();
  kv.v = in.v.const_data_ptr();
  kv.kv_heads = in.k.size(0);
  kv.tokens = in.k.size(1);
  kv.head_dim = in.k.size(2);
  kv.head_stride = in.k.stride(0);
  kv.token_stride = in.k.stride(1);
  if (in.k.stride(2) != 1 || in.v.strides() != in.k.strides())
    fail("luka layer " + std::to_string(layer), "the KV cache must have contiguous rows and equal K/V strides");
  return kv;
}

// The stream ATen runs on: the kernels must order with the tensors it allocates and frees.
void* current_stream() { return at::cuda::getCurrentCUDAStream().stream(); }

}  // namespace

CudaLukaAttention::CudaLukaAttention(int layer, const LayerConfig& config, std::int64_t heads, std::int64_t kv_heads,
                                     std::int64_t head_dim)
    : layer_(layer), heads_(heads), kv_heads_(kv_heads), head_dim_(head_dim) {
  set_config(config);
  reset();
}

void CudaLukaAttention::set_config(const LayerConfig& config) {
  validate(config, layer_);
  cuda::LayerParams p;
  if (const std::string why = to_cuda_params(config, &p); !why.empty()) fail("luka layer " + std::to_string(layer_), why);
  config_ = config;
  params_ = p;
  if (state_) state_->set_params(p);
}

void CudaLukaAttention::adopt_step(LukaStep step, std::vector<Page> pages) {
  pending_ = PendingStep{};
  last_ = std::move(step);
  adopted_pages_ = std::move(pages);
  adopted_ = true;
}

void CudaLukaAttention::reset() {
  adopted_ = false;
  adopted_pages_.clear();
  state_ = std::make_unique<cuda::LayerState>(layer_, heads_, kv_heads_, head_dim_, cuda::ElemType::kF32);
  state_->set_params(params_);
  pages_.clear();
  last_ = LukaStep{};
  pending_ = PendingStep{};
}

void CudaLukaAttention::reserve(std::int64_t tokens) {
  if (const std::string e = state_->reserve(tokens, current_stream()); !e.empty()) fail("luka layer " + std::to_string(layer_), e);
}

LukaState CudaLukaAttention::state_view() const {
  const cuda::LayerState& st = *state_;
  LukaState s;
  s.tokens = st.tokens();
  s.pages = static_cast<std::int64_t>(st.pages().size());
  s.paged_end = st.paged_end();
  if (s.tokens == 0) return s;
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device_);
  const std::int64_t ld = st.ld(), pcap = st.summary_capacity(), D = head_dim_;
  const auto view = [&](const void* p, at::IntArrayRef sizes, at::IntArrayRef strides) {
    return at::from_blob(const_cast<void*>(p), sizes, strides, f32);
  };
  s.importance = view(st.importance(), {kv_heads_, s.tokens}, {ld, 1});
  s.h2o = view(st.h2o(), {heads_, s.tokens}, {ld, 1});
  if (s.pages > 0) {
    s.spread = view(st.spread(), {kv_heads_, s.paged_end}, {ld, 1});
    s.summary_keys = view(st.summary_keys(), {kv_heads_, s.pages, D}, {pcap * D, D, 1});
    s.summary_values = view(st.summary_values(), {kv_heads_, s.pages, D}, {pcap * D, D, 1});
    s.summary_bias = view(st.summary_bias(), {kv_heads_, s.pages}, {pcap, 1});
  }
  return s;
}

// Pages the state made since the last call, with the decode step that made them.
void CudaLukaAttention::sync_pages() {
  const auto& made = state_->pages();
  for (std::size_t i = pages_.size(); i < made.size(); ++i) pages_.push_back(Page{made[i].first, made[i].second, state_->steps(), {}, false});
}

at::Tensor CudaLukaAttention::forward(const AttentionInputs& in) {
  adopted_ = false;
  const std::int64_t n = in.q.size(1), T = in.k.size(1);
  const std::string where = "luka layer " + std::to_string(layer_);
  if (!in.q.is_cuda() || !in.k.is_cuda()) fail(where, "GPU attention given tensors on the CPU");
  if (in.q.scalar_type() != in.k.scalar_type()) fail(where, "queries and cache differ in dtype");
  if (in.q_pos0 != state_->tokens() || in.q_pos0 + n != T)
    fail(where, "attention state out of step with the cache (state has " + std::to_string(state_->tokens()) +
                    " tokens, cache " + std::to_string(T) + " with " + std::to_string(n) + " new)");
  c10::InferenceMode guard;
  device_ = in.q.device().index();
  at::Tensor out = n > 1 || T == 1 ? prefill(in) : decode(in);
  sync_pages();
  return out;
}

// One decode step on the kernels; with records (or the dense shadow) the step's outputs come back
// to the host as a LukaStep the CPU core would have made.
at::Tensor CudaLukaAttention::decode(const AttentionInputs& in) {
  const std::int64_t T = in.k.size(1), H = heads_;
  const std::string where = "luka layer " + std::to_string(layer_);
  const auto t0 = std::chrono::steady_clock::now();
  const at::Tensor q = in.q.contiguous();
  at::Tensor out = at::empty({1, H * head_dim_}, q.options());
  const bool records = records_ || config_.dense_shadow;
  const std::int64_t P = static_cast<std::int64_t>(state_->pages().size()), E = state_->paged_end();
  const at::TensorOptions floats = q.options().dtype(at::kFloat), ints = q.options().dtype(at::kInt);
  at::Tensor eff, mass, refined, count, heavy;
  cuda::StepOutputs o;
  std::int64_t max_refined = 0, heavy_count = 0;
  if (records) {
    max_refined = std::max<std::int64_t>(state_->max_refined(T), 1);
    heavy_count = std::max<std::int64_t>(state_->heavy_count(T), 0);
    eff = at::empty({H, T}, floats);
    mass = at::empty({H, std::max<std::int64_t>(P, 1)}, floats);
    refined = at::empty({H, max_refined}, ints);
    count = at::zeros({H}, ints);
    heavy = at::empty({H, std::max<std::int64_t>(heavy_count, 1)}, ints);
    o = cuda::StepOutputs{eff.mutable_data_ptr<float>(), mass.mutable_data_ptr<float>(), refined.mutable_data_ptr<int>(),
                          count.mutable_data_ptr<int>(), heavy.mutable_data_ptr<int>()};
  }
  if (const std::string e = state_->decode(q.const_data_ptr(), out.mutable_data_ptr(), kv_view(in, layer_),
                                           static_cast<float>(in.scale), current_stream(), o);
      !e.empty())
    fail(where, e);
  pending_ = PendingStep{};
  if (!records) {
    last_ = LukaStep{};
    last_.mode = config_.mode;
    last_.step = state_->steps();
    last_.tokens = T;
    last_.paged_end = E;
    last_.cover_size.assign(static_cast<std::size_t>(H), T);
    return out;
  }
  // The kernels' records, as the CPU core's LukaStep (docs/design.md §5.5), with the pages of the step.
  std::vector<Page> during(pages_.begin(), pages_.begin() + P);
  if (config_.dense_shadow) {  // compares with the records now: copies that wait
    last_ = step_from_records(config_, state_->steps(), T, during, StepRecords{eff, mass, refined, count, heavy.narrow(1, 0, heavy_count)});
    dense_shadow(in, out.view({H, head_dim_}), pages_, last_);
    last_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  }
  // Copies into pinned memory queued behind the step's kernels; an event marks their end.
  const auto to_host = [](const at::Tensor& t) {
    at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
    host.copy_(t, /*non_blocking=*/true);
    return host;
  };
  StepRecords host{to_host(eff), to_host(mass), to_host(refined), to_host(count), to_host(heavy.narrow(1, 0, heavy_count))};
  auto done = std::make_shared<at::cuda::CUDAEvent>();
  done->record(at::cuda::getCurrentCUDAStream());
  last_ = LukaStep{};
  pending_ = PendingStep(config_, state_->steps(), T, std::move(during), std::move(host), [done] { done->synchronize(); },
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return out;
}

// Exact causal attention over the whole prompt: the prefill kernel when h2o has no decay, else
// ATen ops chunked over queries with the CPU prefill's sequential decay. The probabilities feed
// importance and h2o_score, and the state is handed to the kernels (which then make the
// post-prefill pages). A capture's observer gets the map max-pooled on the device to the level it
// asked for: by the kernel in one piece, or block by block on the ATen path.
at::Tensor CudaLukaAttention::prefill(const AttentionInputs& in) {
  const std::int64_t H = in.q.size(0), n = in.q.size(1), KV = in.k.size(0), T = in.k.size(1), G = H / KV;
  if (in.q_pos0 != 0)
    fail("luka layer " + std::to_string(layer_), "the GPU path prefills from position 0 only (reset the decoder first)");
  const at::TensorOptions floats = in.q.options().dtype(at::kFloat);
  const bool observed = static_cast<bool>(prefill_observer_);
  const std::int64_t pool = std::int64_t{1} << prefill_pool_level_;
  const std::int64_t rows = (n + pool - 1) / pool, cols = (T + pool - 1) / pool;
  // The pooled map in one piece: 256 MB for 16 heads at the default map cap of 2,048 cells.
  constexpr std::int64_t kMaxPooledBytes = std::int64_t{1} << 30;
  // The flash-class form (aten_prefill's tiled prefill: SDPA's outputs and log-sum-exp, then a pass
  // over key tiles) once set_device_tiled_prefill is on; else the two-pass kernel where it serves.
  if (!device_tiled_prefill() && config_.lined.decay == 1.0 && (!observed || H * rows * cols * 4 <= kMaxPooledBytes)) {
    // The two-pass kernel: nothing of [n, T] in global memory.
    at::Tensor importance = at::zeros({KV, T}, floats), h2o = at::zeros({H, T}, floats);
    const at::Tensor q = in.q.contiguous();
    at::Tensor out = at::empty({n, H * head_dim_}, q.options());
    at::Tensor pooled;
    cuda::PrefillArgs a;
    a.kv = kv_view(in, layer_);
    a.q = q.const_data_ptr();
    a.out = out.mutable_data_ptr();
    a.heads = H;
    a.queries = n;
    a.scale = static_cast<float>(in.scale);
    a.acc = cuda::Accumulators{importance.mutable_data_ptr<float>(), h2o.mutable_data_ptr<float>(), T, 1.0f};
    if (observed) {
      pooled = at::empty({H, rows, cols}, floats);
      a.pooled = pooled.mutable_data_ptr<float>();
      a.pool = pool;
    }
    const at::Tensor workspace = at::empty({static_cast<std::int64_t>(cuda::prefill_workspace_bytes(a))}, q.options().dtype(at::kByte));
    std::string e = cuda::prefill_attention(a, workspace.mutable_data_ptr(), static_cast<std::size_t>(workspace.numel()),
                                            current_stream());
    if (e.empty()) e = state_->load_prefill(importance.const_data_ptr<float>(), h2o.const_data_ptr<float>(), T, a.kv, current_stream());
    if (!e.empty()) fail("luka layer " + std::to_string(layer_), e);
    if (observed) {
      const at::Tensor host = pooled.cpu();
      for (std::int64_t g = 0; g < KV; ++g) prefill_observer_(layer_, 0, g * G, host.narrow(0, g * G, G).contiguous());
    }
    return out;
  }
  // The tiled form, a decay, or a pooled map too large to hold at once: the CPU core's prefill on
  // ATen, on the GPU (no sparse prefill here).
  at::Tensor importance = at::zeros({KV, T}, floats), h2o = at::zeros({H, T}, floats);
  const at::Tensor out =
      aten_prefill(in, PrefillMask{}, config_.lined.decay, layer_, prefill_observer_, prefill_pool_level_, importance, h2o);
  if (const std::string e = state_->load_prefill(importance.const_data_ptr<float>(), h2o.const_data_ptr<float>(), T,
                                                 kv_view(in, layer_), current_stream());
      !e.empty())
    fail("luka layer " + std::to_string(layer_), e);
  return out;
}

std::vector<std::shared_ptr<LukaLayer>> install_luka_cuda(Decoder& decoder, const LukaConfig& config) {
  const ModelConfig& c = decoder.model().config();
  if (!decoder.model().on_cuda()) fail("luka config", "install_luka_cuda needs a model loaded with cuda");
  if (static_cast<std::int64_t>(config.layers.size()) != c.num_layers)
    fail("luka config", "has " + std::to_string(config.layers.size()) + " layers, the model " + std::to_string(c.num_layers));
  std::vector<std::shared_ptr<LukaLayer>> layers;
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    auto a = std::make_shared<CudaLukaAttention>(static_cast<int>(i), config.layers[static_cast<std::size_t>(i)],
                                                 c.num_heads, c.num_kv_heads, c.head_dim);
    decoder.set_attention(static_cast<int>(i), a);
    layers.push_back(std::move(a));
  }
  return layers;
}

}  // namespace luka
