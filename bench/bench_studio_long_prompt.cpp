// A long prompt through the Studio's session layer (no window): load the model, run the first N
// tokens of a text as a free-text prompt, and report the process's peak resident memory (VmHWM),
// the prefill time, what the live capture holds in memory and in its spill file, and the time of
// 512 x 512 map windows at every stored level (the reads the Studio's map fetcher makes).
//
//   bench_studio_long_prompt MODEL TEXT_FILE TOKENS [NEW_TOKENS] [DEVICE]
//
// Prints `key value` lines, then a markdown table of window read times.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "app/studio/data/run_controller.h"
#include "captures/chunk_codec.h"
#include "core/util/half.h"
#include "captures/live.h"
#include "core/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A field of /proc/self/status in MiB (VmRSS, VmHWM).
double proc_status_mib(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  return -1;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace luka;
  if (argc < 4) {
    std::cerr << "usage: bench_studio_long_prompt MODEL TEXT_FILE TOKENS [NEW_TOKENS] [DEVICE]\n";
    return 2;
  }
  const std::filesystem::path model = argv[1];
  const std::int64_t want = std::stoll(argv[3]);
  const int new_tokens = argc > 4 ? std::stoi(argv[4]) : 4;
  const std::string device = argc > 5 ? argv[5] : "cpu";

  // The first `want` tokens of the text, as text (the session tokenizes the prompt itself).
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::string prompt;
  {
    const Tokenizer tok = Tokenizer::load(model);
    const std::vector<std::int32_t> ids = tok.encode(text.substr(0, static_cast<std::size_t>(want) * 8));
    for (std::size_t i = 0; i < ids.size() && static_cast<std::int64_t>(i) < want; ++i) prompt += tok.token_bytes(ids[i]);
  }

  studio::RunController s;
  s.load_model(model, LoadOptions{}, parse_device(device));
  while (s.busy()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (s.status().state != studio::RunState::kReady) {
    std::cerr << "load failed: " << s.status().message << "\n";
    return 1;
  }
  std::printf("rss_after_load_mib %.0f\n", proc_status_mib("VmRSS"));
  std::printf("hwm_after_load_mib %.0f\n", proc_status_mib("VmHWM"));

  studio::RunRequest r;
  r.free_text = prompt;
  r.max_new_tokens = new_tokens;
  const auto t0 = Clock::now();
  const double cpu0 = cpu_seconds();
  s.run(r);
  double prefill = -1, first_map = -1;
  while (true) {
    const studio::Status st = s.status();
    if (prefill < 0 && (st.steps_done > 0 || st.message.rfind("decode step", 0) == 0 || st.message.rfind("paused", 0) == 0))
      prefill = seconds_since(t0);
    // The first map: the Studio opens on the first recorded layer and head, fitted (the coarsest
    // level); it shows data once that layer's rows have arrived.
    if (first_map < 0) {
      if (const auto v = s.view()) {
        const capture::Layout lay = v->summary().layout;
        if (!lay.levels.empty() && !lay.layers.empty() && !lay.heads.empty() && lay.prompt_tokens > 0) {
          const std::int64_t size = capture::level_size(lay.prompt_tokens, lay.levels.back());
          const capture::MapWindow m = v->map_window(lay.layers.front(), lay.heads.front(), lay.levels.back(), 0, 0, size, size);
          if (std::any_of(m.values.begin(), m.values.end(), [](float x) { return x > 0; })) first_map = seconds_since(t0);
        }
      }
    }
    if (!s.busy() && st.state != studio::RunState::kRunning) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double total = seconds_since(t0), cpu = cpu_seconds() - cpu0;
  const studio::Status st = s.status();
  if (st.state == studio::RunState::kError) {
    std::cerr << "run failed: " << st.message << "\n";
    return 1;
  }
  std::printf("prompt_tokens %lld\n", static_cast<long long>(st.prompt_tokens));
  std::printf("decode_steps %lld\n", static_cast<long long>(st.steps_done));
  std::printf("first_map_s %.1f\n", first_map);
  std::printf("prefill_s %.1f\n", prefill < 0 ? total : prefill);
  std::printf("run_s %.1f\n", total);
  std::printf("run_cpu_s %.1f\n", cpu);
  std::printf("peak_rss_mib %.0f\n", proc_status_mib("VmHWM"));
  std::printf("rss_after_run_mib %.0f\n", proc_status_mib("VmRSS"));

  const auto view = s.view();
  const auto* live = dynamic_cast<const capture::LiveCapture*>(view.get());
  if (!live) {
    std::cerr << "the session's view is not a live capture\n";
    return 1;
  }
  std::printf("live_memory_mib %.1f\n", static_cast<double>(live->memory_bytes()) / (1 << 20));
  std::printf("live_map_memory_mib %.1f\n", static_cast<double>(live->map_memory_bytes()) / (1 << 20));
  std::printf("live_spilled_mib %.1f\n", static_cast<double>(live->spilled_bytes()) / (1 << 20));
  if (!live->spill_error().empty()) std::printf("spill_error %s\n", live->spill_error().c_str());

  // 512 x 512 windows of a middle layer: at the origin (chunk-aligned), off the chunk grid across
  // the diagonal (clipped by a row and a column where the level is no larger than the window), and
  // at the end (the last partial chunk); 10 reads of each, the first one cold.
  const capture::Summary sum = view->summary();
  const int layer = sum.layout.layers[sum.layout.layers.size() / 2];
  const int head = sum.layout.heads.front();
  std::printf("\n| level | map size | window | first read ms | median ms | max ms |\n|---|---|---|---|---|---|\n");
  for (const int level : sum.layout.levels) {
    const std::int64_t S = capture::level_size(sum.layout.prompt_tokens, level), w = std::min<std::int64_t>(512, S);
    const std::int64_t origins[][2] = {{0, 0}, {(S - w) / 3 + 1, (S - w) / 5 + 1}, {S - w, S - w}};
    std::vector<double> times;
    double first = -1;
    for (const auto& o : origins)
      for (int k = 0; k < 10; ++k) {
        const auto t = Clock::now();
        const capture::MapWindow m = view->map_window(layer, head, level, o[0], o[1], w, w);
        const double ms = seconds_since(t) * 1e3;
        if (m.rows == 0) std::fprintf(stderr, "empty window\n");
        if (first < 0) first = ms;
        times.push_back(ms);
      }
    std::sort(times.begin(), times.end());
    std::printf("| %d | %lld | %lldx%lld | %.2f | %.2f | %.2f |\n", level, static_cast<long long>(S), static_cast<long long>(w),
                static_cast<long long>(w), first, times[times.size() / 2], times.back());
  }

  // What the chunk encoding costs the prefill (the session encodes every map chunk for the live
  // capture on the model's threads): one recorded layer's stored levels, every head, read back,
  // then encoded again on this thread as the session does; times the recorded layers. The same
  // loop times decoding the whole layer (the reads).
  double encode_s = 0, read_s = 0;
  std::uint64_t raw = 0;
  const std::size_t li = sum.layout.layers.size() / 2;
  std::vector<std::uint16_t> band;
  for (const int level : sum.layout.levels) {
    const std::int64_t S = capture::level_size(sum.layout.prompt_tokens, level), c = capture::map_chunk(sum.layout, static_cast<int>(li), level);
    for (const int h : sum.layout.heads)
      for (std::int64_t r0 = 0; r0 < S; r0 += c) {
        const std::int64_t rows = std::min(c, S - r0), cols = std::min(S, r0 + c);
        auto t = Clock::now();
        const capture::MapWindow m = view->map_window(layer, h, level, r0, 0, rows, cols);
        read_s += seconds_since(t);
        band.resize(m.values.size());
        luka::floats_to_halves(m.values.data(), band.data(), m.values.size());
        t = Clock::now();
        for (std::int64_t c0 = 0; c0 < cols; c0 += c) {
          const auto bytes = capture::encode_tile(band.data() + c0, 2, rows, std::min(c, cols - c0), cols, c, c, sum.layout.deflate);
          raw += static_cast<std::uint64_t>(c * c * 2);
          if (bytes.empty()) std::fprintf(stderr, "empty chunk\n");
        }
        encode_s += seconds_since(t);
      }
  }
  const double L = static_cast<double>(sum.layout.layers.size());
  std::printf("\nencode_cpu_s_all_layers %.1f\n", encode_s * L);
  std::printf("encode_mb_per_s %.0f\n", static_cast<double>(raw) / 1e6 / encode_s);
  std::printf("read_whole_layer_s %.2f\n", read_s);
  std::printf("read_mb_per_s %.0f\n", static_cast<double>(raw) / 1e6 / read_s);
  return 0;
}
