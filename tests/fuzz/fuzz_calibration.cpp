// Fuzz target for calibration files (core/eval/calibration.cpp: `luka calibrate` output, read back
// by `luka capture --calibration`, `luka inspect --calibration` and the Studio): any text must give
// a calibration or a luka::Error. One that loads has num_layers x num_heads rows in layer-major
// order, every head with one score per candidate, finite numbers where they must be, and a best
// candidate that no other beats in output error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/eval/calibration.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  luka::eval::Calibration c;
  try {
    c = luka::eval::parse_calibration(text, "calib.json");
  } catch (const luka::Error&) {
    return 0;  // rejected cleanly: the expected outcome for most inputs
  }
  if (c.num_layers < 1 || c.num_heads < 1) std::abort();
  if (c.heads.size() != static_cast<std::size_t>(c.num_layers) * static_cast<std::size_t>(c.num_heads)) std::abort();
  if (c.dense_entries.size() != static_cast<std::size_t>(c.num_layers)) std::abort();
  if (c.prompt_tokens < 1 || c.prompt_tokens >= c.tokens || c.decode_steps < 1 || c.decode_steps > c.tokens) std::abort();
  for (std::size_t i = 0; i < c.heads.size(); ++i) {
    const luka::eval::CalibrationHead& r = c.heads[i];
    if (r.layer != static_cast<int>(i) / c.num_heads || r.head != static_cast<int>(i) % c.num_heads) std::abort();
    if (!std::isfinite(r.sink) || !std::isfinite(r.entropy) || !std::isfinite(r.locality)) std::abort();
    if (r.candidates.size() != c.candidates.size()) std::abort();
    if (c.candidates.empty() != (r.best < 0)) std::abort();
    for (const luka::eval::CandidateScores& s : r.candidates) {
      if (!std::isfinite(s.kl) || !std::isfinite(s.recall) || !std::isfinite(s.rel_l2) || !(s.entries >= 0)) std::abort();
      if (r.best >= 0 && s.rel_l2 < r.candidates[static_cast<std::size_t>(r.best)].rel_l2) std::abort();
    }
  }
  return 0;
}
