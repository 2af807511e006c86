// The figure of one layer and head of a capture (live or file), shared by `luka export` and the
// Studio's export button so both draw the same thing.
#pragma once

#include <cstdint>

#include "captures/capture.h"
#include "viz/figure.h"

namespace luka::cli {

// The whole prefill map at pyramid `level`; with `step` > 0 (level 0 only) the effective rows of
// decode steps 1..step continue it downwards. Throws luka::Error for what the capture lacks.
viz::Figure figure_from_capture(const capture::CaptureView& view, int layer, int head, int level, std::int64_t step, bool log_scale);

// The finest stored level of at most `max_cells` cells per side.
int default_figure_level(const capture::Layout& layout, std::int64_t max_cells = 1024);

}  // namespace luka::cli
