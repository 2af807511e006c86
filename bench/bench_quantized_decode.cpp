// Decode tokens/s of a GGUF model with its quantized blocks kept (WeightFormat::kQuantized: the
// one-row products read the blocks) against the dequantized path, in fp32 and bf16 compute.
// The four loads decode in turn within each repetition; ratios are per repetition, medians shown.
//
//   bench_quantized_decode MODEL.gguf [steps=64] [reps=5] [threads=2]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_stats.h"
#include "core/model/decoder.h"
#include "core/model/model.h"

using luka::bench::median;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_quantized_decode MODEL.gguf [steps=64] [reps=5] [threads=2]\n");
    return 2;
  }
  try {
    const std::string path = argv[1];
    const int steps = argc > 2 ? std::atoi(argv[2]) : 64;
    const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
    const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
    c10::InferenceMode guard;
    struct Run {
      luka::DType dtype;
      luka::WeightFormat format;
      std::unique_ptr<luka::Decoder> decoder;
      std::vector<double> tok_s;
    };
    std::vector<Run> runs;
    for (const luka::DType dtype : {luka::DType::kF32, luka::DType::kBF16})
      for (const luka::WeightFormat format : {luka::WeightFormat::kDequantized, luka::WeightFormat::kQuantized}) {
        luka::LoadOptions options{dtype, threads, false, format};
        runs.push_back({dtype, format, std::make_unique<luka::Decoder>(luka::Model::load(path, options)), {}});
      }
    // An 18-token prompt of fixed ids, as in the short-context measurement.
    std::vector<std::int32_t> prompt;
    for (int i = 0; i < 18; ++i) prompt.push_back(100 + 37 * i);
    auto decode_tok_s = [&](luka::Decoder& d) {
      d.reset();
      at::Tensor logits = d.prefill(prompt);
      for (int i = 0; i < 4; ++i) logits = d.decode(static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()));
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i) logits = d.decode(static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()));
      return steps / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    std::vector<std::vector<double>> ratio(2);
    for (int r = 0; r < reps; ++r) {
      // Alternate the order so a drift in machine speed favours neither format.
      for (std::size_t k = 0; k < runs.size(); ++k) {
        Run& run = runs[r % 2 ? runs.size() - 1 - k : k];
        run.tok_s.push_back(decode_tok_s(*run.decoder));
      }
      for (int d = 0; d < 2; ++d) ratio[d].push_back(runs[2 * d + 1].tok_s.back() / runs[2 * d].tok_s.back());
    }
    std::printf("| dtype | dequantized tok/s | quantized tok/s | quantized ÷ dequantized |\n|---|---|---|---|\n");
    for (int d = 0; d < 2; ++d)
      std::printf("| %s | %.1f | %.1f | %.2f× |\n", luka::to_string(runs[2 * d].dtype), median(runs[2 * d].tok_s),
                  median(runs[2 * d + 1].tok_s), median(ratio[d]));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_quantized_decode: %s\n", e.what());
    return 1;
  }
}
