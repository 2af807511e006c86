// Sweeps: a grid over LuKA config keys (and "preset"), each point one independent run of a
// metric command (`luka perplexity` or `luka eval wikisalad`), its result in a file of its own.
// The manifest lists the runs, so they can run here one after another, or as a Slurm job array
// (one run per task), and be merged into one table and figure either way.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace luka::eval {

struct GridAxis {
  std::string key;
  std::vector<std::string> values;
};

// "compressor=mean,attention_weighted;rule=top_frac;top_frac=0,0.0625,0.25,1": axes separated by
// ';', values by ','. Throws luka::Error ("grid: ...") for an empty axis or value, a missing '=',
// or a key given twice.
std::vector<GridAxis> parse_grid(const std::string& text);

using Settings = std::vector<std::pair<std::string, std::string>>;  // key, value in axis order

// Every combination, the last axis varying fastest.
std::vector<Settings> expand_grid(const std::vector<GridAxis>& axes);

// "compressor=mean,top_frac=0.25" (all settings), and the part that is a LuKA --set spec (every key
// but "preset"; empty when none).
std::string settings_label(const Settings& s);
// The label as a figure shows it: a value that is a path ("bench/out/dar.npy") by its file name.
std::string settings_caption(const Settings& s);
// Each part of `value` between ':', ',' and '=' that is a path keeps its file name:
// "auto:bench/out/c.json,budget=0.1" -> "auto:c.json,budget=0.1".
std::string file_names_only(const std::string& value);
std::string settings_set_spec(const Settings& s);
std::optional<std::string> settings_preset(const Settings& s);

enum class Metric { kPerplexity, kEval };
Metric parse_metric(const std::string& name);  // "perplexity" or "eval"; luka::Error otherwise
const char* to_string(Metric m);

// The command line (after "luka") of one run: the metric's command, the user's base arguments,
// the point's --preset and --set, and what makes it write its result (--json for perplexity, an
// output folder for eval).
std::vector<std::string> item_arguments(Metric metric, const std::vector<std::string>& base_args, const Settings& point,
                                        const std::string& item_dir);

// The value a run's output reports: perplexity's "perplexity", eval's overall exact match (its
// summary's totals, the one preset's). Throws luka::Error when it is missing.
double metric_value(Metric metric, const nlohmann::json& output);
const char* metric_label(Metric metric);  // "perplexity", "exact match (%)"

struct SweepResult {
  int index = 0;
  Settings settings;
  bool baseline = false;
  double value = 0;
};

// A table of results as CSV: one column per grid key, then the metric. Values are quoted when
// they hold a comma or a quote.
std::string results_csv(const std::vector<GridAxis>& axes, Metric metric, const std::vector<SweepResult>& results);

// The axis to draw along x: `x_key` when given (it must be an axis), else the last axis whose values
// are all numbers, else the last axis.
std::string choose_x_axis(const std::vector<GridAxis>& axes, const std::string& x_key);

}  // namespace luka::eval
