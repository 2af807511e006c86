// SemantiCache's pages in the clustered core (segmenter delimiter, compressor gsc): the layer's
// pages and summaries against the building blocks (core/luka/semantic_pages, checked against
// NumPy), the delimiter segmenter's cuts on known token streams, proportional attention and exact
// refinement of non-contiguous clusters against dense attention by its formula, and the decoder
// handing its ids through to a whole model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/luka/luka_attention.h"
#include "core/luka/methods/semantic_pages.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/util/error.h"
#include "tests/core/luka/luka_sequence.h"

namespace luka {
namespace {

namespace fs = std::filesystem;
using test::Sequence;

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(); }

// A vocabulary of 8 ids: 0-4 words, 5 ".", 6 ",", 7 "\n".
std::shared_ptr<const std::vector<std::string>> vocabulary() {
  return std::make_shared<const std::vector<std::string>>(std::vector<std::string>{" the", " cat", "s", " sat", "on", ".", ",", "\n"});
}
bool delimiter_id(std::int32_t id) { return id >= 5; }

LayerConfig semantic(std::int64_t page, std::int64_t tail, std::int64_t interval, double tau) {
  LayerConfig c;
  c.mode = AttentionMode::kClustered;
  c.clustered.page_size = page;
  c.clustered.tail = tail;
  c.clustered.interval = interval;
  c.clustered.segmenter = Segmenter::kDelimiter;
  c.clustered.compressor = Compressor::kGsc;
  c.clustered.gsc_tau = tau;
  c.clustered.bias = SummaryBias::kFixed;
  c.clustered.math = RefineMath::kExact;
  c.clustered.rule = RefineRule::kTopK;
  c.clustered.top_k = 0;
  return c;
}

// A sequence whose keys repeat within groups (so GSC finds clusters of several tokens, not
// contiguous) and its token ids.
struct SemanticSequence {
  Sequence s;
  std::vector<std::int32_t> ids;
  SemanticSequence(std::int64_t H, std::int64_t KV, std::int64_t D, std::int64_t N, std::uint64_t seed,
                   const std::vector<std::int32_t>& pattern, double jitter)
      : s(H, KV, D, N, seed) {
    // Four directions per KV head; token t takes direction (t * 7 / 3) % 4 plus a little noise, so
    // tokens of one direction lie apart.
    const at::Tensor dirs = at::randn({KV, 4, D});
    for (std::int64_t t = 0; t < N; ++t) s.k.select(1, t).copy_(dirs.select(1, (t * 7 / 3) % 4) + jitter * at::randn({KV, D}));
    for (std::int64_t t = 0; t < N; ++t) ids.push_back(pattern[static_cast<std::size_t>(t) % pattern.size()]);
  }
  AttentionInputs inputs(std::int64_t pos0, std::int64_t n) const {
    AttentionInputs in = s.inputs(pos0, n);
    in.ids = ids.data();
    return in;
  }
};

template <typename F>
void run(LukaAttention& att, const SemanticSequence& q, std::int64_t prompt, F&& check) {
  c10::InferenceMode guard;
  att.forward(q.inputs(0, prompt));
  for (std::int64_t pos = prompt; pos < q.s.N; ++pos) check(att.forward(q.inputs(pos, 1)).view({q.s.H, q.s.D}), pos);
}

// A layer of config `c` (given the vocabulary) over `q` against dense attention by its formula:
// the largest output difference over the decode steps after `prompt`, and the smallest recall of
// its dense shadow (1 when the shadow is off).
struct AgainstDense {
  double worst = 0, recall = 1;
};
AgainstDense against_dense(LukaAttention& att, const SemanticSequence& q, std::int64_t prompt) {
  att.set_token_texts(vocabulary());
  AgainstDense r;
  run(att, q, prompt, [&](const at::Tensor& out, std::int64_t pos) {
    r.worst = std::max(r.worst, max_diff(out, q.s.dense(pos).first));
    if (att.last_step().fidelity.defined()) r.recall = std::min(r.recall, att.last_step().fidelity.select(1, kRecall).min().item<double>());
  });
  return r;
}

const std::vector<std::int32_t> kSentence = {0, 1, 2, 3, 4, 0, 1, 6, 0, 3, 1, 2, 4, 5, 7, 1, 3, 0, 2, 4, 1, 3, 5};

TEST(LukaSemantic, PagesAndSummariesAreTheBuildingBlocksOnTheSameKeys) {
  const SemanticSequence q(4, 2, 8, 120, 3, kSentence, 0.3);
  LukaAttention att(0, semantic(8, 16, 4, 0.6));
  att.set_token_texts(vocabulary());
  run(att, q, 80, [](const at::Tensor&, std::int64_t) {});
  const auto& pages = att.pages();
  const std::int64_t E = att.paged_end();
  ASSERT_GT(E, 40);
  // The paged region ends right after a delimiter (the cut keeps chunks whole).
  EXPECT_TRUE(delimiter_id(q.ids[static_cast<std::size_t>(E - 1)]));

  // The building blocks on positions [0, E): chunks by the token texts, GSC over every KV head's
  // key side by side, merged by the mean, bias log |S|.
  std::vector<std::string> texts;
  for (std::int64_t t = 0; t < E; ++t) texts.push_back((*vocabulary())[static_cast<std::size_t>(q.ids[static_cast<std::size_t>(t)])]);
  const std::int64_t KV = q.s.KV, D = q.s.D;
  const at::Tensor keys = q.s.k.narrow(1, 0, E).permute({1, 0, 2}).contiguous(), values = q.s.v.narrow(1, 0, E).permute({1, 0, 2}).contiguous();
  SemanticPagesOptions options;
  options.tau = 0.6;
  const SemanticPages want = semantic_pages(delimiter_chunks(texts, DelimiterSet{}), keys.const_data_ptr<float>(), static_cast<int>(KV * D),
                                            values.const_data_ptr<float>(), static_cast<int>(KV * D), options);
  // Pages are made in more than one go (after prefill, then every few steps), and each go ends at
  // a delimiter, so the partition is the same as one pass over [0, E).
  ASSERT_EQ(static_cast<int>(pages.size()), want.cores());
  bool scattered = false;
  const at::Tensor sk = att.summary_keys(), sv = att.summary_values(), sb = att.summary_bias();
  for (int p = 0; p < want.cores(); ++p) {
    std::vector<std::int64_t> got;
    pages[static_cast<std::size_t>(p)].for_each_position([&](std::int64_t t) { got.push_back(t); });
    const std::vector<std::int64_t> expect(want.members[static_cast<std::size_t>(p)].begin(), want.members[static_cast<std::size_t>(p)].end());
    ASSERT_EQ(got, expect) << "page " << p;
    EXPECT_EQ(pages[static_cast<std::size_t>(p)].raw, expect.size() == 1) << "page " << p;
    scattered = scattered || !pages[static_cast<std::size_t>(p)].contiguous();
    for (std::int64_t g = 0; g < KV; ++g) {
      const at::Tensor wk = at::from_blob(const_cast<float*>(want.keys.data()) + (p * KV + g) * D, {D}, at::kFloat);
      const at::Tensor wv = at::from_blob(const_cast<float*>(want.values.data()) + (p * KV + g) * D, {D}, at::kFloat);
      EXPECT_LE(max_diff(sk[g][p], wk), 1e-6) << "page " << p;
      EXPECT_LE(max_diff(sv[g][p], wv), 1e-6) << "page " << p;
      EXPECT_NEAR(sb[g][p].item<double>(), want.bias[static_cast<std::size_t>(p)], 1e-6);
    }
  }
  EXPECT_TRUE(scattered) << "no cluster of this sequence is non-contiguous; the test covers nothing new";
}

TEST(LukaSemantic, DelimiterSegmenterCutsAtTheLastDelimiterAndKeepsDelimitersRaw) {
  // Page size 4, tail 2: after a prefill of 14 tokens the schedule makes 3 pages due ([0, 12)).
  // Delimiters at 3 and 9: the cut is after 9; tokens 10, 11 wait for their delimiter.
  const std::vector<std::int32_t> ids = {0, 1, 2, 5, 3, 4, 0, 1, 2, 6, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4};
  SemanticSequence q(2, 1, 4, static_cast<std::int64_t>(ids.size()), 5, ids, 0.0);
  LayerConfig c = semantic(4, 2, 1, 2.0 / 3.0);
  c.clustered.compressor = Compressor::kMean;  // one page per chunk: the cuts alone
  LukaAttention att(0, c);
  att.set_token_texts(vocabulary());
  c10::InferenceMode guard;
  att.forward(q.inputs(0, 14));
  ASSERT_EQ(att.paged_end(), 10);
  const auto span = [&](std::size_t p) { return std::vector<std::int64_t>{att.pages()[p].start, att.pages()[p].end, att.pages()[p].raw}; };
  ASSERT_EQ(att.pages().size(), 4u);
  EXPECT_EQ(span(0), (std::vector<std::int64_t>{0, 3, 0}));
  EXPECT_EQ(span(1), (std::vector<std::int64_t>{3, 4, 1}));
  EXPECT_EQ(span(2), (std::vector<std::int64_t>{4, 9, 0}));
  EXPECT_EQ(span(3), (std::vector<std::int64_t>{9, 10, 1}));
  // No delimiter after 9: nothing more is paged until 4 pages' worth (16 tokens) after the last
  // cut are due, which is then cut at the schedule's end, [10, 26) at T = 28.
  for (std::int64_t pos = 14; pos < 27; ++pos) att.forward(q.inputs(pos, 1));
  EXPECT_EQ(att.paged_end(), 10);
  att.forward(q.inputs(27, 1));
  EXPECT_EQ(att.paged_end(), 26);
  ASSERT_EQ(att.pages().size(), 5u);
  EXPECT_EQ(span(4), (std::vector<std::int64_t>{10, 26, 0}));
}

TEST(LukaSemantic, ADelimiterSegmenterWithoutTokenTextsOrIdsIsAClearError) {
  SemanticSequence q(2, 1, 4, 40, 5, kSentence, 0.1);
  c10::InferenceMode guard;
  {
    LukaAttention att(0, semantic(4, 2, 1, 0.7));
    try {
      att.forward(q.inputs(0, 20));
      FAIL() << "no token texts, no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("token texts"), std::string::npos) << e.what();
    }
  }
  LukaAttention att(0, semantic(4, 2, 1, 0.7));
  att.set_token_texts(vocabulary());
  EXPECT_THROW(att.forward(q.s.inputs(0, 20)), Error);  // inputs without ids
}

TEST(LukaSemantic, EveryClusterOfOneTokenIsDense) {
  // tau 1 merges nothing: every page is one token kept raw, and the layer is dense attention.
  const SemanticSequence q(4, 2, 8, 100, 7, kSentence, 0.3);
  LayerConfig c = semantic(4, 8, 2, 1.0);
  c.dense_shadow = true;
  LukaAttention att(0, c);
  const AgainstDense r = against_dense(att, q, 50);
  EXPECT_LE(r.worst, 1e-5);
  EXPECT_LE(1.0 - r.recall, 1e-6);  // raw pages count as exactly resolved
  ASSERT_GT(att.pages().size(), 30u);
  for (const Page& p : att.pages()) EXPECT_TRUE(p.raw && p.size() == 1);
  for (const auto& refined : att.last_step().refined) EXPECT_TRUE(refined.empty());
}

TEST(LukaSemantic, ProportionalAttentionOfIdenticalKeysIsDense) {
  // Tokens of one direction share one key exactly: merging them by the mean with log |S| added to
  // the logit gives each cluster exactly its members' mass, so the layer is dense attention
  // without refining anything. Without the bias it is not.
  SemanticSequence q(4, 2, 8, 100, 9, kSentence, 0.0);
  LayerConfig c = semantic(4, 8, 2, 0.99);
  LukaAttention att(0, c);
  EXPECT_LE(against_dense(att, q, 50).worst, 1e-5);
  std::int64_t merged = 0;
  for (const Page& p : att.pages()) merged += p.size() > 1;
  EXPECT_GT(merged, 5);

  c.clustered.bias = SummaryBias::kNone;
  LukaAttention plain(0, c);
  EXPECT_GT(against_dense(plain, q, 50).worst, 1e-3);
}

TEST(LukaSemantic, RefiningEveryNonContiguousClusterWithExactMathIsDense) {
  const SemanticSequence q(6, 2, 16, 140, 11, kSentence, 0.5);
  for (const Compressor compressor : {Compressor::kGsc, Compressor::kMean}) {
    for (const Segmenter segmenter : {Segmenter::kDelimiter, Segmenter::kFixed}) {
      LayerConfig c = semantic(8, 12, 4, 0.3);
      c.clustered.compressor = compressor;
      c.clustered.segmenter = segmenter;
      c.clustered.rule = RefineRule::kTopFrac;
      c.clustered.top_frac = 1.0;
      c.dense_shadow = true;
      LukaAttention att(0, c);
      const AgainstDense r = against_dense(att, q, 60);
      const std::string what = std::string(to_string(segmenter)) + "/" + to_string(compressor);
      EXPECT_LE(r.worst, 1e-5) << what;
      EXPECT_GE(r.recall, 1 - 1e-6) << what;
      bool scattered = false;
      for (const Page& p : att.pages()) scattered = scattered || !p.contiguous();
      EXPECT_EQ(scattered, compressor == Compressor::kGsc) << what;
      // Every page but the raw ones is refined: the cover counts each token once.
      const LukaStep& st = att.last_step();
      std::size_t selectable = 0;
      for (const Page& p : att.pages())
        if (p.created_step < st.step) selectable += !p.raw;
      for (const auto& refined : st.refined) EXPECT_EQ(refined.size(), selectable) << what;
      for (const std::int64_t n : st.cover_size) EXPECT_EQ(n, st.tokens) << what;
    }
  }
}

TEST(LukaSemantic, MassPreservingRefinementSpreadsAClustersMassOverItsMembersOnly) {
  // Mass-preserving refinement of every page: each token's effective weight is its page's α
  // times the softmax of the page's own children, wherever its members lie.
  const SemanticSequence q(2, 1, 8, 90, 13, kSentence, 0.5);
  LayerConfig c = semantic(8, 8, 4, 0.3);
  c.clustered.math = RefineMath::kMassPreserving;
  c.clustered.rule = RefineRule::kTopFrac;
  c.clustered.top_frac = 1.0;
  LukaAttention att(0, c);
  att.set_token_texts(vocabulary());
  c10::InferenceMode guard;
  att.forward(q.inputs(0, 60));
  att.forward(q.inputs(60, 1));
  const LukaStep& st = att.last_step();
  const std::int64_t D = q.s.D;
  const at::Tensor qv = q.s.q.select(1, 60).to(at::kDouble);
  bool checked = false;
  for (std::size_t p = 0; p < att.pages().size(); ++p) {
    const Page& page = att.pages()[p];
    if (page.contiguous() || page.created_step >= st.step) continue;
    for (std::int64_t h = 0; h < q.s.H; ++h) {
      std::vector<double> logits;
      page.for_each_position([&](std::int64_t t) { logits.push_back(at::dot(qv[h], q.s.k[0][t].to(at::kDouble)).item<double>() / std::sqrt(double(D))); });
      double mx = -1e300, z = 0;
      for (double l : logits) mx = std::max(mx, l);
      for (double l : logits) z += std::exp(l - mx);
      const double alpha = st.summary_mass[h][static_cast<std::int64_t>(p)].item<double>();
      std::size_t i = 0;
      page.for_each_position([&](std::int64_t t) {
        EXPECT_NEAR(st.effective[h][t].item<double>(), alpha * std::exp(logits[i++] - mx) / z, 1e-6);
      });
      checked = true;
    }
  }
  EXPECT_TRUE(checked);
  EXPECT_NEAR(st.effective.sum(1).min().item<double>(), 1.0, 1e-5);
}

// --- whole model ------------------------------------------------------------------------------

const fs::path kCheckpoint = fs::path(LUKA_TEST_WORK) / "checkpoints" / "qwen3-fp16-sharded";

TEST(LukaSemanticModel, TheDecoderHandsItsIdsAndEveryRefinedClusterMatchesDense) {
  if (!fs::exists(kCheckpoint / "config.json")) GTEST_SKIP() << "no fixture checkpoint at " << kCheckpoint;
  const auto model = Model::load(kCheckpoint, LoadOptions{DType::kF32, 0});
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 260; ++i) ids.push_back((i * 131 + 17) % 1000);
  // Every id that is 0 mod 7 is a delimiter ("."), the others words.
  auto texts = std::make_shared<std::vector<std::string>>();
  for (std::int64_t id = 0; id < model->config().vocab_size; ++id) texts->push_back(id % 7 == 0 ? "." : " w" + std::to_string(id));
  const auto logits = [&](const LukaConfig* cfg, std::vector<std::shared_ptr<LukaLayer>>* layers) {
    Decoder d(model);
    if (cfg) {
      *layers = install_luka(d, *cfg);
      for (const auto& l : *layers) l->set_token_texts(texts);
    }
    std::vector<at::Tensor> out;
    d.prefill(std::vector<std::int32_t>(ids.begin(), ids.begin() + 100));
    for (std::size_t i = 100; i < ids.size(); ++i) out.push_back(d.decode(ids[i]));
    return out;
  };
  const auto ref = logits(nullptr, nullptr);
  LukaConfig cfg = LukaConfig::preset("semanticache", model->config().num_layers);
  cfg.apply_override("page_size=8,tail=16,interval=8,gsc_tau=0.2,rule=top_frac,top_frac=1");
  std::vector<std::shared_ptr<LukaLayer>> layers;
  const auto got = logits(&cfg, &layers);
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, max_diff(got[i], ref[i]));
  EXPECT_LE(worst, 1e-4);
  // The decoder's ids reached the layer: raw pages are exactly the delimiter tokens.
  std::int64_t raw = 0, scattered = 0;
  for (const Page& p : layers[1]->pages()) {
    if (p.raw && ids[static_cast<std::size_t>(p.start)] % 7 == 0) ++raw;
    scattered += !p.contiguous();
    if (p.raw) continue;
    p.for_each_position([&](std::int64_t t) { EXPECT_NE(ids[static_cast<std::size_t>(t)] % 7, 0) << "a delimiter inside a cluster at " << t; });
  }
  EXPECT_GT(raw, 10);
  EXPECT_GT(scattered, 0);
}

}  // namespace
}  // namespace luka
