// The byte-budget model (kernels/common/byte_budget.h) on Qwen3 shapes read from their config.json
// text: the compulsory bytes it counts against direct formulas, and the clustered step's DRAM
// bytes at 32K within the 10 MB the kernels v2 design allows (docs/kernels-v2.md). Prints the
// table of every kernel at 4K, 32K and 128K for the 0.6B and 4B shapes.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/model/config.h"
#include "kernels/common/byte_budget.h"

namespace {

using luka::budget::Budget;
using luka::budget::Shape;

// The fields of Qwen3-0.6B's and Qwen3-4B's published config.json that fix an attention layer.
const char* kQwen3_0p6b = R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
  "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
  "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000,
  "rms_norm_eps": 1e-06, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";
const char* kQwen3_4b = R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560,
  "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
  "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000,
  "rms_norm_eps": 1e-06, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";

Shape shape_of(const char* json, const char* name) {
  const luka::ModelConfig c = luka::ModelConfig::from_json_text(json, name);
  Shape s;
  s.q_heads = c.num_heads;
  s.kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  return s;
}

void print(const char* shape, std::int64_t T, const char* variant, const Budget& b) {
  for (const auto& k : b.kernels)
    std::printf("| %s | %lld | %s | %s | %.3f | %.3f | %.3f |\n", shape, static_cast<long long>(T), variant,
                k.kernel.c_str(), luka::budget::megabytes(k.read), luka::budget::megabytes(k.written),
                luka::budget::megabytes(k.scratch_read + k.scratch_written));
  std::printf("| %s | %lld | %s | **step** | %.3f | %.3f | %.3f |\n", shape, static_cast<long long>(T), variant,
              luka::budget::megabytes(b.read()), luka::budget::megabytes(b.written()),
              luka::budget::megabytes(b.scratch()));
}

TEST(ByteBudget, ShapeComesFromTheModelConfig) {
  const Shape s = shape_of(kQwen3_0p6b, "qwen3-0.6b config.json");
  EXPECT_EQ(s.q_heads, 16);
  EXPECT_EQ(s.kv_heads, 8);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.group(), 2);
}

// Dense reads every K and V row once per KV head: 2 · KV · T · D · 2 bytes (bf16), plus the query.
TEST(ByteBudget, DenseReadsTheWholeCacheOnce) {
  const Shape s = shape_of(kQwen3_0p6b, "qwen3-0.6b config.json");
  const std::int64_t T = 32768;
  const Budget b = luka::budget::dense_v2(s, T, {16, false});
  EXPECT_DOUBLE_EQ(b.read(), 2.0 * 8 * 32768 * 128 * 2 + 16 * 128 * 2);
  EXPECT_DOUBLE_EQ(b.written(), 16.0 * 128 * 2);
  // With accumulators: h2o_score per query head and importance per KV head, fp32, read and written.
  const Budget acc = luka::budget::dense_v2(s, T, {16, true});
  EXPECT_DOUBLE_EQ(acc.total() - b.total(), 2.0 * (16 + 8) * 32768 * 4);
}

// Clustered must read every summary key and value (bf16) and the raw tail's rows at least once:
// the model's count is not below those, and the rest (children, accumulators) stays small.
TEST(ByteBudget, ClusteredCountsEverySummaryAndTheTail) {
  const Shape s = shape_of(kQwen3_0p6b, "qwen3-0.6b config.json");
  const luka::budget::ClusteredLaunch l;
  std::int64_t P = 0, R = 0;
  luka::budget::clustered_layout(l, 32768, &P, &R);
  EXPECT_EQ(P, (32768 - 128) / 16);
  EXPECT_EQ(P * 16 + R, 32768);
  const double floor_bytes = 8.0 * P * 2 * 128 * 2 + 2.0 * 8 * R * 128 * 2;
  const Budget b = luka::budget::clustered_v2(s, 32768, l);
  EXPECT_GE(b.read(), floor_bytes);
  // Children: 3 pages of 16 per head, K and V rows.
  EXPECT_GE(b.read(), floor_bytes + 16.0 * 3 * 16 * 2 * 128 * 2);
}

// The kernels v2 target (issue: clustered at least 8× SDPA at 32K): a bandwidth-bound step needs
// clustered's DRAM bytes within 10 MB on the 0.6B shape, and at least 8× fewer than dense's.
TEST(ByteBudget, ClusteredAt32KOnQwen3_0p6bWithinTenMegabytes) {
  const Shape s = shape_of(kQwen3_0p6b, "qwen3-0.6b config.json");
  const Budget c = luka::budget::clustered_v2(s, 32768, {});
  const Budget d = luka::budget::dense_v2(s, 32768, {});
  std::printf(
      "clustered 32K 0.6B: %.3f MB DRAM (%.3f read, %.3f written), %.3f MB scratch; dense %.3f MB; ratio %.2fx\n",
      luka::budget::megabytes(c.total()), luka::budget::megabytes(c.read()), luka::budget::megabytes(c.written()),
      luka::budget::megabytes(c.scratch()), luka::budget::megabytes(d.total()), d.total() / c.total());
  EXPECT_LE(c.total(), 10e6) << "clustered v2 at 32K moves " << c.total() / 1e6 << " MB";
  EXPECT_GE(d.total() / c.total(), 8.0);
}

TEST(ByteBudget, ReportsEveryKernelAtEachShape) {
  std::printf(
      "| shape | tokens | variant | kernel | DRAM read MB | DRAM written MB | scratch MB "
      "|\n|---|---:|---|---|---:|---:|---:|\n");
  for (const auto& [name, json] : {std::pair{"0.6b", kQwen3_0p6b}, std::pair{"4b", kQwen3_4b}}) {
    const Shape s = shape_of(json, name);
    for (const std::int64_t T : {4096, 32768, 131072}) {
      const Budget d = luka::budget::dense_v2(s, T, {}), l = luka::budget::lined_v2(s, T, {}),
                   c = luka::budget::clustered_v2(s, T, {});
      print(name, T, "dense v2", d);
      print(name, T, "lined v2", l);
      print(name, T, "clustered v2", c);
      // Every variant reads at least its cover's K/V: clustered and lined below dense at every T.
      EXPECT_LT(c.total(), d.total()) << name << " T " << T;
      EXPECT_LT(l.total(), d.total()) << name << " T " << T;
    }
  }
}

}  // namespace
