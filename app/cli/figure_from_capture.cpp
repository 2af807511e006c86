#include "app/cli/figure_from_capture.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/util/error.h"

namespace luka::cli {

int default_figure_level(const capture::Layout& lay, std::int64_t max_cells) {
  if (lay.levels.empty()) return 0;
  int level = lay.levels.back();
  for (auto it = lay.levels.rbegin(); it != lay.levels.rend(); ++it)
    if (capture::level_size(lay.prompt_tokens, *it) <= max_cells) level = *it;
  return level;
}

viz::Figure figure_from_capture(const capture::CaptureView& view, int layer, int head, int level, std::int64_t step, bool log_scale) {
  const capture::Summary sum = view.summary();
  const capture::Layout& lay = sum.layout;
  capture::recorded_index(lay.layers, layer, "layer");
  capture::recorded_index(lay.heads, head, "head");
  if (lay.levels.empty()) fail("capture", "this capture has no prefill maps");
  if (step < 0 || step > sum.complete_steps)
    fail("capture", "step " + std::to_string(step) + " is not in 0.." + std::to_string(sum.complete_steps));
  if (step > 0 && level != 0) fail("capture", "decode rows need level 0 (they are recorded per token)");
  if (step > 0 && !lay.rows) fail("capture", "effective rows were not recorded");

  viz::Figure f;
  const std::int64_t n = lay.prompt_tokens, size = capture::level_size(n, level), N = size + step;
  const capture::MapWindow w = view.map_window(layer, head, level, 0, 0, size, size);
  f.rows = f.cols = N;
  f.values.assign(static_cast<std::size_t>(N * N), 0.f);
  for (std::int64_t r = 0; r < size; ++r) std::copy_n(w.values.data() + r * size, size, f.values.data() + r * N);
  std::string mode = "prefill";
  for (std::int64_t s = 1; s <= step; ++s) {
    const auto row = view.row(s, layer, head);
    std::copy(row.begin(), row.end(), f.values.data() + (n + s - 1) * N);
    mode = capture::mode_name(view.metrics(s, layer).mode);
  }
  f.cell = static_cast<double>(std::int64_t{1} << level);
  f.tokens = n + step;
  for (const capture::Token& t : view.tokens()) f.labels.push_back(t.piece);
  for (const capture::Segment& s : view.segments()) f.bands.push_back({s.begin, s.end, s.colour, s.label});
  f.options.causal = true;
  f.options.empty = {245, 245, 245};
  if (log_scale) {
    f.options.scale.kind = viz::ColorScale::kLog;
    f.options.scale.vmin = 1e-4;
    f.scale_label = "attention (log10)";
  } else {
    f.scale_label = "attention";
  }
  const std::string model = std::filesystem::path(sum.manifest.model_path).filename().string();
  char title[512];
  std::snprintf(title, sizeof title, "%s (%s) · layer %d · head %d · %s%s · effective attention%s", model.c_str(),
                sum.manifest.architecture.c_str(), layer, head, mode.c_str(), step ? (" to step " + std::to_string(step)).c_str() : "",
                level ? (" · max over " + std::to_string(1 << level) + "×" + std::to_string(1 << level) + " tokens").c_str() : "");
  f.title = title;
  return f;
}

}  // namespace luka::cli
