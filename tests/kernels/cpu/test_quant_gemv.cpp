// The quantized GEMV against an independent reference: the weights decoded by ggml_types'
// dequantize, dotted in fp64 with the activations. Three checks per case:
//   - against the unquantized activations, within the provable activation-quantization bound
//     Σᵢ |wᵢ| · dₓ(i) / 2 (plus float rounding);
//   - against the quantized activations (q · d in fp64), within 1e-5 of Σᵢ |wᵢ · xqᵢ|: only fp32
//     rounding is left there;
//   - each SIMD path equal to the scalar path bit for bit (they share one arithmetic).
#include <gtest/gtest.h>

#include <c10/util/Half.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "core/gguf/gguf.h"
#include "kernels/cpu/quant_gemv.h"

namespace luka::cpu {
namespace {

using gguf::GgmlType;

std::vector<QuantIsa> runnable_isas() {
  std::vector<QuantIsa> out;
  for (const QuantIsa isa : {QuantIsa::kScalar, QuantIsa::kAvx2, QuantIsa::kAvx512})
    if (quant_isa_supported(isa)) out.push_back(isa);
  return out;
}

std::int64_t block_elements(GgmlType t) { return gguf::type_traits(static_cast<std::uint32_t>(t))->block_elements; }
std::int64_t block_bytes(GgmlType t) { return gguf::type_traits(static_cast<std::uint32_t>(t))->block_bytes; }

void put_half(std::uint8_t* p, float v) {
  const std::uint16_t bits = c10::Half(v).x;
  std::memcpy(p, &bits, 2);
}

// Random blocks: random quant bytes, scales of either sign and a spread of magnitudes.
std::vector<std::uint8_t> random_weights(GgmlType type, std::int64_t out, std::int64_t in, std::mt19937& rng) {
  const std::int64_t blocks = out * in / block_elements(type), bytes = block_bytes(type);
  std::vector<std::uint8_t> w(static_cast<std::size_t>(blocks * bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(-3.0f, -1.0f), sign(-1.0f, 1.0f);
  auto scale = [&] { return std::pow(10.0f, mag(rng)) * (sign(rng) < 0 ? -1.0f : 1.0f); };
  for (auto& b : w) b = static_cast<std::uint8_t>(byte(rng));
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::uint8_t* blk = w.data() + b * bytes;
    switch (type) {
      case GgmlType::kQ4_0:
      case GgmlType::kQ8_0: put_half(blk, scale()); break;
      case GgmlType::kQ4_1:
      case GgmlType::kQ4_K:  // d, then m (Q4_1) or dmin (Q4_K)
        put_half(blk, scale());
        put_half(blk + 2, scale());
        break;
      case GgmlType::kQ6_K: put_half(blk + 208, scale()); break;
      default: break;
    }
  }
  return w;
}

// Normal activations with a few outliers (as hidden states have), and one all-zero block.
std::vector<float> random_activation(std::int64_t in, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(in));
  for (auto& v : x) v = normal(rng);
  for (std::int64_t i = 0; i < in; i += 97) x[i] *= 20.0f;
  if (in >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
  return x;
}

struct Reference {
  double exact_x = 0;   // Σ w · x
  double exact_xq = 0;  // Σ w · q · d
  double abs_xq = 0;    // Σ |w · q · d|
  double abs_x = 0;     // Σ |w · x|
  double act_bound = 0; // Σ |w| · d / 2
};

std::vector<Reference> reference(GgmlType type, const std::uint8_t* w, std::int64_t out, std::int64_t in,
                                 const std::vector<float>& x, const QuantizedActivation& xq) {
  const std::int64_t per_row = in / block_elements(type);
  std::vector<float> row(static_cast<std::size_t>(in));
  std::vector<Reference> refs(static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) {
    gguf::dequantize(type, w + o * per_row * block_bytes(type), per_row, row.data());
    Reference& r = refs[o];
    for (std::int64_t i = 0; i < in; ++i) {
      const double wi = row[i], d = xq.d[i / xq.block], xqi = xq.q[i] * d;
      r.exact_x += wi * x[i];
      r.exact_xq += wi * xqi;
      r.abs_xq += std::fabs(wi * xqi);
      r.abs_x += std::fabs(wi * x[i]);
      r.act_bound += std::fabs(wi) * d * 0.5;
    }
  }
  return refs;
}

// Checks every runnable path on one matrix; returns the largest error ÷ activation bound seen.
double check_matrix(GgmlType type, const std::uint8_t* w, std::int64_t out, std::int64_t in, const std::vector<float>& x,
                    const char* what) {
  QuantizedActivation xq;
  quantize_activation(type, x.data(), in, xq);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = xq.d[i / xq.block];
    EXPECT_LE(std::fabs(x[i] - xq.q[i] * d), d * (0.5 + 1e-3)) << what << " activation " << i;
  }
  for (const QuantIsa isa : runnable_isas()) {  // every path quantizes to the same values
    QuantizedActivation other;
    quantize_activation(type, x.data(), in, other, isa);
    EXPECT_EQ(other.q, xq.q) << what << " " << quant_isa_name(isa);
    EXPECT_EQ(other.d, xq.d) << what << " " << quant_isa_name(isa);
    EXPECT_EQ(other.lane_sums, xq.lane_sums) << what << " " << quant_isa_name(isa);
    EXPECT_EQ(other.sums16, xq.sums16) << what << " " << quant_isa_name(isa);
  }
  const std::vector<Reference> refs = reference(type, w, out, in, x, xq);
  std::vector<float> y_scalar(static_cast<std::size_t>(out), NAN);
  quant_gemv(type, w, out, in, x.data(), y_scalar.data(), QuantIsa::kScalar);
  double worst = 0;
  for (const QuantIsa isa : runnable_isas()) {
    std::vector<float> y(static_cast<std::size_t>(out), NAN);
    quant_gemv(type, w, out, in, x.data(), y.data(), isa);
    for (std::int64_t o = 0; o < out; ++o) {
      const Reference& r = refs[o];
      SCOPED_TRACE(testing::Message() << what << " " << gguf::type_name(type) << " " << out << "x" << in << " row " << o
                                      << " path " << quant_isa_name(isa));
      // Rounding of the fp32 accumulation (block sums are exact integers): a few ulps of Σ|terms|.
      EXPECT_NEAR(y[o], r.exact_xq, 1e-5 * r.abs_xq + 1e-30);
      EXPECT_NEAR(y[o], r.exact_x, r.act_bound * (1 + 1e-3) + 1e-5 * (r.abs_x + r.abs_xq) + 1e-30);
      if (r.act_bound > 0) worst = std::max(worst, std::fabs(y[o] - r.exact_x) / r.act_bound);
      // Same arithmetic, same order: identical bits.
      EXPECT_EQ(std::memcmp(&y[o], &y_scalar[o], sizeof(float)), 0) << y[o] << " vs scalar " << y_scalar[o];
    }
  }
  return worst;
}

TEST(QuantGemv, RandomBlocksAllTypesAllPaths) {
  std::mt19937 rng(29);
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K};
  const std::int64_t outs[] = {1, 7, 33, 193};
  for (const GgmlType type : types) {
    ASSERT_TRUE(quant_gemv_supports(type));
    const std::int64_t bs = block_elements(type);
    // One block, an odd number of blocks, and the model shapes' inputs.
    const std::vector<std::int64_t> ins =
        bs == 32 ? std::vector<std::int64_t>{32, 96, 576, 1536} : std::vector<std::int64_t>{256, 768, 1536};
    double worst = 0;
    for (const std::int64_t in : ins) {
      for (const std::int64_t out : outs) {
        const std::vector<std::uint8_t> w = random_weights(type, out, in, rng);
        const std::vector<float> x = random_activation(in, rng);
        worst = std::max(worst, check_matrix(type, w.data(), out, in, x, "random"));
      }
    }
    // For the record (--gtest_output=xml): how much of the worst-case bound random errors use.
    RecordProperty(std::string("worst_error_over_bound_") + gguf::type_name(type), std::to_string(worst));
  }
}

// Q8_0 against fp32 activations (the lm_head's product): the dequantized rows dotted in fp64
// with the unquantized input, to the rounding of an fp32 sum, on every path with the same bits.
TEST(QuantGemv, Q8_0AgainstFp32ActivationsIsTheDequantizedProduct) {
  std::mt19937 rng(31);
  for (const std::int64_t in : {32, 96, 576, 1536}) {
    for (const std::int64_t out : {1, 7, 193}) {
      const std::vector<std::uint8_t> w = random_weights(GgmlType::kQ8_0, out, in, rng);
      const std::vector<float> x = random_activation(in, rng);
      const std::int64_t per_row = in / 32;
      std::vector<float> y_scalar(static_cast<std::size_t>(out));
      q8_0_gemv_f32(w.data(), out, in, x.data(), y_scalar.data(), QuantIsa::kScalar);
      for (const QuantIsa isa : runnable_isas()) {
        std::vector<float> y(static_cast<std::size_t>(out), NAN);
        q8_0_gemv_f32(w.data(), out, in, x.data(), y.data(), isa);
        std::vector<float> row(static_cast<std::size_t>(in));
        for (std::int64_t o = 0; o < out; ++o) {
          gguf::dequantize(GgmlType::kQ8_0, w.data() + o * per_row * 34, per_row, row.data());
          double exact = 0, abs = 0;
          for (std::int64_t i = 0; i < in; ++i) {
            exact += static_cast<double>(row[i]) * x[i];
            abs += std::fabs(static_cast<double>(row[i]) * x[i]);
          }
          SCOPED_TRACE(testing::Message() << out << "x" << in << " row " << o << " path " << quant_isa_name(isa));
          EXPECT_NEAR(y[o], exact, 1e-5 * abs + 1e-30);
          EXPECT_EQ(std::memcmp(&y[o], &y_scalar[o], sizeof(float)), 0) << y[o] << " vs scalar " << y_scalar[o];
          EXPECT_EQ(q8_0_row_f32(w.data() + o * per_row * 34, x.data(), in, isa), y[o]);
        }
      }
    }
  }
  const std::vector<std::uint8_t> w(34, 0);
  const std::vector<float> x(33, 1.0f);
  float y = 0;
  EXPECT_THROW(q8_0_gemv_f32(w.data(), 1, 33, x.data(), &y), std::invalid_argument);
}

TEST(QuantGemv, EnvironmentAndArgumentChecks) {
  EXPECT_TRUE(quant_isa_supported(QuantIsa::kScalar));
  EXPECT_TRUE(quant_isa_supported(quant_isa()));
  EXPECT_FALSE(quant_gemv_supports(GgmlType::kQ5_K));
  std::vector<float> x(48, 1.0f), y(1);
  std::vector<std::uint8_t> w(2 * 18);
  EXPECT_THROW(quant_gemv(GgmlType::kQ4_0, w.data(), 1, 48, x.data(), y.data(), QuantIsa::kScalar), std::invalid_argument);
  EXPECT_THROW(quant_gemv(GgmlType::kQ5_K, w.data(), 1, 256, x.data(), y.data(), QuantIsa::kScalar), std::invalid_argument);
  QuantizedActivation xq;
  quantize_activation(GgmlType::kQ4_0, x.data(), 32, xq);
  EXPECT_THROW(quant_gemv(xq, GgmlType::kQ6_K, w.data(), 1, y.data(), QuantIsa::kScalar), std::invalid_argument);
}

// The default model's own tensors (Q4_1 projections, the Q8_0 embedding as lm_head).
TEST(QuantGemv, DefaultModelTensors) {
  const std::filesystem::path path = std::filesystem::path(LUKA_SOURCE_DIR) / "models" / "default";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no default model at " << path << " (scripts/setup.sh installs it)";
  const auto file = gguf::File::open(path);
  std::mt19937 rng(7);
  int checked = 0;
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.3.ffn_gate.weight", "blk.7.ffn_down.weight",
                           "token_embd.weight"}) {
    const gguf::TensorInfo* t = file->find_tensor(name);
    if (t == nullptr || t->dims.size() != 2 || !quant_gemv_supports(t->type)) continue;
    const std::int64_t in = t->dims[0];
    const std::int64_t out = std::min<std::int64_t>(t->dims[1], 1024);  // rows are independent: the first 1,024 do
    const std::vector<float> x = random_activation(in, rng);
    check_matrix(t->type, t->data, out, in, x, name);
    ++checked;
  }
  EXPECT_GE(checked, 4) << "expected the default model's projections to be Q4_1 and its embedding Q8_0";
}

}  // namespace
}  // namespace luka::cpu
