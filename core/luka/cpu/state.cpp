// LukaAttention's state and dispatch (docs/design.md §5): construction, config, reset, capacity,
// the accessors, forward (prefill or a decode step, then the pages), DAR's projected cache, the
// accumulators every mode updates, and install_luka. Each mode's step is in its own file beside
// this one: dense.cpp, lined.cpp, clustered.cpp, kascade.cpp, press.cpp; the pages in pages.cpp.
#include "core/luka/luka_attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <ATen/Parallel.h>

#include "core/luka/cpu/internal.h"
#include "core/luka/dense_shadow.h"
#include "core/luka/prefill.h"
#include "core/model/decoder.h"
#include "core/util/error.h"
#include "kernels/common/luka_rules.h"

namespace luka {

using namespace cpu_core;

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
  adopted_ = false;
  adopted_pages_.clear();
  step_ = 0;
  heavy_tokens_ = -1;
  tokens_ = 0;
  pages_.clear();
  press_kept_.clear();
  press_prompt_ = 0;
  press_rows_.clear();  // press decoding and quest start again with the new sequence
  quest_paged_ = 0;
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

LukaState LukaAttention::state_view() const {
  LukaState s;
  s.tokens = tokens_;
  s.pages = static_cast<std::int64_t>(pages_.size());
  s.paged_end = paged_end_;
  s.importance = importance();
  s.h2o = h2o_score();
  if (s.pages > 0) {
    s.spread = spread();
    s.summary_keys = summary_keys();
    s.summary_values = summary_values();
    s.summary_bias = summary_bias();
  }
  return s;
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

void LukaAttention::adopt_step(LukaStep step, std::vector<Page> pages) {
  last_ = std::move(step);
  adopted_pages_ = std::move(pages);
  adopted_ = true;
}

at::Tensor LukaAttention::forward(const AttentionInputs& raw) {
  adopted_ = false;
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
  mask.left_out = press_left_out(in);
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
  } else if (config_.mode == AttentionMode::kQuest) {
    decode_quest(s);
  } else {
    cover_rows = decode_clustered(s);
  }
  last_.effective = s.eff;
  if (config_.dense_shadow) dense_shadow(raw_ ? *raw_ : in, s.out, pages_, last_);  // against the raw cache
  accumulate(config_.importance_source == ImportanceSource::kCover && cover_rows.defined() ? cover_rows : s.eff, G);
  last_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s.out.view({1, H * D}).to(in.q.scalar_type());
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
