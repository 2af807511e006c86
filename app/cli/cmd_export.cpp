// luka export: a capture's attention map as a figure (PNG, SVG or PDF), headless — the same
// figure the Studio exports.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "captures/reader.h"
#include "app/figures/capture_figure.h"
#include "viz/figure.h"

namespace luka::cli {

int run_export(int argc, char** argv) {
  ArgParser args("export", "--capture FILE --layer L --head H [--view V] [--step S] [--level K] [--scale log|linear] --out fig.{png,svg,pdf}",
                 "Draws the attention map of one layer and head of a capture as a figure: the heatmap with token\n"
                 "labels on both axes (thinned to fit), topic bands, a colour bar and a title naming model, layer,\n"
                 "head and mode. The format follows the extension of --out. With --step S the rows of decode\n"
                 "steps 1..S continue the prefill map downwards (max-pooled like it at coarser levels).");
  args.option("capture", "FILE", "the capture to draw from")
      .option("layer", "L", "layer (recorded)", Default::integer())
      .range(0, 1000000)
      .option("head", "H", "query head (recorded)", Default::integer())
      .range(0, 1000000)
      .option("view", "NAME", "effective (the attention the run used), dense (the dense shadow's), or\n"
              "difference (effective - dense); dense and difference need --step and the dense shadow", "effective")
      .option("step", "S", "include the rows of decode steps 1..S below the prefill map", 0)
      .range(0, 1e9)
      .option("level", "K", "pyramid level", Default::described_integer("the finest stored level of at most 1024 cells"))
      .range(0, 64)
      .option("scale", "log|linear", "colour scale: log10 from 1e-4, or linear 0..1", "log")
      .option("grid", "heads|layers", "small multiples instead: every head of --layer, or --head in every layer")
      .option("compare", "FILE", "a second capture of the same prompt: the figure is B - A of the two effective maps\n"
              "(B this file, A --capture), as the Studio exports while comparing")
      .option("out", "FILE", "figure file: .png, .svg or .pdf");
  args.epilog("examples:\n  luka export --capture demo.h5 --layer 10 --head 2 --step 8 --out layer10.pdf\n"
              "  luka export --capture dense.h5 --compare clustered.h5 --layer 10 --head 2 --step 8 --out b-minus-a.pdf");
  if (!args.parse(argc, argv, 2)) return 0;
  // A grid of heads draws every head of --layer; a grid of layers, --head in every layer.
  const std::string grid = args.get("grid");
  if (args.has("grid") && grid != "heads" && grid != "layers") throw UsageError("--grid must be heads or layers");
  std::vector<const char*> required = {"capture", "out"};
  if (grid != "layers") required.push_back("layer");
  if (grid != "heads") required.push_back("head");
  for (const char* r : required)
    if (!args.has(r)) throw UsageError(std::string("--") + r + " is required" + (grid.empty() ? "" : " with --grid " + grid));
  const std::string view = args.get("view");
  if (view != "effective" && view != "dense" && view != "difference") throw UsageError("--view must be effective, dense or difference");
  const std::string scale = args.get("scale");
  if (scale != "log" && scale != "linear") throw UsageError("--scale must be log or linear");
  const std::string extension = std::filesystem::path(args.get("out")).extension().string();
  if (extension != ".png" && extension != ".svg" && extension != ".pdf")
    throw UsageError("--out " + args.get("out") + ": the figure's format follows its extension, .png, .svg or .pdf");

  // A grid of heads takes no --head, a grid of layers no --layer.
  const int layer = args.has("layer") ? static_cast<int>(args.get_int("layer")) : 0;
  const int head = args.has("head") ? static_cast<int>(args.get_int("head")) : 0;
  const auto file = capture::CaptureFile::open(args.get("capture"));
  const capture::Layout lay = file->summary().layout;
  if (lay.levels.empty()) throw Error(args.get("capture") + ": this capture has no prefill maps");
  const int level = args.has("level") ? static_cast<int>(args.get_int("level")) : figures::default_figure_level(lay);
  const std::int64_t step = args.get_int("step");
  // What the options pick must be in the capture: a layer, head, level or step it lacks is the
  // command line's error (exit 2), not the file's.
  const auto recorded = [&](const char* option, const std::vector<int>& have, int v) {
    if (args.has(option) && !std::binary_search(have.begin(), have.end(), v))
      throw UsageError(std::string("--") + option + " " + std::to_string(v) + ": " + args.get("capture") + ": " + option + " " +
                       std::to_string(v) + " is not recorded");
  };
  recorded("layer", lay.layers, layer);
  recorded("head", lay.heads, head);
  if (args.has("level") && std::find(lay.levels.begin(), lay.levels.end(), level) == lay.levels.end())
    throw UsageError("--level " + std::to_string(level) + ": " + args.get("capture") + " stores no map level " + std::to_string(level));
  if (step > file->summary().complete_steps)
    throw UsageError("--step " + std::to_string(step) + ": " + args.get("capture") + " has " +
                     std::to_string(file->summary().complete_steps) + " complete decode steps");
  if (view != "effective" && step == 0) throw UsageError("--view " + view + " needs --step S (the dense shadow runs at decode steps)");
  if (args.has("compare")) {
    if (args.has("grid") || view != "effective")
      throw UsageError("--compare draws B - A of the effective maps: drop --grid and --view");
    const auto b = capture::CaptureFile::open(args.get("compare"));
    const viz::Figure f = figures::comparison_figure(*file, *b, layer, head, level, step);
    viz::write_figure(f, args.get("out"));
    std::fprintf(stderr, "wrote %s\n", args.get("out").c_str());
    return 0;
  }
  if (args.has("grid")) {
    viz::write_grid_figure(figures::grid_from_capture(*file, grid == "heads", layer, head, step, scale == "log",
                                                      figures::parse_map_view(view)),
                           args.get("out"));
    std::fprintf(stderr, "wrote %s\n", args.get("out").c_str());
    return 0;
  }
  const viz::Figure f = figures::figure_from_capture(*file, layer, head, level, step, scale == "log", figures::parse_map_view(view));
  const std::filesystem::path out = args.get("out");
  viz::write_figure(f, out);
  std::fprintf(stderr, "wrote %s\n", out.string().c_str());
  return 0;
}

}  // namespace luka::cli
