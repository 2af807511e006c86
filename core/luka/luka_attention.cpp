#include "core/luka/luka_attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include <ATen/Parallel.h>

#include "core/model/decoder.h"
#include "core/util/error.h"
#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/vec.h"

namespace luka {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Row accessors over a [KV, T, D] cache view in fp32 or bf16.
template <typename T>
struct Rows {
  const T* base;
  std::int64_t head_stride, row_stride, d;
  const T* row(std::int64_t head, std::int64_t t) const { return base + head * head_stride + t * row_stride; }
};

using cpu::axpy;
using cpu::dot;

// In-place softmax over `n` logits (−inf allowed); returns nothing, p sums to 1.
void softmax_inplace(float* x, std::int64_t n) {
  float m = kNegInf;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] = x[i] == kNegInf ? 0.0f : std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Indices of the `m` largest scores (ties: lower index first), in ascending index order.
std::vector<std::int64_t> top_indices(const float* score, std::int64_t n, std::int64_t m) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  m = std::min(m, n);
  if (m <= 0) return {};
  const auto better = [&](std::int64_t a, std::int64_t b) { return score[a] != score[b] ? score[a] > score[b] : a < b; };
  std::nth_element(idx.begin(), idx.begin() + (m - 1), idx.end(), better);
  idx.resize(static_cast<std::size_t>(m));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// The `m` largest of `score[0..n)` by value threshold (one nth_element over a copy, then a scan):
// the same set as top_indices, ties to the lower index, at a fraction of its cost for long contexts.
std::vector<std::int64_t> top_by_threshold(const float* score, std::int64_t n, std::int64_t m) {
  if (m <= 0 || n <= 0) return {};
  std::vector<std::int64_t> out;
  if (m >= n) {
    out.resize(static_cast<std::size_t>(n));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  std::vector<float> copy(score, score + n);
  std::nth_element(copy.begin(), copy.begin() + (m - 1), copy.end(), std::greater<float>());
  const float v = copy[static_cast<std::size_t>(m - 1)];
  std::int64_t above = 0;
  for (std::int64_t t = 0; t < n; ++t) above += score[t] > v;
  std::int64_t ties_left = m - above;
  out.reserve(static_cast<std::size_t>(m));
  for (std::int64_t t = 0; t < n; ++t) {
    if (score[t] > v) {
      out.push_back(t);
    } else if (score[t] == v && ties_left > 0) {
      out.push_back(t);
      --ties_left;
    }
  }
  return out;
}

// Units that share a selection: per head (each head alone), per KV group, or the whole layer.
std::vector<std::vector<std::int64_t>> selection_units(Selection s, std::int64_t heads, std::int64_t group) {
  std::vector<std::vector<std::int64_t>> units;
  if (s == Selection::kPerLayer) {
    units.emplace_back(static_cast<std::size_t>(heads));
    std::iota(units.back().begin(), units.back().end(), 0);
  } else if (s == Selection::kPerGroup) {
    for (std::int64_t g = 0; g < heads / group; ++g) {
      units.emplace_back();
      for (std::int64_t j = 0; j < group; ++j) units.back().push_back(g * group + j);
    }
  } else {
    for (std::int64_t h = 0; h < heads; ++h) units.push_back({h});
  }
  return units;
}

// Pages to refine from per-page scores (α, or the max of α over the unit's heads).
}  // namespace

std::vector<std::int64_t> select_pages(const ClusteredConfig& c, const std::vector<float>& score) {
  const std::int64_t P = static_cast<std::int64_t>(score.size());
  std::vector<std::uint8_t> pick(static_cast<std::size_t>(P), 0);
  switch (c.rule) {
    case RefineRule::kThreshold:
      for (std::int64_t p = 0; p < P; ++p) pick[p] = score[p] > static_cast<float>(c.epsilon);  // α is fp32
      break;
    case RefineRule::kTopK:
      for (auto p : top_indices(score.data(), P, c.top_k)) pick[p] = 1;
      break;
    case RefineRule::kTopFrac:
      for (auto p : top_indices(score.data(), P, static_cast<std::int64_t>(std::ceil(c.top_frac * P - 1e-9)))) pick[p] = 1;
      break;
    case RefineRule::kTopP: {
      // Pages in decreasing score until their cumulative score reaches p.
      std::vector<std::int64_t> sorted(static_cast<std::size_t>(P));
      std::iota(sorted.begin(), sorted.end(), 0);
      std::sort(sorted.begin(), sorted.end(), [&](auto a, auto b) { return score[a] != score[b] ? score[a] > score[b] : a < b; });
      double cum = 0;
      for (auto p : sorted) {
        if (cum >= c.top_p) break;
        pick[p] = 1;
        cum += score[p];
      }
      break;
    }
  }
  for (std::int64_t p = 0; p < std::min(P, c.always_refine_first); ++p) pick[p] = 1;
  std::vector<std::int64_t> out;
  for (std::int64_t p = 0; p < P; ++p)
    if (pick[p]) out.push_back(p);
  return out;
}

namespace {
std::int64_t grow(std::int64_t need, std::int64_t have) { return std::max({need, 2 * have, std::int64_t{64}}); }
}  // namespace

LukaAttention::LukaAttention(int layer, LayerConfig config) : layer_(layer), config_(std::move(config)) {
  validate(config_, layer_);
}

void LukaAttention::set_config(const LayerConfig& config) {
  validate(config, layer_);
  config_ = config;
}

void LukaAttention::reset() {
  step_ = 0;
  tokens_ = 0;
  pages_.clear();
  last_ = LukaStep{};
  if (importance_.defined()) {
    importance_.zero_();
    h2o_.zero_();
    spread_.zero_();
  }
}

void LukaAttention::ensure_capacity(std::int64_t tokens, std::int64_t heads, std::int64_t kv_heads) {
  if (!importance_.defined() || importance_.size(0) != kv_heads || h2o_.size(0) != heads) {
    importance_ = at::zeros({kv_heads, 0}, at::kFloat);
    h2o_ = at::zeros({heads, 0}, at::kFloat);
    spread_ = at::zeros({kv_heads, 0}, at::kFloat);
  }
  const std::int64_t cap = importance_.size(1);
  if (tokens <= cap) return;
  const std::int64_t n = grow(tokens, cap);
  const auto widen = [&](const at::Tensor& t) {
    at::Tensor w = at::zeros({t.size(0), n}, at::kFloat);
    if (cap > 0) w.narrow(1, 0, cap).copy_(t);
    return w;
  };
  importance_ = widen(importance_);
  h2o_ = widen(h2o_);
  spread_ = widen(spread_);
}

at::Tensor LukaAttention::importance() const {
  return importance_.defined() ? importance_.narrow(1, 0, tokens_) : at::Tensor();
}
at::Tensor LukaAttention::h2o_score() const { return h2o_.defined() ? h2o_.narrow(1, 0, tokens_) : at::Tensor(); }
at::Tensor LukaAttention::spread() const { return spread_.defined() ? spread_.narrow(1, 0, paged_end()) : at::Tensor(); }
at::Tensor LukaAttention::summary_keys() const {
  return sum_k_.defined() ? sum_k_.narrow(1, 0, static_cast<std::int64_t>(pages_.size())) : at::Tensor();
}
at::Tensor LukaAttention::summary_values() const {
  return sum_v_.defined() ? sum_v_.narrow(1, 0, static_cast<std::int64_t>(pages_.size())) : at::Tensor();
}
at::Tensor LukaAttention::summary_bias() const {
  return sum_bias_.defined() ? sum_bias_.narrow(1, 0, static_cast<std::int64_t>(pages_.size())) : at::Tensor();
}

at::Tensor LukaAttention::forward(const AttentionInputs& in) {
  const std::int64_t n = in.q.size(1), T = in.k.size(1);
  if (in.q_pos0 != tokens_ || in.q_pos0 + n != T)
    fail("luka layer " + std::to_string(layer_),
         "attention state out of step with the cache (state has " + std::to_string(tokens_) + " tokens, cache " +
             std::to_string(T) + " with " + std::to_string(n) + " new)");
  ensure_capacity(T, in.q.size(0), in.k.size(0));
  c10::InferenceMode guard;
  at::Tensor out = n == 1 && T > 1 ? decode(in) : prefill(in);
  tokens_ = T;
  if (n > 1 || T == 1) create_pages(in);
  return out;
}

// Exact causal attention over the new queries (lined sparse_prefill: keys < 32 or inside the
// window), in fp32, chunked over queries; every query's probabilities feed the accumulators.
at::Tensor LukaAttention::prefill(const AttentionInputs& in) {
  const std::int64_t H = in.q.size(0), n = in.q.size(1), D = in.q.size(2), KV = in.k.size(0), T = in.k.size(1);
  const std::int64_t G = in.group_size;
  const bool sparse = config_.mode == AttentionMode::kLined && config_.lined.sparse_prefill;
  const at::Tensor qf = in.q.to(at::kFloat);
  const at::Tensor kf = in.k.to(at::kFloat), vf = in.v.to(at::kFloat);
  at::Tensor out = at::empty({H, n, D}, at::kFloat);
  const double decay = config_.lined.decay;
  const at::Tensor key_pos = at::arange(T, at::kLong).view({1, T});
  constexpr std::int64_t kChunk = 256;
  for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::int64_t m = std::min(kChunk, n - i0);
    const at::Tensor query_pos = at::arange(in.q_pos0 + i0, in.q_pos0 + i0 + m, at::kLong).view({m, 1});
    at::Tensor hidden = key_pos.gt(query_pos);  // [m, T]
    if (sparse) {
      const std::int64_t W = config_.lined.window_frac > 0
                                 ? static_cast<std::int64_t>(std::ceil(config_.lined.window_frac * T))
                                 : config_.lined.window;
      hidden = hidden.logical_or(key_pos.ge(32).logical_and(key_pos.le(query_pos - W)));
    }
    for (std::int64_t g = 0; g < KV; ++g) {
      const at::Tensor qg = qf.narrow(0, g * G, G).narrow(1, i0, m);                    // [G, m, D]
      at::Tensor scores = at::matmul(qg, kf[g].transpose(0, 1)).mul_(in.scale);         // [G, m, T]
      scores.masked_fill_(hidden.unsqueeze(0), kNegInf);
      const at::Tensor probs = at::softmax(scores, -1);
      out.narrow(0, g * G, G).narrow(1, i0, m).copy_(at::matmul(probs, vf[g]));
      if (prefill_observer_) prefill_observer_(layer_, in.q_pos0 + i0, g * G, probs);
      importance_[g].narrow(0, 0, T).add_(probs.sum(at::IntArrayRef{0, 1}));
      for (std::int64_t j = 0; j < G; ++j) {
        at::Tensor h2o = h2o_[g * G + j].narrow(0, 0, T);
        if (decay == 1.0) {
          h2o.add_(probs[j].sum(0));
        } else {  // sequential decay over the queries of the chunk
          for (std::int64_t i = 0; i < m; ++i) h2o.mul_(decay).add_(probs[j][i]);
        }
      }
    }
  }
  return out.transpose(0, 1).reshape({n, H * D}).to(in.q.scalar_type());
}

void LukaAttention::accumulate(const at::Tensor& eff, std::int64_t group) {
  const std::int64_t H = eff.size(0), T = eff.size(1);
  at::Tensor h2o = h2o_.narrow(1, 0, T);
  if (config_.lined.decay != 1.0) h2o.mul_(config_.lined.decay);
  h2o.add_(eff);
  importance_.narrow(1, 0, T).add_(eff.view({H / group, group, T}).sum(1));
}

at::Tensor LukaAttention::decode(const AttentionInputs& in) {
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  ++step_;
  const auto t0 = std::chrono::steady_clock::now();
  const at::Tensor qf = in.q.to(at::kFloat).contiguous().view({H, D});
  const float* q = qf.const_data_ptr<float>();
  const float scale = static_cast<float>(in.scale);
  at::Tensor eff = at::zeros({H, T}, at::kFloat);
  at::Tensor out = at::zeros({H, D}, at::kFloat);
  float* e = eff.mutable_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  last_ = LukaStep{};
  last_.mode = config_.mode;
  last_.step = step_;
  last_.tokens = T;
  last_.paged_end = paged_end();

  const auto run = [&](auto tag) {
    using Elem = decltype(tag);
    const Rows<Elem> K{in.k.const_data_ptr<Elem>(), in.k.stride(0), in.k.stride(1), D};
    const Rows<Elem> V{in.v.const_data_ptr<Elem>(), in.v.stride(0), in.v.stride(1), D};

    if (config_.mode == AttentionMode::kDense) {
      if (cpu::decode_attention_available(in.q.scalar_type())) {
        at::Tensor probs;
        out.copy_(cpu::dense_decode_attention(in.q, in.k, in.v, in.scale, &probs).view({H, D}));
        eff.copy_(probs);
        return;
      }
      at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
        for (std::int64_t h = h0; h < h1; ++h) {
          float* p = e + h * T;
          for (std::int64_t t = 0; t < T; ++t) p[t] = scale * dot(q + h * D, K.row(h / G, t), D);
          softmax_inplace(p, T);
          for (std::int64_t t = 0; t < T; ++t) axpy(p[t], V.row(h / G, t), o + h * D, D);
        }
      });
      return;
    }

    if (config_.mode == AttentionMode::kLined) {
      const LinedConfig& c = config_.lined;
      const std::int64_t W = std::min<std::int64_t>(
          T, c.window_frac > 0 ? static_cast<std::int64_t>(std::ceil(c.window_frac * T)) : c.window);
      const std::int64_t outside = T - W;
      last_.window_start = outside;
      const std::int64_t m = std::min<std::int64_t>(outside, static_cast<std::int64_t>(std::ceil(c.rho * T - 1e-9)));
      last_.heavy.assign(static_cast<std::size_t>(H), {});
      const float* h2o = h2o_.const_data_ptr<float>();
      const std::int64_t cap = h2o_.size(1);
      const auto units = selection_units(c.selection, H, G);
      at::parallel_for(0, static_cast<std::int64_t>(units.size()), 1, [&](std::int64_t u0, std::int64_t u1) {
        for (std::int64_t u = u0; u < u1; ++u) {
          const auto& unit = units[static_cast<std::size_t>(u)];
          std::vector<std::int64_t> heavy;
          if (unit.size() == 1) {
            heavy = top_by_threshold(h2o + unit[0] * cap, outside, m);
          } else {
            std::vector<float> score(static_cast<std::size_t>(outside), 0.0f);
            for (const std::int64_t h : unit)
              for (std::int64_t t = 0; t < outside; ++t) score[t] += h2o[h * cap + t];
            heavy = top_by_threshold(score.data(), outside, m);
          }
          for (const std::int64_t h : unit) last_.heavy[h] = heavy;
        }
      });
      at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
        for (std::int64_t h = h0; h < h1; ++h) {
          std::vector<std::int64_t> cover = last_.heavy[h];
          for (std::int64_t t = outside; t < T; ++t) cover.push_back(t);
          std::vector<float> p(cover.size());
          for (std::size_t i = 0; i < cover.size(); ++i) p[i] = scale * dot(q + h * D, K.row(h / G, cover[i]), D);
          softmax_inplace(p.data(), static_cast<std::int64_t>(p.size()));
          for (std::size_t i = 0; i < cover.size(); ++i) {
            e[h * T + cover[i]] = p[i];
            axpy(p[i], V.row(h / G, cover[i]), o + h * D, D);
          }
        }
      });
      return;
    }

    // Clustered: cover = every page's summary ∪ the raw tokens past the pages.
    const ClusteredConfig& c = config_.clustered;
    const std::int64_t P = static_cast<std::int64_t>(pages_.size()), E = paged_end(), R = T - E;
    const float* sk = P ? sum_k_.const_data_ptr<float>() : nullptr;
    const float* sv = P ? sum_v_.const_data_ptr<float>() : nullptr;
    const float* sb = P ? sum_bias_.const_data_ptr<float>() : nullptr;
    const std::int64_t pcap = P ? sum_k_.size(1) : 0;
    const float* spread = spread_.const_data_ptr<float>();
    const std::int64_t scap = spread_.size(1);
    at::Tensor alpha_t = at::empty({H, P + R}, at::kFloat);  // α over [summaries, raw tail]
    float* alpha = alpha_t.mutable_data_ptr<float>();
    at::Tensor child_t = at::empty({H, E}, at::kFloat);      // children logits, filled on demand
    float* child = child_t.mutable_data_ptr<float>();
    const auto page_logit = [&](std::int64_t h, std::int64_t p) {
      const std::int64_t g = h / G;
      if (oracle_) {  // log-sum-exp of the children's logits
        float mx = kNegInf;
        for (std::int64_t t = pages_[p].start; t < pages_[p].end; ++t) mx = std::max(mx, scale * dot(q + h * D, K.row(g, t), D));
        double s = 0;
        for (std::int64_t t = pages_[p].start; t < pages_[p].end; ++t) s += std::exp(scale * dot(q + h * D, K.row(g, t), D) - mx);
        return mx + static_cast<float>(std::log(s));
      }
      return scale * dot(q + h * D, sk + (g * pcap + p) * D, D) + sb[g * pcap + p];
    };
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) {
        float* a = alpha + h * (P + R);
        for (std::int64_t p = 0; p < P; ++p) a[p] = page_logit(h, p);
        for (std::int64_t t = 0; t < R; ++t) a[P + t] = scale * dot(q + h * D, K.row(h / G, E + t), D);
        if (c.math == RefineMath::kMassPreserving) softmax_inplace(a, P + R);
      }
    });
    // Exact refinement selects on α too: softmax a copy.
    at::Tensor sel_alpha = c.math == RefineMath::kExact ? at::softmax(alpha_t, -1) : alpha_t;
    const float* sa = sel_alpha.const_data_ptr<float>();
    last_.summary_mass = sel_alpha.narrow(1, 0, P).clone();
    last_.refined.assign(static_cast<std::size_t>(H), {});
    for (const auto& unit : selection_units(c.selection, H, G)) {
      std::vector<float> score(static_cast<std::size_t>(P), 0.0f);
      for (const std::int64_t h : unit)
        for (std::int64_t p = 0; p < P; ++p) score[p] = std::max(score[p], sa[h * (P + R) + p]);
      const auto refined = select_pages(c, score);
      for (const std::int64_t h : unit) last_.refined[h] = refined;
    }
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) {
        const std::int64_t g = h / G;
        float* a = alpha + h * (P + R);
        float* eh = e + h * T;
        float* oh = o + h * D;
        const auto& refined = last_.refined[h];
        std::vector<std::uint8_t> is_refined(static_cast<std::size_t>(P), 0);
        for (auto p : refined) is_refined[p] = 1;
        for (auto p : refined)
          for (std::int64_t t = pages_[p].start; t < pages_[p].end; ++t) child[h * E + t] = scale * dot(q + h * D, K.row(g, t), D);
        if (c.math == RefineMath::kMassPreserving) {
          for (std::int64_t p = 0; p < P; ++p) {
            const Page& pg = pages_[p];
            if (is_refined[p]) {  // children share the page's α by a local softmax
              float* ch = child + h * E + pg.start;
              softmax_inplace(ch, pg.end - pg.start);
              for (std::int64_t t = pg.start; t < pg.end; ++t) {
                eh[t] = a[p] * ch[t - pg.start];
                axpy(eh[t], V.row(g, t), oh, D);
              }
            } else {
              axpy(a[p], sv + (g * pcap + p) * D, oh, D);
              for (std::int64_t t = pg.start; t < pg.end; ++t) eh[t] = a[p] * spread[g * scap + t];
            }
          }
          for (std::int64_t t = 0; t < R; ++t) {
            eh[E + t] = a[P + t];
            axpy(a[P + t], V.row(g, E + t), oh, D);
          }
        } else {  // exact: one softmax over unrefined summaries, refined children and raw tokens
          float mx = kNegInf;
          for (std::int64_t p = 0; p < P; ++p)
            if (!is_refined[p]) mx = std::max(mx, a[p]);
          for (auto p : refined)
            for (std::int64_t t = pages_[p].start; t < pages_[p].end; ++t) mx = std::max(mx, child[h * E + t]);
          for (std::int64_t t = 0; t < R; ++t) mx = std::max(mx, a[P + t]);
          double z = 0;
          for (std::int64_t p = 0; p < P; ++p)
            if (!is_refined[p]) z += std::exp(a[p] - mx);
          for (auto p : refined)
            for (std::int64_t t = pages_[p].start; t < pages_[p].end; ++t) z += std::exp(child[h * E + t] - mx);
          for (std::int64_t t = 0; t < R; ++t) z += std::exp(a[P + t] - mx);
          const float inv = static_cast<float>(1.0 / z);
          for (std::int64_t p = 0; p < P; ++p) {
            const Page& pg = pages_[p];
            if (is_refined[p]) {
              for (std::int64_t t = pg.start; t < pg.end; ++t) {
                eh[t] = std::exp(child[h * E + t] - mx) * inv;
                axpy(eh[t], V.row(g, t), oh, D);
              }
            } else {
              const float w = std::exp(a[p] - mx) * inv;
              axpy(w, sv + (g * pcap + p) * D, oh, D);
              for (std::int64_t t = pg.start; t < pg.end; ++t) eh[t] = w * spread[g * scap + t];
            }
          }
          for (std::int64_t t = 0; t < R; ++t) {
            eh[E + t] = std::exp(a[P + t] - mx) * inv;
            axpy(eh[E + t], V.row(g, E + t), oh, D);
          }
        }
      }
    });
  };
  if (in.k.scalar_type() == at::kFloat) {
    run(float{});
  } else if (in.k.scalar_type() == at::kBFloat16) {
    run(c10::BFloat16{});
  } else {
    fail("luka layer " + std::to_string(layer_), std::string("unsupported cache dtype ") + c10::toString(in.k.scalar_type()));
  }
  last_.effective = eff;
  last_.cover_size.assign(static_cast<std::size_t>(H), T);
  if (last_.mode == AttentionMode::kLined) {
    for (std::int64_t h = 0; h < H; ++h)
      last_.cover_size[h] = static_cast<std::int64_t>(last_.heavy[h].size()) +
                            std::min<std::int64_t>(T, config_.lined.window_frac > 0
                                                          ? static_cast<std::int64_t>(std::ceil(config_.lined.window_frac * T))
                                                          : config_.lined.window);
  } else if (last_.mode == AttentionMode::kClustered) {
    const std::int64_t P = static_cast<std::int64_t>(pages_.size());
    for (std::int64_t h = 0; h < H; ++h) {
      std::int64_t children = 0;
      for (const std::int64_t p : last_.refined[h]) children += pages_[p].end - pages_[p].start;
      last_.cover_size[h] = P - static_cast<std::int64_t>(last_.refined[h].size()) + children + (T - last_.paged_end);
    }
  }
  if (config_.dense_shadow) shadow(in, out);
  accumulate(eff, G);
  last_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tokens_ = T;
  if (step_ % config_.clustered.interval == 0) create_pages(in);
  return out.view({1, H * D}).to(in.q.scalar_type());
}

// Dense attention on the same inputs, compared with what the mode produced.
void LukaAttention::shadow(const AttentionInputs& in, const at::Tensor& out) {
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  const at::Tensor q = in.q.to(at::kDouble).view({H, 1, D});
  const at::Tensor k = in.k.to(at::kDouble).repeat_interleave(G, 0), v = in.v.to(at::kDouble).repeat_interleave(G, 0);
  const at::Tensor p = at::softmax(at::matmul(q, k.transpose(1, 2)).squeeze(1) * in.scale, -1);  // [H, T]
  const at::Tensor o_dense = at::matmul(p.unsqueeze(1), v).squeeze(1);                          // [H, D]
  const at::Tensor eff = last_.effective.to(at::kDouble);
  // Exactly resolved tokens: everything for dense, the cover for lined, raw tail and refined
  // children for clustered.
  at::Tensor exact = at::ones({H, T}, at::kBool);
  if (last_.mode == AttentionMode::kLined) {
    exact = eff.gt(0);
  } else if (last_.mode == AttentionMode::kClustered) {
    exact = at::zeros({H, T}, at::kBool);
    exact.narrow(1, last_.paged_end, T - last_.paged_end).fill_(true);
    for (std::int64_t h = 0; h < H; ++h)
      for (const std::int64_t page : last_.refined[h])
        exact[h].narrow(0, pages_[page].start, pages_[page].end - pages_[page].start).fill_(true);
  }
  const at::Tensor kl = at::where(p.gt(0), p * (p.clamp_min(1e-300).log() - eff.clamp_min(1e-10).log()), at::zeros_like(p)).sum(1);
  const at::Tensor recall = (p * exact.to(at::kDouble)).sum(1);
  const std::int64_t kk = std::min(kFidelityTopK, T);
  const at::Tensor top_d = std::get<1>(p.topk(kk, 1)), top_e = std::get<1>(eff.topk(kk, 1));
  at::Tensor overlap = at::zeros({H}, at::kDouble);
  for (std::int64_t h = 0; h < H; ++h)
    overlap[h] = at::isin(top_d[h], top_e[h]).sum().item<double>() / static_cast<double>(kk);
  const at::Tensor o = out.to(at::kDouble);
  const at::Tensor rel = (o - o_dense).norm(2, 1) / o_dense.norm(2, 1).clamp_min(1e-300);
  last_.fidelity = at::stack({kl, recall, overlap, rel}, 1).to(at::kFloat);
  last_.dense = p.to(at::kFloat);
}

// Fixed segmenter: full pages of page_size from the oldest unpaged token, never within the last
// `tail` positions. Compresses each into one key/value per KV head.
void LukaAttention::create_pages(const AttentionInputs& in) {
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t T = in.k.size(1), KV = in.k.size(0), D = in.k.size(2);
  std::int64_t E = paged_end();
  const std::int64_t limit = T - c.tail;
  if (E + c.page_size > limit) return;
  // Only the tokens that become pages now are read (and widened to fp32).
  const std::int64_t first = E;
  const at::Tensor kf = in.k.narrow(1, first, limit - first).to(at::kFloat);
  const at::Tensor vf = in.v.narrow(1, first, limit - first).to(at::kFloat);
  while (E + c.page_size <= limit) {
    const std::int64_t P = static_cast<std::int64_t>(pages_.size());
    if (!sum_k_.defined() || P >= sum_k_.size(1)) {
      const std::int64_t n = grow(P + 1, sum_k_.defined() ? sum_k_.size(1) : 0);
      at::Tensor k = at::zeros({KV, n, D}, at::kFloat), v = at::zeros({KV, n, D}, at::kFloat), b = at::zeros({KV, n}, at::kFloat);
      if (P > 0) {
        k.narrow(1, 0, P).copy_(sum_k_.narrow(1, 0, P));
        v.narrow(1, 0, P).copy_(sum_v_.narrow(1, 0, P));
        b.narrow(1, 0, P).copy_(sum_bias_.narrow(1, 0, P));
      }
      sum_k_ = k;
      sum_v_ = v;
      sum_bias_ = b;
    }
    const std::int64_t L = c.page_size;
    for (std::int64_t g = 0; g < KV; ++g) {
      at::Tensor w;  // compressor weights π over the page
      if (c.compressor == Compressor::kAttentionWeighted) {
        w = at::softmax(importance_[g].narrow(0, E, L) / c.tau, 0);
      } else if (c.compressor == Compressor::kRandom) {
        const std::uint64_t r = splitmix64(c.seed ^ splitmix64(static_cast<std::uint64_t>(layer_) * 1000003u +
                                                               static_cast<std::uint64_t>(E) * 7919u + static_cast<std::uint64_t>(g)));
        w = at::zeros({L}, at::kFloat);
        w[static_cast<std::int64_t>(r % static_cast<std::uint64_t>(L))] = 1.0f;
      } else {
        w = at::full({L}, 1.0f / static_cast<float>(L), at::kFloat);
      }
      sum_k_[g][P].copy_(at::matmul(w, kf[g].narrow(0, E - first, L)));
      if (c.zero_v) {
        sum_v_[g][P].zero_();
      } else {
        sum_v_[g][P].copy_(at::matmul(w, vf[g].narrow(0, E - first, L)));
      }
      double bias = 0;
      if (c.bias == SummaryBias::kFixed) {
        bias = std::log(static_cast<double>(L));
      } else if (c.bias == SummaryBias::kAdaptive) {  // log k_eff = entropy of π
        const at::Tensor pos = w.clamp_min(1e-30);
        bias = -(w * pos.log()).sum().item<double>();
      }
      sum_bias_[g][P] = static_cast<float>(bias);
      // An unrefined page's mass spreads by π for the attention-weighted compressor, else uniformly.
      spread_[g].narrow(0, E, L).copy_(c.compressor == Compressor::kAttentionWeighted ? w
                                                                                    : at::full({L}, 1.0f / static_cast<float>(L)));
    }
    pages_.push_back(Page{E, E + L, step_});
    E += L;
  }
}

std::vector<std::shared_ptr<LukaAttention>> install_luka(Decoder& decoder, const LukaConfig& config) {
  const std::int64_t n = decoder.model().config().num_layers;
  if (decoder.model().on_cuda()) fail("luka config", "the model is on the GPU: install_luka_cuda runs LuKA there");
  if (static_cast<std::int64_t>(config.layers.size()) != n)
    fail("luka config", "has " + std::to_string(config.layers.size()) + " layers, the model " + std::to_string(n));
  std::vector<std::shared_ptr<LukaAttention>> layers;
  for (std::int64_t i = 0; i < n; ++i) {
    auto a = std::make_shared<LukaAttention>(static_cast<int>(i), config.layers[static_cast<std::size_t>(i)]);
    decoder.set_attention(static_cast<int>(i), a);
    layers.push_back(std::move(a));
  }
  return layers;
}

}  // namespace luka
