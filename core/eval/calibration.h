// A calibration file from `luka calibrate`, read back: per layer and head, the head's pattern
// scores under dense attention (sink, entropy, locality, cross-topic mass) and how closely each
// candidate setting (lined and clustered at several budgets) approximated dense attention there
// (KL, recall, the attention output's relative L2 error, entries attended per step). The same
// text travels in a capture's manifest (`luka capture --calibration`), so the Studio's head
// scores and `luka inspect --calibration` show it beside the run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace luka::eval {

struct CandidateScores {
  double kl = 0, recall = 0, rel_l2 = 0, entries = 0;  // means over the calibration's decode steps
};

struct CalibrationHead {
  int layer = 0, head = 0;
  double sink = 0, entropy = 0, locality = 0;
  double cross_topic = 0;                  // NaN when the text had no topics
  std::vector<CandidateScores> candidates;  // in Calibration::candidates' order
  // The candidate with the lowest output error (rel_l2), the loss `--preset auto` minimizes by
  // default; -1 when there are no candidates.
  int best = -1;
};

struct Calibration {
  std::string source, model;
  std::int64_t tokens = 0, prompt_tokens = 0, decode_steps = 0;
  int num_layers = 0, num_heads = 0;
  bool topics = false;
  std::vector<std::string> candidates;   // their names, e.g. "clustered:top_k=3"
  std::vector<double> dense_entries;     // per layer: dense attention's entries per step
  std::vector<CalibrationHead> heads;    // layer-major: heads[l * num_heads + h]
};

// Parses and checks a calibration's JSON text (every field present, counts consistent, numbers
// finite and in range); throws luka::Error "<where>: not a calibration from luka calibrate (...)".
Calibration parse_calibration(const std::string& text, const std::string& where);

// The file, read and parsed; the error names the file.
Calibration read_calibration(const std::filesystem::path& path);

}  // namespace luka::eval
