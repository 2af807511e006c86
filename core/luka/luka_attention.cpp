#include "core/luka/luka_attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include <ATen/Parallel.h>

#include "core/luka/dense_shadow.h"
#include "core/luka/prefill.h"
#include "core/luka/semantic_pages.h"
#include "core/model/decoder.h"
#include "core/util/error.h"
#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/vec.h"
#include "kernels/common/luka_rules.h"

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
      for (auto p : top_indices(score.data(), P, rules::top_frac_count(c.top_frac, P, c.page_rank == PageRank::kSum))) pick[p] = 1;
      break;
    case RefineRule::kTopP: {
      std::vector<std::int64_t> sorted(static_cast<std::size_t>(P));
      std::iota(sorted.begin(), sorted.end(), 0);
      std::sort(sorted.begin(), sorted.end(), [&](auto a, auto b) { return score[a] != score[b] ? score[a] > score[b] : a < b; });
      if (c.page_rank == PageRank::kSum) {
        // The authors' rule: with c the running sums of the sorted scores and S their total, the
        // first count(c <= p·S) + 1 pages (none when S is 0).
        double total = 0;
        for (const float x : score) total += x;
        if (total <= 0) break;
        std::int64_t n = 1;
        double cum = 0;
        for (const auto p : sorted) {
          cum += score[p];
          if (cum <= c.top_p * total) ++n;
        }
        for (std::int64_t i = 0; i < std::min(n, P); ++i) pick[sorted[i]] = 1;
        break;
      }
      // Pages in decreasing score until their cumulative score reaches p.
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
  clock_.calls = config_.clustered.page_counter_start;
  if (config_.dar.window > 0) dar_basis_ = DarBasis::load(config_.dar.basis);
}

void LukaAttention::set_config(const LayerConfig& config) {
  validate(config, layer_);
  std::shared_ptr<const DarBasis> basis = config.dar.window > 0 ? DarBasis::load(config.dar.basis) : nullptr;
  config_ = config;
  delimiter_of_id_.clear();  // the delimiters may have changed
  heavy_tokens_ = -1;
  dar_basis_ = std::move(basis);
  dar_stale_ = true;
}

void LukaAttention::reset() {
  step_ = 0;
  heavy_tokens_ = -1;
  tokens_ = 0;
  pages_.clear();
  press_kept_.clear();
  press_prompt_ = 0;
  paged_end_ = 0;
  clock_ = rules::PageClock{config_.clustered.page_counter_start, 0};
  last_ = LukaStep{};
  dar_stale_ = true;
  if (board_ && static_cast<std::int64_t>(board_->layers.size()) > layer_) board_->layers[static_cast<std::size_t>(layer_)] = {};
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
  const std::int64_t n = tokens <= reserved_ ? reserved_ : grow(tokens, cap);
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

at::Tensor LukaAttention::forward(const AttentionInputs& raw) {
  const std::int64_t n = raw.q.size(1), T = raw.k.size(1);
  if (raw.q_pos0 != tokens_ || raw.q_pos0 + n != T)
    fail("luka layer " + std::to_string(layer_),
         "attention state out of step with the cache (state has " + std::to_string(tokens_) + " tokens, cache " +
             std::to_string(T) + " with " + std::to_string(n) + " new)");
  ensure_capacity(T, raw.q.size(0), raw.k.size(0));
  c10::InferenceMode guard;
  // With DAR every step reads the projected cache (the prefill's near keys and the dense shadow
  // the raw one).
  const AttentionInputs in = dar_basis_ ? dar_inputs(raw) : raw;
  raw_ = &raw;
  const bool is_decode = n == 1 && T > 1;
  if (!is_decode) heavy_tokens_ = -1;
  at::Tensor out = is_decode ? decode(in) : prefill(in);
  // kvpress compresses once, at the prompt's prefill (a forward from position 0).
  if (!is_decode && in.q_pos0 == 0 && config_.mode == AttentionMode::kPress) press_prompt(in);
  tokens_ = T;
  make_pages(in, is_decode ? step_ : 0);
  raw_ = nullptr;
  return out;
}

AttentionInputs LukaAttention::dar_inputs(const AttentionInputs& in) {
  const std::int64_t KV = in.k.size(0), T = in.k.size(1), D = in.k.size(2), W = config_.dar.window;
  const std::int64_t rank = config_.dar.rank > 0 ? config_.dar.rank : std::max<std::int64_t>(1, D / 4);
  if (!dar_k_.defined() || dar_k_.size(0) != KV || dar_k_.size(2) != D || dar_k_.scalar_type() != in.k.scalar_type()) {
    dar_k_ = dar_v_ = at::Tensor();
    dar_stale_ = true;
  }
  if (!dar_k_.defined() || dar_k_.size(1) < T) {  // grows as the accumulators do; keeps what is composed
    const std::int64_t have = dar_k_.defined() ? dar_k_.size(1) : 0;
    at::Tensor k = at::empty({KV, T <= reserved_ ? reserved_ : grow(T, have), D}, in.k.options()), v = at::empty_like(k);
    if (!dar_stale_ && in.q_pos0 > 0) {
      k.narrow(1, 0, in.q_pos0).copy_(dar_k_.narrow(1, 0, in.q_pos0));
      v.narrow(1, 0, in.q_pos0).copy_(dar_v_.narrow(1, 0, in.q_pos0));
    }
    dar_k_ = k;
    dar_v_ = v;
  }
  // Raw rows for what is new (everything when stale), then projections for the positions that
  // left the window of this forward's last query (T - 1 - p > W).
  const std::int64_t from = dar_stale_ || in.q_pos0 == 0 ? 0 : in.q_pos0;
  if (from == 0) dar_projected_ = 0;
  dar_stale_ = false;
  dar_k_.narrow(1, from, T - from).copy_(in.k.narrow(1, from, T - from));
  dar_v_.narrow(1, from, T - from).copy_(in.v.narrow(1, from, T - from));
  // The first dar.sink positions (attention sinks) stay whole.
  const std::int64_t upto = std::max<std::int64_t>(0, T - 1 - W), start = std::max(dar_projected_, config_.dar.sink);
  if (upto > start) {
    const std::int64_t m = upto - start;
    const at::Tensor k = in.k.narrow(1, start, m);
    if (config_.dar.keys == DarKeys::kPostRope) {
      dar_k_.narrow(1, start, m).copy_(dar_basis_->project(layer_, DarBasis::kKeysAfterRope, rank, k));
    } else if (rope_inv_freq_.defined()) {  // back to before RoPE, projected, rotated again
      const at::Tensor before = rope_rotate(k, start, rope_inv_freq_, -1);
      dar_k_.narrow(1, start, m).copy_(rope_rotate(dar_basis_->project(layer_, DarBasis::kKeys, rank, before), start, rope_inv_freq_, 1));
    } else {
      dar_k_.narrow(1, start, m).copy_(dar_basis_->project(layer_, DarBasis::kKeys, rank, k));
    }
    dar_v_.narrow(1, start, m).copy_(dar_basis_->project(layer_, DarBasis::kValues, rank, in.v.narrow(1, start, m)));
  }
  dar_projected_ = std::max(dar_projected_, upto);
  AttentionInputs out = in;
  out.k = dar_k_.narrow(1, 0, T);
  out.v = dar_v_.narrow(1, 0, T);
  return out;
}

// Exact causal attention over the new queries, in fp32, chunked over queries; every query's
// probabilities feed the accumulators. Lined sparse_prefill instead: `sliding`, a query sees keys
// < 32 and its window; `fixed` (the authors' code), the last window of the cache, causal within
// it, while a query before that window gets a uniform row over it (their masked logits all sit
// at the dtype's minimum, which fp32 cannot tell apart).
at::Tensor LukaAttention::prefill(const AttentionInputs& in) {
  if (config_.mode == AttentionMode::kKascade) return prefill_kascade(in);
  const std::int64_t T = in.k.size(1);
  const LinedConfig& lc = config_.lined;
  PrefillMask mask;
  mask.sparse = config_.mode == AttentionMode::kLined && lc.sparse_prefill;
  mask.fixed = mask.sparse && lc.sparse_prefill_window == PrefillWindow::kFixed;
  mask.window = mask.sparse ? rules::lined_window(to_rule(lc), T) : 0;
  if (dar_basis_ && raw_) {
    mask.near_k = raw_->k;
    mask.near_v = raw_->v;
    mask.near_window = config_.dar.window;
    mask.near_first = config_.dar.sink;
  }
  return aten_prefill(in, mask, lc.decay, layer_, prefill_observer_, prefill_pool_level_, importance_.narrow(1, 0, T),
                      h2o_.narrow(1, 0, T));
}

// §5.1: h2o_score per query head (with decay), importance per KV head as the mean over its
// group, both from `rows` [H, T]: the effective attention, or the cover softmax.
void LukaAttention::accumulate(const at::Tensor& rows, std::int64_t group) {
  const std::int64_t H = rows.size(0), T = rows.size(1);
  if (rows.scalar_type() == at::kFloat && rows.is_contiguous() && h2o_.is_contiguous() &&
      importance_.is_contiguous() && group > 0 && H % group == 0) {
    // One pass instead of four ATen ops (a decode step's accumulators are small: their dispatch
    // cost more than their arithmetic). The same float operations in the same order as the ATen
    // form below and the CUDA kernels (rules::h2o_update, rules::importance_update): h2o·decay + r;
    // the group's rows summed in head order, divided by the group size, added.
    const float* r = rows.const_data_ptr<float>();
    float* h2o = h2o_.mutable_data_ptr<float>();
    float* imp = importance_.mutable_data_ptr<float>();
    const std::int64_t hcap = h2o_.size(1), icap = importance_.size(1), KV = H / group;
    const float decay = static_cast<float>(config_.lined.decay);
    const auto kv_heads = [&](std::int64_t k0, std::int64_t k1) {
      for (std::int64_t k = k0; k < k1; ++k)
        for (std::int64_t t = 0; t < T; ++t) {
          float sum = 0.0f;
          for (std::int64_t j = 0; j < group; ++j) {
            const std::int64_t h = k * group + j;
            const float x = r[h * T + t];
            h2o[h * hcap + t] = rules::h2o_update(h2o[h * hcap + t], x, decay);
            sum += x;
          }
          imp[k * icap + t] = rules::importance_update(imp[k * icap + t], sum, group);
        }
    };
    if (H * T < (std::int64_t{1} << 16)) {
      kv_heads(0, KV);  // a fork and join would cost more
    } else {
      at::parallel_for(0, KV, 1, kv_heads);
    }
    return;
  }
  at::Tensor h2o = h2o_.narrow(1, 0, T);
  if (config_.lined.decay != 1.0) h2o.mul_(config_.lined.decay);
  h2o.add_(rows);
  importance_.narrow(1, 0, T).add_(rows.view({H / group, group, T}).sum(1).div_(static_cast<double>(group)));  // group mean
}

namespace {

// Calls f(K, V) with row accessors over the cache in its element type (fp32 or bf16).
template <typename F>
void with_rows(const AttentionInputs& in, int layer, F&& f) {
  const std::int64_t D = in.k.size(2);
  const auto run = [&](auto tag) {
    using Elem = decltype(tag);
    f(Rows<Elem>{in.k.const_data_ptr<Elem>(), in.k.stride(0), in.k.stride(1), D},
      Rows<Elem>{in.v.const_data_ptr<Elem>(), in.v.stride(0), in.v.stride(1), D});
  };
  if (in.k.scalar_type() == at::kFloat) {
    run(float{});
  } else if (in.k.scalar_type() == at::kBFloat16) {
    run(c10::BFloat16{});
  } else {
    fail("luka layer " + std::to_string(layer), std::string("unsupported cache dtype ") + c10::toString(in.k.scalar_type()));
  }
}

}  // namespace

at::Tensor LukaAttention::decode(const AttentionInputs& in) {
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  ++step_;
  const auto t0 = std::chrono::steady_clock::now();
  const at::Tensor qf = in.q.to(at::kFloat).contiguous().view({H, D});
  Step s{in, qf.const_data_ptr<float>(), static_cast<float>(in.scale), at::zeros({H, T}, at::kFloat), at::zeros({H, D}, at::kFloat)};
  last_ = LukaStep{};
  last_.mode = config_.mode;
  last_.step = step_;
  last_.tokens = T;
  last_.paged_end = paged_end();
  last_.cover_size.assign(static_cast<std::size_t>(H), T);

  at::Tensor cover_rows;  // the cover softmax at raw slots, when it differs from the effective rows
  if (config_.mode != AttentionMode::kLined) heavy_tokens_ = -1;  // every score moves
  if (config_.mode == AttentionMode::kDense) {
    decode_dense(s);
  } else if (config_.mode == AttentionMode::kLined) {
    decode_lined(s);
  } else if (config_.mode == AttentionMode::kKascade) {
    decode_kascade(s);
  } else if (config_.mode == AttentionMode::kPress) {
    decode_press(s);
  } else {
    cover_rows = decode_clustered(s);
  }
  last_.effective = s.eff;
  if (config_.dense_shadow) dense_shadow(raw_ ? *raw_ : in, s.out, pages_, last_);  // against the raw cache
  accumulate(config_.importance_source == ImportanceSource::kCover && cover_rows.defined() ? cover_rows : s.eff, G);
  last_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s.out.view({1, H * D}).to(in.q.scalar_type());
}

// Dense: the kernels/cpu decode attention where it covers the dtype, else the same formula here.
void LukaAttention::decode_dense(Step& s) {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  if (cpu::decode_attention_available(in.q.scalar_type())) {
    at::Tensor probs;
    s.out.copy_(cpu::dense_decode_attention(in.q, in.k, in.v, in.scale, &probs).view({H, D}));
    s.eff.copy_(probs);
    return;
  }
  float* e = s.eff.mutable_data_ptr<float>();
  float* o = s.out.mutable_data_ptr<float>();
  with_rows(in, layer_, [&](const auto& K, const auto& V) {
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) {
        float* p = e + h * T;
        for (std::int64_t t = 0; t < T; ++t) p[t] = s.scale * dot(s.q + h * D, K.row(h / G, t), D);
        softmax_inplace(p, T);
        for (std::int64_t t = 0; t < T; ++t) axpy(p[t], V.row(h / G, t), o + h * D, D);
      }
    });
  });
}

void LukaAttention::attend_sets(Step& s, const std::vector<const std::vector<std::int64_t>*>& sets, bool renormalize) {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  float* e = s.eff.mutable_data_ptr<float>();
  float* o = s.out.mutable_data_ptr<float>();
  with_rows(in, layer_, [&](const auto& K, const auto& V) {
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) {
        const std::vector<std::int64_t>& set = *sets[static_cast<std::size_t>(h)];
        const std::int64_t n = static_cast<std::int64_t>(set.size());
        std::vector<float> p(set.size());
        double sum = 0;
        if (renormalize)
          for (std::int64_t i = 0; i < n; ++i) sum += p[i] = e[h * T + set[i]];
        if (sum > 0) {
          const float inv = static_cast<float>(1.0 / sum);
          for (float& x : p) x *= inv;
        } else {
          cpu::gather_dots(s.q + h * D, K.row(h / G, 0), K.row_stride, set.data(), n, D, s.scale, p.data());
          softmax_inplace(p.data(), n);
        }
        std::fill(e + h * T, e + (h + 1) * T, 0.0f);
        std::fill(o + h * D, o + (h + 1) * D, 0.0f);
        for (std::int64_t i = 0; i < n; ++i) e[h * T + set[i]] = p[i];
        cpu::gather_axpy(p.data(), V.row(h / G, 0), V.row_stride, set.data(), n, D, o + h * D);
      }
    });
  });
}

// Lined (§5.3): the recent window and the heavy hitters by h2o_score (rules::lined_cover), one
// exact softmax over their union.
void LukaAttention::decode_lined(Step& s) {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  const LinedConfig& c = config_.lined;
  const rules::LinedCover lc = rules::lined_cover(to_rule(c), T);
  last_.window_start = lc.window_start;
  last_.heavy.assign(static_cast<std::size_t>(H), {});
  const float* h2o = h2o_.const_data_ptr<float>();
  const std::int64_t cap = h2o_.size(1);
  const auto units = selection_units(c.selection, H, G);
  // With decay 1 the previous lined step changed only its cover's scores, so each unit's set is
  // updated from it (HeavyHitterSet); after anything else (another mode, a prefill, a new config,
  // a reset) or with decay, where every score moves, it is ranked from scratch.
  const bool incremental = incremental_heavy_ && c.decay == 1.0;
  if (!incremental || heavy_tokens_ != T - 1 || heavy_sets_.size() != units.size()) {
    heavy_sets_.assign(units.size(), HeavyHitterSet{});
  }
  // One parallel region per step: each unit picks its heavy hitters, then its heads attend to
  // their cover (a fork and join per region is a large part of a lined step at these sizes).
  float* e = s.eff.mutable_data_ptr<float>();
  float* o = s.out.mutable_data_ptr<float>();
  with_rows(in, layer_, [&](const auto& K, const auto& V) {
    at::parallel_for(0, static_cast<std::int64_t>(units.size()), 1, [&](std::int64_t u0, std::int64_t u1) {
      std::vector<std::int64_t> cover;
      std::vector<float> p;
      for (std::int64_t u = u0; u < u1; ++u) {
        const auto& unit = units[static_cast<std::size_t>(u)];
        std::vector<std::int64_t> heavy;
        if (incremental) {
          HeavyHitterSet::Rows rows;
          for (const std::int64_t h : unit) rows.push_back(h2o + h * cap);
          heavy = heavy_sets_[static_cast<std::size_t>(u)].select(rows, lc.select_end, lc.heavy, lc.window_start);
        } else if (unit.size() == 1) {
          heavy = select_heavy_hitters(h2o + unit[0] * cap, lc.select_end, lc.heavy);
        } else {
          std::vector<float> score(static_cast<std::size_t>(lc.select_end), 0.0f);
          for (const std::int64_t h : unit)
            for (std::int64_t t = 0; t < lc.select_end; ++t) score[t] += h2o[h * cap + t];
          heavy = select_heavy_hitters(score.data(), lc.select_end, lc.heavy);
        }
        // A pick inside the window (only when the window is the whole context) is in the cover once.
        heavy.erase(std::remove_if(heavy.begin(), heavy.end(), [&](std::int64_t t) { return t >= lc.window_start; }), heavy.end());
        cover = heavy;
        for (std::int64_t t = lc.window_start; t < T; ++t) cover.push_back(t);
        p.resize(cover.size());
        const std::int64_t n = static_cast<std::int64_t>(cover.size());
        for (const std::int64_t h : unit) {
          last_.heavy[h] = heavy;
          cpu::gather_dots(s.q + h * D, K.row(h / G, 0), K.row_stride, cover.data(), n, D, s.scale, p.data());
          softmax_inplace(p.data(), n);
          for (std::int64_t i = 0; i < n; ++i) e[h * T + cover[i]] = p[i];
          cpu::gather_axpy(p.data(), V.row(h / G, 0), V.row_stride, cover.data(), n, D, o + h * D);
        }
      }
    });
  });
  heavy_tokens_ = incremental ? T : -1;
  for (std::int64_t h = 0; h < H; ++h)
    last_.cover_size[static_cast<std::size_t>(h)] = static_cast<std::int64_t>(last_.heavy[h].size()) + (T - lc.window_start);
}

// Clustered (§5.4), in the spec's steps: the logits over the cover (every page's summary with its
// bias, then the raw tail), α = their softmax, the pages to refine per selection unit, then the
// refinement and finalize (the output and the effective row under mass-preserving or exact
// refinement). Returns the cover rows [H, T] (α at the raw tail, zero elsewhere) when
// importance_source is cover, else an undefined tensor.
at::Tensor LukaAttention::decode_clustered(Step& s) {
  const std::int64_t H = s.in.q.size(0), T = s.in.k.size(1);
  const std::int64_t P = static_cast<std::int64_t>(pages_.size()), E = paged_end(), R = T - E;
  const at::Tensor logits = clustered_logits(s);
  const at::Tensor alpha = cover_softmax(logits);
  last_.summary_mass = alpha.narrow(1, 0, P).clone();
  select_refined_pages(logits, alpha, s.in.group_size);
  refine_and_finalize(s, logits, alpha);
  for (std::int64_t h = 0; h < H; ++h) {
    std::int64_t children = 0;
    for (const std::int64_t p : last_.refined[h]) children += pages_[p].size();
    last_.cover_size[static_cast<std::size_t>(h)] = P - static_cast<std::int64_t>(last_.refined[h].size()) + children + R;
  }
  if (config_.importance_source != ImportanceSource::kCover) return {};
  at::Tensor rows = at::zeros({H, T}, at::kFloat);
  rows.narrow(1, E, R).copy_(alpha.narrow(1, P, R));
  for (std::int64_t p = 0; p < P; ++p)  // raw pages are raw slots
    if (pages_[p].raw) rows.select(1, pages_[p].start).copy_(alpha.select(1, p));
  return rows;
}

// [logits] ℓ [H, P + R]: each summary's score with its bias (or, as an oracle, the log-sum-exp of
// its children), then the raw tail's.
at::Tensor LukaAttention::clustered_logits(const Step& s) const {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  const std::int64_t P = static_cast<std::int64_t>(pages_.size()), E = paged_end(), R = T - E, N = P + R;
  const float* sk = P ? sum_k_.const_data_ptr<float>() : nullptr;
  const float* sb = P ? sum_bias_.const_data_ptr<float>() : nullptr;
  const std::int64_t pcap = P ? sum_k_.size(1) : 0;
  const float* q = s.q;
  const float scale = s.scale;
  at::Tensor logits_t = at::empty({H, N}, at::kFloat);
  float* lg = logits_t.mutable_data_ptr<float>();
  with_rows(in, layer_, [&](const auto& K, const auto& /*V*/) {
    const auto page_logit = [&](std::int64_t h, std::int64_t p) {
      const std::int64_t g = h / G;
      if (oracle_) {
        float mx = kNegInf;
        pages_[p].for_each_position([&](std::int64_t t) { mx = std::max(mx, scale * dot(q + h * D, K.row(g, t), D)); });
        double z = 0;
        pages_[p].for_each_position([&](std::int64_t t) { z += std::exp(scale * dot(q + h * D, K.row(g, t), D) - mx); });
        return mx + static_cast<float>(std::log(z));
      }
      return scale * dot(q + h * D, sk + (g * pcap + p) * D, D) + sb[g * pcap + p];
    };
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) {
        float* l = lg + h * N;
        for (std::int64_t p = 0; p < P; ++p) l[p] = page_logit(h, p);
        for (std::int64_t t = 0; t < R; ++t) l[P + t] = scale * dot(q + h * D, K.row(h / G, E + t), D);
      }
    });
  });
  return logits_t;
}

// [cover softmax] α before refinement: the mass each page holds, what selection ranks (unless
// refine_on=unbiased asks for the softmax without the summary bias) and, under mass-preserving
// refinement, the weights of the output.
at::Tensor LukaAttention::cover_softmax(const at::Tensor& logits_t) const {
  const std::int64_t H = logits_t.size(0), N = logits_t.size(1);
  const bool exact_math = config_.clustered.math == RefineMath::kExact;
  at::Tensor alpha_t;
  if (exact_math) {
    alpha_t = at::softmax(logits_t, -1);
  } else {
    alpha_t = logits_t.clone();
    float* a = alpha_t.mutable_data_ptr<float>();
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) softmax_inplace(a + h * N, N);
    });
  }
  return alpha_t;
}

// [selection] Per unit of heads that share it, each page's score — the max of α over the unit, or
// for top_frac / top_p with page_rank=sum, the sum — then the rule: last_.refined per head.
void LukaAttention::select_refined_pages(const at::Tensor& logits_t, const at::Tensor& alpha_t, std::int64_t G) {
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t H = logits_t.size(0), N = logits_t.size(1);
  const std::int64_t P = static_cast<std::int64_t>(pages_.size());
  at::Tensor select_t = alpha_t;
  if (c.refine_on == RefineOn::kUnbiased && c.bias != SummaryBias::kNone && !oracle_ && P > 0) {
    at::Tensor unbiased = logits_t.clone();
    for (std::int64_t h = 0; h < H; ++h) unbiased[h].narrow(0, 0, P).sub_(sum_bias_[h / G].narrow(0, 0, P));
    select_t = at::softmax(unbiased, -1);
  }
  const float* sa = select_t.const_data_ptr<float>();
  const bool sum_rank = c.page_rank == PageRank::kSum && (c.rule == RefineRule::kTopFrac || c.rule == RefineRule::kTopP);
  // The pages selection ranks: all but raw ones (a token kept as it is has nothing to refine).
  std::vector<std::int64_t> candidates;
  for (std::int64_t p = 0; p < P; ++p)
    if (!pages_[p].raw) candidates.push_back(p);
  const auto C = static_cast<std::int64_t>(candidates.size());
  last_.refined.assign(static_cast<std::size_t>(H), {});
  for (const auto& unit : selection_units(c.selection, H, G)) {
    std::vector<float> score(static_cast<std::size_t>(C), 0.0f);
    for (const std::int64_t h : unit)
      for (std::int64_t i = 0; i < C; ++i) {
        const float x = sa[h * N + candidates[i]];
        score[i] = sum_rank ? score[i] + x : std::max(score[i], x);
      }
    std::vector<std::int64_t> refined = select_pages(c, score);
    for (std::int64_t& i : refined) i = candidates[i];
    for (const std::int64_t h : unit) last_.refined[h] = refined;
  }
}

// [refinement, finalize] Per head: the children logits of the refined pages, then the output and
// the effective row over raw tokens, under mass-preserving (α shared by a local softmax) or exact
// (one softmax over unrefined summaries, refined children and the raw tail) refinement.
void LukaAttention::refine_and_finalize(Step& s, const at::Tensor& logits_t, const at::Tensor& alpha_t) {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t P = static_cast<std::int64_t>(pages_.size()), E = paged_end(), R = T - E, N = P + R;
  const float* sv = P ? sum_v_.const_data_ptr<float>() : nullptr;
  const std::int64_t pcap = P ? sum_k_.size(1) : 0;
  const float* spread = spread_.const_data_ptr<float>();
  const std::int64_t scap = spread_.size(1);
  const bool exact_math = c.math == RefineMath::kExact;
  const float* q = s.q;
  const float scale = s.scale;
  const float* lg = logits_t.const_data_ptr<float>();
  const float* alpha = alpha_t.const_data_ptr<float>();
  float* e = s.eff.mutable_data_ptr<float>();
  float* o = s.out.mutable_data_ptr<float>();
  at::Tensor child_t = at::empty({H, E}, at::kFloat);  // children logits, filled on demand
  float* child = child_t.mutable_data_ptr<float>();
  with_rows(in, layer_, [&](const auto& K, const auto& V) {
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) {
        const std::int64_t g = h / G;
        const float* l = lg + h * N;
        const float* a = alpha + h * N;
        float* eh = e + h * T;
        float* oh = o + h * D;
        const auto& refined = last_.refined[h];
        std::vector<std::uint8_t> is_refined(static_cast<std::size_t>(P), 0);
        for (auto p : refined) is_refined[p] = 1;
        for (auto p : refined)
          pages_[p].for_each_position([&](std::int64_t t) { child[h * E + t] = scale * dot(q + h * D, K.row(g, t), D); });
        if (!exact_math) {
          std::vector<float> local;
          for (std::int64_t p = 0; p < P; ++p) {
            const Page& pg = pages_[p];
            if (is_refined[p]) {  // children share the page's α by a local softmax
              local.clear();
              pg.for_each_position([&](std::int64_t t) { local.push_back(child[h * E + t]); });
              softmax_inplace(local.data(), static_cast<std::int64_t>(local.size()));
              std::size_t i = 0;
              pg.for_each_position([&](std::int64_t t) {
                eh[t] = a[p] * local[i++];
                axpy(eh[t], V.row(g, t), oh, D);
              });
            } else {
              axpy(a[p], sv + (g * pcap + p) * D, oh, D);
              pg.for_each_position([&](std::int64_t t) { eh[t] = a[p] * spread[g * scap + t]; });
            }
          }
          for (std::int64_t t = 0; t < R; ++t) {
            eh[E + t] = a[P + t];
            axpy(a[P + t], V.row(g, E + t), oh, D);
          }
          continue;
        }
        // Exact: one softmax over unrefined summaries, refined children and raw tokens.
        float mx = kNegInf;
        for (std::int64_t p = 0; p < P; ++p)
          if (!is_refined[p]) mx = std::max(mx, l[p]);
        for (auto p : refined) pages_[p].for_each_position([&](std::int64_t t) { mx = std::max(mx, child[h * E + t]); });
        for (std::int64_t t = 0; t < R; ++t) mx = std::max(mx, l[P + t]);
        double z = 0;
        for (std::int64_t p = 0; p < P; ++p)
          if (!is_refined[p]) z += std::exp(l[p] - mx);
        for (auto p : refined) pages_[p].for_each_position([&](std::int64_t t) { z += std::exp(child[h * E + t] - mx); });
        for (std::int64_t t = 0; t < R; ++t) z += std::exp(l[P + t] - mx);
        const float inv = static_cast<float>(1.0 / z);
        for (std::int64_t p = 0; p < P; ++p) {
          const Page& pg = pages_[p];
          if (is_refined[p]) {
            pg.for_each_position([&](std::int64_t t) {
              eh[t] = std::exp(child[h * E + t] - mx) * inv;
              axpy(eh[t], V.row(g, t), oh, D);
            });
          } else {
            const float w = std::exp(l[p] - mx) * inv;
            axpy(w, sv + (g * pcap + p) * D, oh, D);
            pg.for_each_position([&](std::int64_t t) { eh[t] = w * spread[g * scap + t]; });
          }
        }
        for (std::int64_t t = 0; t < R; ++t) {
          eh[E + t] = std::exp(l[P + t] - mx) * inv;
          axpy(eh[E + t], V.row(g, E + t), oh, D);
        }
      }
    });
  });
}

// The segmenter (§5.4, rules::pages_due): after a forward over the cache, as many full pages of
// page_size as the schedule makes due, from the oldest unpaged token. The delimiter segmenter takes
// what the schedule makes due up to its last delimiter, so no chunk is cut; where the last
// 4·page_size tokens of it hold none, it is cut there, and where fewer than that hold none, the
// tokens wait for their delimiter.
void LukaAttention::make_pages(const AttentionInputs& in, std::int64_t decode_step) {
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t count = rules::pages_due(to_rule(c), &clock_, static_cast<std::int64_t>(pages_.size()), paged_end(),
                                              in.k.size(1), decode_step);
  if (count <= 0) return;
  std::int64_t end = paged_end_ + count * c.page_size;
  if (c.segmenter == Segmenter::kDelimiter) {
    const std::int64_t longest = 4 * c.page_size;
    std::int64_t last = -1;
    for (std::int64_t t = end - 1; t >= std::max(paged_end_, end - longest); --t)
      if (is_delimiter(in, t)) {
        last = t;
        break;
      }
    if (last >= 0) {
      end = last + 1;
    } else if (end - paged_end_ < longest) {
      return;
    }
  }
  make_pages_until(in, end);
}

namespace {
DelimiterSet delimiter_set(const ClusteredConfig& c) {
  DelimiterSet set;
  set.texts = c.delimiters;
  set.match = c.delimiter_match == DelimiterMatch::kExact ? DelimiterSet::Match::kExact : DelimiterSet::Match::kComposed;
  return set;
}
}  // namespace

bool LukaAttention::is_delimiter(const AttentionInputs& in, std::int64_t position) {
  if (!in.ids) fail("luka layer " + std::to_string(layer_), "segmenter=delimiter needs the tokens' ids (the decoder passes them)");
  if (!token_texts_)
    fail("luka layer " + std::to_string(layer_), "segmenter=delimiter needs the tokenizer's token texts (LukaLayer::set_token_texts)");
  const auto n = static_cast<std::int64_t>(token_texts_->size());
  if (static_cast<std::int64_t>(delimiter_of_id_.size()) != n) delimiter_of_id_.assign(static_cast<std::size_t>(n), -1);
  const std::int32_t id = in.ids[position];
  if (id < 0 || id >= n) return false;
  std::int8_t& known = delimiter_of_id_[static_cast<std::size_t>(id)];
  if (known < 0) known = delimiter_set(config_.clustered).is_delimiter((*token_texts_)[static_cast<std::size_t>(id)]) ? 1 : 0;
  return known != 0;
}

void LukaAttention::set_token_texts(std::shared_ptr<const std::vector<std::string>> texts) {
  token_texts_ = std::move(texts);
  delimiter_of_id_.clear();
}

void LukaAttention::make_pages_until(const AttentionInputs& in, std::int64_t end) {
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t first = paged_end_, n = end - first, L = c.page_size;
  if (n <= 0) return;
  // Only the tokens that become pages now are read (and widened to fp32).
  const at::Tensor kf = in.k.narrow(1, first, n).to(at::kFloat);
  const at::Tensor vf = in.v.narrow(1, first, n).to(at::kFloat);
  const std::int64_t KV = kf.size(0), D = kf.size(2);
  // Units [b, e): fixed pages, or the delimiter segmenter's chunks (at most 4 pages long) and
  // delimiter tokens.
  std::vector<SemanticUnit> units;
  if (c.segmenter == Segmenter::kDelimiter) {
    std::vector<std::string> texts(static_cast<std::size_t>(n));
    for (std::int64_t t = first; t < end; ++t)  // a delimiter's text, or one no delimiter set matches
      texts[static_cast<std::size_t>(t - first)] = is_delimiter(in, t) ? (*token_texts_)[static_cast<std::size_t>(in.ids[t])] : std::string();
    const std::int64_t longest = 4 * L;
    for (const SemanticUnit& u : delimiter_chunks(texts, delimiter_set(c)))
      for (std::int64_t b = u.begin; b < u.end; b += longest)
        units.push_back({static_cast<int>(b), static_cast<int>(std::min<std::int64_t>(u.end, b + longest)), u.delimiter});
  } else {
    for (std::int64_t b = 0; b + L <= n; b += L) units.push_back({static_cast<int>(b), static_cast<int>(b + L), false});
  }
  const bool semantic = c.segmenter == Segmenter::kDelimiter || c.compressor == Compressor::kGsc;
  for (const SemanticUnit& u : units) {
    const std::int64_t b = first + u.begin, e = first + u.end;
    if (u.delimiter) {
      add_page(kf, vf, first, Page{b, e, step_, {}, true});
    } else if (c.compressor == Compressor::kGsc) {
      // One partition for the layer: the cosine of every KV head's key side by side.
      const at::Tensor keys = kf.narrow(1, u.begin, u.end - u.begin).permute({1, 0, 2}).contiguous();  // [m, KV, D]
      const int width = static_cast<int>(KV * D);
      for (const std::vector<int>& cluster : gsc_clusters(keys.const_data_ptr<float>(), width, width, 0, u.end - u.begin, c.gsc_tau)) {
        Page page{b + cluster.front(), b + cluster.back() + 1, step_, {}, false};
        if (page.end - page.start != static_cast<std::int64_t>(cluster.size()))
          for (const int i : cluster) page.members.push_back(b + i);
        page.raw = cluster.size() == 1;
        add_page(kf, vf, first, std::move(page));
      }
    } else {
      add_page(kf, vf, first, Page{b, e, step_, {}, semantic && e - b == 1});
    }
  }
  paged_end_ = end;
}

// One page: a key/value per KV head by the compressor's weights π over its tokens, its bias, and
// the spread of an unrefined page's mass over its tokens.
void LukaAttention::add_page(const at::Tensor& kf, const at::Tensor& vf, std::int64_t first, Page page) {
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t KV = kf.size(0), D = kf.size(2), L = page.size();
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
  // The page's positions along dimension `dim` of x, whose index 0 is position `base`.
  at::Tensor where;  // absolute positions of a non-contiguous page
  if (!page.contiguous()) where = at::tensor(page.members, at::kLong);
  const auto take = [&](const at::Tensor& x, std::int64_t dim, std::int64_t base) {
    return page.contiguous() ? x.narrow(dim, page.start - base, L) : x.index_select(dim, base == 0 ? where : where - base);
  };
  // The authors' adaptive bias: the entropy of softmax(importance) (temperature 1) over the
  // page, averaged over the KV heads; one bias for every head.
  float shared_bias = 0;
  const bool authors_bias = c.bias == SummaryBias::kAdaptive && c.bias_entropy == BiasEntropy::kImportanceMean;
  if (authors_bias) {
    const at::Tensor logp = at::log_softmax(take(importance_.narrow(0, 0, KV), 1, 0), 1);  // [KV, L]
    const at::Tensor pr = logp.exp();
    shared_bias = at::where(pr.gt(0), -pr * logp, at::zeros_like(pr)).sum(1).mean().item<float>();
  }
  std::vector<float> pi(static_cast<std::size_t>(L)), spread(static_cast<std::size_t>(L));
  for (std::int64_t g = 0; g < KV; ++g) {
    // Compressor weights π over the page, by the rules the CUDA kernels use.
    at::Tensor imp;
    if (c.compressor == Compressor::kAttentionWeighted) imp = take(importance_[g], 0, 0).contiguous();
    const int n = static_cast<int>(L);
    const int pick = c.compressor == Compressor::kRandom ? rules::seeded_pick(c.seed, layer_, page.start, g, n) : 0;
    rules::compressor_weights(c.compressor, imp.defined() ? imp.const_data_ptr<float>() : nullptr, n,
                              static_cast<float>(c.tau), pick, pi.data());
    const at::Tensor w = at::from_blob(pi.data(), {L}, at::kFloat);
    sum_k_[g][P].copy_(at::matmul(w, take(kf[g], 0, first)));
    if (c.zero_v && !page.raw) {  // a raw page is its token, kept as it is
      sum_v_[g][P].zero_();
    } else {
      sum_v_[g][P].copy_(at::matmul(w, take(vf[g], 0, first)));
    }
    sum_bias_[g][P] = authors_bias ? shared_bias : rules::summary_bias(c.bias, pi.data(), n);
    for (int i = 0; i < n; ++i) spread[static_cast<std::size_t>(i)] = rules::spread_weight(c.compressor, pi.data(), i, n);
    const at::Tensor spread_t = at::from_blob(spread.data(), {L}, at::kFloat);
    if (page.contiguous()) {
      spread_[g].narrow(0, page.start, L).copy_(spread_t);
    } else {
      spread_[g].index_put_({where}, spread_t);
    }
  }
  pages_.push_back(std::move(page));
}

std::vector<std::shared_ptr<LukaLayer>> install_luka(Decoder& decoder, const LukaConfig& config) {
  const std::int64_t n = decoder.model().config().num_layers;
  if (decoder.model().on_cuda()) fail("luka config", "the model is on the GPU: install_luka_cuda runs LuKA there");
  if (static_cast<std::int64_t>(config.layers.size()) != n)
    fail("luka config", "has " + std::to_string(config.layers.size()) + " layers, the model " + std::to_string(n));
  validate_kascade_sources(config);
  auto board = std::make_shared<KascadeBoard>();
  std::vector<std::shared_ptr<LukaLayer>> layers;
  for (std::int64_t i = 0; i < n; ++i) {
    auto a = std::make_shared<LukaAttention>(static_cast<int>(i), config.layers[static_cast<std::size_t>(i)]);
    a->set_kascade_board(board);
    a->set_rope(decoder.rope_frequencies());
    a->set_layer_count(static_cast<int>(n));
    decoder.set_attention(static_cast<int>(i), a);
    layers.push_back(std::move(a));
  }
  return layers;
}

}  // namespace luka
