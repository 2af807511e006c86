// luka export: a capture's attention map as a figure (PNG, SVG or PDF), headless — the same
// figure the Studio exports.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "captures/reader.h"
#include "viz/figure.h"

namespace luka::cli {

int run_export(int argc, char** argv) {
  ArgParser args("export", "--capture FILE --layer L --head H [--step S] [--level K] [--scale log|linear] --out fig.{png,svg,pdf}",
                 "Draws the attention map of one layer and head of a capture as a figure: the heatmap with token\n"
                 "labels on both axes (thinned to fit), topic bands, a colour bar and a title naming model, layer,\n"
                 "head and mode. The format follows the extension of --out. With --step S (level 0) the decode\n"
                 "steps' effective attention rows 1..S continue the prefill map downwards.");
  args.option("capture", "FILE", "the capture to draw from")
      .option("layer", "L", "layer (recorded)")
      .option("head", "H", "query head (recorded)")
      .option("view", "NAME", "effective (the attention the run used)", "effective")
      .option("step", "S", "include decode steps 1..S (level 0 only)", "0")
      .option("level", "K", "pyramid level (default: the finest stored level of at most 1024 cells)")
      .option("scale", "log|linear", "colour scale: log10 from 1e-4, or linear 0..1", "log")
      .option("out", "FILE", "figure file: .png, .svg or .pdf");
  args.epilog("example:\n  luka export --capture demo.h5 --layer 10 --head 2 --step 8 --out layer10.pdf");
  if (!args.parse(argc, argv, 2)) return 0;
  for (const char* required : {"capture", "layer", "head", "out"})
    if (!args.has(required)) throw UsageError(std::string("--") + required + " is required");
  const std::string view = args.get("view", "effective");
  if (view == "dense" || view == "difference")
    throw UsageError("--view " + view + ": captures of format version 1 hold no dense attention rows (only the shadow's metrics)");
  if (view != "effective") throw UsageError("--view must be effective");
  const std::string scale = args.get("scale", "log");
  if (scale != "log" && scale != "linear") throw UsageError("--scale must be log or linear");

  const auto file = capture::CaptureFile::open(args.get("capture"));
  const capture::Summary sum = file->summary();
  const capture::Layout& lay = sum.layout;
  const int layer = static_cast<int>(args.get_int("layer", 0)), head = static_cast<int>(args.get_int("head", 0));
  capture::recorded_index(lay.layers, layer, "layer");
  capture::recorded_index(lay.heads, head, "head");
  if (lay.levels.empty()) throw Error(args.get("capture") + ": this capture has no prefill maps");
  int level = lay.levels.back();
  for (auto it = lay.levels.rbegin(); it != lay.levels.rend(); ++it)
    if (capture::level_size(lay.prompt_tokens, *it) <= 1024) level = *it;
  if (args.has("level")) level = static_cast<int>(args.get_int("level", 0));
  const std::int64_t step = args.get_int("step", 0);
  if (step < 0 || step > sum.complete_steps)
    throw UsageError("--step must be in 0.." + std::to_string(sum.complete_steps) + " (the capture's complete steps)");
  if (step > 0 && level != 0) throw UsageError("--step needs level 0 (decode rows are recorded per token)");
  if (step > 0 && !lay.rows) throw Error(args.get("capture") + ": effective rows were not recorded");

  viz::Figure f;
  const std::int64_t n = lay.prompt_tokens, size = capture::level_size(n, level), N = size + step;
  const capture::MapWindow w = file->map_window(layer, head, level, 0, 0, size, size);
  f.rows = f.cols = N;
  f.values.assign(static_cast<std::size_t>(N * N), 0.f);
  for (std::int64_t r = 0; r < size; ++r) std::copy_n(w.values.data() + r * size, size, f.values.data() + r * N);
  std::string mode = "prefill";
  for (std::int64_t s = 1; s <= step; ++s) {
    const auto row = file->row(s, layer, head);
    std::copy(row.begin(), row.end(), f.values.data() + (n + s - 1) * N);
    mode = capture::mode_name(file->metrics(s, layer).mode);
  }
  f.cell = static_cast<double>(std::int64_t{1} << level);
  f.tokens = n + step;
  for (const capture::Token& t : file->tokens()) f.labels.push_back(t.piece);
  for (const capture::Segment& s : file->segments()) f.bands.push_back({s.begin, s.end, s.colour, s.label});
  f.options.causal = true;
  f.options.empty = {245, 245, 245};
  if (scale == "log") {
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
  const std::filesystem::path out = args.get("out");
  viz::write_figure(f, out);
  std::fprintf(stderr, "wrote %s\n", out.string().c_str());
  return 0;
}

}  // namespace luka::cli
