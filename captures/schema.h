// The capture file's schema, named once: every group, dataset and attribute the writer creates
// and the reader opens, with each dataset's stored type. docs/capture-format.md's table lists the
// same names and types, and tests/captures/test_schema.cpp checks the three against each other
// (the table, this list, and what a written file holds). The manifest's string attributes are
// kManifestStrings (capture.h).
#pragma once

#include <string>

namespace luka::capture::schema {

// Groups under the root.
inline constexpr char kManifest[] = "manifest";
inline constexpr char kLayout[] = "layout";
inline constexpr char kTokens[] = "tokens";
inline constexpr char kSegments[] = "segments";
inline constexpr char kPrefill[] = "prefill";  // prefill/layer_LL/level_K
inline constexpr char kDecode[] = "decode";
inline constexpr char kPages[] = "pages";      // pages/layer_LL/{start,end,created_step}
inline constexpr const char* kGroups[] = {kManifest, kLayout, kTokens, kSegments, kDecode, kPages, kPrefill};

// Attributes of the root, /manifest (besides kManifestStrings) and /layout.
inline constexpr char kFormatAttr[] = "format";
inline constexpr char kVersionAttr[] = "version";
inline constexpr char kFinishedAttr[] = "finished";  // present only when the run ended normally
inline constexpr char kSeedAttr[] = "seed";
inline constexpr char kNumLayersAttr[] = "num_layers";
inline constexpr char kNumHeadsAttr[] = "num_heads";
inline constexpr char kNumKvHeadsAttr[] = "num_kv_heads";
inline constexpr char kLayersAttr[] = "layers";
inline constexpr char kHeadsAttr[] = "heads";
inline constexpr char kPageSizeAttr[] = "page_size";
inline constexpr char kPromptTokensAttr[] = "prompt_tokens";
inline constexpr char kLevelsAttr[] = "levels";
inline constexpr char kRowsAttr[] = "rows";
inline constexpr char kCoversAttr[] = "covers";
inline constexpr char kDeflateAttr[] = "deflate";
inline constexpr const char* kLayoutAttrs[] = {kNumLayersAttr, kNumHeadsAttr, kNumKvHeadsAttr, kLayersAttr, kHeadsAttr, kPageSizeAttr,
                                               kPromptTokensAttr, kLevelsAttr, kRowsAttr, kCoversAttr, kDeflateAttr};

// A dataset's stored element type, named as docs/capture-format.md writes it.
enum class Type { kInt8, kUInt8, kInt32, kInt64, kFloat16, kFloat32, kFloat64, kString };
const char* type_name(Type type);

enum class Place {
  kFixed,     // group/name
  kPerLayer,  // group/layer_LL/name, one per recorded layer
  kPerLevel,  // group/layer_LL/level_K, one per recorded layer and stored pyramid level
};

struct Dataset {
  const char* group;  // "" for the root
  const char* name;   // for kPerLevel, the prefix "level_"
  Type type;
  Place place = Place::kFixed;
};

inline constexpr Dataset kCompleteSteps{"", "complete_steps", Type::kInt64};
inline constexpr Dataset kTokenId{kTokens, "id", Type::kInt32};
inline constexpr Dataset kTokenGenerated{kTokens, "generated", Type::kUInt8};
inline constexpr Dataset kTokenSegment{kTokens, "segment", Type::kInt32};
inline constexpr Dataset kTokenProb{kTokens, "prob", Type::kFloat32};
inline constexpr Dataset kTokenPieceEnd{kTokens, "piece_end", Type::kInt64};
inline constexpr Dataset kTokenPieceBytes{kTokens, "piece_bytes", Type::kUInt8};
inline constexpr Dataset kSegmentLabel{kSegments, "label", Type::kString};
inline constexpr Dataset kSegmentColour{kSegments, "colour", Type::kString};
inline constexpr Dataset kSegmentBegin{kSegments, "begin", Type::kInt64};
inline constexpr Dataset kSegmentEnd{kSegments, "end", Type::kInt64};
inline constexpr Dataset kPrefillLevel{kPrefill, "level_", Type::kFloat16, Place::kPerLevel};
inline constexpr Dataset kStepTokens{kDecode, "tokens", Type::kInt64};
inline constexpr Dataset kStepMode{kDecode, "mode", Type::kInt8};
inline constexpr Dataset kStepPagedEnd{kDecode, "paged_end", Type::kInt64};
inline constexpr Dataset kStepSeconds{kDecode, "seconds", Type::kFloat64};
inline constexpr Dataset kStepCoverSize{kDecode, "cover_size", Type::kInt32};
inline constexpr Dataset kStepFidelity{kDecode, "fidelity", Type::kFloat32};
inline constexpr Dataset kStepKascadeSource{kDecode, "kascade_source", Type::kInt32};  // absent before Kascade
inline constexpr Dataset kStepKascadeHead{kDecode, "kascade_head", Type::kInt32};      // absent before Kascade
inline constexpr Dataset kStepEffective{kDecode, "effective", Type::kFloat16};  // with rows recorded
inline constexpr Dataset kStepDense{kDecode, "dense", Type::kFloat16};          // with rows recorded
inline constexpr Dataset kStepCover{kDecode, "cover", Type::kUInt8};            // with covers recorded
inline constexpr Dataset kStepPageState{kDecode, "page_state", Type::kUInt8};   // with covers recorded
inline constexpr Dataset kStepSummaryMass{kDecode, "summary_mass", Type::kFloat16};  // with covers recorded
inline constexpr Dataset kPageStart{kPages, "start", Type::kInt64, Place::kPerLayer};
inline constexpr Dataset kPageEnd{kPages, "end", Type::kInt64, Place::kPerLayer};
inline constexpr Dataset kPageCreated{kPages, "created_step", Type::kInt64, Place::kPerLayer};
// Version 2: SemantiCache's pages. raw: 1 for a page that is one token kept as it is; member_end:
// per page, the end of its positions in `members` (a page whose slice is empty holds every position
// of [start, end)); members: the positions of the pages that list them, ascending per page.
inline constexpr Dataset kPageRaw{kPages, "raw", Type::kUInt8, Place::kPerLayer};
inline constexpr Dataset kPageMemberEnd{kPages, "member_end", Type::kInt64, Place::kPerLayer};
inline constexpr Dataset kPageMembers{kPages, "members", Type::kInt64, Place::kPerLayer};

inline constexpr const Dataset* kDatasets[] = {
    &kCompleteSteps, &kTokenId,     &kTokenGenerated, &kTokenSegment,  &kTokenProb,     &kTokenPieceEnd,  &kTokenPieceBytes,
    &kSegmentLabel,  &kSegmentColour, &kSegmentBegin, &kSegmentEnd,    &kPrefillLevel,  &kStepTokens,     &kStepMode,
    &kStepPagedEnd,  &kStepSeconds, &kStepCoverSize,  &kStepFidelity,  &kStepEffective, &kStepDense,      &kStepCover,
    &kStepPageState, &kStepSummaryMass, &kPageStart,  &kPageEnd,       &kPageCreated,   &kStepKascadeSource, &kStepKascadeHead,
    &kPageRaw,       &kPageMemberEnd, &kPageMembers};
// The per-step datasets of /decode every capture has (the rows' and covers' come with them).
inline constexpr const Dataset* kStepMetrics[] = {&kStepMode, &kStepPagedEnd, &kStepSeconds, &kStepCoverSize, &kStepFidelity};

// "layer_05": a recorded layer's group name (two digits at least).
std::string layer_name(int layer);
// "pages/layer_05".
std::string layer_group(const char* group, int layer);
// A dataset's path from the root: "tokens/id"; per layer "pages/layer_05/start"; per level
// "prefill/layer_05/level_2". `layer` and `level` are used only where the dataset has them.
std::string path(const Dataset& dataset, int layer = -1, int level = -1);

}  // namespace luka::capture::schema
