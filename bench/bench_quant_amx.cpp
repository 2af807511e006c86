// Multi-row products on GGUF blocks (a prefill's linear layers): kernels/cpu/quant_gemm on AMX
// int8 tiles, against the VNNI one-row kernels run per row, and against what the decoder did
// before: the blocks dequantized, then at::linear (oneDNN inside LibTorch) in fp32 and in bf16
// (oneDNN's bf16 matmul, on AMX-BF16 where the CPU has it). A last column times oneDNN's bf16
// matmul alone on weights dequantized beforehand (its best case, at twice the memory of Q8_0).
// oneDNN's own int8 API is not reachable: LibTorch ships its headers but not its symbols
// (libtorch_cpu.so exports no dnnl_* function), so its int8 matmul is out of reach from here.
//
// Times are medians of interleaved repetitions in one process; GOP/s counts 2·rows·out·in.
//   bench_quant_amx [reps=7] [threads=1]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "bench/bench_stats.h"
#include "core/gguf/ggml_types.h"
#include "kernels/cpu/quant_gemv.h"

namespace {

using luka::gguf::GgmlType;
using luka::cpu::QuantIsa;

std::vector<std::uint8_t> random_blocks(GgmlType type, std::int64_t out, std::int64_t in, std::mt19937& rng) {
  const auto traits = *luka::gguf::type_traits(static_cast<std::uint32_t>(type));
  const std::int64_t blocks = out * in / traits.block_elements;
  std::vector<std::uint8_t> w(static_cast<std::size_t>(blocks * traits.block_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : w) b = static_cast<std::uint8_t>(byte(rng));
  const std::uint16_t scale = c10::Half(0.01f).x;
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::uint8_t* blk = w.data() + b * traits.block_bytes;
    std::memcpy(blk + (type == GgmlType::kQ6_K ? 208 : 0), &scale, 2);
    if (type == GgmlType::kQ4_1 || type == GgmlType::kQ4_K) std::memcpy(blk + 2, &scale, 2);
  }
  return w;
}

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

at::Tensor dequantized(GgmlType type, const std::vector<std::uint8_t>& w, std::int64_t out, std::int64_t in, at::ScalarType dt) {
  const auto traits = *luka::gguf::type_traits(static_cast<std::uint32_t>(type));
  at::Tensor t = at::empty({out, in}, at::kFloat);
  luka::gguf::dequantize(type, w.data(), out * in / traits.block_elements, t.mutable_data_ptr<float>());
  return dt == at::kFloat ? t : t.to(dt);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  if (reps < 1 || threads < 1) {
    std::fprintf(stderr, "usage: bench_quant_amx [reps=7] [threads=1]\n");
    return 2;
  }
  at::set_num_threads(threads);
  c10::InferenceMode guard;
  const bool amx = luka::cpu::quant_isa_supported(QuantIsa::kAmx);
  const bool vnni = luka::cpu::quant_isa_supported(QuantIsa::kVnni);
  if (!vnni) {
    std::fprintf(stderr, "bench_quant_amx: this CPU runs neither the vnni nor the amx path (%s)\n",
                 luka::cpu::quant_isa_why_not(QuantIsa::kVnni).c_str());
    return 1;
  }
  struct Case {
    const char* name;
    GgmlType type;
    std::int64_t in, out;
  };
  const Case cases[] = {
      {"SmolLM2 q/o", GgmlType::kQ4_1, 576, 576},          {"SmolLM2 gate/up", GgmlType::kQ4_1, 576, 1536},
      {"SmolLM2 down", GgmlType::kQ4_1, 1536, 576},        {"SmolLM2 gate/up", GgmlType::kQ8_0, 576, 1536},
      {"SmolLM2 gate/up", GgmlType::kQ4_0, 576, 1536},     {"Qwen3-0.6B gate/up", GgmlType::kQ4_K, 1024, 3072},
      {"Qwen3-0.6B down", GgmlType::kQ4_K, 3072, 1024},
  };
  std::printf("%d thread%s, medians of %d interleaved repetitions; ms per call (GOP/s); ratio = the decoder's former path "
              "(dequantize + fp32 at::linear) ÷ amx tiles\n\n",
              threads, threads == 1 ? "" : "s", reps);
  std::printf("| shape | type | rows | amx tiles | vnni rows | dequantize + fp32 linear | dequantize + bf16 linear (oneDNN) | "
              "bf16 linear alone (oneDNN) | ratio |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  std::mt19937 rng(5);
  for (const Case& c : cases) {
    const std::vector<std::uint8_t> w = random_blocks(c.type, c.out, c.in, rng);
    const at::Tensor wbf = dequantized(c.type, w, c.out, c.in, at::kBFloat16);
    for (const std::int64_t rows : {1, 16, 128, 512}) {
      const at::Tensor x = at::randn({rows, c.in});
      const at::Tensor xbf = x.to(at::kBFloat16);
      std::vector<float> y(static_cast<std::size_t>(rows * c.out));
      const bool vnni_rows = rows <= 16;  // per-row kernels: quadratic in rows, timed where they could compete
      std::vector<double> t[5];
      for (int r = 0; r < reps + 1; ++r) {  // the first round warms up and is dropped
        double s[5] = {0, 0, 0, 0, 0};
        if (amx) s[0] = seconds([&] { luka::cpu::quant_gemm(c.type, w.data(), c.out, c.in, x.const_data_ptr<float>(), rows, y.data(), QuantIsa::kAmx); });
        if (vnni_rows)
          s[1] = seconds([&] { luka::cpu::quant_gemm(c.type, w.data(), c.out, c.in, x.const_data_ptr<float>(), rows, y.data(), QuantIsa::kVnni); });
        s[2] = seconds([&] { (void)at::linear(x, dequantized(c.type, w, c.out, c.in, at::kFloat)); });
        s[3] = seconds([&] { (void)at::linear(xbf, dequantized(c.type, w, c.out, c.in, at::kBFloat16)); });
        s[4] = seconds([&] { (void)at::linear(xbf, wbf); });
        if (r > 0)
          for (int k = 0; k < 5; ++k) t[k].push_back(s[k]);
      }
      const double ops = 2.0 * static_cast<double>(rows * c.in * c.out);
      std::printf("| %s %lld→%lld | %s | %lld |", c.name, static_cast<long long>(c.in), static_cast<long long>(c.out),
                  luka::gguf::type_name(c.type), static_cast<long long>(rows));
      double med[5];
      for (int k = 0; k < 5; ++k) {
        med[k] = luka::bench::median(t[k]);
        if ((k == 0 && !amx) || (k == 1 && !vnni_rows))
          std::printf(" — |");
        else
          std::printf(" %.3f (%.0f) |", med[k] * 1e3, ops / med[k] / 1e9);
      }
      if (amx)
        std::printf(" %.2f× |\n", med[2] / med[0]);
      else
        std::printf(" — |\n");
    }
  }
  return 0;
}
