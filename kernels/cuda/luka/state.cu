#include "kernels/cuda/luka/state.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "kernels/cuda/common.cuh"

namespace luka::cuda {
namespace {

std::string api(cudaError_t e, const char* what) {
  return e == cudaSuccess ? std::string() : std::string(what) + ": " + cudaGetErrorString(e);
}

std::size_t elem_size(ElemType t) { return t == ElemType::kF32 ? 4 : 2; }

std::int64_t grown(std::int64_t need, std::int64_t have) { return std::max({need, 2 * have, std::int64_t{64}}); }

// Replaces *ptr ([rows, old_ld] elements of `size` bytes) by a zeroed [rows, new_ld] buffer
// holding the old rows, stream-ordered.
template <class P>
std::string regrow(P** ptr, std::int64_t rows, std::int64_t old_ld, std::int64_t new_ld, std::size_t size, cudaStream_t s) {
  void* fresh = nullptr;
  const std::size_t bytes = static_cast<std::size_t>(rows * new_ld) * size;
  if (std::string e = api(cudaMallocAsync(&fresh, bytes, s), "cudaMallocAsync"); !e.empty()) return e;
  if (std::string e = api(cudaMemsetAsync(fresh, 0, bytes, s), "cudaMemsetAsync"); !e.empty()) return e;
  if (*ptr && old_ld > 0) {
    if (std::string e = api(cudaMemcpy2DAsync(fresh, new_ld * size, *ptr, old_ld * size, old_ld * size, rows,
                                              cudaMemcpyDeviceToDevice, s),
                            "cudaMemcpy2DAsync");
        !e.empty())
      return e;
    if (std::string e = api(cudaFreeAsync(*ptr, s), "cudaFreeAsync"); !e.empty()) return e;
  }
  *ptr = static_cast<P*>(fresh);
  return {};
}

// page_start[first + 1 + i] = start + (i + 1) · size for the i-th new page.
__global__ void append_starts_kernel(int* page_start, int first, int count, int start, int size) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) page_start[first + 1 + i] = start + (i + 1) * size;
}

}  // namespace

LayerState::LayerState(int layer, std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim, ElemType summary_type)
    : layer_(layer), H_(heads), KV_(kv_heads), D_(head_dim), summary_type_(summary_type) {}

LayerState::~LayerState() {
  for (void* p : {static_cast<void*>(importance_), static_cast<void*>(h2o_), static_cast<void*>(spread_),
                  static_cast<void*>(sum_bias_), sum_k_, sum_v_, static_cast<void*>(page_start_), workspace_})
    if (p) cudaFree(p);
}

rules::LinedRule LayerState::lined_rule() const { return to_rule(params_.lined); }

rules::PageRule LayerState::page_rule() const { return to_rule(params_.clustered); }

std::int64_t LayerState::window(std::int64_t T) const { return rules::lined_window(lined_rule(), T); }

std::int64_t LayerState::heavy_count(std::int64_t T) const { return rules::lined_cover(lined_rule(), T).heavy; }

ClusteredDecodeArgs LayerState::clustered_args(const DecodeCommon& c) const {
  ClusteredDecodeArgs a;
  a.c = c;
  a.s = Summaries{summary_type_, sum_k_, sum_v_, sum_bias_, pcap_, static_cast<std::int64_t>(pages_.size()), page_start_,
                  paged_end(), spread_, cap_};
  const ClusteredConfig& k = params_.clustered;
  a.rule = k.rule;
  a.math = k.math;
  a.share = k.selection;
  a.epsilon = k.epsilon;
  a.top_k = static_cast<int>(k.top_k);
  a.top_frac = k.top_frac;
  a.top_p = k.top_p;
  a.always_refine_first = static_cast<int>(k.always_refine_first);
  return a;
}

DecodeCommon LayerState::sizes(std::int64_t tokens) const {
  DecodeCommon c;
  c.heads = H_;
  c.kv.kv_heads = KV_;
  c.kv.head_dim = D_;
  c.kv.tokens = tokens;
  c.splits = params_.splits;
  return c;
}

std::int64_t LayerState::max_refined(std::int64_t T) const { return clustered_max_refined(clustered_args(sizes(T))); }

std::string LayerState::grow_tokens(std::int64_t tokens, void* stream) {
  if (tokens <= cap_) return {};
  const auto s = static_cast<cudaStream_t>(stream);
  const std::int64_t n = grown(tokens, cap_);
  if (std::string e = regrow(&importance_, KV_, cap_, n, 4, s); !e.empty()) return e;
  if (std::string e = regrow(&h2o_, H_, cap_, n, 4, s); !e.empty()) return e;
  if (std::string e = regrow(&spread_, KV_, cap_, n, 4, s); !e.empty()) return e;
  cap_ = n;
  return {};
}

std::string LayerState::grow_pages(std::int64_t pages, void* stream) {
  if (pages <= pcap_ && page_start_) return {};
  const auto s = static_cast<cudaStream_t>(stream);
  const std::int64_t n = grown(pages, pcap_);
  const std::size_t es = elem_size(summary_type_);
  // Summaries [KV, pcap, D]: rows are (g), a row holds pcap·D elements.
  if (std::string e = regrow(&sum_k_, KV_, pcap_ * D_, n * D_, es, s); !e.empty()) return e;
  if (std::string e = regrow(&sum_v_, KV_, pcap_ * D_, n * D_, es, s); !e.empty()) return e;
  if (std::string e = regrow(&sum_bias_, KV_, pcap_, n, 4, s); !e.empty()) return e;
  if (std::string e = regrow(&page_start_, 1, pcap_ ? pcap_ + 1 : 0, n + 1, 4, s); !e.empty()) return e;
  pcap_ = n;
  return {};
}

std::string LayerState::grow_workspace(std::size_t bytes, void* stream) {
  if (bytes <= workspace_bytes_) return {};
  const auto s = static_cast<cudaStream_t>(stream);
  const std::size_t n = std::max(bytes, workspace_bytes_ * 2);
  if (workspace_)
    if (std::string e = api(cudaFreeAsync(workspace_, s), "cudaFreeAsync"); !e.empty()) return e;
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  if (std::string e = api(cudaMallocAsync(&workspace_, n, s), "cudaMallocAsync"); !e.empty()) return e;
  workspace_bytes_ = n;
  return {};
}

std::string LayerState::reserve(std::int64_t tokens, void* stream) {
  if (std::string e = grow_tokens(tokens, stream); !e.empty()) return e;
  const std::int64_t pages = tokens / std::max<std::int64_t>(params_.clustered.page_size, 1) + 1;
  if (std::string e = grow_pages(pages, stream); !e.empty()) return e;
  // The largest workspace a step of any mode with these parameters needs up to `tokens`.
  const DecodeCommon c = sizes(tokens);
  LinedDecodeArgs lined;
  lined.c = c;
  lined.share = params_.lined.selection;
  return grow_workspace(std::max({luka_dense_workspace_bytes(c), lined_workspace_bound(lined, tokens),
                                  clustered_workspace_bound(clustered_args(c), tokens, pages)}),
                        stream);
}

std::string LayerState::load_prefill(const float* importance, const float* h2o, std::int64_t ld, const KvView& kv, void* stream) {
  const std::int64_t T = kv.tokens;
  if (kv.kv_heads != KV_ || kv.head_dim != D_) return "cache shape does not match the layer";
  if (ld < T) return "accumulators shorter than the context";
  const auto s = static_cast<cudaStream_t>(stream);
  if (std::string e = grow_tokens(T, stream); !e.empty()) return e;
  for (auto [dst, src, rows] : {std::tuple{importance_, importance, KV_}, std::tuple{h2o_, h2o, H_}}) {
    if (std::string e = api(cudaMemsetAsync(dst, 0, static_cast<std::size_t>(rows * cap_) * 4, s), "cudaMemsetAsync"); !e.empty())
      return e;
    if (std::string e = api(cudaMemcpy2DAsync(dst, cap_ * 4, src, ld * 4, T * 4, rows, cudaMemcpyDeviceToDevice, s),
                            "cudaMemcpy2DAsync");
        !e.empty())
      return e;
  }
  if (spread_)
    if (std::string e = api(cudaMemsetAsync(spread_, 0, static_cast<std::size_t>(KV_ * cap_) * 4, s), "cudaMemsetAsync"); !e.empty())
      return e;
  pages_.clear();
  clock_ = rules::PageClock{params_.clustered.page_counter_start, 0};
  step_ = 0;
  tokens_ = T;
  return create_pages(kv, 0, stream);
}

// The pages rules::pages_due makes due after a forward (decode_step 0: the prefill).
std::string LayerState::create_pages(const KvView& kv, std::int64_t decode_step, void* stream) {
  const ClusteredConfig& p = params_.clustered;
  const std::int64_t T = kv.tokens, E = paged_end(), size = p.page_size, P = static_cast<std::int64_t>(pages_.size());
  const std::int64_t count = rules::pages_due(page_rule(), &clock_, P, E, T, decode_step);
  if (count < 1) return {};
  if (std::string e = grow_pages(P + count, stream); !e.empty()) return e;
  const auto s = static_cast<cudaStream_t>(stream);
  append_starts_kernel<<<static_cast<unsigned>((count + 127) / 128), 128, 0, s>>>(page_start_, static_cast<int>(P),
                                                                                   static_cast<int>(count), static_cast<int>(E),
                                                                                   static_cast<int>(size));
  CompressArgs c;
  c.kv = kv;
  c.importance = importance_;
  c.importance_ld = cap_;
  c.page_start = page_start_;
  c.first_page = P;
  c.count = count;
  c.max_page_tokens = size;
  c.compressor = p.compressor;
  c.tau = static_cast<float>(p.tau);
  c.seed = p.seed;
  c.layer = layer_;
  c.zero_v = p.zero_v;
  c.bias = p.bias;
  c.summary_type = summary_type_;
  c.sum_k = sum_k_;
  c.sum_v = sum_v_;
  c.sum_bias = sum_bias_;
  c.capacity = pcap_;
  c.spread = spread_;
  c.spread_ld = cap_;
  if (std::string e = compress_pages(c, stream); !e.empty()) return e;
  for (std::int64_t i = 0; i < count; ++i) pages_.emplace_back(E + i * size, E + (i + 1) * size);
  return {};
}

std::string LayerState::decode(const void* q, void* out, const KvView& kv, float scale, void* stream, const StepOutputs& o) {
  const std::int64_t T = kv.tokens;
  if (kv.kv_heads != KV_ || kv.head_dim != D_) return "cache shape does not match the layer";
  if (T != tokens_ + 1)
    return "state out of step with the cache (state has " + std::to_string(tokens_) + " tokens, cache " + std::to_string(T) + ")";
  if (std::string e = grow_tokens(T, stream); !e.empty()) return e;
  DecodeCommon c;
  c.kv = kv;
  c.q = q;
  c.out = out;
  c.heads = H_;
  c.scale = scale;
  c.acc = Accumulators{importance_, h2o_, cap_, static_cast<float>(params_.lined.decay)};
  c.effective = o.effective;
  c.splits = params_.splits;
  std::string err;
  if (params_.mode == AttentionMode::kDense) {
    if (!(err = grow_workspace(luka_dense_workspace_bytes(c), stream)).empty()) return err;
    err = luka_dense_decode(c, workspace_, workspace_bytes_, stream);
  } else if (params_.mode == AttentionMode::kLined) {
    LinedDecodeArgs a;
    a.c = c;
    a.window = window(T);
    a.heavy = heavy_count(T);
    a.share = params_.lined.selection;
    a.heavy_out = o.heavy;
    if (!(err = grow_workspace(lined_workspace_bytes(a), stream)).empty()) return err;
    err = lined_decode(a, workspace_, workspace_bytes_, stream);
  } else {
    ClusteredDecodeArgs a = clustered_args(c);
    a.summary_mass = o.summary_mass;
    a.refined = o.refined;
    a.refined_count = o.refined_count;
    if (!(err = grow_workspace(clustered_workspace_bytes(a), stream)).empty()) return err;
    err = clustered_decode(a, workspace_, workspace_bytes_, stream);
  }
  if (!err.empty()) return "luka layer " + std::to_string(layer_) + ": " + err;
  ++step_;
  tokens_ = T;
  return create_pages(kv, step_, stream);
}

}  // namespace luka::cuda
