// A capture's consistency rules, on the structures the reader decoded from the file: the layout's
// attributes, each decode step's token count, the token table, the segment table and each layer's
// page table. Every rule is a plain function of plain data (no HDF5), so that
//   - the reader (captures/reader.cpp) applies them as it opens a file and answers a query, and
//   - a fuzz target (tests/fuzz/fuzz_capture_checks.cpp) drives them directly at millions of
//     inputs a minute, beside the HDF5 target (fuzz_capture_reader), whose rate HDF5 bounds.
// Each function throws luka::Error "<name>: damaged capture: ..." naming what is wrong, or returns
// structures that hold the invariants listed with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "captures/capture.h"

namespace luka::capture {

// The layout's attributes agree with each other: one page size per recorded layer, a prompt of at
// least 0 tokens, at least one head, recorded layers and heads ascending and within the model's.
void check_layout(const Layout& layout, const std::string& name);

// Every complete decode step attends between 1 and `num_tokens` tokens (a step's count sizes the
// rows read for it: a damaged one must fail here, not as a huge allocation).
void check_step_tokens(const std::vector<std::int64_t>& step_tokens, std::int64_t num_tokens, const std::string& name);

// The token table's columns, each `num_tokens` long; `pieces` holds every token's bytes, token i's
// ending at piece_end[i]. Returns the tokens; piece ends must ascend within `pieces`.
struct TokenColumns {
  std::vector<std::int32_t> ids, segments;
  std::vector<float> probs;
  std::vector<std::uint8_t> generated;
  std::vector<std::int64_t> piece_end;
  std::string pieces;
};
std::vector<Token> tokens_from_columns(const TokenColumns& columns, const std::string& name);

// The segment table's columns (one entry each per segment). Returns the segments, each a span
// [begin, end) of the `num_tokens` recorded.
struct SegmentColumns {
  std::vector<std::string> labels, colours;
  std::vector<std::int64_t> begin, end;
};
std::vector<Segment> segments_from_columns(const SegmentColumns& columns, std::int64_t num_tokens, const std::string& name);

// One layer's page table: per page its span, creating step, and (format version 2 on) whether it
// stayed raw and where its member list ends in `members`. Returns the pages made by complete steps
// (created_step <= complete_steps), each a span of the `num_tokens` recorded whose members (if
// listed) ascend inside it.
struct PageColumns {
  std::vector<std::int64_t> start, end, created;
  std::vector<std::uint8_t> raw;         // version >= 2
  std::vector<std::int64_t> member_end;  // version >= 2
  std::vector<std::int64_t> members;     // version >= 2: the first member_end.back() entries
};
std::vector<PageInfo> pages_from_columns(int layer, const PageColumns& columns, std::int64_t version,
                                         std::int64_t complete_steps, std::int64_t num_tokens, const std::string& name);

}  // namespace luka::capture
