// Token survival: what became of chosen tokens (an answer span, any token range) at every decode
// step, layer and head of a capture — kept raw, seen through a page summary, refined back, kept
// as a heavy hitter, or dropped — and the attention they got. `luka inspect --track` prints it;
// the Studio marks the tracked tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "captures/capture.h"

namespace luka::capture {

// Tokens [begin, end) of the capture (prompt and generated).
struct TokenSpan {
  std::int64_t begin = 0, end = 0;
};

// "A-B" (positions A to B, both included), "A" (one token), "text:STRING": the tokens that cover
// the first occurrence of STRING's bytes in the capture's text, "segment:LABEL": the first prompt
// segment of that label, or "needle": the needles `luka eval niah|ruler --capture-dir` marks (the
// segments labelled "needle 1", "needle 2", ..., from the first's start to the last's end).
// Throws luka::Error for a malformed spec, a span outside the tokens, or text or a segment that
// does not occur.
TokenSpan parse_track(const std::string& spec, const std::vector<Token>& tokens, const std::vector<Segment>& segments = {});

struct SurvivalRow {
  std::int64_t step = 0;
  int layer = 0, head = 0;
  std::vector<std::uint8_t> states;  // per tracked token: a CoverState
  std::vector<float> attention;      // per tracked token: the effective row's value (NaN when rows were not recorded)
};

// One row per complete decode step, recorded layer in `layers` and head in `heads` (empty: all
// recorded), in step, layer, head order. Needs the capture's covers; throws luka::Error without.
std::vector<SurvivalRow> track_tokens(const CaptureView& capture, TokenSpan span, const std::vector<int>& layers,
                                      const std::vector<int>& heads);

struct SurvivalSummary {
  int layer = 0, head = 0;
  std::int64_t steps = 0;
  std::array<std::int64_t, 6> counts{};  // token-steps per CoverState
  double mass = 0;                        // mean attention on the span per step (NaN without rows)
};
// Per layer and head, over the steps of `rows` (the token-steps where a token was absent, before it
// existed, are counted as kAbsent).
std::vector<SurvivalSummary> summarize_survival(const std::vector<SurvivalRow>& rows);

// "absent", "summarized", "refined", "raw", "heavy", "dropped"; and one letter each for timelines:
// '.', 's', 'R', 'r', 'h', 'x'.
const char* cover_state_name(std::uint8_t state);
char cover_state_letter(std::uint8_t state);

}  // namespace luka::capture
