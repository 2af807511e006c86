// One-row GEMV on quantized weights (kernels/cpu/quant_gemv) against linear_row in bf16 on the
// same weights dequantized: GB/s of weight bytes streamed, and the time ratio bf16 ÷ quantized
// from interleaved runs in one process (medians over repetitions).
//
// Each matrix is copied until a set of copies holds at least STREAM_MB, and calls cycle through
// the copies, so weights come from memory as in a decode step (the default model's 97 MB of
// weights do not fit the caches either), not from a cache that holds one matrix.
// The quantized call includes quantizing its activation row; the bf16 call takes bf16 input.
// Run through bench/run_quant_gemv_bench.sh.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_stats.h"
#include "core/gguf/ggml_types.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/quant_gemv.h"

namespace {

using luka::gguf::GgmlType;

struct Shape {
  const char* name;
  std::int64_t in, out;
};

// Valid blocks with random contents: scales are finite halves, everything else random bytes.
std::vector<std::uint8_t> random_matrix(GgmlType type, std::int64_t out, std::int64_t in, std::mt19937& rng) {
  const auto traits = *luka::gguf::type_traits(static_cast<std::uint32_t>(type));
  const std::int64_t blocks = out * in / traits.block_elements;
  std::vector<std::uint8_t> w(static_cast<std::size_t>(blocks * traits.block_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : w) b = static_cast<std::uint8_t>(byte(rng));
  const std::uint16_t scale = c10::Half(0.01f).x;
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::uint8_t* blk = w.data() + b * traits.block_bytes;
    if (type == GgmlType::kQ6_K) {
      std::memcpy(blk + 208, &scale, 2);
    } else {
      std::memcpy(blk, &scale, 2);
      if (type == GgmlType::kQ4_1 || type == GgmlType::kQ4_K) std::memcpy(blk + 2, &scale, 2);
    }
  }
  return w;
}

template <class F>
double seconds_per_call(int calls, F&& call) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call(i);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
}

}  // namespace

using luka::bench::median;

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const double stream_mb = argc > 3 ? std::atof(argv[3]) : 256;
  if (reps < 1 || threads < 1 || stream_mb <= 0) {
    std::fprintf(stderr, "usage: bench_quant_gemv [reps=15] [threads=2] [stream_mb=256]\n");
    return 2;
  }
  at::set_num_threads(threads);
  c10::InferenceMode guard;
  using luka::cpu::QuantIsa;
  std::vector<QuantIsa> isas;
  for (const QuantIsa isa : {QuantIsa::kAvx512, QuantIsa::kAvx2})
    if (luka::cpu::quant_isa_supported(isa)) isas.push_back(isa);

  // SmolLM2-135M (hidden 576, 3 KV heads of 64, intermediate 1536, vocab 49,152) and Qwen3-0.6B
  // (hidden 1024, intermediate 3072).
  const Shape shapes[] = {{"SmolLM2 q/o", 576, 576},      {"SmolLM2 k/v", 576, 192},     {"SmolLM2 gate/up", 576, 1536},
                          {"SmolLM2 down", 1536, 576},    {"SmolLM2 lm_head", 576, 49152}, {"Qwen3-0.6B gate/up", 1024, 3072},
                          {"Qwen3-0.6B down", 3072, 1024}};
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K};

  std::printf("| shape | in→out | type | bits/weight |");
  for (const QuantIsa isa : isas) std::printf(" %s GB/s |", luka::cpu::quant_isa_name(isa));
  std::printf(" bf16 GB/s |");
  for (const QuantIsa isa : isas) std::printf(" %s speed-up vs bf16 |", luka::cpu::quant_isa_name(isa));
  std::printf("\n|---|---|---|---|");
  for (std::size_t i = 0; i < 2 * isas.size() + 1; ++i) std::printf("---|");
  std::printf("\n");

  std::mt19937 rng(1);
  for (const Shape& s : shapes) {
    for (const GgmlType type : types) {
      const auto traits = *luka::gguf::type_traits(static_cast<std::uint32_t>(type));
      if (s.in % traits.block_elements != 0) continue;  // K-quants need rows of whole 256-blocks
      const std::vector<std::uint8_t> w = random_matrix(type, s.out, s.in, rng);
      const double q_bytes = static_cast<double>(w.size());
      const double bf16_bytes = 2.0 * static_cast<double>(s.out * s.in);

      at::Tensor w_f32 = at::empty({s.out, s.in});
      luka::gguf::dequantize(type, w.data(), s.out * s.in / traits.block_elements, w_f32.mutable_data_ptr<float>());
      const at::Tensor w_bf16 = w_f32.to(at::kBFloat16);
      w_f32 = at::Tensor();

      const int q_copies = std::max(1, static_cast<int>(stream_mb * 1e6 / q_bytes + 0.5));
      const int b_copies = std::max(1, static_cast<int>(stream_mb * 1e6 / bf16_bytes + 0.5));
      std::vector<std::vector<std::uint8_t>> q_set(static_cast<std::size_t>(q_copies), w);
      std::vector<at::Tensor> b_set;
      for (int i = 0; i < b_copies; ++i) b_set.push_back(w_bf16.clone());

      const at::Tensor x = at::randn({1, s.in});
      const at::Tensor x_bf16 = x.to(at::kBFloat16);
      std::vector<float> y(static_cast<std::size_t>(s.out));
      auto run_q = [&](QuantIsa isa) {
        return seconds_per_call(q_copies, [&](int i) {
          luka::cpu::quant_gemv(type, q_set[i].data(), s.out, s.in, x.const_data_ptr<float>(), y.data(), isa);
        });
      };
      auto run_b = [&] { return seconds_per_call(b_copies, [&](int i) { (void)luka::cpu::linear_row(x_bf16, b_set[i], at::Tensor()); }); };

      for (const QuantIsa isa : isas) run_q(isa);  // warm-up: page in, thread pool up
      run_b();
      std::vector<std::vector<double>> q_gbs(isas.size()), ratio(isas.size());
      std::vector<double> b_gbs;
      for (int r = 0; r < reps; ++r) {
        // Alternate the order within a repetition so a drift in machine speed favours neither side.
        std::vector<double> tq(isas.size());
        double tb;
        if (r % 2 == 0) {
          for (std::size_t k = 0; k < isas.size(); ++k) tq[k] = run_q(isas[k]);
          tb = run_b();
        } else {
          tb = run_b();
          for (std::size_t k = isas.size(); k-- > 0;) tq[k] = run_q(isas[k]);
        }
        b_gbs.push_back(bf16_bytes / tb / 1e9);
        for (std::size_t k = 0; k < isas.size(); ++k) {
          q_gbs[k].push_back(q_bytes / tq[k] / 1e9);
          ratio[k].push_back(tb / tq[k]);
        }
      }
      std::printf("| %s | %lld→%lld | %s | %.2f |", s.name, static_cast<long long>(s.in), static_cast<long long>(s.out),
                  luka::gguf::type_name(type), 8.0 * q_bytes / static_cast<double>(s.out * s.in));
      for (std::size_t k = 0; k < isas.size(); ++k) std::printf(" %.1f |", median(q_gbs[k]));
      std::printf(" %.1f |", median(b_gbs));
      for (std::size_t k = 0; k < isas.size(); ++k) std::printf(" %.2f× |", median(ratio[k]));
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
