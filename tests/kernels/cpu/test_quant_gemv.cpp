// The quantized GEMV against an independent reference: the weights decoded by ggml_types'
// dequantize, dotted in fp64 with the activations. Three checks per case:
//   - against the unquantized activations, within the provable activation-quantization bound
//     Σᵢ |wᵢ| · dₓ(i) / 2 (plus float rounding);
//   - against the quantized activations (q · d in fp64), within 1e-5 of Σᵢ |wᵢ · xqᵢ|: only fp32
//     rounding is left there;
//   - each SIMD path equal to the scalar path bit for bit (they share one arithmetic).
// Then the multi-row product (quant_gemm) on every path, the path chosen by LUKA_QUANT_PATH (run
// once per path by CTest, tests/kernels/cpu/CMakeLists.txt), and the fallback when the kernel
// refuses the AMX tile state (a seccomp filter makes it refuse, in a child process).
#include <gtest/gtest.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <c10/util/Half.h>

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "core/gguf/gguf.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_gemv.h"

namespace luka::cpu {
namespace {

using gguf::GgmlType;

constexpr QuantIsa kAllPaths[] = {QuantIsa::kScalar, QuantIsa::kAvx2, QuantIsa::kAvx512, QuantIsa::kVnni, QuantIsa::kAmx};

std::vector<QuantIsa> runnable_isas() {
  std::vector<QuantIsa> out;
  for (const QuantIsa isa : kAllPaths)
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

// quant_gemm against the fp64 reference with the same quantized activations: the non-tile paths
// give quant_gemv's bits row by row; the tile path the same integer sums in another fp32 order.
void check_gemm(GgmlType type, std::int64_t rows, std::int64_t out, std::int64_t in, std::mt19937& rng) {
  const std::vector<std::uint8_t> w = random_weights(type, out, in, rng);
  std::vector<float> x;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::vector<float> xr = random_activation(in, rng);
    x.insert(x.end(), xr.begin(), xr.end());
  }
  std::vector<float> y_gemv(static_cast<std::size_t>(rows * out));
  for (std::int64_t r = 0; r < rows; ++r) quant_gemv(type, w.data(), out, in, x.data() + r * in, y_gemv.data() + r * out, QuantIsa::kScalar);
  for (const QuantIsa isa : runnable_isas()) {
    std::vector<float> y(static_cast<std::size_t>(rows * out), NAN);
    quant_gemm(type, w.data(), out, in, x.data(), rows, y.data(), isa);
    const bool tiles = quant_gemm_uses_tiles(type, isa);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<float> xr(x.begin() + r * in, x.begin() + (r + 1) * in);
      QuantizedActivation xq;
      quantize_activation(type, xr.data(), in, xq, QuantIsa::kScalar);
      const std::vector<Reference> refs = reference(type, w.data(), out, in, xr, xq);
      for (std::int64_t o = 0; o < out; ++o) {
        const float v = y[r * out + o], one_row = y_gemv[r * out + o];
        SCOPED_TRACE(testing::Message() << gguf::type_name(type) << " " << rows << "x" << in << " -> " << out << " row " << r << " col "
                                        << o << " path " << quant_isa_name(isa) << (tiles ? " (tiles)" : ""));
        EXPECT_NEAR(v, refs[o].exact_xq, 1e-5 * refs[o].abs_xq + 1e-30);
        if (tiles)
          EXPECT_NEAR(v, one_row, 2e-5 * refs[o].abs_xq + 1e-30);
        else
          EXPECT_EQ(std::memcmp(&v, &one_row, sizeof(float)), 0) << v << " vs one-row " << one_row;
      }
    }
  }
}

TEST(QuantGemm, EveryTypeEveryPathOddSizes) {
  std::mt19937 rng(41);
  for (const GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const bool k = block_elements(type) == 256;
    // Rows: one, fewer than a tile, a tile and one more (17), two tiles and one; weights: one row,
    // an odd count, more than two panels of 16; inputs: one block, an odd count, a model's size.
    for (const std::int64_t rows : {1, 5, 17, 33})
      for (const std::int64_t out : {1, 7, 37})
        for (const std::int64_t in : k ? std::vector<std::int64_t>{256, 768} : std::vector<std::int64_t>{32, 96, 576})
          check_gemm(type, rows, out, in, rng);
  }
  std::vector<float> x(2 * 48, 1.0f), y(2);
  std::vector<std::uint8_t> w(2 * 18);
  EXPECT_THROW(quant_gemm(GgmlType::kQ4_0, w.data(), 1, 48, x.data(), 2, y.data(), QuantIsa::kScalar), std::invalid_argument);
}

// The prefill's choice: tiles only on the amx path, for the types the tiles read, from
// kTileMinRows rows; and `luka info`'s report names the path each product takes.
TEST(QuantGemm, TilesChosenOnlyOnAmxFromTheMinimumRows) {
  for (const QuantIsa isa : runnable_isas()) {
    for (const GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      const bool tiles = isa == QuantIsa::kAmx && type != GgmlType::kQ6_K;
      EXPECT_EQ(quant_gemm_uses_tiles(type, isa), tiles) << quant_isa_name(isa) << " " << gguf::type_name(type);
      EXPECT_FALSE(quant_gemm_preferred(type, kTileMinRows - 1, isa));
      EXPECT_EQ(quant_gemm_preferred(type, kTileMinRows, isa), tiles);
      EXPECT_EQ(quant_gemm_preferred(type, 512, isa), tiles);
    }
    const std::vector<QuantPathLine> report = quant_path_report(isa);
    std::string text;
    for (const QuantPathLine& l : report) text += l.product + ": " + l.path + "\n";
    const std::string rows = isa == QuantIsa::kAmx ? "vnni" : quant_isa_name(isa);
    EXPECT_NE(text.find(std::string("quant path: ") + quant_isa_name(isa)), std::string::npos) << text;
    EXPECT_NE(text.find("decode rows: " + rows + " kernels"), std::string::npos) << text;
    EXPECT_EQ(text.find("amx int8 tiles") != std::string::npos, isa == QuantIsa::kAmx) << text;
  }
}

std::string thrown_by(const char* env) {
  try {
    quant_isa_from(env);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(QuantPath, ChoiceAndRefusal) {
  // No variable: the widest path this CPU (and process) runs.
  QuantIsa widest = QuantIsa::kScalar;
  for (const QuantIsa isa : kAllPaths)
    if (quant_isa_supported(isa)) widest = isa;
  EXPECT_EQ(quant_isa_from(nullptr), widest);
  EXPECT_EQ(quant_isa_from(""), widest);
  for (const QuantIsa isa : kAllPaths) {
    EXPECT_EQ(parse_quant_isa(quant_isa_name(isa)), isa);
    if (quant_isa_supported(isa)) {
      EXPECT_EQ(quant_isa_from(quant_isa_name(isa)), isa);
      EXPECT_EQ(quant_isa_why_not(isa), "");
    } else {  // refused with the variable, the value and the reason
      const std::string error = thrown_by(quant_isa_name(isa));
      EXPECT_NE(error.find(std::string("LUKA_QUANT_PATH=") + quant_isa_name(isa)), std::string::npos) << error;
      EXPECT_NE(error.find(quant_isa_why_not(isa)), std::string::npos) << error;
      EXPECT_FALSE(quant_isa_why_not(isa).empty());
    }
  }
  EXPECT_NE(thrown_by("avx1024").find("expected scalar, avx2, avx512, vnni or amx"), std::string::npos);
  EXPECT_TRUE(quant_isa_supported(QuantIsa::kScalar));
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(quant_isa_supported(QuantIsa::kVnni), f.avx512 && f.avx512_vnni);
  if (!f.amx_int8) EXPECT_FALSE(quant_isa_supported(QuantIsa::kAmx));
}

// Run by CTest once per path with LUKA_QUANT_PATH set (test_quant_gemv_path_<name>): the default
// arguments then take that path, and give what the path gives when named; a path this CPU lacks
// is refused when the default is first asked for.
TEST(QuantPathFromEnvironment, ForcedPathIsTaken) {
  const char* env = std::getenv("LUKA_QUANT_PATH");
  if (env == nullptr || *env == '\0') GTEST_SKIP() << "LUKA_QUANT_PATH not set (CTest runs this once per path)";
  const std::optional<QuantIsa> named = parse_quant_isa(env);
  ASSERT_TRUE(named.has_value()) << env;
  if (!quant_isa_supported(*named)) {
    EXPECT_THROW(quant_isa(), std::invalid_argument);
    GTEST_SKIP() << "this machine cannot run the " << env << " path: " << quant_isa_why_not(*named) << " (refusal checked)";
  }
  ASSERT_EQ(quant_isa(), *named);
  std::mt19937 rng(43);
  for (const GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const std::int64_t in = block_elements(type) == 32 ? 96 : 512, out = 19, rows = 3;
    const std::vector<std::uint8_t> w = random_weights(type, out, in, rng);
    std::vector<float> x;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<float> xr = random_activation(in, rng);
      x.insert(x.end(), xr.begin(), xr.end());
    }
    std::vector<float> a(static_cast<std::size_t>(out)), b(a.size()), ga(static_cast<std::size_t>(rows * out)), gb(ga.size());
    quant_gemv(type, w.data(), out, in, x.data(), a.data());
    quant_gemv(type, w.data(), out, in, x.data(), b.data(), *named);
    EXPECT_EQ(a, b) << gguf::type_name(type);
    quant_gemm(type, w.data(), out, in, x.data(), rows, ga.data());
    quant_gemm(type, w.data(), out, in, x.data(), rows, gb.data(), *named);
    EXPECT_EQ(ga, gb) << gguf::type_name(type);
  }
}

// The tile state refused by the kernel: a seccomp filter in a fresh child process (a death test
// in the threadsafe style re-runs the binary) makes arch_prctl(ARCH_REQ_XCOMP_PERM) fail with
// EPERM. The process must then see no amx path, default to the next widest, refuse
// LUKA_QUANT_PATH=amx, and still compute multi-row products (without tiles) correctly.
int run_with_tile_state_refused() {
  unsetenv("LUKA_QUANT_PATH");
  unsetenv("LUKA_AMX");
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_arch_prctl, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x1023, 0, 1),  // ARCH_REQ_XCOMP_PERM
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return 10;
  const AmxTileState expected = cpu_features().amx_tile ? AmxTileState::kRefused : AmxTileState::kNoCpu;
  if (amx_tile_state() != expected) return 11;
  if (quant_isa_supported(QuantIsa::kAmx) || quant_isa() == QuantIsa::kAmx) return 12;
  if (thrown_by("amx").find("LUKA_QUANT_PATH=amx") == std::string::npos) return 13;
  std::mt19937 rng(47);
  const std::int64_t in = 64, out = 21, rows = 18;
  const std::vector<std::uint8_t> w = random_weights(GgmlType::kQ4_1, out, in, rng);
  std::vector<float> x(static_cast<std::size_t>(rows * in));
  for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  std::vector<float> y(static_cast<std::size_t>(rows * out)), y1(static_cast<std::size_t>(out));
  quant_gemm(GgmlType::kQ4_1, w.data(), out, in, x.data(), rows, y.data());  // default path: no tiles
  for (std::int64_t r = 0; r < rows; ++r) {
    quant_gemv(GgmlType::kQ4_1, w.data(), out, in, x.data() + r * in, y1.data(), QuantIsa::kScalar);
    if (std::memcmp(y1.data(), y.data() + r * out, sizeof(float) * static_cast<std::size_t>(out)) != 0) return 14;
  }
  return 0;
}

TEST(AmxTileStateDeathTest, RefusedTileStateFallsBack) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(run_with_tile_state_refused()), testing::ExitedWithCode(0), "");
}

TEST(AmxTileState, SwitchedOffByEnvironmentOrAsked) {
  const char* env = std::getenv("LUKA_AMX");
  if (env != nullptr && std::string(env) == "off") {
    EXPECT_EQ(amx_tile_state(), AmxTileState::kDisabled);
    EXPECT_FALSE(quant_isa_supported(QuantIsa::kAmx));
  } else {
    EXPECT_EQ(amx_tile_state() == AmxTileState::kNoCpu, !cpu_features().amx_tile);
  }
  EXPECT_STRNE(amx_tile_state_text(amx_tile_state()), "?");
}

}  // namespace
}  // namespace luka::cpu
