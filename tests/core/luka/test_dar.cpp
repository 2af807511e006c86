// The distance-adaptive-dimension probe (core/luka/methods/dar.h, DarConfig): the basis against a
// subspace built by hand, the file round trip, and the layer against direct fp64 formulas and
// against a plain layer fed the projected cache.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/luka/config.h"
#include "core/luka/methods/dar.h"
#include "core/luka/luka_attention.h"
#include "core/util/error.h"
#include "core/util/npy.h"
#include "tests/core/luka/luka_sequence.h"

namespace luka {
namespace {

namespace fs = std::filesystem;
using test::Sequence;

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(); }

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("luka_test_dar_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

// Rows mean + 3 s1 u1 + s2 u2 over 64 tokens, u1 ⟂ u2 unit vectors and s1, s2 = ±1 patterns of
// zero mean and zero covariance: the covariance's eigenvalues are 9, 1, then 0.
at::Tensor two_directions(std::int64_t D, std::uint64_t seed, at::Tensor* u1, at::Tensor* u2, at::Tensor* mean) {
  at::manual_seed(seed);
  const at::Tensor q = std::get<0>(at::linalg_qr(at::randn({D, 2}, at::kDouble)));
  *u1 = q.select(1, 0);
  *u2 = q.select(1, 1);
  *mean = at::randn({D}, at::kDouble);
  at::Tensor x = at::empty({64, D}, at::kDouble);
  for (std::int64_t t = 0; t < 64; ++t) {
    const double s1 = t % 2 == 0 ? 1 : -1, s2 = (t / 2) % 2 == 0 ? 1 : -1;
    x[t].copy_(*mean + 3 * s1 * *u1 + s2 * *u2);
  }
  return x;
}

TEST(DarBasis, FindsTheDirectionsOfASubspaceBuiltByHand) {
  const std::int64_t D = 8;
  at::Tensor u1, u2, mean, u1b, u2b, meanb;
  const at::Tensor x0 = two_directions(D, 1, &u1, &u2, &mean), x1 = two_directions(D, 2, &u1b, &u2b, &meanb);
  const at::Tensor keys = at::stack({x0, x1}).to(at::kFloat);  // [KV 2, 64, D]
  const DarBasis basis = DarBasis::measure({keys, keys * 2}, {keys.flip(0), keys}, {keys, keys});
  const at::Tensor t = basis.table();
  ASSERT_EQ(t.sizes(), (at::IntArrayRef{2, 3, 2, D + 2, D}));
  // Head 0's keys: mean, eigenvalues 9, 1, 0..., leading directions ±u1, ±u2.
  EXPECT_LT(max_diff(t[0][0][0][0], mean), 1e-5);
  EXPECT_NEAR(t[0][0][0][1][0].item<double>(), 9.0, 1e-4);
  EXPECT_NEAR(t[0][0][0][1][1].item<double>(), 1.0, 1e-4);
  EXPECT_LT(t[0][0][0][1].narrow(0, 2, D - 2).abs().max().item<double>(), 1e-4);
  EXPECT_NEAR(std::abs(at::dot(t[0][0][0][2].to(at::kDouble), u1).item<double>()), 1.0, 1e-5);
  EXPECT_NEAR(std::abs(at::dot(t[0][0][0][3].to(at::kDouble), u2).item<double>()), 1.0, 1e-5);
  // Layer 1's keys are twice layer 0's: four times the variance.
  EXPECT_NEAR(t[1][0][0][1][0].item<double>(), 36.0, 4e-4);
  // The directions are orthonormal.
  const at::Tensor b = t[0][1][1].narrow(0, 2, D).to(at::kDouble);
  EXPECT_LT(max_diff(at::matmul(b, b.transpose(0, 1)), at::eye(D, at::kDouble)), 1e-5);
  EXPECT_NEAR(basis.explained(0, 0, 1)[0].item<double>(), 0.9, 1e-5);
  EXPECT_NEAR(basis.explained(0, 0, 2)[0].item<double>(), 1.0, 1e-5);

  // Rank 2 keeps every row; rank 1 drops the u2 part; rank D is the identity.
  EXPECT_LT(max_diff(basis.project(0, 0, 2, keys), keys), 1e-5);
  const at::Tensor r1 = basis.project(0, 0, 1, keys)[0].to(at::kDouble);
  for (std::int64_t i = 0; i < 64; ++i) {
    const double s1 = i % 2 == 0 ? 1 : -1;
    EXPECT_LT(max_diff(r1[i], mean + 3 * s1 * u1), 1e-5) << "row " << i;
  }
  const at::Tensor any = at::randn({2, 5, D});
  EXPECT_LT(max_diff(basis.project(1, 1, D, any), any), 1e-5);
  EXPECT_EQ(basis.project(0, 0, 2, keys.to(at::kBFloat16)).scalar_type(), at::kBFloat16);
  EXPECT_THROW(basis.project(2, 0, 2, keys), Error);                      // no layer 2
  EXPECT_THROW(basis.project(0, 0, 2, at::randn({3, 4, D})), Error);     // three KV heads
  EXPECT_THROW(basis.project(0, 0, D + 1, keys), Error);                  // rank above D
}

TEST(DarBasis, FilesRoundTripAndBadOnesAreRefused) {
  const at::Tensor keys = at::randn({2, 40, 6});
  const DarBasis basis = DarBasis::measure({keys}, {keys * 0.5}, {keys});
  const fs::path path = scratch("basis.npy");
  basis.write(path);
  const auto a = DarBasis::load(path), b = DarBasis::load(path);
  EXPECT_EQ(a.get(), b.get());  // read once for every layer
  EXPECT_TRUE(at::equal(a->table(), basis.table()));
  const fs::path bad = scratch("bad.npy");
  const std::vector<float> zeros(24, 0.f);
  write_npy_f32(bad, zeros.data(), {2, 3, 4});
  EXPECT_THROW(DarBasis::load(bad), Error);
  EXPECT_THROW(DarBasis::load(scratch("missing.npy")), Error);
}

// RoPE as rotations of the pairs (i, i + D/2) by angle pos·inv_freq[i], written out in fp64.
TEST(DarBasis, RopeRotatesThePairsAndTurnsBack) {
  const std::int64_t D = 8, m = 5, pos0 = 7;
  at::manual_seed(3);
  const at::Tensor x = at::randn({2, m, D});
  const at::Tensor inv = 1.0 / at::pow(at::Scalar(10000.0), at::arange(0, D, 2, at::kLong).to(at::kFloat) / static_cast<double>(D));
  const at::Tensor y = rope_rotate(x, pos0, inv, 1);
  const at::Tensor xd = x.to(at::kDouble), yd = y.to(at::kDouble);
  double worst = 0;
  for (std::int64_t g = 0; g < 2; ++g)
    for (std::int64_t t = 0; t < m; ++t)
      for (std::int64_t i = 0; i < D / 2; ++i) {
        const double a = static_cast<double>(pos0 + t) * inv[i].item<double>();
        const double x1 = xd[g][t][i].item<double>(), x2 = xd[g][t][i + D / 2].item<double>();
        worst = std::max({worst, std::abs(yd[g][t][i].item<double>() - (x1 * std::cos(a) - x2 * std::sin(a))),
                          std::abs(yd[g][t][i + D / 2].item<double>() - (x2 * std::cos(a) + x1 * std::sin(a)))});
      }
  EXPECT_LT(worst, 1e-5);
  EXPECT_LT(max_diff(rope_rotate(y, pos0, inv, -1), x), 1e-5);
}

TEST(DarConfig, KeysValidateAndRoundTrip) {
  LukaConfig c = LukaConfig::preset("dense", 4);
  EXPECT_THROW(c.apply_override("layers=1,dar_window=16"), Error);  // no basis
  c.apply_override("layers=1,dar_window=16,dar_rank=8,dar_basis=b.npy,dar_keys=post_rope");
  EXPECT_EQ(c.layers[1].dar.keys, DarKeys::kPostRope);
  EXPECT_EQ(c.layers[0].dar.keys, DarKeys::kPreRope);
  EXPECT_EQ(c.layers[1].dar.window, 16);
  EXPECT_EQ(c.layers[1].dar.rank, 8);
  EXPECT_EQ(c.layers[1].dar.basis, "b.npy");
  EXPECT_EQ(c.layers[0].dar.window, 0);
  const LukaConfig back = LukaConfig::from_json(c.to_json(), 4, "test");
  EXPECT_EQ(back.layers[1].dar.basis, "b.npy");
  EXPECT_EQ(back.layers[1].dar.window, 16);
  EXPECT_THROW(c.apply_override("layers=2,mode=kascade,dar_window=4,dar_basis=b.npy"), Error);
  EXPECT_THROW(c.apply_override("dar_rank=-1"), Error);
  EXPECT_THROW(c.apply_override("dar_sink=-1"), Error);
  c.apply_override("layers=1,dar_sink=4");
  EXPECT_EQ(LukaConfig::from_json(c.to_json(), 4, "test").layers[1].dar.sink, 4);
}

// A basis for a Sequence: its own keys and values, one layer.
std::shared_ptr<const DarBasis> sequence_basis(const Sequence& s, const std::string& name) {
  const fs::path path = scratch(name);
  DarBasis::measure({s.k}, {s.v}, {s.k}).write(path);
  return DarBasis::load(path);
}

LayerConfig with_dar(LayerConfig c, std::int64_t window, std::int64_t rank, const std::string& basis) {
  c.dar.window = window;
  c.dar.rank = rank;
  c.dar.basis = basis;
  return c;
}

std::vector<LayerConfig> modes() {
  std::vector<LayerConfig> out(3);
  out[1].mode = AttentionMode::kLined;
  out[1].lined.window = 6;
  out[1].lined.rho = 0.3;
  out[2].mode = AttentionMode::kClustered;
  out[2].clustered.page_size = 4;
  out[2].clustered.tail = 8;
  out[2].clustered.interval = 4;
  return out;
}

TEST(LukaDar, FullRankIsTheIdentity) {
  const Sequence s(6, 2, 16, 70, 41);
  const std::string path = scratch("full.npy").string();
  sequence_basis(s, "full.npy");
  for (const LayerConfig& base : modes()) {
    SCOPED_TRACE(to_string(base.mode));
    c10::InferenceMode guard;
    LukaAttention plain(0, base), dar(0, with_dar(base, 5, s.D, path));
    EXPECT_LT(max_diff(dar.forward(s.inputs(0, 40)), plain.forward(s.inputs(0, 40))), 1e-4);
    for (std::int64_t pos = 40; pos < s.N; ++pos)
      EXPECT_LT(max_diff(dar.forward(s.inputs(pos, 1)), plain.forward(s.inputs(pos, 1))), 1e-4) << "pos " << pos;
  }
}

// Decode: a DAR layer is a plain layer whose cache holds, at each step, the projection of every
// token more than W behind the query (and the raw row of the others); every mode's state (heavy
// hitters, pages and their summaries) then follows. The prefill here is W + 1 tokens, where no key
// is far yet.
TEST(LukaDar, DecodeEqualsAPlainLayerOnTheProjectedCache) {
  const Sequence s(6, 2, 16, 90, 42);
  const std::string path = scratch("decode.npy").string();
  const auto basis = sequence_basis(s, "decode.npy");
  const std::int64_t W = 9, rank = 3;
  const at::Tensor inv = 1.0 / at::pow(at::Scalar(10000.0), at::arange(0, s.D, 2, at::kLong).to(at::kFloat) / static_cast<double>(s.D));
  for (const bool rope : {false, true})
  for (const LayerConfig& base : modes()) {
    SCOPED_TRACE(std::string(to_string(base.mode)) + (rope ? ", keys projected before RoPE" : ""));
    c10::InferenceMode guard;
    LukaAttention plain(0, base), dar(0, with_dar(base, W, rank, path));
    if (rope) dar.set_rope(inv);  // the sequence's keys read as rotated: turned back, projected, rotated again
    const at::Tensor far_k = rope ? rope_rotate(basis->project(0, DarBasis::kKeys, rank, rope_rotate(s.k, 0, inv, -1)), 0, inv, 1)
                                  : basis->project(0, DarBasis::kKeys, rank, s.k);
    const at::Tensor far_v = basis->project(0, DarBasis::kValues, rank, s.v);
    EXPECT_LT(max_diff(dar.forward(s.inputs(0, W + 1)), plain.forward(s.inputs(0, W + 1))), 1e-5);
    for (std::int64_t pos = W + 1; pos < s.N; ++pos) {
      AttentionInputs in = s.inputs(pos, 1);
      const std::int64_t T = pos + 1, far = std::max<std::int64_t>(0, T - 1 - W);
      in.k = at::cat({far_k.narrow(1, 0, far), s.k.narrow(1, far, T - far)}, 1);
      in.v = at::cat({far_v.narrow(1, 0, far), s.v.narrow(1, far, T - far)}, 1);
      EXPECT_LT(max_diff(dar.forward(s.inputs(pos, 1)), plain.forward(in)), 1e-5) << "pos " << pos;
      EXPECT_LT(max_diff(dar.last_step().effective, plain.last_step().effective), 1e-6) << "pos " << pos;
    }
  }
}

// Prefill: query i sees key j whole when i − j <= W (or j < dar_sink) and projected beyond, in
// fp64; then decode steps.
TEST(LukaDar, PrefillMatchesTheBandedFormula) {
  for (const std::int64_t sink : {0, 3}) {
  SCOPED_TRACE("dar_sink " + std::to_string(sink));
  const Sequence s(4, 2, 16, 60, 43);
  const std::string path = scratch("prefill.npy").string();
  const auto basis = sequence_basis(s, "prefill.npy");
  const std::int64_t W = 7, rank = 4, n = 50;
  c10::InferenceMode guard;
  LayerConfig config = with_dar(LayerConfig{}, W, rank, path);
  config.dar.sink = sink;
  LukaAttention dar(0, config);
  const at::Tensor out = dar.forward(s.inputs(0, n)).view({n, s.H, s.D});
  const at::Tensor far_k = basis->project(0, DarBasis::kKeys, rank, s.k).to(at::kDouble);
  const at::Tensor far_v = basis->project(0, DarBasis::kValues, rank, s.v).to(at::kDouble);
  const at::Tensor k = s.k.to(at::kDouble), v = s.v.to(at::kDouble);
  // The output of query i, head h: keys and values at most W behind it whole, the rest projected.
  const auto banded = [&](std::int64_t i, std::int64_t h) {
    const std::int64_t g = h / (s.H / s.KV);
    at::Tensor logits = at::empty({i + 1}, at::kDouble), vals = at::empty({i + 1, s.D}, at::kDouble);
    for (std::int64_t j = 0; j <= i; ++j) {
      const bool near = i - j <= W || j < sink;
      logits[j] = at::dot(s.q[h][i].to(at::kDouble), (near ? k : far_k)[g][j]) / std::sqrt(static_cast<double>(s.D));
      vals[j].copy_((near ? v : far_v)[g][j]);
    }
    return at::matmul(at::softmax(logits, 0), vals);
  };
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t h = 0; h < s.H; ++h) worst = std::max(worst, max_diff(out[i][h], banded(i, h)));
  EXPECT_LT(worst, 1e-5);
  // ... and the next decode steps see exactly the keys more than W back projected.
  for (std::int64_t pos = n; pos < s.N; ++pos) {
    const at::Tensor step = dar.forward(s.inputs(pos, 1)).view({s.H, s.D});
    for (std::int64_t h = 0; h < s.H; ++h) EXPECT_LT(max_diff(step[h], banded(pos, h)), 1e-5) << "pos " << pos << " head " << h;
  }
  }
}

}  // namespace
}  // namespace luka
