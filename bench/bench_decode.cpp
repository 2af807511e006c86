// Prefill and decode throughput of the CPU decoder next to the memory-bandwidth bound.
//
// The bound: a decode step reads every weight once (the embedding table only as the lm_head when
// tied; an untied table is read one row per token and left out), so
//   bound tokens/s = copy bandwidth / weight bytes per token,
// with the copy bandwidth measured in the same run (STREAM convention: bytes read + bytes written).
// Run through bench/run_decode_bench.sh, which also makes the checkpoint.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/model/decoder.h"
#include "core/model/model.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best of several multi-threaded copies of a 1 GiB buffer.
double copy_bandwidth_bytes_per_s() {
  const std::int64_t n = (1LL << 30) / 4;
  at::Tensor src = at::rand({n});
  at::Tensor dst = at::empty({n});
  dst.copy_(src);  // fault the pages in
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    dst.copy_(src);
    best = std::max(best, 2.0 * static_cast<double>(n) * 4 / seconds_since(t0));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_decode MODEL_DIR fp32|bf16 [prompt_tokens=512] [decode_tokens=64] [threads=0]\n");
    return 2;
  }
  try {
    const std::string dir = argv[1];
    luka::LoadOptions options;
    options.dtype = luka::parse_dtype(argv[2]);
    const int prompt_tokens = argc > 3 ? std::atoi(argv[3]) : 512;
    const int decode_tokens = argc > 4 ? std::atoi(argv[4]) : 64;
    options.threads = argc > 5 ? std::atoi(argv[5]) : 0;

    const auto t_load = std::chrono::steady_clock::now();
    const auto model = luka::Model::load(dir, options);
    const double load_s = seconds_since(t_load);
    const luka::ModelConfig& c = model->config();
    const double elem = options.dtype == luka::DType::kF32 ? 4.0 : 2.0;
    const double embedding = static_cast<double>(c.vocab_size) * c.hidden_size;
    const double weight_bytes =
        (static_cast<double>(model->parameter_count()) - (c.tie_word_embeddings ? 0.0 : embedding)) * elem;
    const double bandwidth = copy_bandwidth_bytes_per_s();

    std::mt19937 rng(1);
    std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(std::min<std::int64_t>(c.vocab_size, 150000) - 1));
    std::vector<std::int32_t> prompt(static_cast<std::size_t>(prompt_tokens));
    for (auto& id : prompt) id = token(rng);

    luka::Decoder decoder(model);
    decoder.prefill(std::vector<std::int32_t>(prompt.begin(), prompt.begin() + 16), false);  // warm-up
    decoder.reset();
    auto t0 = std::chrono::steady_clock::now();
    at::Tensor logits = decoder.prefill(prompt, /*all_logits=*/false);
    const double prefill_s = seconds_since(t0);

    std::int32_t next = logits.reshape({-1}).argmax().item<std::int64_t>();
    for (int i = 0; i < 4; ++i) next = decoder.decode(next).argmax().item<std::int64_t>();  // warm-up
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < decode_tokens; ++i) next = decoder.decode(next).argmax().item<std::int64_t>();
    const double decode_s = seconds_since(t0);

    const double decode_tps = decode_tokens / decode_s;
    const double bound_tps = bandwidth / weight_bytes;
    std::printf("| %s | %d | %.1f | %.2f | %.2f GB | %.1f GB/s | %.2f | %.2f | %.1f s |\n", argv[2],
                at::get_num_threads(), prompt_tokens / prefill_s, decode_tps, weight_bytes / 1e9, bandwidth / 1e9,
                bound_tps, decode_tps / bound_tps, load_s);
    return 0;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    std::fprintf(stderr, "bench_decode: error: %s\n", what.c_str());
    return 1;
  }
}
