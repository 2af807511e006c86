// The automatic layer config (`--preset auto:FILE[,budget=B][,loss=kl|output]`): from a calibration file written by
// `luka calibrate` — per layer, the KL(dense ‖ effective) and the entries attended per step of each
// candidate setting (dense, lined and clustered at several budgets) — the per-layer choice that
// minimizes the total KL with the total entries at most B times dense's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/luka/config.h"

namespace luka {

struct LayerOption {
  std::int64_t cost = 0;  // entries attended per step (rounded)
  double loss = 0;        // KL(dense ‖ effective), mean over heads and steps
};

// One option per layer minimizing the summed loss with the summed cost at most `budget`: an exact
// dynamic program over the integer costs (layers x budget states). Throws luka::Error when even
// the cheapest choice per layer exceeds the budget.
std::vector<int> choose_layer_options(const std::vector<std::vector<LayerOption>>& options, std::int64_t budget);

// What a layer's choice minimizes, summed over layers: the calibration's KL(dense ‖ effective) or
// the attention output's relative L2 error against dense (both means over heads and steps).
enum class AutoLoss { kKl, kOutput };

// "FILE[,budget=B][,loss=kl|output]" (0 < B <= 1; default 0.125, the paper's "roughly 1/8 of the
// tokens"). Default loss output: on the default model it chose configs of lower perplexity than KL
// did at the same budget (bench/results/luka-defaults.md).
struct AutoSpec {
  std::string file;
  double budget = 0.125;
  AutoLoss loss = AutoLoss::kOutput;
};
AutoSpec parse_auto_spec(const std::string& spec);

// The config the calibration file and budget give for a model of `num_layers` layers; throws
// luka::Error naming the file when it is not a calibration of that many layers.
LukaConfig auto_config(const AutoSpec& spec, std::int64_t num_layers);

}  // namespace luka
