// Kascade mode of the CPU core (docs/papers/kascade.md; docs/design.md §5; docs/methods.md for the choices the
// paper leaves open). An anchor layer computes its exact attention, pools it post-softmax — over
// each KV head's query heads in decode, over a tile of queries and those heads in prefill, or over
// every head with `shared` — keeps the top-k positions of the pooled row and attends to them only;
// layer 0's anchor keeps its dense output (the paper's dense layer 0). A reuse layer attends only to
// the sets its anchor published at the same forward, KV head g taking the anchor's head_map[g].
//
// In prefill a query attends to its tile's set within its causal past; a query that sees none of
// it (possible only when every pick lies after it inside the tile) attends to itself.
#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "core/luka/methods/kascade.h"
#include "core/luka/luka_attention.h"
#include "core/luka/prefill.h"
#include "core/util/error.h"

namespace luka {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

KascadeTopK top_k_rule(const KascadeConfig& c) {
  KascadeTopK k;
  k.count = static_cast<int>(c.top_k);
  k.fraction = c.top_frac;
  k.min_count = static_cast<int>(c.min_k);
  return k;
}

// The top-k positions of a pooled row of n floats, ascending.
std::vector<std::int64_t> pooled_set(const at::Tensor& pooled, std::int64_t n, const KascadeConfig& c) {
  const at::Tensor row = pooled.narrow(0, 0, n).contiguous();
  const std::vector<int> best = kascade_top_k(row.const_data_ptr<float>(), static_cast<int>(n), top_k_rule(c).size(static_cast<int>(n)));
  std::vector<std::int64_t> out(best.begin(), best.end());
  std::sort(out.begin(), out.end());
  return out;
}

// An anchor's sets from its post-softmax rows `probs[g]` ([G, m, T] or [G, T] per KV group): one
// per group, or one pooled over every group when shared; top-k among the first n positions.
std::vector<std::vector<std::int64_t>> anchor_sets(const std::vector<at::Tensor>& probs, std::int64_t n, const KascadeConfig& c) {
  std::vector<std::vector<std::int64_t>> sets;
  const auto pool = [](const at::Tensor& p) { return p.reshape({-1, p.size(-1)}).sum(0); };
  if (c.shared) {
    at::Tensor total = pool(probs[0]);
    for (std::size_t g = 1; g < probs.size(); ++g) total.add_(pool(probs[g]));
    sets.push_back(pooled_set(total, n, c));
  } else {
    for (const at::Tensor& p : probs) sets.push_back(pooled_set(pool(p), n, c));
  }
  return sets;
}

}  // namespace

KascadeBoard::Published& LukaAttention::published(std::int64_t layer) {
  if (!board_) board_ = std::make_shared<KascadeBoard>();
  if (static_cast<std::int64_t>(board_->layers.size()) <= layer) board_->layers.resize(static_cast<std::size_t>(layer) + 1);
  return board_->layers[static_cast<std::size_t>(layer)];
}

// The sets this reuse layer's anchor published at this forward, or a clear error.
const KascadeBoard::Published& LukaAttention::reused(const AttentionInputs& in) const {
  const std::int64_t source = config_.kascade.source, T = in.k.size(1), n = in.q.size(1);
  const std::string where = "luka layer " + std::to_string(layer_);
  if (!board_ || static_cast<std::int64_t>(board_->layers.size()) <= source)
    fail(where, "kascade reuses layer " + std::to_string(source) + ", which has published no top-k (it must be a Kascade anchor)");
  const KascadeBoard::Published& p = board_->layers[static_cast<std::size_t>(source)];
  if (p.tokens != T || p.q_pos0 != in.q_pos0 || p.queries != n)
    fail(where, "kascade reuses layer " + std::to_string(source) +
                    ", which published no top-k at this step (it must be a Kascade anchor, mode=kascade with kascade_source=-1)");
  return p;
}

namespace {

// The set KV group g of a layer reads among `sets`: the only one when shared, else head_map[g]
// (g itself for an anchor or an empty map). Throws when the map does not fit the sets.
std::int64_t set_of_group(const std::vector<std::vector<std::int64_t>>& sets, bool shared, const std::vector<std::int64_t>& map,
                          std::int64_t g, std::int64_t groups, int layer) {
  if (shared) return 0;
  if (map.empty()) return g;
  const std::string where = "luka layer " + std::to_string(layer);
  if (static_cast<std::int64_t>(map.size()) != groups)
    fail(where, "kascade_head_map has " + std::to_string(map.size()) + " entries, the model " + std::to_string(groups) + " KV heads");
  if (map[static_cast<std::size_t>(g)] >= static_cast<std::int64_t>(sets.size()))
    fail(where, "kascade_head_map names KV head " + std::to_string(map[static_cast<std::size_t>(g)]) + " of " +
                    std::to_string(sets.size()));
  return map[static_cast<std::size_t>(g)];
}

}  // namespace

void LukaAttention::decode_kascade(Step& s) {
  const AttentionInputs& in = s.in;
  const KascadeConfig& c = config_.kascade;
  const std::int64_t H = in.q.size(0), T = in.k.size(1), G = in.group_size, KV = H / G;
  const bool anchor = c.source < 0;
  const std::vector<std::vector<std::int64_t>>* sets = nullptr;
  bool shared = false, dense_out = false;
  if (anchor) {
    decode_dense(s);  // the exact rows, pooled below; layer 0 keeps this output
    std::vector<at::Tensor> rows;
    for (std::int64_t g = 0; g < KV; ++g) rows.push_back(s.eff.narrow(0, g * G, G));
    KascadeBoard::Published& pub = published(layer_);
    pub = KascadeBoard::Published{T, in.q_pos0, 1, 1, c.shared, {anchor_sets(rows, T, c)}};
    sets = &pub.sets[0];
    shared = c.shared;
    dense_out = layer_ == 0;
  } else {
    const KascadeBoard::Published& pub = reused(in);
    sets = &pub.sets.at(0);
    shared = pub.shared;
  }
  last_.kascade_source = anchor ? layer_ : c.source;
  last_.selected.assign(static_cast<std::size_t>(H), {});
  last_.head_map.clear();
  const std::vector<std::int64_t> no_map;
  std::vector<const std::vector<std::int64_t>*> per_head(static_cast<std::size_t>(H));
  for (std::int64_t g = 0; g < KV; ++g) {
    const std::int64_t which = set_of_group(*sets, shared, anchor ? no_map : c.head_map, g, KV, layer_);
    if (!shared) last_.head_map.push_back(which);
    const std::vector<std::int64_t>& set = (*sets)[static_cast<std::size_t>(which)];
    for (std::int64_t j = 0; j < G; ++j) {
      const std::size_t h = static_cast<std::size_t>(g * G + j);
      per_head[h] = &set;
      auto& sel = last_.selected[h];
      if (dense_out) {
        sel.resize(static_cast<std::size_t>(T));
        std::iota(sel.begin(), sel.end(), 0);
      } else {
        sel = set;
      }
      last_.cover_size[h] = static_cast<std::int64_t>(sel.size());
    }
  }
  // The exact softmax over each head's set; an anchor's rows are already exact, so renormalized.
  if (!dense_out) attend_sets(s, per_head, anchor);
}

at::Tensor LukaAttention::prefill_kascade(const AttentionInputs& in) {
  const KascadeConfig& c = config_.kascade;
  const std::int64_t H = in.q.size(0), n = in.q.size(1), D = in.q.size(2), KV = in.k.size(0), T = in.k.size(1);
  const std::int64_t G = in.group_size;
  const bool anchor = c.source < 0;
  const double decay = config_.lined.decay;
  at::Tensor importance = importance_.narrow(1, 0, T), h2o = h2o_.narrow(1, 0, T);
  if (!anchor && c.prefill == KascadePrefill::kDense) return aten_prefill(in, PrefillMask{}, decay, layer_, prefill_observer_, prefill_pool_level_, importance, h2o);

  const KascadeBoard::Published* source = anchor ? nullptr : &reused(in);
  KascadeBoard::Published pub{T, in.q_pos0, n, anchor ? c.tile : source->tile, anchor ? c.shared : source->shared, {}};
  const std::int64_t tile = pub.tile;
  const bool dense_out = anchor && (layer_ == 0 || c.prefill == KascadePrefill::kDense);
  const at::TensorOptions longs = at::TensorOptions().dtype(at::kLong);
  const at::Tensor qf = in.q.to(at::kFloat), kf = in.k.to(at::kFloat), vf = in.v.to(at::kFloat);
  at::Tensor out = at::empty({H, n, D}, at::kFloat);
  const at::Tensor key_pos = at::arange(T, longs).view({1, T});
  const std::vector<std::int64_t> no_map;
  for (std::int64_t i0 = 0, t = 0; i0 < n; i0 += tile, ++t) {
    const std::int64_t m = std::min(tile, n - i0), seen = in.q_pos0 + i0 + m;  // keys [0, seen) reach the tile
    const at::Tensor query_pos = at::arange(in.q_pos0 + i0, in.q_pos0 + i0 + m, longs).view({m, 1});
    const at::Tensor causal_hidden = key_pos.gt(query_pos);  // [m, T]
    std::vector<at::Tensor> scores(static_cast<std::size_t>(KV)), dense(static_cast<std::size_t>(KV));
    for (std::int64_t g = 0; g < KV; ++g) {
      scores[g] = at::matmul(qf.narrow(0, g * G, G).narrow(1, i0, m), kf[g].transpose(0, 1)).mul_(in.scale);  // [G, m, T]
      if (anchor) dense[g] = at::softmax(scores[g].masked_fill(causal_hidden.unsqueeze(0), kNegInf), -1);
    }
    if (anchor) pub.sets.push_back(anchor_sets(dense, seen, c));
    if (!anchor && t >= static_cast<std::int64_t>(source->sets.size()))
      fail("luka layer " + std::to_string(layer_), "kascade's anchor published fewer prefill tiles than this layer reads");
    const auto& sets = anchor ? pub.sets.back() : source->sets[static_cast<std::size_t>(t)];
    for (std::int64_t g = 0; g < KV; ++g) {
      at::Tensor probs;
      if (dense_out) {
        probs = dense[g];
      } else {
        const auto& set = sets[static_cast<std::size_t>(set_of_group(sets, pub.shared, anchor ? no_map : c.head_map, g, KV, layer_))];
        at::Tensor picked = at::zeros({T}, at::kBool);
        picked.index_fill_(0, at::tensor(set, at::kLong), true);
        at::Tensor hidden = causal_hidden.logical_or(picked.logical_not().view({1, T}));
        // A query that sees none of the set attends to itself.
        const at::Tensor blind = hidden.all(1, /*keepdim=*/true);
        hidden = hidden.logical_and(key_pos.eq(query_pos).logical_and(blind).logical_not());
        probs = at::softmax(scores[g].masked_fill(hidden.unsqueeze(0), kNegInf), -1);
      }
      out.narrow(0, g * G, G).narrow(1, i0, m).copy_(at::matmul(probs, vf[g]));
      if (prefill_observer_) observe_prefill_block(prefill_observer_, 0, layer_, in.q_pos0 + i0, g * G, probs);  // CPU: level 0
      add_prefill_probs(probs, g, decay, importance, h2o);
    }
  }
  if (anchor) published(layer_) = std::move(pub);
  return out.transpose(0, 1).reshape({n, H * D}).to(in.q.scalar_type());
}

}  // namespace luka
