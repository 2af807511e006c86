// Decode tokens/s of the fused one-row step (Decoder::set_fused_step(true): kernels/cpu/decode_step)
// against the unfused ATen step, for each compute dtype and weight format of a model, and the
// number of ATen operator dispatches and parallel regions per decode step of each (counted with a
// RecordFunction callback over one step after the timed ones).
// Within a repetition every configuration decodes `steps` tokens in turn after the same prompt,
// so the fused/unfused ratios are taken from interleaved runs; medians are printed.
//
//   bench_fused_step MODEL [steps=64] [reps=5] [threads=2] [prompt_tokens=18] [only=DTYPE-WEIGHTS]
// (only: one configuration, e.g. fp32-quantized, for a profiler)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_stats.h"
#include "core/model/decoder.h"
#include "core/model/model.h"

namespace {

std::atomic<long> g_ops{0};

std::unique_ptr<at::ObserverContext> count_op(const at::RecordFunction&) {
  g_ops.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

}  // namespace

using luka::bench::median;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_fused_step MODEL [steps=64] [reps=5] [threads=2] [prompt_tokens=18] [only=DTYPE-WEIGHTS]\n");
    return 2;
  }
  try {
    const std::string path = argv[1];
    const int steps = argc > 2 ? std::atoi(argv[2]) : 64;
    const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
    const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
    const int prompt_tokens = argc > 5 ? std::atoi(argv[5]) : 18;
    const std::string only = argc > 6 ? argv[6] : "";
    if (steps < 1 || reps < 1 || threads < 1 || prompt_tokens < 1) {
      std::fprintf(stderr, "bench_fused_step: steps, reps, threads and prompt_tokens must be positive\n");
      return 2;
    }
    c10::InferenceMode guard;
    struct Config {
      luka::DType dtype;
      luka::WeightFormat format;
      std::shared_ptr<const luka::Model> model;
      std::vector<double> tok_s[2];  // [unfused, fused]
      long ops[2] = {0, 0};
    };
    std::vector<Config> configs;
    const bool gguf = std::filesystem::canonical(path).extension() == ".gguf";
    for (const luka::DType dtype : {luka::DType::kF32, luka::DType::kBF16})
      for (const luka::WeightFormat format : {luka::WeightFormat::kDequantized, luka::WeightFormat::kQuantized}) {
        if (format == luka::WeightFormat::kQuantized && !gguf) continue;
        const std::string name = std::string(dtype == luka::DType::kF32 ? "fp32" : "bf16") + "-" +
                                 (format == luka::WeightFormat::kQuantized ? "quantized" : "dequantized");
        if (!only.empty() && only != name) continue;
        configs.push_back({dtype, format, luka::Model::load(path, luka::LoadOptions{dtype, threads, false, format}), {}, {}});
      }
    std::vector<std::int32_t> prompt;
    const std::int64_t vocab = configs.front().model->config().vocab_size;
    for (int i = 0; i < prompt_tokens; ++i) prompt.push_back(static_cast<std::int32_t>((i * 131 + 17) % vocab));
    const auto run = [&](luka::Decoder& d) {
      d.reset();
      d.reserve(prompt_tokens + steps + 1);
      at::Tensor logits = d.prefill(prompt);
      const auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) logits = d.decode(static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()));
      return steps / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    for (int r = 0; r < reps + 1; ++r)  // the first round warms up and is not counted
      for (Config& c : configs)
        for (int fused = 0; fused < 2; ++fused) {
          luka::Decoder d(c.model);
          d.set_fused_step(fused == 1);
          if (fused == 1 && !d.fused_step()) continue;
          const double t = run(d);
          if (r > 0) c.tok_s[fused].push_back(t);
        }
    // Operators dispatched by one decode step (argmax excluded), each side.
    at::addGlobalCallback(at::RecordFunctionCallback(count_op).scopes({at::RecordScope::FUNCTION}));
    for (Config& c : configs)
      for (int fused = 0; fused < 2; ++fused) {
        luka::Decoder d(c.model);
        d.set_fused_step(fused == 1);
        at::Tensor logits = d.prefill(prompt);
        const std::int32_t next = static_cast<std::int32_t>(logits.argmax().item<std::int64_t>());
        g_ops = 0;
        d.decode(next);
        c.ops[fused] = g_ops.load();
      }
    at::clearCallbacks();
    const auto& cfg = configs.front().model->config();
    std::printf("%s: %lld layers, %d-token prompt, %d decode steps, %d reps (+1 warm-up), %d threads (at::get_num_threads %d)\n",
                path.c_str(), static_cast<long long>(cfg.num_layers), prompt_tokens, steps, reps, threads, at::get_num_threads());
    std::printf("| dtype | weights | unfused tok/s | fused tok/s | fused / unfused (median of per-rep ratios) | ATen ops per step, unfused | fused |\n");
    std::printf("|---|---|---:|---:|---:|---:|---:|\n");
    for (const Config& c : configs) {
      std::vector<double> ratios;
      for (std::size_t i = 0; i < c.tok_s[1].size(); ++i) ratios.push_back(c.tok_s[1][i] / c.tok_s[0][i]);
      std::printf("| %s | %s | %.1f | %.1f | %.3f | %ld | %ld |\n", c.dtype == luka::DType::kF32 ? "fp32" : "bf16",
                  c.format == luka::WeightFormat::kQuantized ? "quantized" : "dequantized", median(c.tok_s[0]),
                  c.tok_s[1].empty() ? 0.0 : median(c.tok_s[1]), ratios.empty() ? 0.0 : median(ratios), c.ops[0], c.ops[1]);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_fused_step: %s\n", e.what());
    return 1;
  }
}
