// Lined against dense decode steps at one context, with the heavy hitters updated step to step
// (HeavyHitterSet) and ranked from scratch every step (the selection before it), interleaved.
//
// One decoder with LukaAttention in every layer, prefilled once with `context` tokens. Each round
// runs `steps` timed decode steps in each of three settings, in a rotating order: dense, lined
// (incremental) and lined ranked from scratch. A switch is followed by one untimed step, so a
// lined round never pays for the first full ranking. Reported: the median over rounds of each
// round's ratios (dense ms / lined ms: > 1 means lined is faster), and median ms per step with,
// in brackets, the part spent in the layers' attention (LukaStep::seconds).
//
//   bench_lined_decode MODEL fp32|bf16 [context=2048] [steps=8] [rounds=9] [threads=0]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_stats.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"

using luka::bench::median;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_lined_decode MODEL fp32|bf16 [context=2048] [steps=8] [rounds=9] [threads=0]\n");
    return 2;
  }
  try {
    luka::LoadOptions options;
    options.dtype = luka::parse_dtype(argv[2]);
    const std::int64_t context = argc > 3 ? std::atoll(argv[3]) : 2048;
    const int steps = argc > 4 ? std::atoi(argv[4]) : 8;
    const int rounds = argc > 5 ? std::atoi(argv[5]) : 9;
    options.threads = argc > 6 ? std::atoi(argv[6]) : 0;
    const auto model = luka::Model::load(argv[1], options);
    const std::int64_t layers = model->config().num_layers;

    std::vector<std::int32_t> prompt(static_cast<std::size_t>(context));
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::int32_t>((i * 7919 + 13) % 30000);
    const luka::LukaConfig config = luka::LukaConfig::preset("lined", layers);
    luka::Decoder d(model);
    std::vector<luka::LukaAttention*> attention;
    for (const auto& l : luka::install_luka(d, config)) attention.push_back(&dynamic_cast<luka::LukaAttention&>(*l));
    d.prefill(prompt);

    enum Setting { kDense, kLined, kLinedFromScratch };
    const auto apply = [&](Setting s) {
      for (luka::LukaAttention* a : attention) {
        luka::LayerConfig c = a->config();
        c.mode = s == kDense ? luka::AttentionMode::kDense : luka::AttentionMode::kLined;
        a->set_config(c);
        a->set_incremental_heavy_hitters(s != kLinedFromScratch);
      }
    };
    std::int32_t next = 1;
    double attention_s = 0;  // the layers' attention time (LukaStep::seconds), summed over timed steps
    const auto step = [&] {
      next = static_cast<std::int32_t>(d.decode(next).argmax().item<std::int64_t>());
      for (const luka::LukaAttention* a : attention) attention_s += a->last_step().seconds;
    };
    std::vector<double> ms[3], attention_ms[3], lined_speedup, scratch_speedup, incremental_gain;
    for (int r = 0; r < rounds; ++r) {
      double round_ms[3];
      for (int k = 0; k < 3; ++k) {
        const Setting s = static_cast<Setting>((r + k) % 3);
        apply(s);
        step();  // untimed: the first step after a switch
        attention_s = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < steps; ++i) step();
        round_ms[s] = 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
        ms[s].push_back(round_ms[s]);
        attention_ms[s].push_back(1e3 * attention_s / steps);
      }
      lined_speedup.push_back(round_ms[kDense] / round_ms[kLined]);
      scratch_speedup.push_back(round_ms[kDense] / round_ms[kLinedFromScratch]);
      incremental_gain.push_back(round_ms[kLinedFromScratch] / round_ms[kLined]);
    }
    const std::int64_t end = context + static_cast<std::int64_t>(rounds) * 3 * (steps + 1);
    std::printf("| %s | %lld-%lld | %.1f (%.1f) | %.1f (%.1f) | %.1f (%.1f) | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) |\n",
                argv[2], static_cast<long long>(context), static_cast<long long>(end), median(ms[kDense]), median(attention_ms[kDense]),
                median(ms[kLinedFromScratch]), median(attention_ms[kLinedFromScratch]), median(ms[kLined]), median(attention_ms[kLined]), median(scratch_speedup), *std::min_element(scratch_speedup.begin(), scratch_speedup.end()),
                *std::max_element(scratch_speedup.begin(), scratch_speedup.end()), median(lined_speedup),
                *std::min_element(lined_speedup.begin(), lined_speedup.end()), *std::max_element(lined_speedup.begin(), lined_speedup.end()),
                median(incremental_gain), *std::min_element(incremental_gain.begin(), incremental_gain.end()),
                *std::max_element(incremental_gain.begin(), incremental_gain.end()));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_lined_decode: error: %s\n", e.what());
    return 1;
  }
}
