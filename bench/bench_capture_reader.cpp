// Reader speed on a large capture: writes a synthetic capture of about SIZE_GB (prefill maps of
// several layers and heads over N tokens, causal rows of softmax-like values) through the real
// pipeline (pyramid builder, writer), then times fetching 512 x 512 windows at every stored
// pyramid level with a freshly opened reader, and the first frame (open + one window of the
// coarsest level). Prints a markdown table.
//
//   bench_capture_reader OUT.h5 [N=4096] [LAYERS=6] [HEADS=8] [DEFLATE=none|0-9] [WINDOWS=20] [MAP_CAP=N] [SEGMENTS=0] [STEPS=0]
// WINDOWS 0 only writes the capture (inputs for bench/run_studio_bench.sh). SEGMENTS > 0 cuts the
// prompt into that many segments of two topics; STEPS > 0 adds that many decode steps of clustered
// layers with effective rows and covers (what the Studio's decode views and the Topics tab's
// decode part read).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "captures/reader.h"
#include "captures/pipeline.h"
#include "captures/writer.h"
#include "kernels/common/half.h"

using namespace luka::capture;
using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_capture_reader OUT.h5 [N] [LAYERS] [HEADS] [DEFLATE] [WINDOWS] [MAP_CAP] [SEGMENTS] [STEPS]\n");
    return 2;
  }
  const std::string path = argv[1];
  const std::int64_t n = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int L = argc > 3 ? std::atoi(argv[3]) : 6, H = argc > 4 ? std::atoi(argv[4]) : 8;
  const std::string deflate = argc > 5 ? argv[5] : "none";
  const int windows = argc > 6 ? std::atoi(argv[6]) : 20;
  const std::int64_t map_cap = argc > 7 ? std::atoll(argv[7]) : n;
  const std::int64_t segments_wanted = argc > 8 ? std::atoll(argv[8]) : 0;
  const std::int64_t steps = argc > 9 ? std::atoll(argv[9]) : 0;

  Layout layout;
  layout.num_layers = L;
  layout.num_heads = H;
  layout.num_kv_heads = H;
  for (int i = 0; i < L; ++i) layout.layers.push_back(i), layout.page_size.push_back(16);
  for (int h = 0; h < H; ++h) layout.heads.push_back(h);
  layout.prompt_tokens = n;
  layout.levels = stored_levels(n, map_cap, 64);
  layout.rows = layout.covers = steps > 0;
  layout.max_tokens = n + steps;
  layout.deflate = deflate == "none" ? -1 : std::atoi(deflate.c_str());
  Manifest m;
  m.record = "synthetic";

  const auto tw = Clock::now();
  {
    CaptureWriter writer(path);
    CapturePipeline session({&writer});
    std::vector<Token> prompt(static_cast<std::size_t>(n), Token{1, "x", false, -1});
    // SEGMENTS > 0: the prompt cut into that many equal segments of two topics, A B A B ...
    std::vector<Segment> segments;
    for (std::int64_t k = 0; k < segments_wanted; ++k) {
      const std::int64_t b = n * k / segments_wanted, e = n * (k + 1) / segments_wanted;
      segments.push_back({k % 2 ? "topic B" : "topic A", k % 2 ? "#e69f00" : "#0072b2", b, e});
      for (std::int64_t t = b; t < e; ++t) prompt[static_cast<std::size_t>(t)].segment = static_cast<std::int32_t>(k);
    }
    session.begin(m, layout, prompt, segments);
    std::mt19937 rng(1);
    std::exponential_distribution<float> ex(1.f);
    const std::int64_t chunk = 256;
    for (std::int64_t r0 = 0; r0 < n; r0 += chunk) {
      const std::int64_t rows = std::min(chunk, n - r0);
      for (int l = 0; l < L; ++l) {
        std::vector<float> data(static_cast<std::size_t>(H * rows * n), 0.f);
        for (int h = 0; h < H; ++h)
          for (std::int64_t r = 0; r < rows; ++r) {
            float* row = data.data() + (h * rows + r) * n;
            const std::int64_t q = r0 + r;
            float sum = 0;
            for (std::int64_t c = 0; c <= q; ++c) sum += row[c] = std::exp(-4.f * ex(rng));
            row[0] += sum;  // an attention sink
            for (std::int64_t c = 0; c <= q; ++c) row[c] /= 2 * sum;
          }
        session.prefill_rows(l, r0, rows, std::move(data));
      }
    }
    session.end_prefill();
    // Decode steps of a clustered layer: pages of 16 summarized up to a raw tail of 128 tokens,
    // the 3 pages with the most attention refined; rows like the prefill's (a sink, then
    // exponentially spread mass). Pages exist from the prefill (created at step 0) or the step
    // that completes them.
    constexpr std::int64_t kPage = 16, kTail = 128, kTopK = 3;
    std::vector<std::int64_t> pages_made(static_cast<std::size_t>(L), 0);
    for (std::int64_t st = 1; st <= steps; ++st) {
      Step step;
      step.step = st;
      step.tokens = n + st;
      step.new_tokens.push_back(Token{2, "y", true, -1, 0.5f});
      const std::int64_t T = step.tokens, paged_end = std::max<std::int64_t>(0, (T - kTail) / kPage * kPage), P = paged_end / kPage;
      for (int l = 0; l < L; ++l) {
        LayerStep ls;
        ls.mode = kModeClustered;
        ls.paged_end = paged_end;
        ls.seconds = 1e-3;
        for (int h = 0; h < H; ++h) {
          std::vector<float> row(static_cast<std::size_t>(T));
          float sum = 0;
          for (auto& x : row) sum += x = std::exp(-4.f * ex(rng));
          row[0] += sum;
          std::vector<std::pair<float, std::int64_t>> mass(static_cast<std::size_t>(P));
          for (std::int64_t p = 0; p < P; ++p) mass[static_cast<std::size_t>(p)] = {0.f, p};
          for (std::int64_t t = 0; t < T; ++t) {
            row[static_cast<std::size_t>(t)] /= 2 * sum;
            ls.effective.push_back(luka::float_to_half(row[static_cast<std::size_t>(t)]));
            if (t < paged_end) mass[static_cast<std::size_t>(t / kPage)].first += row[static_cast<std::size_t>(t)];
          }
          std::vector<std::uint8_t> refined(static_cast<std::size_t>(P), 0);
          std::vector<std::pair<float, std::int64_t>> top = mass;
          const std::int64_t k = std::min(kTopK, P);
          std::partial_sort(top.begin(), top.begin() + k, top.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
          for (std::int64_t i = 0; i < k; ++i) refined[static_cast<std::size_t>(top[static_cast<std::size_t>(i)].second)] = 1;
          for (std::int64_t t = 0; t < T; ++t)
            ls.cover.push_back(t >= paged_end ? kRaw : refined[static_cast<std::size_t>(t / kPage)] ? kRefined : kSummarized);
          for (std::int64_t p = 0; p < P; ++p) {
            ls.page_state.push_back(refined[static_cast<std::size_t>(p)] ? kPageRefined : kPageSummarized);
            ls.summary_mass.push_back(luka::float_to_half(mass[static_cast<std::size_t>(p)].first));
          }
          ls.cover_size.push_back(static_cast<std::int32_t>(P - k + k * kPage + T - paged_end));
          for (int c = 0; c < 4; ++c) ls.fidelity.push_back(std::nanf(""));
        }
        for (std::int64_t& made = pages_made[static_cast<std::size_t>(l)]; made < P; ++made)
          ls.new_pages.push_back({made * kPage, (made + 1) * kPage, (made + 1) * kPage <= n ? 0 : st});
        step.layers.push_back(std::move(ls));
      }
      session.step(std::move(step));
    }
    session.finish({});
  }
  const double write_s = ms_since(tw) / 1e3;
  if (windows == 0) {
    std::printf("wrote %s in %.1f s\n", path.c_str(), write_s);
    return 0;
  }

  // Try to start cold (needs root; otherwise the page cache is warm and this says so).
  const bool dropped = std::system("sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null") == 0;
  const auto t_first = Clock::now();
  {
    const auto f = CaptureFile::open(path);
    const int top = layout.levels.back();
    f->map_window(0, 0, top, 0, 0, 512, 512);
  }
  const double first_ms = ms_since(t_first);

  const auto f = CaptureFile::open(path);
  std::printf("capture: %s, %.2f GB, %lld tokens, %d layers x %d heads, deflate %s, written in %.1f s; page cache %s\n\n", path.c_str(),
              static_cast<double>(f->file_bytes()) / 1e9, static_cast<long long>(n), L, H, deflate.c_str(), write_s,
              dropped ? "dropped before the first frame" : "warm (could not drop it)");
  std::printf("first frame (open + a 512x512 window of the coarsest level): %.1f ms\n\n", first_ms);
  std::printf("| level | map size | window | median ms | max ms |\n|---|---|---|---|---|\n");
  std::mt19937 rng(2);
  for (const int k : layout.levels) {
    const std::int64_t s = level_size(n, k);
    std::vector<double> t;
    for (int i = 0; i < windows; ++i) {
      const std::int64_t r0 = s > 512 ? static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(s - 512)) : 0;
      const std::int64_t c0 = r0 > 0 ? static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(r0 + 1)) : 0;  // at or left of the diagonal
      const auto t0 = Clock::now();
      const MapWindow w = f->map_window(static_cast<int>(rng() % L), static_cast<int>(rng() % H), k, r0, c0, 512, 512);
      t.push_back(ms_since(t0));
      if (w.values.empty()) return 1;
    }
    std::sort(t.begin(), t.end());
    std::printf("| %d | %lld | %lldx%lld | %.2f | %.2f |\n", k, static_cast<long long>(s), static_cast<long long>(std::min<std::int64_t>(s, 512)),
                static_cast<long long>(std::min<std::int64_t>(s, 512)), t[t.size() / 2], t.back());
  }
  return 0;
}
