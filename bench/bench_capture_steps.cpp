// What recording every decode step costs a run whose host thread bounds the step, as on the GPU
// (the host launches every kernel of a step): the model thread spins for STEP_MS (the step's
// launches), then hands a recorded step (clustered rows, covers and page states of LAYERS x HEADS
// over N tokens, deflate 1) to a CapturePipeline writing an HDF5 file. Three ways, interleaved
// over ROUNDS: no recording; steps compressed by the producer in step() (StepEncoding::kProducer,
// the CPU's choice); steps compressed by the I/O thread (kWriter, the GPU's). Prints each way's
// ms per step, the model thread's time in step() and of it waiting for room in the queue, and the
// median over rounds of the ratio to no recording.
//
//   bench_capture_steps OUT.h5 [N=4096] [LAYERS=28] [HEADS=16] [STEPS=32] [STEP_MS=25] [ROUNDS=5] [THREADS=all]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_stats.h"
#include "captures/pipeline.h"
#include "captures/writer.h"
#include "kernels/common/half.h"

using namespace luka::capture;
using Clock = std::chrono::steady_clock;

namespace {

// A step of clustered layers: pages of 16 up to a raw tail of 128, the 3 with the most mass refined,
// rows with a sink and exponentially spread mass (bench_capture_reader's decode steps).
Step make_step(std::int64_t st, std::int64_t n, int L, int H, std::mt19937& rng) {
  constexpr std::int64_t kPage = 16, kTail = 128, kTopK = 3;
  std::exponential_distribution<float> ex(1.f);
  Step step;
  step.step = st;
  step.tokens = n + st;
  step.new_tokens.push_back(Token{2, "y", true, -1, 0.5f});
  const std::int64_t T = step.tokens, paged_end = std::max<std::int64_t>(0, (T - kTail) / kPage * kPage), P = paged_end / kPage;
  for (int l = 0; l < L; ++l) {
    LayerStep ls;
    ls.mode = kModeClustered;
    ls.paged_end = paged_end;
    for (int h = 0; h < H; ++h) {
      std::vector<float> row(static_cast<std::size_t>(T)), mass(static_cast<std::size_t>(P), 0.f);
      float sum = 0;
      for (auto& x : row) sum += x = std::exp(-4.f * ex(rng));
      row[0] += sum;
      for (std::int64_t t = 0; t < T; ++t) {
        row[static_cast<std::size_t>(t)] /= 2 * sum;
        ls.effective.push_back(luka::float_to_half(row[static_cast<std::size_t>(t)]));
        if (t < paged_end) mass[static_cast<std::size_t>(t / kPage)] += row[static_cast<std::size_t>(t)];
      }
      std::vector<std::int64_t> order(static_cast<std::size_t>(P));
      for (std::int64_t p = 0; p < P; ++p) order[static_cast<std::size_t>(p)] = p;
      const std::int64_t k = std::min(kTopK, P);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](std::int64_t a, std::int64_t b) { return mass[static_cast<std::size_t>(a)] > mass[static_cast<std::size_t>(b)]; });
      std::vector<std::uint8_t> refined(static_cast<std::size_t>(P), 0);
      for (std::int64_t i = 0; i < k; ++i) refined[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = 1;
      for (std::int64_t t = 0; t < T; ++t)
        ls.cover.push_back(t >= paged_end ? kRaw : refined[static_cast<std::size_t>(t / kPage)] ? kRefined : kSummarized);
      for (std::int64_t p = 0; p < P; ++p) {
        ls.page_state.push_back(refined[static_cast<std::size_t>(p)] ? kPageRefined : kPageSummarized);
        ls.summary_mass.push_back(luka::float_to_half(mass[static_cast<std::size_t>(p)]));
      }
      ls.cover_size.push_back(static_cast<std::int32_t>(P - k + k * kPage + T - paged_end));
      for (int c = 0; c < 4; ++c) ls.fidelity.push_back(std::nanf(""));
    }
    if (st == 1)
      for (std::int64_t p = 0; p < P; ++p) ls.new_pages.push_back({p * kPage, (p + 1) * kPage, 0});
    step.layers.push_back(std::move(ls));
  }
  return step;
}

void spin_for(double ms) {
  const auto end = Clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (Clock::now() < end) {
  }
}

}  // namespace

using luka::bench::median;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_capture_steps OUT.h5 [N=4096] [LAYERS=28] [HEADS=16] [STEPS=32] [STEP_MS=25] [ROUNDS=5] [THREADS=all]\n");
    return 2;
  }
  const std::string path = argv[1];
  const std::int64_t n = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int L = argc > 3 ? std::atoi(argv[3]) : 28, H = argc > 4 ? std::atoi(argv[4]) : 16;
  const int steps = argc > 5 ? std::atoi(argv[5]) : 32;
  const double step_ms = argc > 6 ? std::atof(argv[6]) : 25;
  const int rounds = argc > 7 ? std::atoi(argv[7]) : 5;
  const int threads = argc > 8 ? std::atoi(argv[8]) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (n < 1 || L < 1 || H < 1 || steps < 1 || step_ms < 0 || rounds < 1 || threads < 1) {
    std::fprintf(stderr, "bench_capture_steps: every size must be positive\n");
    return 2;
  }

  Layout layout;
  layout.num_layers = L;
  layout.num_heads = H;
  layout.num_kv_heads = H;
  for (int i = 0; i < L; ++i) layout.layers.push_back(i), layout.page_size.push_back(16);
  for (int h = 0; h < H; ++h) layout.heads.push_back(h);
  layout.prompt_tokens = n;
  layout.max_tokens = n + steps;
  layout.deflate = 1;
  std::mt19937 rng(1);
  std::vector<Step> made;
  for (int st = 1; st <= steps; ++st) made.push_back(make_step(st, n, L, H, rng));
  std::fprintf(stderr, "bench_capture_steps: %d steps of %d layers x %d heads over %lld tokens, a %.1f ms host-bound step, %d threads\n",
               steps, L, H, static_cast<long long>(n), step_ms, threads);

  // Contiguous ranges on `threads` threads, as LibTorch's intra-op pool splits them.
  const ParallelFor parallel = [threads](std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body) {
    const std::int64_t parts = std::min<std::int64_t>(count, threads);
    std::vector<std::thread> pool;
    for (std::int64_t i = 1; i < parts; ++i) pool.emplace_back([&, i] { body(count * i / parts, count * (i + 1) / parts); });
    if (parts > 0) body(0, count / parts);
    for (auto& t : pool) t.join();
  };

  enum Way { kNone, kProducer, kWriter };
  const char* names[] = {"no recording", "compressed in step() (producer)", "compressed by the I/O thread (writer)"};
  std::vector<double> ms[3], in_step[3], waited[3], ratio[3];
  for (int r = 0; r < rounds; ++r) {
    double round_ms[3] = {0, 0, 0};
    for (const Way way : {kNone, kProducer, kWriter}) {
      std::filesystem::remove(path);
      std::optional<CaptureWriter> writer;
      std::optional<CapturePipeline> session;
      if (way != kNone) {
        writer.emplace(path);
        session.emplace(std::vector<CaptureSink*>{&*writer});
        session->set_parallel(parallel);
        session->set_step_encoding(way == kWriter ? CapturePipeline::StepEncoding::kWriter : CapturePipeline::StepEncoding::kProducer);
        session->begin(Manifest{}, layout, std::vector<Token>(static_cast<std::size_t>(n), Token{1, "x", false, -1}), {});
        session->end_prefill();
        session->drain();
      }
      std::vector<Step> copies = made;  // the recorder makes each step anew; not timed here
      const auto t0 = Clock::now();
      for (Step& s : copies) {
        spin_for(step_ms);
        if (session) session->step(std::move(s));
      }
      const double per = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / steps;
      if (session) {
        in_step[way].push_back(1e3 * session->producer_time().step_seconds / steps);
        waited[way].push_back(1e3 * session->producer_time().wait_seconds / steps);
        session->finish({});
      }
      round_ms[way] = per;
      ms[way].push_back(per);
    }
    for (const Way way : {kProducer, kWriter}) ratio[way].push_back(round_ms[way] / round_ms[kNone]);
  }
  std::filesystem::remove(path);
  std::printf("| recording | ms per step | of it in step() | of that waiting for the writer | ratio to no recording (median of %d rounds) |\n"
              "|---|---|---|---|---|\n", rounds);
  for (const Way way : {kNone, kProducer, kWriter}) {
    if (way == kNone) {
      std::printf("| %s | %.2f | - | - | 1 |\n", names[way], median(ms[way]));
    } else {
      std::printf("| %s | %.2f | %.2f | %.2f | %.3f |\n", names[way], median(ms[way]), median(in_step[way]), median(waited[way]),
                  median(ratio[way]));
    }
  }
  return 0;
}
