// The live capture against the file written by the same run: both sinks of one CapturePipeline,
// every read compared bit for bit (map windows at every level, aligned or not, across the
// diagonal and the last partial chunk; rows, covers, page states, pages, metrics), with the map
// chunks in memory, in the spill file, or split between the two; and the live capture's memory
// for a 4K-token map held within its budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include "core/util/half.h"
#include "captures/live.h"
#include "captures/reader.h"
#include "captures/pipeline.h"
#include "captures/writer.h"
#include "core/util/error.h"
#include "tests/process_util.h"

namespace fs = std::filesystem;

namespace luka::capture {
namespace {

fs::path work_dir() { return luka::test::test_dir("captures"); }

struct SyntheticRun {
  Manifest manifest;
  Layout layout;
  std::vector<Token> prompt, trailing;
  std::vector<Segment> segments;
  std::vector<Step> steps;
  std::uint32_t seed = 0;
};

// Row r of head h of recorded layer li's level-0 map, [n] halves: a causal distribution-like
// row with a sink column and a few heavy keys, zero right of the diagonal.
void map_row(const SyntheticRun& run, std::size_t li, std::size_t h, std::int64_t r, std::uint16_t* out) {
  const std::int64_t n = run.layout.prompt_tokens;
  std::mt19937 rng(run.seed ^ static_cast<std::uint32_t>(li * 7919 + h * 104729 + static_cast<std::size_t>(r) * 31));
  std::uniform_real_distribution<float> u(0.f, 1.f);
  const float scale = 1.f / static_cast<float>(r + 1);
  for (std::int64_t c = 0; c < n; ++c) out[c] = c <= r ? float_to_half(u(rng) * scale) : 0;
  out[0] = float_to_half(0.5f);
  if (r > 3) out[r - 3] = float_to_half(0.25f);
}

SyntheticRun make_run(std::int64_t n, int steps, std::uint32_t seed, std::vector<int> layers, std::vector<int> heads, std::int64_t map_cap,
             int deflate) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  SyntheticRun run;
  run.seed = seed;
  run.manifest.model_path = "/models/tiny";
  run.manifest.architecture = "llama";
  run.manifest.record = "live";
  Layout& l = run.layout;
  l.num_layers = *std::max_element(layers.begin(), layers.end()) + 1;
  l.num_heads = *std::max_element(heads.begin(), heads.end()) + 1;
  l.num_kv_heads = 1;
  l.layers = std::move(layers);
  l.heads = std::move(heads);
  for (std::size_t i = 0; i < l.layers.size(); ++i) l.page_size.push_back(i % 2 ? 24 : 16);  // chunks of 256 and 240
  l.prompt_tokens = n;
  l.levels = stored_levels(n, map_cap, 16);
  l.deflate = deflate;
  l.max_tokens = n + steps + 1;
  for (std::int64_t i = 0; i < n; ++i) run.prompt.push_back({static_cast<std::int32_t>(i), " t", false, i < n / 2 ? 0 : 1});
  run.segments = {{"A", "#1f77b4", 0, n / 2}, {"B", "#ff7f0e", n / 2, n}};
  const std::size_t H = l.heads.size();
  for (int st = 1; st <= steps; ++st) {
    Step s;
    s.step = st;
    s.tokens = n + st;
    s.new_tokens.push_back({static_cast<std::int32_t>(7 + st), "g", true, -1, 0.5f});
    for (std::size_t li = 0; li < l.layers.size(); ++li) {
      LayerStep ls;
      ls.mode = static_cast<std::int8_t>(st % 3);
      ls.paged_end = 16 * (st / 2);
      ls.seconds = 1e-3 * st;
      const std::int64_t P = st / 2 + static_cast<std::int64_t>(li);
      for (std::size_t h = 0; h < H; ++h) {
        ls.cover_size.push_back(static_cast<std::int32_t>(s.tokens - static_cast<std::int64_t>(h)));
        for (int k = 0; k < 4; ++k) ls.fidelity.push_back(st % 2 ? std::nanf("") : u(rng));
        for (std::int64_t t = 0; t < s.tokens; ++t) {
          ls.effective.push_back(float_to_half(u(rng) / static_cast<float>(s.tokens)));
          ls.cover.push_back(static_cast<std::uint8_t>(rng() % 6));
          if (st % 2 == 0) ls.dense.push_back(float_to_half(u(rng) / static_cast<float>(s.tokens)));
        }
        for (std::int64_t p = 0; p < P; ++p) {
          ls.page_state.push_back(static_cast<std::uint8_t>(1 + rng() % 2));
          ls.summary_mass.push_back(float_to_half(u(rng)));
        }
      }
      s.layers.push_back(std::move(ls));
    }
    // Page tables: every page a step uses exists before it.
    for (std::size_t li = 0; li < l.layers.size(); ++li) {
      const std::int64_t need = (st + 1) / 2 + static_cast<std::int64_t>(li);
      std::int64_t have = 0;
      for (int k = 1; k < st; ++k) have += static_cast<std::int64_t>(run.steps[static_cast<std::size_t>(k - 1)].layers[li].new_pages.size());
      for (std::int64_t p = have; p < need; ++p) s.layers[li].new_pages.push_back({p * 16, p * 16 + 16, p < static_cast<std::int64_t>(li) ? 0 : st});
    }
    run.steps.push_back(std::move(s));
  }
  run.trailing.push_back({99, "<end>", true, -1});
  return run;
}

// Feeds the run to a pipeline: level-0 rows in uneven blocks, layers interleaved.
void feed(CapturePipeline& pipeline, const SyntheticRun& run) {
  pipeline.begin(run.manifest, run.layout, run.prompt, run.segments);
  const std::int64_t n = run.layout.prompt_tokens;
  const std::size_t H = run.layout.heads.size();
  if (!run.layout.levels.empty())
    for (std::int64_t r = 0; r < n;) {
      const std::int64_t m = std::min<std::int64_t>(r % 2 ? 37 : 101, n - r);
      for (std::size_t li = 0; li < run.layout.layers.size(); ++li) {
        std::vector<std::uint16_t> part(H * static_cast<std::size_t>(m * n));
        for (std::size_t h = 0; h < H; ++h)
          for (std::int64_t i = 0; i < m; ++i) map_row(run, li, h, r + i, part.data() + (h * static_cast<std::size_t>(m) + static_cast<std::size_t>(i)) * static_cast<std::size_t>(n));
        pipeline.prefill_rows(run.layout.layers[li], r, m, part);
      }
      r += m;
    }
  pipeline.end_prefill();
  for (const Step& s : run.steps) pipeline.step(s);
  pipeline.finish(run.trailing);
}

void three_threads(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
  std::vector<std::thread> t;
  for (int i = 0; i < 3; ++i) t.emplace_back([&, i] { body(n * i / 3, n * (i + 1) / 3); });
  for (auto& x : t) x.join();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

::testing::AssertionResult same_window(const CaptureView& live, const CaptureView& file, int layer, int head, int level, std::int64_t r0,
                                       std::int64_t c0, std::int64_t rows, std::int64_t cols) {
  const MapWindow a = live.map_window(layer, head, level, r0, c0, rows, cols);
  const MapWindow b = file.map_window(layer, head, level, r0, c0, rows, cols);
  if (a.row0 != b.row0 || a.col0 != b.col0 || a.rows != b.rows || a.cols != b.cols || !same_bits(a.values, b.values))
    return ::testing::AssertionFailure() << "layer " << layer << " head " << head << " level " << level << " window (" << r0 << ", " << c0
                                         << ") " << rows << "x" << cols << ": live " << a.rows << "x" << a.cols << " at (" << a.row0 << ", "
                                         << a.col0 << "), file " << b.rows << "x" << b.cols;
  return ::testing::AssertionSuccess();
}

// Every read of `live` equals the same read of `file`.
void expect_same_views(const CaptureView& live, const CaptureView& file, std::uint32_t seed) {
  const Summary ls = live.summary(), fs_ = file.summary();
  const Layout& l = fs_.layout;
  EXPECT_EQ(ls.layout.levels, l.levels);
  EXPECT_EQ(ls.complete_steps, fs_.complete_steps);
  EXPECT_EQ(ls.num_tokens, fs_.num_tokens);
  EXPECT_EQ(live.tokens().size(), file.tokens().size());
  EXPECT_EQ(live.segments().size(), file.segments().size());
  std::mt19937 rng(seed);
  for (std::size_t li = 0; li < l.layers.size(); ++li) {
    const int layer = l.layers[li];
    for (const int head : l.heads)
      for (const int level : l.levels) {
        const std::int64_t S = level_size(l.prompt_tokens, level), c = map_chunk(l, static_cast<int>(li), level);
        // The whole level, each chunk row, the last partial chunk, windows across the diagonal.
        EXPECT_TRUE(same_window(live, file, layer, head, level, 0, 0, S, S));
        for (std::int64_t r0 = 0; r0 < S; r0 += c) EXPECT_TRUE(same_window(live, file, layer, head, level, r0, 0, c, S));
        EXPECT_TRUE(same_window(live, file, layer, head, level, (S - 1) / c * c, (S - 1) / c * c, c, c));
        EXPECT_TRUE(same_window(live, file, layer, head, level, S - 3, S - 5, 10, 10));  // clipped at the end
        EXPECT_TRUE(same_window(live, file, layer, head, level, S / 2 - 7, S / 2 - 9, 19, 23));
        EXPECT_TRUE(same_window(live, file, layer, head, level, -5, -2, 9, 11));  // clipped at the start
        EXPECT_TRUE(same_window(live, file, layer, head, level, 3, 3, 0, 5));      // empty
        EXPECT_TRUE(same_window(live, file, layer, head, level, S + 4, 0, 5, 5));  // outside
        // Odd sizes and positions.
        for (int k = 0; k < 6; ++k) {
          const std::int64_t r0 = static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(S));
          const std::int64_t c0 = static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(S));
          const std::int64_t rows = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(S));
          const std::int64_t cols = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(S));
          EXPECT_TRUE(same_window(live, file, layer, head, level, r0, c0, rows, cols));
        }
        // A single row, as the figures read it.
        EXPECT_TRUE(same_window(live, file, layer, head, level, S - 1, 0, 1, S));
      }
    EXPECT_EQ(live.pages(layer).size(), file.pages(layer).size());
    const auto lp = live.pages(layer), fp = file.pages(layer);
    for (std::size_t p = 0; p < std::min(lp.size(), fp.size()); ++p) {
      EXPECT_EQ(lp[p].start, fp[p].start);
      EXPECT_EQ(lp[p].end, fp[p].end);
      EXPECT_EQ(lp[p].created_step, fp[p].created_step);
    }
    for (std::int64_t st = 1; st <= fs_.complete_steps; ++st) {
      const StepMetrics a = live.metrics(st, layer), b = file.metrics(st, layer);
      EXPECT_EQ(a.mode, b.mode);
      EXPECT_EQ(a.tokens, b.tokens);
      EXPECT_EQ(a.paged_end, b.paged_end);
      EXPECT_EQ(a.seconds, b.seconds);
      EXPECT_EQ(a.cover_size, b.cover_size);
      EXPECT_TRUE(same_bits(a.fidelity, b.fidelity));
      for (const int head : l.heads) {
        EXPECT_TRUE(same_bits(live.row(st, layer, head), file.row(st, layer, head))) << "step " << st;
        if (st % 2 == 0)
          EXPECT_TRUE(same_bits(live.dense_row(st, layer, head), file.dense_row(st, layer, head))) << "step " << st;
        else
          EXPECT_THROW(live.dense_row(st, layer, head), Error);
        EXPECT_EQ(live.cover(st, layer, head), file.cover(st, layer, head));
        EXPECT_EQ(live.page_states(st, layer, head), file.page_states(st, layer, head));
        EXPECT_TRUE(same_bits(live.summary_mass(st, layer, head), file.summary_mass(st, layer, head)));
        EXPECT_EQ(live.refined_pages(st, layer, head), file.refined_pages(st, layer, head));
      }
    }
  }
}

// Level 0 read back equals the rows fed in (an independent reference for the pooled levels'
// source; the pooled levels are compared with the file, which test_capture_file checks).
void expect_level0_is_the_map(const CaptureView& live, const SyntheticRun& run) {
  const std::int64_t n = run.layout.prompt_tokens;
  std::vector<std::uint16_t> row(static_cast<std::size_t>(n));
  for (std::size_t li = 0; li < run.layout.layers.size(); ++li)
    for (std::size_t h = 0; h < run.layout.heads.size(); ++h) {
      const MapWindow w = live.map_window(run.layout.layers[li], run.layout.heads[h], 0, 0, 0, n, n);
      ASSERT_EQ(w.rows, n);
      for (std::int64_t r = 0; r < n; ++r) {
        map_row(run, li, h, r, row.data());
        for (std::int64_t c = 0; c < n; ++c)
          ASSERT_EQ(float_to_half(w.values[static_cast<std::size_t>(r * n + c)]), row[static_cast<std::size_t>(c)]) << "row " << r << " col " << c;
      }
    }
}

// The budgets: everything in memory, nothing in memory (all chunks in the spill file), and one
// that keeps the coarse levels in memory and spills level 0.
TEST(LiveCapture, EveryReadEqualsTheFileOfTheSameRun) {
  for (const int deflate : {1, -1, 4}) {
    const SyntheticRun run = make_run(700, 5, 3 + static_cast<std::uint32_t>(deflate + 1), {2, 5}, {0, 3, 4}, 1024, deflate);
    const std::size_t budgets[] = {LiveCapture::kDefaultMapMemory, 0, std::size_t{3} << 20};
    for (const std::size_t budget : budgets) {
      SCOPED_TRACE("deflate " + std::to_string(deflate) + ", budget " + std::to_string(budget));
      const fs::path path = work_dir() / "run.h5";
      LiveCapture live(budget);
      {
        CaptureWriter writer(path);
        CapturePipeline pipeline({&writer, &live}, 1 << 18);
        pipeline.set_parallel(three_threads);
        feed(pipeline, run);
      }
      EXPECT_EQ(live.spill_error(), "");
      EXPECT_LE(live.map_memory_bytes(), budget);
      if (budget == 0) EXPECT_EQ(live.map_memory_bytes(), 0u);
      if (budget == LiveCapture::kDefaultMapMemory) EXPECT_EQ(live.spilled_bytes(), 0u);
      if (budget == (std::size_t{3} << 20)) {  // level 0 (700 x 700, 2 layers x 3 heads: 6 x 6 x 256^2 x 2 bytes raw) spills
        EXPECT_GT(live.spilled_bytes(), 0u);
        EXPECT_GT(live.map_memory_bytes(), 0u);
      }
      const auto file = CaptureFile::open(path);
      expect_same_views(live, *file, 17);
      expect_level0_is_the_map(live, run);
    }
  }
}

// A LiveCapture fed plain halves (by a caller that does not hand it chunks) encodes them itself
// and answers the same; bands must start on a chunk row.
TEST(LiveCapture, PlainBandsAreEncodedByTheCapture) {
  const SyntheticRun run = make_run(300, 2, 9, {0}, {1, 2}, 512, 1);
  struct Bands final : CaptureSink {
    std::vector<MapRows> bands;
    void begin(const Manifest&, const Layout&, const std::vector<Token>&, const std::vector<Segment>&) override {}
    void map_rows(const MapRows& r, const MapChunks*) override { bands.push_back(r); }
    void end_prefill() override {}
    void step(const Step&, const StepChunks*) override {}
    void finish(const std::vector<Token>&) override {}
  } bands;
  const fs::path path = work_dir() / "run.h5";
  {
    CaptureWriter writer(path);
    CapturePipeline pipeline({&writer, &bands});
    feed(pipeline, run);
  }
  for (const std::size_t budget : {LiveCapture::kDefaultMapMemory, std::size_t{0}}) {
    LiveCapture live(budget);
    live.begin(run.manifest, run.layout, run.prompt, run.segments);
    for (MapRows b : bands.bands) {
      ASSERT_FALSE(b.data.empty());
      live.map_rows(b, nullptr);
    }
    live.end_prefill();
    for (const Step& s : run.steps) live.step(s, nullptr);
    live.finish(run.trailing);
    expect_same_views(live, *CaptureFile::open(path), 5);
    MapRows odd = bands.bands.front();
    odd.row0 = 1;
    EXPECT_THROW(live.map_rows(odd, nullptr), Error);
  }
}

// Windows read while the bands arrive (the Studio's fetcher thread during a prefill): each
// value is either not there yet (0) or final, and the reads end equal to the file's.
TEST(LiveCapture, WindowsReadDuringThePrefillAreZeroOrFinal) {
  const SyntheticRun run = make_run(900, 1, 21, {0, 1}, {0, 1}, 1024, 1);
  const fs::path path = work_dir() / "run.h5";
  LiveCapture live(std::size_t{1} << 20);  // level 0 spills: reads race with file writes too
  std::atomic<bool> done{false};
  std::vector<MapWindow> seen;
  std::thread reader([&] {
    std::mt19937 rng(4);
    while (!done) {
      if (live.summary().layout.levels.empty()) continue;
      const std::int64_t r0 = rng() % 900, c0 = rng() % 900;
      seen.push_back(live.map_window(static_cast<int>(rng() % 2), static_cast<int>(rng() % 2), 0, r0, c0, 200, 200));
      if (seen.size() > 400) seen.erase(seen.begin(), seen.begin() + 200);
    }
  });
  {
    CaptureWriter writer(path);
    CapturePipeline pipeline({&writer, &live}, 1 << 16);
    pipeline.set_parallel(three_threads);
    feed(pipeline, run);
  }
  done = true;
  reader.join();
  const auto file = CaptureFile::open(path);
  expect_same_views(live, *file, 3);
  // The windows seen meanwhile: every value 0 or the final one (head and layer unknown here, so
  // against the union of the four maps' values at that cell).
  std::vector<MapWindow> full;
  for (int layer = 0; layer < 2; ++layer)
    for (int head = 0; head < 2; ++head) full.push_back(file->map_window(layer, head, 0, 0, 0, 900, 900));
  std::size_t nonzero = 0;
  for (const MapWindow& w : seen)
    for (std::int64_t r = 0; r < w.rows; ++r)
      for (std::int64_t c = 0; c < w.cols; ++c) {
        const float v = w.values[static_cast<std::size_t>(r * w.cols + c)];
        if (v == 0.f) continue;
        ++nonzero;
        const std::size_t at = static_cast<std::size_t>((w.row0 + r) * 900 + w.col0 + c);
        bool any = false;
        for (const MapWindow& f : full) any = any || f.values[at] == v;
        ASSERT_TRUE(any) << "a value read during the prefill is neither 0 nor final";
      }
  EXPECT_GT(seen.size(), 0u);
  std::printf("windows read during the prefill: %zu, non-zero values seen: %zu\n", seen.size(), nonzero);
}

// A 4K-token prompt: the live capture holds its map chunks within the budget and the rest in
// the spill file, far below the dense arrays a [heads][S][S] copy per level took, and reads the
// same as the file.
TEST(LiveCapture, A4KMapIsHeldWithinTheMemoryBudget) {
  const SyntheticRun run = make_run(4096, 1, 8, {0}, {0, 1}, 4096, 1);
  const std::size_t budget = std::size_t{4} << 20;
  const fs::path path = work_dir() / "run.h5";
  LiveCapture live(budget);
  {
    CaptureWriter writer(path);
    CapturePipeline pipeline({&writer, &live});
    pipeline.set_parallel(three_threads);
    feed(pipeline, run);
  }
  std::uint64_t dense = 0;  // what the dense arrays held: every stored level, [heads][S][S] halves
  for (const int level : run.layout.levels) dense += 2 * 2 * static_cast<std::uint64_t>(level_size(4096, level) * level_size(4096, level));
  EXPECT_EQ(live.spill_error(), "");
  EXPECT_LE(live.map_memory_bytes(), budget);
  EXPECT_LE(live.memory_bytes(), budget + (std::size_t{1} << 20));  // plus the chunk index and one step
  EXPECT_LT(live.memory_bytes() * 20, dense);
  EXPECT_GT(live.spilled_bytes(), 0u);
  EXPECT_LT(live.spilled_bytes(), dense / 2);  // the lower triangle only, compressed
  const auto file = CaptureFile::open(path);
  for (const int level : run.layout.levels) {
    const std::int64_t S = level_size(4096, level);
    for (const int head : {0, 1}) {
      EXPECT_TRUE(same_window(live, *file, 0, head, level, 0, 0, std::min<std::int64_t>(S, 512), std::min<std::int64_t>(S, 512)));
      EXPECT_TRUE(same_window(live, *file, 0, head, level, S / 3, S / 5, 511, 513));
      EXPECT_TRUE(same_window(live, *file, 0, head, level, S - 300, S - 300, 512, 512));
    }
  }
  EXPECT_TRUE(same_window(live, *file, 0, 1, 0, 0, 0, 4096, 4096));
}

}  // namespace
}  // namespace luka::capture
