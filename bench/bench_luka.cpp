// Decode step time per LuKA mode at several context lengths, next to the plain dense decoder.
//
// One decoder per context length: the prompt is prefilled once (exact attention, the same in every
// mode), then each mode runs `steps` decode steps after a live switch of every layer (the state is
// maintained in all modes, so switching costs nothing). "dense (baseline)" is the decoder's own
// DenseAttention (no LuKA state); "dense", "lined", "clustered" and "kascade" (the `kascade`
// preset's anchors and reuse layers) run through LukaAttention. "semanticache" (the preset: delimiter
// chunks, GSC clusters, no refinement) needs its pages from the prefill on, so it runs on a decoder
// of its own, prefilled again; its token texts are synthetic (ids ≡ 0 mod 12 are ".", ≡ 6 are ",",
// a sentence-like rhythm) since the bench has no tokenizer.
//
// With `methods`, the kvpress methods and Quest follow (docs/methods.md): "quest" and
// "tova_decoding" (their presets) switched live like the modes; each press scorer at 25% of the
// prompt kept (compression_ratio 0.75, and SnapKV under PyramidKV's and AdaKV's allocation) on a
// decoder of its own, since a press scores the prompt at its prefill. Its row gives that prefill's
// time, scoring included, next to the dense prefill's. A press step attends to the kept positions
// only, so the scorers' step times differ only by noise; their prefills differ by the scoring.
//
//   bench_luka MODEL fp32|bf16 [contexts=1024,4096,8192] [steps=16] [threads=0] [methods]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/luka/luka_attention.h"
#include "core/util/error.h"
#include "core/model/decoder.h"
#include "core/model/model.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_luka MODEL fp32|bf16 [contexts=1024,4096,8192] [steps=16] [threads=0] [methods]\n");
    return 2;
  }
  try {
    luka::LoadOptions options;
    options.dtype = luka::parse_dtype(argv[2]);
    std::vector<std::int64_t> contexts;
    std::stringstream list(argc > 3 ? argv[3] : "1024,4096,8192");
    for (std::string item; std::getline(list, item, ',');) contexts.push_back(std::stoll(item));
    const int steps = argc > 4 ? std::atoi(argv[4]) : 16;
    options.threads = argc > 5 ? std::atoi(argv[5]) : 0;
    const bool methods = argc > 6 && std::string(argv[6]) == "methods";
    if (argc > 6 && !methods) luka::fail("bench_luka", std::string("the sixth argument is `methods` or nothing, not ") + argv[6]);
    const auto model = luka::Model::load(argv[1], options);
    const std::int64_t layers = model->config().num_layers;

    for (const std::int64_t ctx : contexts) {
      std::vector<std::int32_t> prompt(static_cast<std::size_t>(ctx));
      for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::int32_t>((i * 7919 + 13) % 30000);
      // Baseline: the decoder's dense attention.
      double baseline_ms;
      {
        luka::Decoder d(model);
        d.prefill(prompt);
        std::int32_t next = 1;
        // Random weights must still give finite logits, or the timings would measure NaN arithmetic.
        if (!at::isfinite(d.decode(next)).all().item<bool>()) luka::fail("bench_luka", "the model's logits are not finite");
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < steps; ++i) next = static_cast<std::int32_t>(d.decode(next).argmax().item<std::int64_t>());
        baseline_ms = 1e3 * seconds_since(t0) / steps;
      }
      // Every layer in one mode with its default settings, then the kascade and paper presets.
      std::vector<std::pair<std::string, luka::LukaConfig>> runs;
      for (const auto mode : {luka::AttentionMode::kDense, luka::AttentionMode::kLined, luka::AttentionMode::kClustered}) {
        luka::LukaConfig c = luka::LukaConfig::preset("dense", layers);
        for (auto& l : c.layers) l.mode = mode;
        runs.emplace_back(luka::to_string(mode), c);
      }
      for (const char* name : {"kascade", "paper"}) runs.emplace_back(name, luka::LukaConfig::preset(name, layers));
      if (methods)
        for (const char* name : {"quest", "tova_decoding"}) runs.emplace_back(name, luka::LukaConfig::preset(name, layers));
      const luka::LukaConfig config = luka::LukaConfig::preset("dense", layers);
      luka::Decoder d(model);
      const auto luka_layers = luka::install_luka(d, config);
      const auto t_prefill = std::chrono::steady_clock::now();
      d.prefill(prompt);
      const double prefill_s = seconds_since(t_prefill);
      std::int32_t next = 1;
      std::printf("| %lld | dense (baseline) | %.1f | 1.00 | |\n", static_cast<long long>(ctx), baseline_ms);
      for (const auto& [name, run] : runs) {
        for (std::int64_t l = 0; l < layers; ++l) luka_layers[static_cast<std::size_t>(l)]->set_config(run.layers[static_cast<std::size_t>(l)]);
        next = static_cast<std::int32_t>(d.decode(next).argmax().item<std::int64_t>());  // warm-up
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < steps; ++i) next = static_cast<std::int32_t>(d.decode(next).argmax().item<std::int64_t>());
        const double ms = 1e3 * seconds_since(t0) / steps;
        std::printf("| %lld | %s | %.1f | %.2f | %s |\n", static_cast<long long>(ctx), name.c_str(), ms, baseline_ms / ms,
                    name == "dense" ? ("prefill " + std::to_string(static_cast<int>(prefill_s)) + " s").c_str() : "");
        std::fflush(stdout);
      }
      {
        luka::Decoder s(model);
        const auto semantic = luka::install_luka(s, luka::LukaConfig::preset("semanticache", layers));
        std::vector<std::string> texts(static_cast<std::size_t>(model->config().vocab_size), " word");
        for (std::size_t id = 0; id < texts.size(); ++id) texts[id] = id % 12 == 0 ? "." : id % 12 == 6 ? "," : " word";
        luka::set_token_texts(semantic, texts);
        s.prefill(prompt);
        std::int32_t n = static_cast<std::int32_t>(s.decode(1).argmax().item<std::int64_t>());  // warm-up
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < steps; ++i) n = static_cast<std::int32_t>(s.decode(n).argmax().item<std::int64_t>());
        const double ms = 1e3 * seconds_since(t0) / steps;
        std::int64_t entries = 0, tokens = 0;  // the last step's, head 0 of every layer
        for (const auto& l : semantic) {
          entries += l->last_step().cover_size.empty() ? 0 : l->last_step().cover_size[0];
          tokens += l->last_step().tokens;
        }
        const double attended = static_cast<double>(entries) / static_cast<double>(std::max<std::int64_t>(1, tokens));
        std::printf("| %lld | semanticache | %.1f | %.2f | attends %.2f of dense's entries |\n", static_cast<long long>(ctx), ms, baseline_ms / ms,
                    attended);
        std::fflush(stdout);
      }
      if (!methods) continue;
      for (const char* name : {"streaming_llm", "snapkv", "tova", "knorm", "expected_attention", "random", "pyramidkv", "adakv"}) {
        luka::LukaConfig c = luka::LukaConfig::preset(name, layers);
        c.apply_override("compression_ratio=0.75");
        luka::Decoder p(model);
        const auto press_layers = luka::install_luka(p, c);
        const auto t_press = std::chrono::steady_clock::now();
        p.prefill(prompt);
        const double press_prefill_s = seconds_since(t_press);
        std::int32_t n = static_cast<std::int32_t>(p.decode(1).argmax().item<std::int64_t>());  // warm-up
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < steps; ++i) n = static_cast<std::int32_t>(p.decode(n).argmax().item<std::int64_t>());
        const double ms = 1e3 * seconds_since(t0) / steps;
        std::printf("| %lld | %s, 25%% kept | %.1f | %.2f | prefill with scoring %.1f s (dense %.1f s) |\n", static_cast<long long>(ctx),
                    name, ms, baseline_ms / ms, press_prefill_s, prefill_s);
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_luka: error: %s\n", e.what());
    return 1;
  }
}
