// Kascade mode of the LuKA core against direct computations in fp64: the anchor's pooled top-k
// (post-softmax, summed over a KV head's query heads, or over a tile of queries in prefill), the
// reuse layer's exact softmax over its anchor's sets through the head map, and dense attention
// when the top-k keeps every key.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/luka/config.h"
#include "core/luka/luka_attention.h"
#include "core/util/error.h"
#include "tests/core/luka/luka_sequence.h"

namespace luka {
namespace {

using test::Sequence;

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(); }

LayerConfig kascade(std::int64_t source, std::int64_t top_k) {
  LayerConfig c;
  c.mode = AttentionMode::kKascade;
  c.kascade.source = source;
  c.kascade.top_k = top_k;
  c.kascade.top_frac = 0;  // a count
  return c;
}

// The top-k positions of a row (higher value first, lower position on ties), ascending.
std::vector<std::int64_t> top_of(const at::Tensor& row, std::int64_t k) {
  const at::Tensor r = row.to(at::kDouble).contiguous();
  const double* p = r.const_data_ptr<double>();
  std::vector<std::int64_t> idx(static_cast<std::size_t>(r.size(0)));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](auto a, auto b) { return p[a] > p[b]; });
  idx.resize(static_cast<std::size_t>(std::min<std::int64_t>(k, r.size(0))));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// The attention of `s`'s query at `pos`, head h, over the keys in `keys` only: [D] in fp64.
at::Tensor attend(const Sequence& s, std::int64_t pos, std::int64_t h, const std::vector<std::int64_t>& keys) {
  const std::int64_t g = h / (s.H / s.KV);
  const at::Tensor idx = at::tensor(keys, at::kLong);
  const at::Tensor k = s.k[g].index_select(0, idx).to(at::kDouble), v = s.v[g].index_select(0, idx).to(at::kDouble);
  const at::Tensor q = s.q[h][pos].to(at::kDouble);
  const at::Tensor p = at::softmax(at::matmul(k, q) / std::sqrt(static_cast<double>(s.D)), 0);
  return at::matmul(p, v);
}

// Prefills `prompt` tokens of `s` through `att`, decodes the rest, and returns the largest
// difference of any output from dense attention in fp64.
double worst_against_dense(LukaAttention& att, const Sequence& s, std::int64_t prompt) {
  c10::InferenceMode guard;
  const at::Tensor pre = att.forward(s.inputs(0, prompt)).view({prompt, s.H, s.D});
  double worst = 0;
  for (std::int64_t pos = 0; pos < prompt; ++pos) worst = std::max(worst, max_diff(pre[pos], s.dense(pos).first));
  for (std::int64_t pos = prompt; pos < s.N; ++pos)
    worst = std::max(worst, max_diff(att.forward(s.inputs(pos, 1)).view({s.H, s.D}), s.dense(pos).first));
  return worst;
}

TEST(LukaKascade, AnAnchorKeepingEveryKeyIsDense) {
  const Sequence s(6, 2, 16, 70, 11);
  for (const bool shared : {false, true}) {
    LayerConfig c = kascade(-1, 1000);
    c.kascade.shared = shared;
    c.kascade.tile = 8;
    LukaAttention att(3, c);  // not layer 0: the output is the top-k one
    EXPECT_LE(worst_against_dense(att, s, 40), 1e-5) << "shared " << shared;
    EXPECT_EQ(att.last_step().kascade_source, 3);
    EXPECT_EQ(att.last_step().selected[0].size(), static_cast<std::size_t>(s.N));
  }
}

TEST(LukaKascade, LayerZerosAnchorKeepsItsDenseOutput) {
  const Sequence s(4, 2, 8, 50, 12);
  LukaAttention att(0, kascade(-1, 3));
  EXPECT_LE(worst_against_dense(att, s, 30), 1e-5);
}

TEST(LukaKascade, DecodeAnchorAttendsToItsGroupsPooledTopK) {
  const Sequence s(6, 2, 16, 60, 13);
  const std::int64_t G = s.H / s.KV, k = 7;
  for (const bool shared : {false, true}) {
    LayerConfig c = kascade(-1, k);
    c.kascade.shared = shared;
    LukaAttention att(2, c);
    c10::InferenceMode guard;
    att.forward(s.inputs(0, 30));
    double worst = 0;
    for (std::int64_t pos = 30; pos < s.N; ++pos) {
      const at::Tensor out = att.forward(s.inputs(pos, 1)).view({s.H, s.D});
      const at::Tensor probs = s.dense(pos).second;  // [H, pos + 1]
      for (std::int64_t h = 0; h < s.H; ++h) {
        const std::int64_t g = h / G;
        const at::Tensor pooled = shared ? probs.sum(0) : probs.narrow(0, g * G, G).sum(0);
        const auto want = top_of(pooled, k);
        ASSERT_EQ(att.last_step().selected[static_cast<std::size_t>(h)], want) << "pos " << pos << " head " << h;
        worst = std::max(worst, max_diff(out[h], attend(s, pos, h, want)));
      }
      EXPECT_EQ(att.last_step().cover_size[0], k);
      const double row_sum = att.last_step().effective[0].sum().item<double>();
      EXPECT_NEAR(row_sum, 1.0, 1e-5);
    }
    EXPECT_LE(worst, 1e-5) << "shared " << shared;
  }
}

TEST(LukaKascade, ReuseLayerAttendsToItsAnchorsSetsThroughTheHeadMap) {
  // Two layers with their own queries and keys; layer 2 reuses layer 1's sets with KV head 0
  // taking the anchor's head 1 and head 1 taking head 1 (many-to-one).
  const Sequence a(4, 2, 8, 48, 14), b(4, 2, 8, 48, 15);
  const std::int64_t G = a.H / a.KV;
  auto board = std::make_shared<KascadeBoard>();
  LukaAttention anchor(1, kascade(-1, 5));
  LayerConfig rc = kascade(1, 1);
  rc.kascade.head_map = {1, 1};
  LukaAttention reuse(2, rc);
  anchor.set_kascade_board(board);
  reuse.set_kascade_board(board);
  c10::InferenceMode guard;
  anchor.forward(a.inputs(0, 24));
  reuse.forward(b.inputs(0, 24));
  double worst = 0;
  for (std::int64_t pos = 24; pos < a.N; ++pos) {
    anchor.forward(a.inputs(pos, 1));
    const at::Tensor out = reuse.forward(b.inputs(pos, 1)).view({b.H, b.D});
    const auto& picked = anchor.last_step().selected;
    for (std::int64_t h = 0; h < b.H; ++h) {
      const auto& want = picked[static_cast<std::size_t>(1 * G)];  // the anchor's KV head 1
      ASSERT_EQ(reuse.last_step().selected[static_cast<std::size_t>(h)], want);
      worst = std::max(worst, max_diff(out[h], attend(b, pos, h, want)));
    }
    EXPECT_EQ(reuse.last_step().kascade_source, 1);
    EXPECT_EQ(reuse.last_step().head_map, (std::vector<std::int64_t>{1, 1}));
  }
  EXPECT_LE(worst, 1e-5);
}

TEST(LukaKascade, PrefillTilesShareOnePooledTopK) {
  // The reference: per tile of 4 queries, the post-softmax rows of the tile's queries and the KV
  // head's query heads summed, top 2 among the keys the tile sees; each query attends to the set
  // within its causal past, or to itself when it sees none of it.
  // Queries close to their own keys make the rows peak on the diagonal, so some tile's first
  // query sees none of the tile's picks.
  Sequence s(4, 2, 8, 22, 16);
  const std::int64_t G = s.H / s.KV, tile = 4, k = 2;
  s.q = s.k.repeat_interleave(G, 0) * 3 + s.q * 0.3;
  LayerConfig c = kascade(-1, k);
  c.kascade.tile = tile;
  LukaAttention att(5, c);
  c10::InferenceMode guard;
  const at::Tensor out = att.forward(s.inputs(0, s.N)).view({s.N, s.H, s.D});
  double worst = 0;
  int blind = 0;
  for (std::int64_t i0 = 0; i0 < s.N; i0 += tile) {
    const std::int64_t m = std::min(tile, s.N - i0), seen = i0 + m;
    for (std::int64_t g = 0; g < s.KV; ++g) {
      at::Tensor pooled = at::zeros({seen}, at::kDouble);
      for (std::int64_t i = i0; i < i0 + m; ++i)
        pooled.narrow(0, 0, i + 1).add_(s.dense(i).second.narrow(0, g * G, G).sum(0));
      const auto set = top_of(pooled, k);
      for (std::int64_t i = i0; i < i0 + m; ++i) {
        std::vector<std::int64_t> keys;
        for (const auto t : set)
          if (t <= i) keys.push_back(t);
        if (keys.empty()) {
          keys.push_back(i);
          ++blind;
        }
        for (std::int64_t j = 0; j < G; ++j) worst = std::max(worst, max_diff(out[i][g * G + j], attend(s, i, g * G + j, keys)));
      }
    }
  }
  EXPECT_LE(worst, 1e-5);
  EXPECT_GT(blind, 0);  // the first queries of a tile can see none of its picks
}

TEST(LukaKascade, ReuseWithoutAPublishingAnchorIsAnError) {
  const Sequence s(4, 2, 8, 20, 17);
  LukaAttention reuse(3, kascade(1, 4));
  c10::InferenceMode guard;
  try {
    reuse.forward(s.inputs(0, 10));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kascade reuses layer 1"), std::string::npos) << e.what();
  }
  // A head map that does not fit the model's KV heads.
  auto board = std::make_shared<KascadeBoard>();
  LukaAttention anchor(1, kascade(-1, 4));
  LayerConfig rc = kascade(1, 4);
  rc.kascade.head_map = {0, 1, 1};
  LukaAttention bad(2, rc);
  anchor.set_kascade_board(board);
  bad.set_kascade_board(board);
  anchor.forward(s.inputs(0, 10));
  EXPECT_THROW(bad.forward(s.inputs(0, 10)), Error);
}

TEST(LukaKascade, ConfigKeysPresetAndSources) {
  const LukaConfig p = LukaConfig::preset("kascade", 28);
  std::vector<std::int64_t> anchors;
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    EXPECT_EQ(p.layers[i].mode, AttentionMode::kKascade);
    if (p.layers[i].kascade.source < 0) anchors.push_back(static_cast<std::int64_t>(i));
  }
  EXPECT_EQ(anchors, (std::vector<std::int64_t>{0, 2, 5, 11, 18}));  // round(a·28/36) for a in 0, 2, 7, 14, 23
  EXPECT_EQ(p.layers[10].kascade.source, 5);
  EXPECT_EQ(p.layers[27].kascade.source, 18);
  EXPECT_EQ(describe_modes(p), "kascade 0-27");

  LukaConfig c = LukaConfig::preset("dense", 4);
  c.apply_override("layers=0|2,mode=kascade");
  c.apply_override("layer=3,mode=kascade,kascade_source=2,kascade_head_map=1|0,kascade_top_frac=0.2,kascade_prefill=dense");
  EXPECT_EQ(c.layers[3].kascade.head_map, (std::vector<std::int64_t>{1, 0}));
  const LukaConfig back = LukaConfig::from_json(c.to_json(), 4, "test");
  EXPECT_EQ(back.to_json(), c.to_json());
  EXPECT_EQ(back.layers[3].kascade.prefill, KascadePrefill::kDense);
  EXPECT_EQ(back.layers[3].kascade.head_map, (std::vector<std::int64_t>{1, 0}));
  // A source that is not an anchor, or not earlier; bad values.
  EXPECT_THROW(c.apply_override("layer=3,kascade_source=1"), Error);
  EXPECT_THROW(c.apply_override("layer=2,kascade_source=2"), Error);
  EXPECT_THROW(c.apply_override("layer=3,kascade_head_map=1||0"), Error);
  EXPECT_THROW(c.apply_override("layer=3,kascade_head_map=-1"), Error);
  EXPECT_THROW(c.apply_override("kascade_tile=0"), Error);
  EXPECT_THROW(c.apply_override("kascade_top_frac=1.5"), Error);
  EXPECT_THROW(LukaConfig::from_json(R"({"layers": {"1": {"mode": "kascade", "kascade_source": 0}}})", 4, "f.json"), Error);
}

}  // namespace
}  // namespace luka
