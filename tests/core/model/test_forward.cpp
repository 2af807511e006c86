// Forward parity against transformers (eager attention) on the random fixture checkpoints:
// logits through prefill and decode, fp32 and bf16, and greedy generation.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/run/run_loop.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/util/error.h"
#include "core/util/npy.h"
#include "kernels/cpu/gemv.h"
#include "tests/core/model/test_util.h"

namespace luka {
namespace {

constexpr int kPrefill = 20;  // rows 0..19 through prefill, the rest (8) one by one through decode

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << p;
  return nlohmann::json::parse(in);
}

class Forward : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    name_ = GetParam();
    if (name_ == "qwen3-tok" && !std::filesystem::exists(test::checkpoints_dir() / name_))
      GTEST_SKIP() << "qwen3-tok needs the shared Qwen3 tokenizer (" << LUKA_SHARED_DATA << "/qwen3-tokenizer)";
    dir_ = test::checkpoint(name_);
    ASSERT_TRUE(std::filesystem::exists(dir_ / "config.json"));
    ids_ = read_json(dir_ / "reference" / "ids.json")["ids"].get<std::vector<std::int32_t>>();
    ASSERT_GE(ids_.size(), 24u);
  }

  // Max |C++ - HF| over all rows: the first kPrefill through prefill, the rest through decode.
  // Also returns the largest |reference logit| in `scale`.
  double max_diff(DType dtype, const std::string& ref_file, double* scale) {
    const auto model = Model::load(dir_, LoadOptions{dtype, 0});
    const NpyArray ref = read_npy_f32(dir_ / "reference" / ref_file);
    const std::int64_t vocab = model->config().vocab_size;
    EXPECT_EQ(ref.shape, (std::vector<std::int64_t>{static_cast<std::int64_t>(ids_.size()), vocab}));
    Decoder decoder(model);
    std::vector<float> ours;
    const std::vector<std::int32_t> head(ids_.begin(), ids_.begin() + kPrefill);
    at::Tensor pre = decoder.prefill(head, /*all_logits=*/true).contiguous();
    EXPECT_EQ(pre.size(0), kPrefill);
    ours.insert(ours.end(), pre.data_ptr<float>(), pre.data_ptr<float>() + pre.numel());
    for (std::size_t i = kPrefill; i < ids_.size(); ++i) {
      at::Tensor row = decoder.decode(ids_[i]).contiguous();
      EXPECT_EQ(row.numel(), vocab);
      ours.insert(ours.end(), row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
    }
    EXPECT_EQ(decoder.position(), static_cast<std::int64_t>(ids_.size()));
    EXPECT_EQ(ours.size(), ref.data.size());
    double diff = 0, big = 0;
    for (std::size_t i = 0; i < std::min(ours.size(), ref.data.size()); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(ours[i] - ref.data[i])));
      big = std::max(big, static_cast<double>(std::fabs(ref.data[i])));
    }
    if (scale) *scale = big;
    return diff;
  }

  std::string name_;
  std::filesystem::path dir_;
  std::vector<std::int32_t> ids_;
};

TEST_P(Forward, Fp32MatchesTransformers) {
  double scale = 0;
  const double diff = max_diff(DType::kF32, "logits_fp32.npy", &scale);
  std::printf("[%s] fp32 max |diff| %.3g (max |logit| %.3g)\n", name_.c_str(), diff, scale);
  EXPECT_GT(scale, 0.5) << "reference logits too small for a meaningful comparison";
  EXPECT_LE(diff, 1e-4);
}

TEST_P(Forward, Bf16MatchesTransformersBf16) {
  double scale = 0;
  const double diff = max_diff(DType::kBF16, "logits_bf16.npy", &scale);
  // Tolerance: bf16 keeps 8 significant bits (epsilon 2^-8 = 0.0039; one ulp at |x| is up to
  // 2^-7 |x|). Both sides run the same bf16 ops, but the matmul kernels differ (HF runs all rows
  // at once through oneDNN, decode runs one row through our GEMV, each with its own fp32
  // accumulation order), so a value may round to the neighbouring bf16 value;
  // such one-ulp flips pass through the remaining layers and the final norm. Eight ulps of the
  // largest logit (8 * 2^-7 * max|logit| = max|logit| / 16) bounds that with room, and is still
  // far below the spread of the logits (a wrong layer or RoPE shows up as errors of order 1).
  const double tol = scale / 16;
  std::printf("[%s] bf16 max |diff| %.3g (max |logit| %.3g, tolerance %.3g)\n", name_.c_str(), diff, scale, tol);
  EXPECT_LE(diff, tol);
}

TEST_P(Forward, GreedyMatchesTransformersGenerate) {
  const auto ref = read_json(dir_ / "reference" / "greedy_fp32.json");
  const auto prompt = ref["prompt"].get<std::vector<std::int32_t>>();
  const auto expected = ref["new_ids"].get<std::vector<std::int32_t>>();
  Decoder decoder(Model::load(dir_, LoadOptions{DType::kF32, 0}));
  RunSettings options;
  options.max_new_tokens = static_cast<int>(expected.size());
  struct Stream final : RunObserver {
    std::vector<std::int32_t> ids;
    bool token(const ChosenToken& t) override {
      ids.push_back(t.id);
      return true;
    }
  } streamed;
  RunLoop loop(decoder);
  const RunResult result = loop.run(prompt, options, &streamed);
  EXPECT_EQ(result.ids, expected);
  EXPECT_EQ(streamed.ids, expected);
  EXPECT_EQ(result.prompt_tokens, static_cast<std::int64_t>(prompt.size()));
  EXPECT_EQ(result.stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(result.decode_steps, static_cast<std::int64_t>(expected.size()) - 1);
  EXPECT_GT(result.prefill_seconds, 0);
  EXPECT_GT(result.decode_seconds, 0);
}

TEST_P(Forward, LastRowPrefillEqualsAllRowsAndResetRepeats) {
  const auto model = Model::load(dir_, LoadOptions{DType::kF32, 0});
  Decoder decoder(model);
  const at::Tensor all = decoder.prefill(ids_, true);
  decoder.reset();
  EXPECT_EQ(decoder.position(), 0);
  const at::Tensor last = decoder.prefill(ids_, false);
  ASSERT_EQ(last.dim(), 1);
  EXPECT_TRUE(at::allclose(last, all[all.size(0) - 1], 1e-5, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, Forward,
                         ::testing::Values("qwen3-tied", "qwen3-bf16", "qwen3-fp16-sharded", "llama", "qwen2",
                                           "qwen3-tok"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// A LayerAttention that counts calls and delegates to dense attention: the decoder must route
// every layer's attention through the entry point, with consistent inputs.
class CountingAttention : public LayerAttention {
 public:
  at::Tensor forward(const AttentionInputs& in) override {
    ++calls;
    EXPECT_EQ(in.k.size(1), in.q_pos0 + in.q.size(1));
    EXPECT_EQ(in.q.size(0), in.k.size(0) * in.group_size);
    return dense.forward(in);
  }
  void reset() override { ++resets; }
  const char* name() const override { return "counting"; }
  int calls = 0, resets = 0;
  DenseAttention dense;
};

TEST(Decoder, AttentionEntryPointPerLayer) {
  const auto dir = test::checkpoint("qwen3-bf16");
  const auto model = Model::load(dir, LoadOptions{DType::kF32, 0});
  Decoder plain(model), counted(model);
  std::vector<std::shared_ptr<CountingAttention>> hooks;
  for (int l = 0; l < model->config().num_layers; ++l) {
    hooks.push_back(std::make_shared<CountingAttention>());
    counted.set_attention(l, hooks.back());
  }
  const std::vector<std::int32_t> ids = {3, 14, 15, 92, 65, 35};
  const at::Tensor a = plain.prefill(ids, true), b = counted.prefill(ids, true);
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_TRUE(at::equal(plain.decode(7), counted.decode(7)));
  for (const auto& h : hooks) EXPECT_EQ(h->calls, 2);
  counted.reset();
  for (const auto& h : hooks) EXPECT_EQ(h->resets, 1);
  EXPECT_THROW(counted.set_attention(model->config().num_layers, hooks[0]), Error);
}

TEST(Decoder, KvCacheGrowsPastInitialCapacity) {
  // Prefill 100 then decode to max_position_embeddings (256): the cache grows 100 -> 200 -> 256
  // while decoding; the last step must still match one prefill of the same ids.
  const auto model = Model::load(test::checkpoint("qwen3-tied"), LoadOptions{DType::kF32, 0});
  Decoder a(model), b(model);
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 256; ++i) ids.push_back((i * 37 + 11) % 512);
  a.prefill({ids.begin(), ids.begin() + 100});
  at::Tensor last;
  for (int i = 100; i < 256; ++i) last = a.decode(ids[static_cast<std::size_t>(i)]);
  const at::Tensor ref = b.prefill(ids);
  EXPECT_TRUE(at::allclose(last, ref, 1e-4, 1e-4)) << (last - ref).abs().max().item<float>();
  EXPECT_THROW(a.decode(1), Error);  // position 256 == max_position_embeddings
}

TEST(KvCache, ReserveAllocatesExactlyAndAppendsWithinItDoNotMove) {
  c10::InferenceMode guard;
  KvCache cache(2, 4, 300, at::kFloat);
  cache.reserve(100);
  EXPECT_EQ(cache.capacity(), 100);
  const at::Tensor rows = at::ones({2, 10, 4});
  cache.append(rows, rows);
  const void* where = cache.keys().data_ptr();
  for (int i = 1; i < 10; ++i) cache.append(rows, rows);
  EXPECT_EQ(cache.length(), 100);
  EXPECT_EQ(cache.capacity(), 100);
  EXPECT_EQ(cache.keys().data_ptr(), where) << "no regrow inside the reservation";
  cache.append(rows.narrow(1, 0, 1), rows.narrow(1, 0, 1));  // past it: doubling, as without one
  EXPECT_EQ(cache.capacity(), 200);
  EXPECT_TRUE(at::equal(cache.keys(), at::ones({2, 101, 4})));
  cache.reserve(1000);  // clamped to max_tokens
  EXPECT_EQ(cache.capacity(), 300);
  cache.reserve(10);  // never shrinks
  EXPECT_EQ(cache.capacity(), 300);
}

}  // namespace
}  // namespace luka

namespace luka {
namespace {

// The decode-path GEMV against at::linear, with odd sizes (vector tails) and a bias.
TEST(Gemv, MatchesAtLinear) {
  c10::InferenceMode guard;
  at::manual_seed(3);
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const std::int64_t in : {16, 48, 80, 96, 100, 1000, 1024}) {
      const std::int64_t out = 37;
      const at::Tensor w = at::randn({out, in}).to(dtype), b = at::randn({out}).to(dtype);
      const at::Tensor x = at::randn({1, in}).to(dtype);
      const at::Tensor ours = cpu::linear_row(x, w, b).to(at::kFloat);
      // Reference in fp32 from the same (rounded) inputs; bf16 output rounds once (2^-8 relative).
      const at::Tensor ref = at::linear(x.to(at::kFloat), w.to(at::kFloat), b.to(at::kFloat));
      const double tol = dtype == at::kFloat ? 1e-4 : 1e-2 * (1 + ref.abs().max().item<double>());
      EXPECT_LE((ours - ref).abs().max().item<double>(), tol) << "in " << in << " dtype " << dtype;
      const at::Tensor no_bias = cpu::linear_row(x, w, at::Tensor()).to(at::kFloat);
      EXPECT_LE((no_bias - (ref - b.to(at::kFloat))).abs().max().item<double>(), tol);
    }
  }
}

}  // namespace
}  // namespace luka
