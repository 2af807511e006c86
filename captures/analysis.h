// Numbers a capture yields beyond its stored arrays (docs/capture-analysis.md): attention by topic
// of an interwoven prompt (segment-by-segment mass, each decode step's mass per segment and topic,
// cross-topic leakage, refined pages and heavy hitters by topic) and per-head pattern scores (sink,
// entropy, locality, previous token, induction, cross-topic mass, fidelity KL). Pure functions
// over a CaptureView that return plain data: `luka inspect --topics / --heads` prints them, and
// the Studio can call them off its UI thread on a view of its own (a CaptureFile caches open
// datasets, so one view serves one thread at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "captures/capture.h"

namespace luka::capture {

// The topics of a capture's prompt. A topic is a segment label: segments with the same label are
// one topic (an ABA prompt has two). Topics are numbered, and lettered A, B, ..., in the order of
// their first segment.
struct TopicIndex {
  std::vector<std::string> labels, colours, letters;  // per topic
  std::vector<Segment> segments;                      // the capture's segment table
  std::vector<int> segment_topic;                     // per segment: its topic
  std::vector<std::int32_t> token_segment;            // per token (prompt, then generated): its segment, -1 none
  std::vector<std::int32_t> token_topic;              // per token: its segment's topic, -1 none
  std::vector<std::int32_t> token_id;                 // per token: its id (for the induction score)
  // The topic decode queries are measured against (generated tokens belong to no segment): by
  // default the one the prompt's question asks about, when the capture says (its generation's
  // question_topic, from the prompt file), else that of the segment that starts last in the prompt
  // (AnalysisOptions::decode_topic).
  int decode_topic = -1;
  int num_topics() const { return static_cast<int>(labels.size()); }
  int num_segments() const { return static_cast<int>(segments.size()); }
};

// Throws luka::Error when the capture has no segments (a plain prompt), or when `decode_topic`
// (>= 0) is not one of its topics.
TopicIndex topic_index(const CaptureView& view, int decode_topic = -1);
// The label of the topic the capture's question asks about (its generation's question_topic); "".
std::string question_topic(const CaptureView& view);

struct AnalysisOptions {
  std::vector<int> layers, heads;  // subsets of the recorded ones (checked); empty: all recorded
  bool prefill = true;             // use the prefill map (level 0), when stored
  bool decode = true;              // use the decode steps' effective rows (and covers), when recorded
  // The topic (index, A = 0) decode queries are measured against; -1: that of the segment that
  // starts last in the prompt. Checked against the capture's topics.
  int decode_topic = -1;
  // Called with the fraction done (0..1) between heads and steps; returning false stops the
  // analysis, which then returns what it has with `cancelled` set. May be empty.
  std::function<bool(double)> progress;
};

constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// [SECTION] Attention by topic

// One recorded layer and head over the run. S segments, K topics; the last entry of every
// per-segment axis (index S) and per-topic axis (index K) is "other": tokens outside every segment.
struct HeadTopics {
  int layer = 0, head = 0;
  // Prefill, [(S + 1) x (S + 1)] row-major: entry (i, j) is the mean, over the query rows in
  // segment i (row S: queries outside every segment), of the mass the row puts on the keys of
  // segment j (column S: keys outside every segment). Each row with queries sums to 1; rows
  // without queries are 0.
  std::vector<double> prefill_matrix;
  std::vector<std::int64_t> prefill_queries;  // [S + 1]: query rows averaged in each matrix row
  // Mean over the query rows inside a segment of the mass on segments of other topics (NaN
  // without the prefill map).
  double prefill_leakage = kNoValue;
  // Mean over the decode steps of the mass on segments of topics other than decode_topic (NaN
  // without rows).
  double decode_leakage = kNoValue;
  // [K]: decode_leakage measured against each topic in turn (entry decode_topic is decode_leakage);
  // empty without rows.
  std::vector<double> decode_leakage_by_topic;
  // Summed over the decode steps ([K + 1], empty without covers): refined pages by the topic that
  // holds most of the page's tokens (ties: the one met first in the page; "other" when that is
  // tokens outside every segment), and heavy hitters (tokens) by their topic.
  std::vector<std::int64_t> refined_pages, heavy_hitters;
};

// One decode step of one recorded layer and head: the effective attention row by segment and topic.
struct StepTopics {
  std::int64_t step = 0;
  int layer = 0, head = 0;
  std::vector<double> segment_mass;  // [S + 1]: mass on each segment's keys; S: keys outside every segment
  std::vector<double> topic_mass;    // [K + 1]: the same summed by topic (the bar chart)
  double generated = 0;              // mass on generated tokens (part of "other")
  double leakage = 0;                // mass on segments of topics other than decode_topic
  std::vector<std::int64_t> refined_pages, heavy_hitters;  // [K + 1] as in HeadTopics; empty without covers
};

struct TopicAnalysis {
  TopicIndex topics;
  bool prefill = false, decode = false, covers = false;  // which parts the numbers come from
  std::string prefill_note, decode_note;                 // why a part is missing, when it is
  std::int64_t steps = 0;                                // decode steps analysed
  std::vector<HeadTopics> heads;                         // per selected layer, then head
  std::vector<StepTopics> steps_by_head;                 // per step, then layer, then head
  bool cancelled = false;
  const HeadTopics* find(int layer, int head) const;
};

// Throws luka::Error without segments, or when neither the prefill map at level 0 nor decode rows
// were recorded.
TopicAnalysis analyze_topics(const CaptureView& view, const AnalysisOptions& options = {});

// [SECTION] Head scores

// Means of core/eval/head_scores.h's per-row scores over the rows where each is defined.
struct PatternScores {
  double sink = kNoValue, entropy = kNoValue, locality = kNoValue;  // over every row
  double previous_token = kNoValue;  // over rows whose query has a previous token (q >= 1)
  double induction = kNoValue;       // over rows whose query token occurred before (at j <= q - 2)
  double cross_topic = kNoValue;     // over rows in a segment (prefill) / every row against decode_topic (decode)
  std::int64_t rows = 0, previous_rows = 0, induction_rows = 0, cross_rows = 0;
};

struct HeadScoreRow {
  int layer = 0, head = 0;
  PatternScores prefill;  // the query rows of the prefill map (level 0)
  PatternScores decode;   // the effective rows of the decode steps
  // Mean over the steps the dense shadow ran of the stored KL(dense || effective) of this head
  // (`decode/fidelity` is per head); NaN when it never ran.
  double kl = kNoValue;
  std::int64_t kl_steps = 0;
};

struct HeadScoreAnalysis {
  bool prefill = false, decode = false, topics = false;
  std::vector<std::string> topic_letters;  // with topics
  int decode_topic = -1;                   // the topic decode rows' cross-topic mass is measured against
  std::string prefill_note, decode_note;
  std::int64_t steps = 0;
  std::vector<HeadScoreRow> heads;  // per selected layer, then head
  bool cancelled = false;
};

// Throws luka::Error when neither the prefill map at level 0 nor decode rows were recorded.
// Without segments the cross-topic scores are NaN.
HeadScoreAnalysis analyze_heads(const CaptureView& view, const AnalysisOptions& options = {});

}  // namespace luka::capture
